// Connection: one provider connection of the konnector (the "cluster controller",
// bind-protocol.md §4.4-§4.8). It owns the provider client and caches of its cluster namespace
// (ClusterBinding, APIServiceExports, APIServiceNamespaces, the kubeconfig Secret), the set of
// attached bindings and the export syncers (SyncerRegistry), and wires four controllers to
// them: HeartbeatReconciler (heartbeat and kubeconfig mirroring), NamespaceDeletionReconciler,
// CrdReconciler (the consumer CRD of each attached binding) and ExportReconciler (the export's
// status and its ExportSyncer). Those reconcilers and the syncers read the connection through
// its accessors. Internal to the konnector. Thread-safe: Attach/Detach and the accessors may be
// called from any thread.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/sync.h"
#include "konnector/context.h"
#include "konnector/syncer_registry.h"

namespace klutch::konnector::internal {

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
  bool Attached(const std::string& binding_key) const;
  // The attached binding named `name` (any namespace), nullptr when none.
  client::ObjectPtr BindingNamed(const std::string& name) const;
  // Until every cache of the connection has listed, "not in the cache" does not mean "does not
  // exist": reconcilers wait, and the last first list brings them back.
  bool CachesSynced() const;

  // For the reconcilers and syncers: the provider side and the caches.
  Context& ctx() { return ctx_; }
  client::RestClient& provider() { return provider_; }
  client::Informer& cluster_bindings() { return *cluster_bindings_; }
  client::Informer& exports() { return *exports_; }
  client::Informer& service_namespaces() { return *service_namespaces_; }
  // The provider's kubeconfig Secrets; null in control-plane mode.
  client::Informer* provider_secrets() { return provider_secrets_.get(); }
  SyncerRegistry& syncers() { return syncers_; }
  // The consumer namespace mapped to provider namespace `pns` ("" when none).
  std::string ConsumerNamespaceFor(const std::string& pns) const;
  // The provider namespace of consumer namespace `cns` ("" when not (yet) assigned).
  std::string ProviderNamespaceFor(const std::string& cns) const;

 private:
  std::unique_ptr<reconcile::Controller> NewController(std::string_view name,
                                                       reconcile::Reconciler& reconciler);
  // Start(): the event handlers on the provider's informers and on the konnector's shared ones.
  void WatchProvider();
  void WatchConsumer();
  void EnqueueBindingsAndExports();

  Context& ctx_;
  std::string kubeconfig_;
  client::RestClient& provider_;
  std::unique_ptr<client::RestClient> owned_provider_;
  std::string provider_ns_;

  std::unique_ptr<client::Informer> cluster_bindings_;
  std::unique_ptr<client::Informer> exports_;
  std::unique_ptr<client::Informer> service_namespaces_;
  std::unique_ptr<client::Informer> provider_secrets_;
  SyncerRegistry syncers_;

  std::unique_ptr<reconcile::Reconciler> heartbeat_reconciler_, namespace_reconciler_,
      crd_reconciler_, export_reconciler_;
  std::unique_ptr<reconcile::Controller> heartbeat_, namespaces_, crds_, export_controller_;

  // Handlers on the konnector's shared informers, removed on Stop().
  std::vector<std::pair<client::Informer*, client::Informer::HandlerId>> shared_handlers_;

  mutable core::Mutex mu_;
  std::set<std::string> bindings_ GUARDED_BY(mu_);
  bool stopped_ GUARDED_BY(mu_) = false;
};

}  // namespace klutch::konnector::internal
