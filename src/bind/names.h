// The wire names of the provider side of the binding protocol (bind-protocol.md §1.10, §2.7):
// resources, annotations, labels, finalizers and object names that upstream Klutch's backend
// uses, so a Control Plane set up by either implementation works with either konnector.
// Constants only; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "machinery/object.h"

namespace klutch::bind {

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

// On an APIServiceExport: the hash of the CRD snapshot its spec was made from (§2.8).
inline constexpr std::string_view kSourceSpecHashAnnotation =
    "klutch.anynines.com/source-spec-hash";
// On a provider Namespace made for a consumer namespace: "<clusterNs>/<consumerNs>".
inline constexpr std::string_view kApiServiceNamespaceAnnotation =
    "klutch.anynines.com/api-service-namespace";
// On a cluster namespace: the consumer identity "<oidc sub>#<clusterID>" (§2.4).
inline constexpr std::string_view kIdentityAnnotation =
    "example-backend.klutch.anynines.com/identity";
// On a cluster namespace: Sha224Base62 of the identity, so the namespace of an identity is
// found with a label selector (then the identity annotation is compared exactly).
inline constexpr std::string_view kIdentityHashLabel = "klutch.anynines.com/identity-hash";
// On a cluster namespace: the OIDC issuer of the identity (ours; the consumer page lists a
// user's clusters by issuer and subject).
inline constexpr std::string_view kIssuerAnnotation = "klutch.anynines.com/identity-issuer";
// On a cluster namespace: when a consumer last bound it (RFC 3339, ours): a space no konnector
// ever connected to is collected the grace period after its last bind.
inline constexpr std::string_view kLastBoundAnnotation = "klutch.anynines.com/last-bound-at";
// The ResourceQuota the backend keeps in every consumer namespace (cluster and provider
// namespaces), labelled so its informer watches only these.
inline constexpr std::string_view kConsumerQuotaName = "klutch-consumer";
inline constexpr std::string_view kConsumerQuotaLabel = "klutch.anynines.com/consumer-quota";
// On the kubeconfig Secret of a ClusterBinding: when its token was issued and when it expires
// (RFC 3339), written by provisioning and the token refresh (ours, ADR 0013).
inline constexpr std::string_view kTokenIssuedAnnotation = "klutch.anynines.com/token-issued-at";
inline constexpr std::string_view kTokenExpiresAnnotation = "klutch.anynines.com/token-expires-at";

// Back-reference labels on Control Plane objects made for an AppClusterBinding.
inline constexpr std::string_view kAppClusterBindingNameLabel =
    "klutch.anynines.com/appclusterbinding-name";
inline constexpr std::string_view kAppClusterBindingNamespaceLabel =
    "klutch.anynines.com/appclusterbinding-namespace";
inline constexpr std::string_view kAppClusterBindingFinalizer =
    "klutch.anynines.com/appclusterbinding-cleanup";

// The ClusterBinding of every cluster namespace.
inline constexpr std::string_view kClusterBindingName = "cluster";
// ServiceAccount, RoleBinding and static ClusterRole of a consumer (§2.7); the per-consumer
// ClusterRole and ClusterRoleBinding are "klutch-binder-<clusterNs>".
inline constexpr std::string_view kBinderName = "klutch-binder";
// The kubeconfig Secret of a new ClusterBinding, and its key.
inline constexpr std::string_view kKubeconfigSecretName = "kubeconfig";
inline constexpr std::string_view kKubeconfigKey = "kubeconfig";
// Role and RoleBinding of a control-plane-mode konnector in the binding root namespace.
inline constexpr std::string_view kControlPlaneConnectorName = "control-plane-connector";

// The field manager of the backend's writes.
inline constexpr std::string_view kFieldManager = "klutch-backend";

inline std::string BinderRoleName(std::string_view cluster_namespace) {
  return std::string(kBinderName) + "-" + std::string(cluster_namespace);
}
// The binding root namespace of AppClusterBinding `ns`/`name` (§2.6.5).
inline std::string BindingRootNamespace(std::string_view ns, std::string_view name) {
  return "klutch-bind-" + std::string(ns) + "-" + std::string(name);
}

}  // namespace klutch::bind
