// The CustomResourceDefinitions of Klutch's own API group (klutch.anynines.com) that our
// binaries install into clusters, as YAML text embedded from src/apis/klutch/*.yaml. Today that
// is the APIServiceBinding CRD, which the konnector creates or updates in an App Cluster at
// start-up, and the provider-side CRDs the bind backend serves on a Control Plane
// (APIServiceExportRequest, APIServiceExport, APIServiceNamespace, ClusterBinding,
// AppClusterBinding, and the APIServiceExportTemplate of example-backend.klutch.anynines.com).
// Callers parse the text with machinery::ParseYaml.
//
// The data is immutable and statically initialized; every function here is thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace klutch::apis {

// The file holding the apiservicebindings.klutch.anynines.com CRD (one YAML document).
inline constexpr std::string_view kApiServiceBindingsCrdFile = "apiservicebindings.yaml";

// The provider-side CRDs (bind-protocol.md §1.0.1, §1.7), one YAML document each.
inline constexpr std::string_view kApiServiceExportRequestsCrdFile =
    "apiserviceexportrequests.yaml";
inline constexpr std::string_view kApiServiceExportsCrdFile = "apiserviceexports.yaml";
inline constexpr std::string_view kApiServiceNamespacesCrdFile = "apiservicenamespaces.yaml";
inline constexpr std::string_view kClusterBindingsCrdFile = "clusterbindings.yaml";
inline constexpr std::string_view kAppClusterBindingsCrdFile = "appclusterbindings.yaml";
inline constexpr std::string_view kApiServiceExportTemplatesCrdFile =
    "apiserviceexporttemplates.yaml";

// The files of the CRDs a Control Plane needs for the bind backend: export requests, exports,
// namespaces, cluster bindings and templates; with `control_plane_mode` also APIServiceBinding
// and AppClusterBinding.
std::vector<std::string_view> ProviderCrdFiles(bool control_plane_mode);

// The text of the embedded file `file_name` (a bare name such as kApiServiceBindingsCrdFile),
// or "" when no such file is embedded.
std::string KlutchCrdYaml(std::string_view file_name);

}  // namespace klutch::apis
