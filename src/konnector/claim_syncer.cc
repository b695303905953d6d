// §4.13: the caches and controller of one permission claim.
#include "konnector/claim_syncer.h"

#include "konnector/claim_reconciler.h"
#include "konnector/connection.h"

namespace klutch::konnector::internal {

ClaimSyncer::ClaimSyncer(Connection& connection, const Json& claim) : connection_(connection) {
  Context& ctx = connection.ctx();
  client::GroupVersionResource gvr{machinery::GetString(claim, {"group"}),
                                   machinery::GetString(claim, {"version"}),
                                   machinery::GetString(claim, {"resource"})};
  std::string owner = machinery::GetString(claim, {"selector", "owner"});
  // Bound objects are the bulk of a konnector's memory: cached serialized (ADR 0009).
  client::InformerOptions options{.compact = true, .clock = &ctx.clock};
  consumer_ = std::make_unique<client::Informer>(ctx.app, gvr, options);
  provider_ =
      std::make_unique<client::MultiNamespaceInformer>(connection_.provider(), gvr, options);
  const std::string name =
      "klutch-konnector-claimed-" + gvr.GroupResource() + (owner.empty() ? "" : "-" + owner);
  reconciler_ = std::make_unique<ClaimReconciler>(
      connection, gvr, std::move(owner),
      machinery::Strings(machinery::Find(claim, {"selector", "names"})), *consumer_, *provider_);
  controller_ = std::make_unique<reconcile::Controller>(
      name, *reconciler_,
      reconcile::ControllerOptions{
          .workers = ctx.options.workers, .metrics = &ctx.controller_metrics, .clock = &ctx.clock});
}

ClaimSyncer::~ClaimSyncer() { Stop(); }

void ClaimSyncer::EnqueueConsumer(const Json& c) {
  // Every matching consumer object of a mapped namespace: the reconcile decides who owns it
  // (an edited annotation on a copy must not hide the copy from its owner).
  if (!reconciler_->Matches(c)) return;
  std::string pns = connection_.ProviderNamespaceFor(machinery::Namespace(c));
  if (!pns.empty()) controller_->queue().Add(pns + "/" + machinery::Name(c));
}

void ClaimSyncer::Start() {
  auto consumer_fn = [this](const client::ObjectPtr& o) { EnqueueConsumer(*o); };
  consumer_->AddEventHandler({.on_add = consumer_fn,
                              .on_update =
                                  [this](const client::ObjectPtr& old, const client::ObjectPtr& o) {
                                    if (old != o) EnqueueConsumer(*o);
                                  },
                              .on_delete = consumer_fn});
  auto provider_fn = [this](const client::ObjectPtr& o) {
    controller_->queue().Add(client::ObjectKey(*o));
  };
  provider_->AddEventHandler({.on_add = provider_fn,
                              .on_update =
                                  [this](const client::ObjectPtr& old, const client::ObjectPtr& o) {
                                    if (old != o) controller_->queue().Add(client::ObjectKey(*o));
                                  },
                              .on_delete = provider_fn});
  provider_->OnSynced([this](const std::string& pns) {
    std::string cns = connection_.ConsumerNamespaceFor(pns);
    if (cns.empty()) return;
    for (const auto& c : consumer_->indexer().ByIndex(client::Indexer::kNamespaceIndex, cns)) {
      EnqueueConsumer(*c);
    }
  });
  consumer_->Start();
  provider_->Start();
  controller_->Start();
}

void ClaimSyncer::Stop() {
  if (controller_) controller_->Stop();
  if (consumer_) consumer_->Stop();
  if (provider_) provider_->Stop();
}

void ClaimSyncer::OnServiceNamespace(const std::string& cns, const std::string& pns, bool deleted) {
  if (pns.empty()) return;
  if (deleted) {
    provider_->RemoveNamespace(pns);
    return;
  }
  provider_->AddNamespace(pns);
  for (const auto& c : consumer_->indexer().ByIndex(client::Indexer::kNamespaceIndex, cns)) {
    EnqueueConsumer(*c);
  }
}

}  // namespace klutch::konnector::internal
