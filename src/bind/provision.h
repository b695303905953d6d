// Provisioning of a consumer on `/bind` (bind-protocol.md §2.4, §2.5, ADR 0013): the cluster
// namespace of an identity, its ClusterBinding, the `klutch-binder` ServiceAccount and a
// kubeconfig holding a short-lived token from the TokenRequest API, stored in the
// ClusterBinding's kubeconfig Secret (which the konnector mirrors to the App Cluster and the
// token-refresh controller keeps fresh) and returned to the caller.
// Thread-safe (no state); concurrent calls for one identity converge on one namespace.
#pragma once

#include <chrono>
#include <string>

#include "client/rest_client.h"
#include "core/clock.h"
#include "core/status.h"
#include "machinery/json.h"

namespace klutch::bind {

struct ProvisionOptions {
  // New cluster namespaces are "<prefix>-<12 characters of the identity's hash>" (ADR 0013).
  std::string namespace_prefix = "cluster";
  std::string pretty_name = "anynines";
  std::string
      external_address;  // https URL written into the kubeconfig ("" = admin.config().server)
  std::string external_ca_pem;       // "" = the admin config's CA
  std::string external_server_name;  // tls-server-name, optional
  std::chrono::seconds token_ttl{std::chrono::hours(24)};
  // At most this many cluster namespaces per user (OIDC issuer and subject; 0: no limit). A
  // new cluster of a user who has that many is refused (IsClusterLimitReached); binding a
  // cluster that already has its namespace again never is.
  int max_clusters_per_user = 0;
  // Time for the token's issued/expires annotations (nullptr: real time). Must outlive calls.
  const core::Clock* clock = nullptr;
};

struct ConsumerAccess {
  std::string cluster_namespace;
  std::string kubeconfig;  // YAML, context namespace = cluster_namespace
};

// identity = "<oidc sub>#<clusterID>". `issuer` (optional) is recorded as an annotation so the
// consumer page can find a user's clusters. Idempotent: the same identity gets the same
// cluster namespace (and a fresh token); every call records the time in the namespace's
// last-bound annotation. Errors: kInvalid for an empty identity or a bad option (e.g.
// external_address not https, a prefix that is no DNS label), kConflict while the identity's
// namespace is being deleted, kForbidden with IsClusterLimitReached when the user already has
// `max_clusters_per_user` clusters (the message says how many and which), otherwise the API
// server's. Concurrent first binds of one user's new clusters count again after creating and
// give their namespace up when the user has more than `max_clusters_per_user`, so the limit
// holds under races too.
core::Result<ConsumerAccess> ProvisionConsumer(client::RestClient& admin,
                                               const ProvisionOptions& options,
                                               const std::string& identity,
                                               const std::string& issuer = "");

// Whether `status` is ProvisionConsumer's refusal of a user's cluster beyond the limit.
bool IsClusterLimitReached(const core::Status& status);

// A kubeconfig for the `klutch-binder` ServiceAccount of `cluster_namespace` with a new
// TokenRequest token, and when that token was issued and expires (on `options.clock`; the
// lifetime is the one the server granted, which may be shorter than asked).
struct IssuedKubeconfig {
  std::string kubeconfig;
  core::SystemTime issued;
  core::SystemTime expires;
};
core::Result<IssuedKubeconfig> IssueKubeconfig(client::RestClient& admin,
                                               const ProvisionOptions& options,
                                               const std::string& cluster_namespace);
// Creates Secret `cluster_namespace`/`secret_name` holding `issued` under key "kubeconfig"
// with the token annotations, or replaces the data and annotations of the existing one
// (retrying conflicts). Returns the Secret as stored.
core::Result<machinery::Json> WriteKubeconfigSecret(client::RestClient& admin,
                                                    const std::string& cluster_namespace,
                                                    const std::string& secret_name,
                                                    const IssuedKubeconfig& issued);

}  // namespace klutch::bind
