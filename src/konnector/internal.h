// Internals of the konnector shared by its parts (konnector.cc, connection.cc, syncer.cc,
// claims.cc): the context every controller gets, the sync metrics, and the connection and
// syncer classes. Not a public header of the module.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client/informer.h"
#include "client/multi_namespace_informer.h"
#include "konnector/konnector.h"
#include "konnector/objects.h"
#include "reconcile/conditions.h"
#include "reconcile/controller.h"
#include "reconcile/events.h"
#include "reconcile/metrics.h"
#include "serving/metrics.h"

namespace klutch::konnector::internal {

// klutch_konnector_* families on /metrics.
struct SyncMetrics {
  explicit SyncMetrics(serving::MetricRegistry& registry);
  // Seconds from the watch event that made an object differ to the write that fixed it;
  // direction up (spec to the provider), down (status to the consumer), adopt, claim.
  serving::HistogramFamily& sync_seconds;
  serving::CounterFamily& sync_errors;  // direction, resource, reason
  serving::CounterFamily& writes;       // cluster (app|provider), verb
  serving::GaugeFamily& connections;
  serving::GaugeFamily& syncers;
  serving::CounterFamily& heartbeats;  // result
};

struct Context {
  client::RestClient& binding;  // where APIServiceBindings and their Secrets live
  client::RestClient& app;      // the App Cluster
  client::Informer& bindings;
  client::Informer& secrets;
  client::Informer& app_crds;
  client::Informer& app_namespaces;
  const KonnectorOptions& options;
  const core::Clock& clock;
  reconcile::EventRecorder& binding_events;
  reconcile::EventRecorder& app_events;
  SyncMetrics& metrics;
  reconcile::Metrics& controller_metrics;
};

// Index of the binding informer: "<secret namespace>/<secret name>" of each binding's
// kubeconfig Secret.
inline constexpr const char* kBySecretIndex = "byKubeconfigSecret";
// Index of a connection's APIServiceNamespace informer: status.namespace.
inline constexpr const char* kByProviderNamespaceIndex = "byProviderNamespace";

std::string SecretKeyOf(const Json& binding);  // "<ns>/<name>" of spec.kubeconfigSecretRef

// An informer handler calling `fn` with the object on add, change and delete (a resync's
// unchanged object is skipped).
inline client::EventHandler OnChange(std::function<void(const Json&)> fn) {
  return {.on_add = [fn](const client::ObjectPtr& o) { fn(*o); },
          .on_update =
              [fn](const client::ObjectPtr& old, const client::ObjectPtr& o) {
                if (old != o) fn(*o);
              },
          .on_delete = [fn](const client::ObjectPtr& o) { fn(*o); }};
}

class ExportSyncer;
class ClaimSyncer;

// One provider connection (the "cluster controller", §4.4): the provider's bind objects in
// its cluster namespace, the heartbeat, CRDs, export status and one syncer set per export.
class Connection {
 public:
  // `provider` is owned (OIDC mode) or borrowed (`owned` null, control-plane mode).
  Connection(Context& ctx, std::string kubeconfig, client::RestClient& provider,
             std::unique_ptr<client::RestClient> owned, std::string provider_ns);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void Start();
  void Stop();

  const std::string& kubeconfig() const { return kubeconfig_; }
  const std::string& provider_ns() const { return provider_ns_; }
  void Attach(const std::string& binding_key);
  void Detach(const std::string& binding_key);
  bool Empty() const;
  std::set<std::string> Bindings() const;
  // The attached binding named `name` (any namespace), nullptr when none.
  client::ObjectPtr BindingNamed(const std::string& name) const;

  // For syncers: the provider side and the shared caches.
  Context& ctx() { return ctx_; }
  client::RestClient& provider() { return provider_; }
  client::Informer& service_namespaces() { return *service_namespaces_; }
  // The consumer namespace mapped to provider namespace `pns` ("" when none).
  std::string ConsumerNamespaceFor(const std::string& pns) const;
  // The provider namespace of consumer namespace `cns` ("" when not (yet) assigned).
  std::string ProviderNamespaceFor(const std::string& cns) const;

 private:
  core::Result<reconcile::Result> ReconcileHeartbeat();
  core::Result<reconcile::Result> ReconcileNamespace(const reconcile::Request& request);
  core::Result<reconcile::Result> ReconcileCrd(const reconcile::Request& request);
  bool AdoptableCrd(const Json& crd, const Json& binding) const;
  core::Result<reconcile::Result> ReconcileExport(const reconcile::Request& request);
  core::Status MirrorKubeconfig(const Json& cluster_binding, Json& status_object);
  void SetBindingCondition(const std::string& binding_key, const reconcile::SeverityCondition& c);
  void EnqueueBindingsAndExports();
  bool CachesSynced() const;

