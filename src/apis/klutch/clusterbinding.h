// Names that belong to the ClusterBinding and the cluster namespace it lives in on the provider
// (bind-protocol.md §1.4, §2.4, §2.7): the binding's name and kubeconfig Secret, the consumer's
// RBAC objects, and the annotations that tie a cluster namespace to a consumer. Read by the
// backend, the konnector and `klutch up`. Constants and pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace klutch::apis::klutch {

// The ClusterBinding of every cluster namespace.
inline constexpr std::string_view kClusterBindingName = "cluster";
// The kubeconfig Secret of a new ClusterBinding (its key is kKubeconfigKey).
inline constexpr std::string_view kKubeconfigSecretName = "kubeconfig";
// ServiceAccount, RoleBinding and static ClusterRole of a consumer (§2.7); the per-consumer
// ClusterRole and ClusterRoleBinding are BinderRoleName(<clusterNs>).
inline constexpr std::string_view kBinderName = "klutch-binder";
inline std::string BinderRoleName(std::string_view cluster_namespace) {
  return std::string(kBinderName) + "-" + std::string(cluster_namespace);
}

// On a provider Namespace made for a consumer namespace: "<clusterNs>/<consumerNs>" (the
// APIServiceNamespace it belongs to).
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
// On a cluster namespace: the App Cluster's name as its user knows it (the kubeconfig context
// kubectl bind used), sent as `n` to /authorize or /device/authorize and recorded at bind time
// (ours; the consumer page titles the cluster with it).
inline constexpr std::string_view kClusterNameAnnotation = "klutch.anynines.com/cluster-name";
// On the kubeconfig Secret of a ClusterBinding: when its token was issued and when it expires
// (RFC 3339), written by provisioning and the token refresh (ours, ADR 0013).
inline constexpr std::string_view kTokenIssuedAnnotation = "klutch.anynines.com/token-issued-at";
inline constexpr std::string_view kTokenExpiresAnnotation = "klutch.anynines.com/token-expires-at";

}  // namespace klutch::apis::klutch
