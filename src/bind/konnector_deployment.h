// The konnector Deployment an AppClusterBinding with spec.konnector.deploy asks for in its
// binding root namespace (control-plane mode, bind-protocol.md §2.6.5): the konnector in
// control-plane mode reading the mirrored App Cluster kubeconfig, probes, least privilege,
// spec.konnector.overrides merged into its container (strategic-merge style), and the hash of
// its spec in an annotation so a pass rewrites it only when that changes. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "client/dynamic.h"

namespace klutch::bind {

// The annotation holding the hash of the Deployment's spec.
inline constexpr std::string_view kKonnectorSpecHashAnnotation = "klutch.anynines.com/spec-hash";

// Deployment `konnector-<binding>` in `root` running `image`, reading key `key` of Secret
// `secret_name` in `root`, labelled with `labels` (the binding's back-references) and app.
client::Json KonnectorDeployment(const client::Json& acb, const std::string& image,
                                 const std::string& root, const std::string& secret_name,
                                 const std::string& key, const client::Json& labels);

}  // namespace klutch::bind
