// The syncers of one export (§4.8-§4.12): wiring of the consumer and provider caches to the
// spec, status and adopt controllers, and the claim syncers.
#include "konnector/export_syncer.h"

#include "konnector/adopt_reconciler.h"
#include "konnector/claim_syncer.h"
#include "konnector/connection.h"
#include "konnector/isolation.h"
#include "konnector/spec_reconciler.h"
#include "konnector/status_reconciler.h"
#include "konnector/sync_latency.h"
#include "konnector/syncer_context.h"

namespace klutch::konnector::internal {

ExportSyncer::ExportSyncer(Connection& connection, const Json& export_object, const Json& binding,
                           std::string namespace_uid)
    : connection_(connection), ctx_(connection.ctx()), provider_ns_uid_(std::move(namespace_uid)) {
  name_ = machinery::Name(export_object);
  generation_ = Generation(export_object);
  gvr_ = {machinery::GetString(export_object, {"spec", "group"}), FirstServedVersion(export_object),
          machinery::GetString(export_object, {"spec", "names", "plural"})};
  kind_ = machinery::GetString(export_object, {"spec", "names", "kind"});
  scope_ = machinery::GetString(export_object, {"spec", "scope"});
  claims_ = AcceptedClaims(binding);
}

ExportSyncer::~ExportSyncer() { Stop(); }

core::Status ExportSyncer::Start() {
  if (gvr_.version.empty() || gvr_.resource.empty()) {
    return core::Invalid("APIServiceExport " + name_ + " has no served version");
  }
  // Bound objects are the bulk of a konnector's memory: cached serialized (ADR 0009).
  client::InformerOptions options{.compact = true, .clock = &ctx_.clock};
  consumer_ = std::make_unique<client::Informer>(ctx_.app, gvr_, options);
  isolation_ = Isolation::ForScope(scope_, connection_, gvr_, options, provider_ns_uid_);
  latency_ =
      std::make_unique<SyncLatency>(ctx_.metrics.sync_seconds, ctx_.clock, gvr_.GroupResource());
  sync_ = std::make_unique<SyncerContext>(SyncerContext{.ctx = ctx_,
                                                        .connection = connection_,
                                                        .gvr = gvr_,
                                                        .kind = kind_,
                                                        .consumer = *consumer_,
                                                        .isolation = *isolation_,
                                                        .latency = *latency_});
  MakeControllers();
  Watch();
  for (const Json& claim : claims_) {
    claim_syncers_.push_back(std::make_unique<ClaimSyncer>(connection_, claim));
  }
  consumer_->Start();
  isolation_->Start();
  for (auto& c : claim_syncers_) c->Start();
  spec_->Start();
  status_->Start();
  adopt_->Start();
  return core::Status::Ok();
}

void ExportSyncer::MakeControllers() {
  const std::string prefix = "klutch-konnector-" + gvr_.GroupResource() + "-";
  auto make = [&](const std::string& name, std::unique_ptr<reconcile::Reconciler> r,
                  std::unique_ptr<reconcile::Reconciler>& owned,
                  std::unique_ptr<reconcile::Controller>& c) {
    owned = std::move(r);
    c = std::make_unique<reconcile::Controller>(
        prefix + name, *owned,
        reconcile::ControllerOptions{.workers = ctx_.options.workers,
                                     .metrics = &ctx_.controller_metrics,
                                     .clock = &ctx_.clock});
  };
  make("spec", std::make_unique<SpecReconciler>(*sync_), spec_reconciler_, spec_);
  make("status", std::make_unique<StatusReconciler>(*sync_), status_reconciler_, status_);
  make("adopt", std::make_unique<AdoptReconciler>(*sync_), adopt_reconciler_, adopt_);
}

void ExportSyncer::Watch() {
  consumer_->AddEventHandler(OnChange([this](const Json& d) {
    std::string key = client::ObjectKey(d);
    latency_->Touch("up", key);
    spec_->queue().Add(key);
    if (std::string pkey = isolation_->ProviderKey(key); !pkey.empty()) {
      status_->queue().Add(pkey);
      adopt_->queue().Add(pkey);
    }
  }));
  auto on_provider = OnChange([this](const Json& u) {
    std::string key = client::ObjectKey(u);
    std::string ckey = isolation_->ConsumerKey(key);
    if (ckey.empty() || !isolation_->Ours(u)) return;  // another connection's namespace or prefix
    latency_->Touch("down", key);
    status_->queue().Add(key);
    adopt_->queue().Add(key);
    spec_->queue().Add(ckey);
  });
  isolation_->Watch(on_provider, [this](const std::string& cns) {
    // The provider cache listed: objects skipped meanwhile (and objects only the consumer has,
    // now visible as missing upstream) are synced again.
    for (const auto& d : consumer_->indexer().ByIndex(client::Indexer::kNamespaceIndex, cns)) {
      spec_->queue().Add(client::ObjectKey(*d));
    }
  });
}

void ExportSyncer::Stop() {
  for (auto* c : {spec_.get(), status_.get(), adopt_.get()}) {
    if (c) c->Stop();
  }
  for (auto& c : claim_syncers_) c->Stop();
  if (consumer_) consumer_->Stop();
  if (isolation_) isolation_->Stop();
}

void ExportSyncer::OnServiceNamespace(const Json& asn, bool deleted) {
  const std::string cns = machinery::Name(asn);
  const std::string pns = machinery::GetString(asn, {"status", "namespace"});
  for (auto& c : claim_syncers_) c->OnServiceNamespace(cns, pns, deleted);
  if (!isolation_ || !isolation_->OnNamespaceMapped(pns, deleted)) return;
  if (!consumer_) return;
  for (const auto& d : consumer_->indexer().ByIndex(client::Indexer::kNamespaceIndex, cns)) {
    spec_->queue().Add(client::ObjectKey(*d));
  }
}

}  // namespace klutch::konnector::internal
