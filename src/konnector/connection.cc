// The connection to one provider (§4.4-§4.8): its caches, attached bindings and syncers, and
// the wiring of its four controllers (heartbeat, namespace deletion, CRDs, exports).
#include "konnector/connection.h"

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "konnector/crd_reconciler.h"
#include "konnector/export_reconciler.h"
#include "konnector/export_syncer.h"
#include "konnector/heartbeat_reconciler.h"
#include "konnector/namespace_deletion_reconciler.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;

constexpr std::string_view kControllerPrefix = "klutch-konnector-";

}  // namespace

std::string SecretKeyOf(const Json& binding) {
  return machinery::GetString(binding, {"spec", "kubeconfigSecretRef", "namespace"}) + "/" +
         machinery::GetString(binding, {"spec", "kubeconfigSecretRef", "name"});
}

Connection::Connection(Context& ctx, std::string kubeconfig, client::RestClient& provider,
                       std::unique_ptr<client::RestClient> owned, std::string provider_ns)
    : ctx_(ctx),
      kubeconfig_(std::move(kubeconfig)),
      provider_(provider),
      owned_provider_(std::move(owned)),
      provider_ns_(std::move(provider_ns)) {
  // The last first list brings the waiting reconcilers back (CachesSynced).
  client::InformerOptions o{.ns = provider_ns_,
                            .on_synced =
                                [this] {
                                  if (!CachesSynced()) return;
                                  heartbeat_->queue().Add("cluster");
                                  EnqueueBindingsAndExports();
                                },
                            .clock = &ctx_.clock};
  cluster_bindings_ =
      std::make_unique<client::Informer>(provider_, apis::klutch::kClusterBindings, o);
  exports_ = std::make_unique<client::Informer>(provider_, apis::klutch::kApiServiceExports, o);
  service_namespaces_ =
      std::make_unique<client::Informer>(provider_, apis::klutch::kApiServiceNamespaces, o);
  (void)service_namespaces_->indexer().AddIndex(kByProviderNamespaceIndex, [](const Json& asn) {
    std::string ns = machinery::GetString(asn, {"status", "namespace"});
    return ns.empty() ? std::vector<std::string>{} : std::vector<std::string>{ns};
  });
  if (!ctx_.options.control_plane_mode) {
    provider_secrets_ =
        std::make_unique<client::Informer>(provider_, client::resources::kSecrets, o);
  }

  heartbeat_reconciler_ = std::make_unique<HeartbeatReconciler>(*this);
  namespace_reconciler_ = std::make_unique<NamespaceDeletionReconciler>(*this);
  crd_reconciler_ = std::make_unique<CrdReconciler>(*this);
  export_reconciler_ = std::make_unique<ExportReconciler>(*this);
  heartbeat_ = NewController("clusterbinding", *heartbeat_reconciler_);
  namespaces_ = NewController("namespacedeletion", *namespace_reconciler_);
  crds_ = NewController("servicebinding-crd", *crd_reconciler_);
  export_controller_ = NewController("serviceexport", *export_reconciler_);
}

std::unique_ptr<reconcile::Controller> Connection::NewController(
    std::string_view name, reconcile::Reconciler& reconciler) {
  return std::make_unique<reconcile::Controller>(
      std::string(kControllerPrefix) + std::string(name), reconciler,
      reconcile::ControllerOptions{.workers = ctx_.options.workers,
                                   .metrics = &ctx_.controller_metrics,
                                   .clock = &ctx_.clock});
}

Connection::~Connection() { Stop(); }

void Connection::Attach(const std::string& binding_key) {
  {
    core::MutexLock lock(mu_);
    bindings_.insert(binding_key);
  }
  crds_->queue().Add(binding_key);
  export_controller_->queue().Add(provider_ns_ + "/" + Request::FromKey(binding_key).name);
  heartbeat_->queue().Add("cluster");
}

void Connection::Detach(const std::string& binding_key) {
  {
    core::MutexLock lock(mu_);
    bindings_.erase(binding_key);
  }
  export_controller_->queue().Add(provider_ns_ + "/" + Request::FromKey(binding_key).name);
}

bool Connection::Empty() const {
  core::MutexLock lock(mu_);
  return bindings_.empty();
}

std::set<std::string> Connection::Bindings() const {
  core::MutexLock lock(mu_);
  return bindings_;
}

bool Connection::Attached(const std::string& binding_key) const {
  core::MutexLock lock(mu_);
  return bindings_.count(binding_key) > 0;
}

ObjectPtr Connection::BindingNamed(const std::string& name) const {
  for (const auto& key : Bindings()) {
    if (Request::FromKey(key).name != name) continue;
    if (ObjectPtr b = ctx_.bindings.indexer().Get(key)) return b;
  }
  return nullptr;
}

bool Connection::CachesSynced() const {
  return cluster_bindings_->HasSynced() && exports_->HasSynced() &&
         service_namespaces_->HasSynced() && (!provider_secrets_ || provider_secrets_->HasSynced());
}

