// Test support: the PROVIDER side (Control Plane) of the binding protocol, set up through the
// API exactly as the bind backend does it (shared/specs/bind-protocol.md §2.4-§2.8), so the
// konnector can be tested before the backend exists.
//
// InstallBindCrds applies the upstream klutch-bind CRDs (read at run time from
// ../shared/conformance/klutch/bind/deploy/crd, never copied into the project).
// SetupProvider creates a cluster namespace with its ClusterBinding `cluster`, the
// `klutch-binder` ServiceAccount and its long-lived token Secret, the RBAC of §2.7 and the
// Secret `kubeconfig` holding the consumer's kubeconfig, and returns that kubeconfig.
// ExportFromCrd / CreateExport offer a CRD to the consumer (§2.8, §2.6.4), keeping the
// ClusterRole `klutch-binder-<clusterNs>` in step (§2.6.1). NamespaceMapper plays the
// backend's APIServiceNamespace controller (§2.6.2) on a background thread.
//
// Everything works through a client::RestClient with admin rights, so the same code serves an
// in-process TestCluster (admin()) and a `klutch apiserver` process (its admin kubeconfig).
// The free functions are thread-safe as the RestClient is; NamespaceMapper is thread-safe.
// For tests only.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "client/dynamic.h"
#include "client/informer.h"
#include "client/rest_client.h"
#include "core/status.h"
#include "core/sync.h"
#include "machinery/json.h"

