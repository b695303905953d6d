// CustomResourceDefinition -> served resources: turns a CRD object into the ResourceInfo of
// each served version (names, scope, subresources, printer columns, schema), and validates
// CRD specs beyond the generic metadata rules.
#pragma once

#include <vector>

#include "apiserver/resource.h"
#include "core/status.h"

namespace klutch::apiserver {

inline constexpr const char* kCrdCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io";

// The resources a CRD serves (one per served version). Errors name the offending field.
core::Result<std::vector<ResourcePtr>> ResourcesForCrd(const Json& crd);

// Validation of a CRD's spec on create/update (appends causes with field paths).
void ValidateCrdSpec(const Json& crd, const Json* old, std::vector<core::Cause>& causes);

}  // namespace klutch::apiserver
