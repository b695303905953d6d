// Names that belong to the AppClusterBinding (bind-protocol.md §2.6.5, Klutch only): the labels
// and finalizer of the Control Plane objects made for one, its binding root namespace and the
// RBAC of its control-plane-mode konnector. Constants and pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace klutch::apis::klutch {

// Back-reference labels on Control Plane objects made for an AppClusterBinding.
inline constexpr std::string_view kAppClusterBindingNameLabel =
    "klutch.anynines.com/appclusterbinding-name";
inline constexpr std::string_view kAppClusterBindingNamespaceLabel =
    "klutch.anynines.com/appclusterbinding-namespace";
inline constexpr std::string_view kAppClusterBindingFinalizer =
    "klutch.anynines.com/appclusterbinding-cleanup";
// Role and RoleBinding of a control-plane-mode konnector in the binding root namespace.
inline constexpr std::string_view kControlPlaneConnectorName = "control-plane-connector";

// The binding root namespace of AppClusterBinding `ns`/`name`.
inline std::string BindingRootNamespace(std::string_view ns, std::string_view name) {
  return "klutch-bind-" + std::string(ns) + "-" + std::string(name);
}

}  // namespace klutch::apis::klutch