namespace klutch::testing::bind {

using machinery::Json;

// The binding protocol's wire names (bind-protocol.md §1.10), spelled out here rather than taken
// from src/konnector so the fixture checks the konnector instead of sharing its mistakes.
inline const client::GroupVersionResource kApiServiceBindings{"klutch.anynines.com", "v1alpha1",
                                                              "apiservicebindings"};
inline const client::GroupVersionResource kApiServiceExports{"klutch.anynines.com", "v1alpha1",
                                                             "apiserviceexports"};
inline const client::GroupVersionResource kApiServiceExportRequests{
    "klutch.anynines.com", "v1alpha1", "apiserviceexportrequests"};
inline const client::GroupVersionResource kApiServiceNamespaces{"klutch.anynines.com", "v1alpha1",
                                                                "apiservicenamespaces"};
inline const client::GroupVersionResource kClusterBindings{"klutch.anynines.com", "v1alpha1",
                                                           "clusterbindings"};
inline const client::GroupVersionResource kAppClusterBindings{"klutch.anynines.com", "v1alpha1",
                                                              "appclusterbindings"};
inline constexpr char kBindApiVersion[] = "klutch.anynines.com/v1alpha1";
// ServiceAccount, token Secret, RoleBinding and static ClusterRole on the provider.
inline constexpr char kBinderName[] = "klutch-binder";
inline constexpr char kApiServiceNamespaceAnnotation[] =
    "klutch.anynines.com/api-service-namespace";
inline constexpr char kSourceSpecHashAnnotation[] = "klutch.anynines.com/source-spec-hash";
inline constexpr char kBoundAnnotation[] = "klutch.anynines.com/bound";
inline constexpr char kResourceOwnerAnnotation[] = "klutch.anynines.com/resource-owner";
inline constexpr char kSyncerFinalizer[] = "klutch.anynines.com/syncer";

// The claim CRD the konnector tests and benchmark export: postgresqlinstances.anynines.com,
// namespaced, v1 with a status subresource, spec.version and status.phase strings (other
// fields kept).
Json ExampleClaimCrd();

// The directory holding the upstream CRD YAML files.
std::string BindCrdDir();

// Applies (create, or replace the spec of) the CRDs the provider needs: clusterbindings,
// apiserviceexports, apiservicenamespaces, apiserviceexportrequests, and with
// `control_plane_mode` also apiservicebindings and appclusterbindings; then waits until each
// is Established. Unreadable files -> kNotFound/kBadRequest naming the file; a CRD not
// Established within `timeout` -> kTimeout naming it; API errors as the server sent them.
core::Status InstallBindCrds(client::RestClient& rest, bool control_plane_mode = false,
                             std::chrono::seconds timeout = std::chrono::seconds(30));

// Applies one upstream CRD file (e.g. "klutch.anynines.com_apiservicebindings.yaml") the same
// way, e.g. to pre-install a CRD on the App Cluster.
core::Status InstallBindCrd(client::RestClient& rest, const std::string& file,
                            std::chrono::seconds timeout = std::chrono::seconds(30));

// Waits until CRD `name` has condition Established=True; kTimeout naming it otherwise.
core::Status WaitForCrdEstablished(client::RestClient& rest, const std::string& name,
                                   std::chrono::seconds timeout = std::chrono::seconds(30));

struct ProviderOptions {
  // The cluster namespace; "" = a new one named by the server from `generate_name`.
  std::string cluster_namespace;
  std::string generate_name = "klutch-bind-";
  // The server URL written into the consumer's kubeconfig; "" = rest.config().server. Tests
  // point it at a TcpProxy in front of the provider.
  std::string server_url;
  // The CA written into the kubeconfig; "" = the token Secret's ca.crt.
  std::string ca_pem;
  std::string provider_pretty_name = "klutch-test-provider";
  // How long to wait for the token controller to fill Secret klutch-binder (§2.4 step 5).
  std::chrono::seconds token_timeout{30};
};

// What SetupProvider made.
struct ProviderBinding {
  std::string cluster_namespace;
  std::string server;      // as written into the kubeconfig
  std::string ca_pem;      // as written into the kubeconfig
  std::string token;       // the klutch-binder ServiceAccount's long-lived token
  std::string kubeconfig;  // YAML: cluster/user/context "default", namespace = cluster namespace
};

// Sets up one consumer on the provider (bind-protocol.md §2.4, §2.5, §2.6.1 RBAC):
//  - Namespace `options.cluster_namespace` (AlreadyExists is fine) or a generated one;
//  - ClusterBinding `cluster` {kubeconfigSecretRef {kubeconfig, kubeconfig}, providerPrettyName};
//  - ServiceAccount `klutch-binder` and its kubernetes.io/service-account-token Secret
//    `klutch-binder`, waiting for the token controller to fill `token` and `ca.crt`;
//  - ClusterRole `klutch-binder` (the static bind-object role) and RoleBinding `klutch-binder`
//    in the cluster namespace; ClusterRole `klutch-binder-<clusterNs>` (owned by the Namespace)
//    for the exports present (see SyncBinderRole);
//  - Secret `kubeconfig` (key `kubeconfig`) in the cluster namespace.
// Get-or-create throughout, so calling it again for the same namespace is harmless. A token not
// issued within options.token_timeout -> kTimeout; API errors as the server sent them.
core::Result<ProviderBinding> SetupProvider(client::RestClient& rest,
                                            const ProviderOptions& options = {});

// A PermissionClaim (§1.3.2) for core/v1 `resource` with selector.owner `owner`
// ("Provider"/"Consumer"; "" = none).
Json PermissionClaim(const std::string& resource, const std::string& owner);

// The APIServiceExport the backend makes from `crd` (§2.8, §2.6.4): named `<plural>.<group>`,
// spec = the CRD snapshot (served versions only; only the storage version under webhook
// conversion; subresources always present) + informerScope (Namespaced for namespaced CRDs,
// Cluster and clusterScopedIsolation Prefixed for cluster-scoped ones) + `permission_claims`,
// annotated with the snapshot's source-spec-hash. No namespace set.
Json ExportFromCrd(const Json& crd, const Json& permission_claims = Json::array());

// Creates `export_object` in `cluster_namespace` (or replaces the spec of the existing one),
// then SyncBinderRole. Returns the export as stored.
core::Result<Json> CreateExport(client::RestClient& rest, const std::string& cluster_namespace,
                                Json export_object);

// Makes ClusterRole `klutch-binder-<clusterNs>` hold, for every APIServiceExport in the
// namespace, a rule for the exported resource and one per permission claim, all verbs
// (§2.6.1), owned by the cluster Namespace so it goes when the namespace goes.
core::Status SyncBinderRole(client::RestClient& rest, const std::string& cluster_namespace);

// The backend's APIServiceNamespace controller (§2.6.2, consumer scope Namespaced) for one
// cluster namespace: for each APIServiceNamespace X it creates Namespace `<clusterNs>-X` with
// annotation klutch.anynines.com/api-service-namespace=<clusterNs>/X, RoleBinding
// `klutch-binder` there (ServiceAccount <clusterNs>/klutch-binder -> ClusterRole
// klutch-binder-<clusterNs>) and sets X's status.namespace through the status subresource;
// when X is deleted it deletes the Namespace. Failures are retried twice a second, and every
// object is re-checked every few seconds (a Namespace deleted behind its back comes back).
// Runs an informer and one worker thread between Start() and Stop(). Thread-safe.
class NamespaceMapper {
 public:
  // `rest` (admin on the provider) must outlive the mapper.
  NamespaceMapper(client::RestClient& rest, std::string cluster_namespace);
  ~NamespaceMapper();  // Stop()
  NamespaceMapper(const NamespaceMapper&) = delete;
  NamespaceMapper& operator=(const NamespaceMapper&) = delete;

  // Starts the informer and the worker; returns once the informer has synced (or after 30 s).
  void Start();
  // Stops and joins both; idempotent.
  void Stop();
  // The provider namespace for consumer namespace `name`: `<clusterNs>-<name>`.
  std::string TargetNamespace(const std::string& name) const;
  // The last error of a reconcile ("" when the last one succeeded), for test diagnostics.
  std::string LastError() const;

 private:
  void Enqueue(const std::string& name);
  void Run();
  core::Status Reconcile(const std::string& name);

  client::RestClient& rest_;
  const std::string cluster_namespace_;
  std::unique_ptr<client::Informer> informer_;
  mutable core::Mutex mu_;
  core::CondVar cv_;
  std::set<std::string> dirty_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  bool started_ GUARDED_BY(mu_) = false;
  std::string last_error_ GUARDED_BY(mu_);
  std::thread worker_;
};

}  // namespace klutch::testing::bind