std::string Connection::ConsumerNamespaceFor(const std::string& pns) const {
  auto asns = service_namespaces_->indexer().ByIndex(kByProviderNamespaceIndex, pns);
  return asns.empty() ? "" : machinery::Name(*asns.front());
}

std::string Connection::ProviderNamespaceFor(const std::string& cns) const {
  ObjectPtr asn = service_namespaces_->indexer().Get(provider_ns_ + "/" + cns);
  return asn ? machinery::GetString(*asn, {"status", "namespace"}) : "";
}

void Connection::EnqueueBindingsAndExports() {
  for (const auto& key : Bindings()) {
    crds_->queue().Add(key);
    export_controller_->queue().Add(provider_ns_ + "/" + Request::FromKey(key).name);
  }
}

void Connection::Start() {
  WatchProvider();
  WatchConsumer();
  cluster_bindings_->Start();
  exports_->Start();
  service_namespaces_->Start();
  if (provider_secrets_) provider_secrets_->Start();
  heartbeat_->Start();
  namespaces_->Start();
  crds_->Start();
  export_controller_->Start();
  heartbeat_->queue().Add("cluster");
  ctx_.metrics.connections.With({}).Add(1);
}

void Connection::WatchProvider() {
  // Provider-side events.
  cluster_bindings_->AddEventHandler(OnChange([this](const Json&) {
    heartbeat_->queue().Add("cluster");
    EnqueueBindingsAndExports();  // the pretty name
  }));
  exports_->AddEventHandler(OnChange([this](const Json& e) {
    export_controller_->queue().Add(provider_ns_ + "/" + machinery::Name(e));
    for (const auto& key : Bindings()) {
      if (Request::FromKey(key).name == machinery::Name(e)) crds_->queue().Add(key);
    }
  }));
  // Syncers are told outside the lock: they start and stop informers.
  auto tell_syncers = [this](const Json& asn, bool deleted) {
    for (auto& s : syncers_.List()) s->OnServiceNamespace(asn, deleted);
  };
  service_namespaces_->AddEventHandler(
      {.on_add =
           [this, tell_syncers](const ObjectPtr& o) {
             namespaces_->queue().Add(machinery::Name(*o));
             tell_syncers(*o, false);
           },
       .on_update =
           [this, tell_syncers](const ObjectPtr&, const ObjectPtr& o) {
             namespaces_->queue().Add(machinery::Name(*o));
             tell_syncers(*o, false);
           },
       .on_delete = [tell_syncers](const ObjectPtr& o) { tell_syncers(*o, true); }});
  if (provider_secrets_) {
    provider_secrets_->AddEventHandler(
        OnChange([this](const Json&) { heartbeat_->queue().Add("cluster"); }));
  }
}

void Connection::WatchConsumer() {
  // Consumer-side events, through the konnector's shared informers.
  auto share = [this](client::Informer& informer, std::function<void(const Json&)> fn) {
    shared_handlers_.emplace_back(&informer, informer.AddEventHandler(OnChange(std::move(fn))));
  };
  share(ctx_.bindings, [this](const Json& b) {
    std::string key = client::ObjectKey(b);
    if (!Attached(key)) return;
    crds_->queue().Add(key);
    export_controller_->queue().Add(provider_ns_ + "/" + machinery::Name(b));
    heartbeat_->queue().Add("cluster");
  });
  share(ctx_.secrets, [this](const Json& s) {
    std::string key = client::ObjectKey(s);
    for (const auto& b : Bindings()) {
      ObjectPtr binding = ctx_.bindings.indexer().Get(b);
      if (binding && SecretKeyOf(*binding) == key) {
        heartbeat_->queue().Add("cluster");
        return;
      }
    }
  });
  share(ctx_.app_crds, [this](const Json& crd) {
    const std::string name = machinery::Name(crd);
    for (const auto& key : Bindings()) {
      if (Request::FromKey(key).name == name) crds_->queue().Add(key);
    }
    export_controller_->queue().Add(provider_ns_ + "/" + name);
  });
  share(ctx_.app_namespaces,
        [this](const Json& ns) { namespaces_->queue().Add(machinery::Name(ns)); });
}

void Connection::Stop() {
  {
    core::MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  syncers_.Close();
  for (auto& [informer, id] : shared_handlers_) informer->RemoveEventHandler(id);
  shared_handlers_.clear();
  for (auto* c : {heartbeat_.get(), namespaces_.get(), crds_.get(), export_controller_.get()}) {
    c->Stop();
  }
  SyncerRegistry::Map syncers = syncers_.TakeAll();
  syncers.clear();  // each stops (when no event handler holds it any more)
  ctx_.metrics.syncers.Remove({{"connection", provider_ns_}});
  cluster_bindings_->Stop();
  exports_->Stop();
  service_namespaces_->Stop();
  if (provider_secrets_) provider_secrets_->Stop();
  ctx_.metrics.connections.With({}).Add(-1);
}

}  // namespace klutch::konnector::internal
