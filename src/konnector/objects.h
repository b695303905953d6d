// Pure object transformations of the konnector (bind-protocol.md §2.8, §4.7, §4.9-§4.13): an
// APIServiceExport into the consumer CRD, the copy of an object for the other cluster, the
// prefixed names of cluster-scoped objects, and the kubeconfig a binding's Secret holds.
// Functions of their arguments only: thread-compatible, no I/O, never throw.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/kubeconfig.h"
#include "machinery/object.h"

namespace klutch::konnector {

using machinery::Json;

// The consumer CRD for an APIServiceExport: named like the export; group, names and scope
// copied; each version with its schema, subresources (always present) and printer columns;
// no conversion. `binding` (an APIServiceBinding) becomes its controlling owner.
Json ExportToCrd(const Json& export_object, const Json& binding);
// The version syncers use: the export's first served version ("" when none).
std::string FirstServedVersion(const Json& export_object);
// True when the CRD's controlling owner is `binding` (group, kind, name and uid).
bool CrdOwnedBy(const Json& crd, const Json& binding);
// The uid of the APIServiceBinding of the same name as `binding` but another uid that controls
// the CRD (an earlier binding, deleted and made again), or "" when the CRD has no such owner.
std::string EarlierBindingUid(const Json& crd, const Json& binding);
// metadata.generation (0 when absent).
int64_t Generation(const Json& object);
// The binding's permission claims with state Accepted (the only ones acted upon), in order.
Json AcceptedClaims(const Json& binding);

// The copy of `object` to create in the other cluster: server-set metadata (uid,
// resourceVersion, generation, creationTimestamp, managedFields, deletion fields, selfLink),
// ownerReferences and finalizers cleared, status removed, namespace set to `ns` (dropped when
// empty).
Json CleanCopy(const Json& object, const std::string& ns);
using machinery::Annotation;
using machinery::Covers;
using machinery::JsonHash;
using machinery::SetAnnotation;
bool HasBoundAnnotation(const Json& object);

// Cluster-scoped objects (§4.9): consumer `name` is `<providerNs>-name` on the provider, with
// the cluster-namespace annotation and a (non-controller) ownerReference to the provider
// Namespace so that deleting the cluster namespace collects them.
std::string PrefixedName(std::string_view provider_ns, std::string_view name);
// The consumer name of a provider name; nullopt when it lacks the prefix.
std::optional<std::string> UnprefixedName(std::string_view provider_ns, std::string_view name);
void InjectClusterNamespace(Json& object, const std::string& provider_ns,
                            const std::string& namespace_uid);
// Undoes InjectClusterNamespace (annotation and the Namespace ownerReference).
void ClearClusterNamespace(Json& object);

// True for what each cluster makes for itself and that claims never copy or contest (§4.12):
// service-account token Secrets (credentials of one cluster), the ConfigMap kube-root-ca.crt
// (the root CA bundle kube-controller-manager publishes in every namespace) and the `default`
// ServiceAccount. `group`/`resource` are the claimed resource's.
bool ClusterManaged(std::string_view group, std::string_view resource, const Json& object);

// A provider object's status as the consumer reads it (§4.11): every condition message, at any
// depth (status.conditions, and nested ones such as a claim's status.managed.conditions), with
// the provider namespace `provider_ns` named as the consumer's namespace `consumer_ns`, so a
// reason reads in the developer's names, not the Control Plane's. Whole names only: the
// characters around a match are not [a-z0-9-]. So does every field `namespace` whose value is
// `provider_ns` (references such as a8s' status.managed.secret: the synced Secret is in the
// consumer's namespace). No-op when either namespace is empty.
Json StatusInConsumerTerms(const Json& status, std::string_view provider_ns,
                           std::string_view consumer_ns);

// A top-level condition that a status change turned False, or whose reason or message changed
// while False: what the konnector tells the consumer with an Event. `event_type` is Warning,
// or Normal for progress (reasons Creating and Deleting). Conditions of type `skip_type` (the
// konnector's own) are ignored.
struct ConditionNews {
  std::string type, event_type, reason, message;
};
std::vector<ConditionNews> FalseConditionNews(const Json* before_status, const Json* after_status,
                                              std::string_view skip_type);

// A binding's kubeconfig Secret, checked (§4.2).
struct KubeconfigCheck {
  bool valid = false;
  std::string reason;      // KubeconfigSecretNotFound | KubeconfigSecretInvalid when !valid
  std::string message;     // what is wrong and what to do
  std::string kubeconfig;  // the text, when valid
  client::RestConfig config;
  std::string ns;  // the current context's namespace (the provider's cluster namespace)
};
// `secret` is nullptr when missing. `require_namespace`: the current context must name a
// namespace (OIDC mode: it is the cluster namespace on the provider).
KubeconfigCheck CheckKubeconfigSecret(const Json* secret, std::string_view secret_ref,
                                      std::string_view key, bool require_namespace);
// The decoded value of data[key] of a Secret (nullopt when absent or not base64).
std::optional<std::string> SecretValue(const Json& secret, std::string_view key);

}  // namespace klutch::konnector