  Context& ctx_;
  std::string kubeconfig_;
  client::RestClient& provider_;
  std::unique_ptr<client::RestClient> owned_provider_;
  std::string provider_ns_;

  std::unique_ptr<client::Informer> cluster_bindings_;
  std::unique_ptr<client::Informer> exports_;
  std::unique_ptr<client::Informer> service_namespaces_;
  std::unique_ptr<client::Informer> provider_secrets_;

  std::unique_ptr<reconcile::FuncReconciler> heartbeat_reconciler_, namespace_reconciler_,
      crd_reconciler_, export_reconciler_;
  std::unique_ptr<reconcile::Controller> heartbeat_, namespaces_, crds_, export_controller_;

  // Handlers on the konnector's shared informers, removed on Stop().
  std::vector<std::pair<client::Informer*, client::Informer::HandlerId>> shared_handlers_;

  mutable core::Mutex mu_;
  std::set<std::string> bindings_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<ExportSyncer>> syncers_ GUARDED_BY(mu_);
  core::MonoTime last_heartbeat_ GUARDED_BY(mu_);
  bool stopped_ GUARDED_BY(mu_) = false;
};

// The syncers of one export (§4.8): the consumer and provider caches of its resource and the
// spec, status, adopt and claimed-resource controllers.
class ExportSyncer {
 public:
  // `namespace_uid`: the provider namespace's uid (cluster-scoped exports only).
  ExportSyncer(Connection& connection, const Json& export_object, const Json& binding,
               std::string namespace_uid);
  ~ExportSyncer();
  ExportSyncer(const ExportSyncer&) = delete;
  ExportSyncer& operator=(const ExportSyncer&) = delete;

  core::Status Start();
  void Stop();
  int64_t generation() const { return generation_; }
  // The binding's accepted permission claims it was started with.
  const Json& claims() const { return claims_; }
  // An APIServiceNamespace appeared, changed or went away.
  void OnServiceNamespace(const Json& asn, bool deleted);

 private:
  core::Result<reconcile::Result> ReconcileSpec(const reconcile::Request& request);
  core::Result<reconcile::Result> ReconcileStatus(const reconcile::Request& request);
  core::Result<reconcile::Result> ReconcileAdopt(const reconcile::Request& request);
  // The provider key of consumer object key `key`; "" when its namespace is not mapped.
  std::string ProviderKey(const std::string& consumer_key) const;
  // The consumer key of provider key `key`; "" when not ours.
  std::string ConsumerKey(const std::string& provider_key) const;
  client::ObjectPtr ProviderGet(const std::string& key) const;
  // False for a cluster-scoped provider object of another connection.
  bool Ours(const Json& provider_object) const;
  bool ProviderSynced(const std::string& key) const;
  void MarkSynced(const Json& consumer, bool ok, std::string_view reason,
                  const std::string& message);
  void Observe(const std::string& direction, const std::string& key);
  void Touch(const std::string& direction, const std::string& key);
  // The object is gone: nothing to measure.
  void Forget(const std::string& direction, const std::string& key);

  Connection& connection_;
  Context& ctx_;
  std::string name_;
  int64_t generation_ = 0;
  client::GroupVersionResource gvr_;
  std::string kind_;
  bool namespaced_ = true;
  std::string provider_ns_uid_;
  Json claims_ = Json::array();  // the binding's accepted permission claims

  std::unique_ptr<client::Informer> consumer_;
  // Namespaced resources: one informer per mapped provider namespace.
  std::unique_ptr<client::MultiNamespaceInformer> provider_multi_;
  // Cluster-scoped resources: one cluster-wide informer.
  std::unique_ptr<client::Informer> provider_cluster_;

  std::unique_ptr<reconcile::FuncReconciler> spec_reconciler_, status_reconciler_,
      adopt_reconciler_;
  std::unique_ptr<reconcile::Controller> spec_, status_, adopt_;
  std::vector<std::unique_ptr<ClaimSyncer>> claim_syncers_;

  mutable core::Mutex mu_;
  // When an object first differed per direction ("up:key"), for the latency histogram.
  std::map<std::string, core::MonoTime> pending_ GUARDED_BY(mu_);
};

}  // namespace klutch::konnector::internal
