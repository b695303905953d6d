// Server-side printing: metav1.Table responses built from a resource's printer columns.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "apiserver/resource.h"
#include "core/clock.h"

namespace klutch::apiserver {

enum class IncludeObject { kNone, kMetadata, kObject };

// Whether an Accept header asks for a Table (`as=Table;g=meta.k8s.io;v=v1` or v1beta1).
bool WantsTable(std::string_view accept);
// The apiVersion of the Table the client asked for ("meta.k8s.io/v1" or ".../v1beta1").
std::string TableApiVersion(std::string_view accept);

// One Table for `objects`; `column_definitions` false leaves them null (watch events after
// the first). `list_meta` becomes the Table's metadata (resourceVersion, continue).
Json ToTable(const ResourceInfo& r, const std::vector<const Json*>& objects, IncludeObject include,
             const Json& list_meta, bool column_definitions, core::SystemTime now,
             std::string_view api_version = "meta.k8s.io/v1");

}  // namespace klutch::apiserver
