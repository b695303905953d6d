// The built-in resources klutch apiserver serves, with their per-kind rules (defaults,
// validation, field selectors) and printer columns. Each serves one built-in schema
// (apis::BuiltinSchemas()), whose x-kubernetes-group-version-kind gives the resource its group,
// version and kind.
#pragma once

#include <vector>

#include "apiserver/resource.h"

namespace klutch::apiserver {

// Every built-in resource, ready for Registry::SetOwner("builtin", ...).
std::vector<ResourcePtr> BuiltinResources();

// Namespaces the server creates on first start.
inline constexpr const char* kSeedNamespaces[] = {"default", "kube-system", "kube-public",
                                                  "kube-node-lease"};

}  // namespace klutch::apiserver
