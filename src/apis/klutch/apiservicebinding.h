// Names that belong to the APIServiceBinding (bind-protocol.md §1.5, §3.3): where kubectl bind
// creates the bindings in an App Cluster, how a binding is named, and the Secret key of the
// provider kubeconfig it refers to. Constants and pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace klutch::apis::klutch {

// The App Cluster namespace of the bindings, their kubeconfig Secrets and the konnector.
inline constexpr char kBindNamespace[] = "klutch-bind";
// The key of the provider kubeconfig in a binding's kubeconfigSecretRef Secret, and in the
// kubeconfig Secret of a ClusterBinding on the provider.
inline constexpr std::string_view kKubeconfigKey = "kubeconfig";

// The APIServiceBinding of `resource` in `group`: "<resource>.<group>", or `resource` for the
// core group.
inline std::string BindingName(std::string_view group, std::string_view resource) {
  return group.empty() ? std::string(resource) : std::string(resource) + "." + std::string(group);
}

}  // namespace klutch::apis::klutch
