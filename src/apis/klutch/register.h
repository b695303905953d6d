// The API group of the binding protocol (bind-protocol.md §1): its group, version and the
// resources the bind backend, the konnector and kubectl bind read and write, as upstream Klutch
// names them, so a cluster set up by either implementation works with the other. This folder is
// the protocol's one home (ADR 0013): the backend (src/bind), the konnector (src/konnector) and
// kubectl bind (src/kubectl_bind) take its names and documents from here, never from each other.
// Constants only; thread-safe.
#pragma once

#include <string_view>

#include "machinery/object.h"

namespace klutch::apis::klutch {

inline constexpr std::string_view kGroup = "klutch.anynines.com";
inline constexpr std::string_view kVersion = "v1alpha1";
inline constexpr std::string_view kApiVersion = "klutch.anynines.com/v1alpha1";

inline const machinery::GroupVersionResource kApiServiceExportRequests{
    "klutch.anynines.com", "v1alpha1", "apiserviceexportrequests"};
inline const machinery::GroupVersionResource kApiServiceExports{"klutch.anynines.com", "v1alpha1",
                                                                "apiserviceexports"};
inline const machinery::GroupVersionResource kApiServiceNamespaces{
    "klutch.anynines.com", "v1alpha1", "apiservicenamespaces"};
inline const machinery::GroupVersionResource kClusterBindings{"klutch.anynines.com", "v1alpha1",
                                                              "clusterbindings"};
inline const machinery::GroupVersionResource kApiServiceBindings{"klutch.anynines.com", "v1alpha1",
                                                                 "apiservicebindings"};
inline const machinery::GroupVersionResource kAppClusterBindings{"klutch.anynines.com", "v1alpha1",
                                                                 "appclusterbindings"};

// The export templates (§1.7): group of upstream's bind/ sources, which our CRD serves.
inline constexpr std::string_view kTemplateGroup = "example-backend.klutch.anynines.com";
inline const machinery::GroupVersionResource kApiServiceExportTemplates{
    "example-backend.klutch.anynines.com", "v1alpha1", "apiserviceexporttemplates"};

}  // namespace klutch::apis::klutch
