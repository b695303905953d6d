// Connection: one provider connection of the konnector (the "cluster controller",
// bind-protocol.md §4.4-§4.8). Through the provider client it watches the provider's bind
// objects in its cluster namespace and runs four controllers: the heartbeat on the
// ClusterBinding (with kubeconfig mirroring), namespace deletion, the consumer CRD of each
// attached binding, and per APIServiceExport its status and one ExportSyncer. Internal to the
// konnector. Thread-safe: Attach/Detach and the accessors may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/sync.h"
#include "konnector/context.h"
#include "reconcile/step.h"

namespace klutch::konnector::internal {

class ExportSyncer;

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
  struct ExportPass;  // what the steps of one export reconcile share

  // Start(): the event handlers on the provider's informers and on the konnector's shared ones.
  void WatchProvider();
  void WatchConsumer();

  core::Result<reconcile::Result> ReconcileHeartbeat();
  core::Result<reconcile::Result> ReconcileNamespace(const reconcile::Request& request);

  core::Result<reconcile::Result> ReconcileCrd(const reconcile::Request& request);
  // The CRD of `exp` for `binding`, created or updated; Connected set on `modified` (the
  // binding). Returns an error to retry with, OK when nothing is to retry.
  core::Status EnsureCrd(const std::string& name, const Json& exp, const Json& binding,
                         Json& modified);
  // Writes `crd`; Connected=True when it went (true), False when the App Cluster refused it;
  // other errors land in `retry`.
  bool UpdateCrd(const Json& crd, const Json& binding, Json& modified, core::Status& retry);
  // Connected=False on `modified` with a Warning Event on `binding` when it changed.
  void MarkNotConnected(Json& modified, const Json& binding, const std::string& reason,
                        const std::string& message);
  bool AdoptableCrd(const Json& crd, const Json& binding) const;

  core::Result<reconcile::Result> ReconcileExport(const reconcile::Request& request);
  // The export's syncer started, restarted (new generation or claims) or stopped; a start
  // that failed is left in pass.start_error. Ends the pass once the connection stopped.
  reconcile::Step EnsureSyncer(ExportPass& pass);
  // Connected, ConsumerInSync, the CRD's conditions and names, Syncing: on the export.
  core::Result<reconcile::Result> UpdateExportStatus(const ExportPass& pass);
  void CopyCrdStatus(const Json& crd, Json& modified);

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

}  // namespace klutch::konnector::internal
