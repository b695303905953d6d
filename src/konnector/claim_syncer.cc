#include "konnector/claim_syncer.h"

#include "apis/klutch/apiserviceexport.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "konnector/connection.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

constexpr std::string_view kProvider = "Provider";
constexpr std::string_view kConsumer = "Consumer";

// What a copy carries over: everything a user or program reads from a Secret or ConfigMap.
bool SameContent(const Json& a, const Json& b) {
  for (const char* key : {"data", "binaryData", "stringData", "type", "immutable"}) {
    const Json* x = machinery::Find(a, {key});
    const Json* y = machinery::Find(b, {key});
    if ((x ? *x : Json()) != (y ? *y : Json())) return false;
  }
  for (const char* key : {"labels", "annotations"}) {
    const Json* x = machinery::Find(a, {"metadata", key});
    const Json* y = machinery::Find(b, {"metadata", key});
    if ((x ? *x : Json::object()) != (y ? *y : Json::object())) return false;
  }
  return true;
}

}  // namespace

ClaimSyncer::ClaimSyncer(Connection& connection, const Json& claim)
    : connection_(connection), ctx_(connection.ctx()) {
  gvr_ = {machinery::GetString(claim, {"group"}), machinery::GetString(claim, {"version"}),
          machinery::GetString(claim, {"resource"})};
  owner_ = machinery::GetString(claim, {"selector", "owner"});
  names_ = machinery::Strings(machinery::Find(claim, {"selector", "names"}));
  // Bound objects are the bulk of a konnector's memory: cached serialized (ADR 0009).
  client::InformerOptions options{.compact = true, .clock = &ctx_.clock};
  consumer_ = std::make_unique<client::Informer>(ctx_.app, gvr_, options);
  provider_ =
      std::make_unique<client::MultiNamespaceInformer>(connection_.provider(), gvr_, options);
  reconciler_ = std::make_unique<reconcile::FuncReconciler>(
      [this](const Request& r) { return Reconcile(r); });
  controller_ = std::make_unique<reconcile::Controller>(
      "klutch-konnector-claimed-" + gvr_.GroupResource() + (owner_.empty() ? "" : "-" + owner_),
      *reconciler_,
      reconcile::ControllerOptions{.workers = ctx_.options.workers,
                                   .metrics = &ctx_.controller_metrics,
                                   .clock = &ctx_.clock});
}

ClaimSyncer::~ClaimSyncer() { Stop(); }

std::string ClaimSyncer::EffectiveOwner(const Json& object, bool provider_side) {
  std::string a = Annotation(object, apis::klutch::kResourceOwnerAnnotation);
  if (a == kProvider || a == kConsumer) return a;
  return std::string(provider_side ? kProvider : kConsumer);
}

bool ClaimSyncer::Matches(const Json& object) const {
  if (ClusterManaged(gvr_.group, gvr_.resource, object)) return false;
  if (names_.empty()) return true;
  for (const auto& n : names_) {
    if (n == "*" || n == machinery::Name(object)) return true;
  }
  return false;
}

void ClaimSyncer::EnqueueConsumer(const Json& c) {
  // Every matching consumer object of a mapped namespace: the reconcile decides who owns it
  // (an edited annotation on a copy must not hide the copy from its owner).
  if (!Matches(c)) return;
  std::string pns = connection_.ProviderNamespaceFor(machinery::Namespace(c));
  if (!pns.empty()) controller_->queue().Add(pns + "/" + machinery::Name(c));
}

void ClaimSyncer::Start() {
  auto consumer_fn = [this](const ObjectPtr& o) { EnqueueConsumer(*o); };
  consumer_->AddEventHandler({.on_add = consumer_fn,
                              .on_update =
                                  [this](const ObjectPtr& old, const ObjectPtr& o) {
                                    if (old != o) EnqueueConsumer(*o);
                                  },
                              .on_delete = consumer_fn});
  auto provider_fn = [this](const ObjectPtr& o) {
    controller_->queue().Add(client::ObjectKey(*o));
  };
  provider_->AddEventHandler({.on_add = provider_fn,
                              .on_update =
                                  [this](const ObjectPtr& old, const ObjectPtr& o) {
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

core::Result<Result> ClaimSyncer::Reconcile(const Request& request) {
  const std::string& pns = request.ns;
  const std::string cns = connection_.ConsumerNamespaceFor(pns);
  if (cns.empty()) return Result::Done();  // the APIServiceNamespace's event brings it back
  // A first list in progress: "not cached" does not mean "absent" yet; back off.
  if (!provider_->HasSynced(pns) || !consumer_->HasSynced()) return Result::Requeue();
  ObjectPtr p = provider_->Get(request.Key());
  ObjectPtr c = consumer_->indexer().Get(cns + "/" + request.name);
  if (p && !Matches(*p)) p = nullptr;
  if (c && !Matches(*c)) c = nullptr;
  if (!p && !c) return Result::Done();
  // The owner is what the source says. A copy edited to claim otherwise is still a copy:
  // P annotated Provider owns C whatever C's annotation now says, and the other way round.
  const std::string p_owner = p ? Annotation(*p, apis::klutch::kResourceOwnerAnnotation) : "";
  const std::string c_owner = c ? Annotation(*c, apis::klutch::kResourceOwnerAnnotation) : "";
  std::string owner;
  if (p_owner == kProvider || (p && p_owner.empty() && c_owner != kConsumer)) {
    owner = kProvider;
  } else if (c_owner == kConsumer || (c && c_owner.empty() && !p)) {
    owner = kConsumer;
  } else if (p_owner == kConsumer) {
    owner = kConsumer;  // a copy whose source is gone or not yet seen
  } else {
    owner = kProvider;
  }
  if (!owner_.empty() && owner != owner_) return Result::Done();
  // An object of the same name the other side made on its own (no owner annotation) is not
  // ours to overwrite: say so and leave both alone.
  const ObjectPtr& copy = owner == kProvider ? c : p;
  const std::string& copy_owner = owner == kProvider ? c_owner : p_owner;
  const ObjectPtr& source = owner == kProvider ? p : c;
  if (source && copy && copy_owner.empty()) {
    if (owner == kProvider) {
      ctx_.app_events.Event(*copy, "Warning", "ClaimedNameConflict",
                            "the Control Plane provides a " + gvr_.resource + " named " +
                                request.name + " here; rename or delete this one to receive it");
    } else {
      ctx_.app_events.Event(*source, "Warning", "ClaimedNameConflict",
                            "the Control Plane already has a " + gvr_.resource + " named " +
                                request.name + " of its own; rename this one to sync it");
    }
    return Result::Done();
  }
  return owner == kProvider ? Sync(p, c, true, pns, cns, request.name)
                            : Sync(c, p, false, pns, cns, request.name);
}

core::Result<Result> ClaimSyncer::Sync(const ObjectPtr& source, const ObjectPtr& copy,
                                       bool provider_owns, const std::string& pns,
                                       const std::string& cns, const std::string& name) {
  client::ResourceClient source_rc(provider_owns ? connection_.provider() : ctx_.app, gvr_,
                                   provider_owns ? pns : cns);
  client::ResourceClient copy_rc(provider_owns ? ctx_.app : connection_.provider(), gvr_,
                                 provider_owns ? cns : pns);
  const std::string source_cluster = provider_owns ? "provider" : "app";
  const std::string copy_cluster = provider_owns ? "app" : "provider";
  const std::string owner(provider_owns ? kProvider : kConsumer);
  if (!source || machinery::IsBeingDeleted(*source)) {
    // The owner's object is gone: the copy goes too, once the API server confirms it.
    if (!source) {
      auto live = source_rc.Get(name);
      if (live.ok()) return Result::Done();  // our cache is behind; its event follows
      if (!core::IsNotFound(live.status())) return live.status();
    }
    if (!copy) return Result::Done();
    client::DeleteOptions o;
    o.precondition_uid = machinery::Uid(*copy);
    auto r = copy_rc.Delete(name, o);
    ctx_.metrics.writes.Increment({{"cluster", copy_cluster}, {"verb", "delete"}});
    if (!r.ok() && !core::IsNotFound(r.status()) && !core::IsConflict(r.status())) {
      return r.status();
    }
    return Result::Done();
  }
  if (Annotation(*source, apis::klutch::kResourceOwnerAnnotation) != owner) {
    Json patch = {
        {"metadata",
         {{"annotations", {{std::string(apis::klutch::kResourceOwnerAnnotation), owner}}}}}};
    auto r = source_rc.Patch(name, client::PatchType::kMerge, machinery::Dump(patch),
                             {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
    ctx_.metrics.writes.Increment({{"cluster", source_cluster}, {"verb", "patch"}});
    if (!r.ok()) return r.status();
    return Result::Done();  // the annotated object's event brings us back
  }
  Json desired = CleanCopy(*source, provider_owns ? cns : pns);
  if (!copy) {
    auto r = copy_rc.Create(desired,
                            {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
    ctx_.metrics.writes.Increment({{"cluster", copy_cluster}, {"verb", "create"}});
    if (!r.ok() && !core::IsAlreadyExists(r.status())) return r.status();
    return Result::Done();
  }
  if (SameContent(desired, *copy)) return Result::Done();
  // The owner wins every field of the copy.
  Json replaced = *copy;
  for (const char* key : {"data", "binaryData", "stringData", "type", "immutable"}) {
    replaced.erase(key);
    if (const Json* v = machinery::Find(desired, {key})) replaced[key] = *v;
  }
  Json& meta = machinery::MutableMetadata(replaced);
  for (const char* key : {"labels", "annotations"}) {
    meta.erase(key);
    if (const Json* v = machinery::Find(desired, {"metadata", key})) meta[key] = *v;
  }
  auto r = copy_rc.Update(replaced,
                          {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
  ctx_.metrics.writes.Increment({{"cluster", copy_cluster}, {"verb", "update"}});
  if (!r.ok()) {
    if (core::IsInvalid(r.status())) {
      KLUTCH_LOG(kWarn, "konnector", "{} refused the copy of claimed {} {}: {}", copy_cluster,
                 gvr_.GroupResource(), name, r.status().message());
      ctx_.metrics.sync_errors.Increment(
          {{"direction", "claim"}, {"resource", gvr_.GroupResource()}, {"reason", "Invalid"}});
      return Result::Done();
    }
    return r.status();
  }
  return Result::Done();
}

}  // namespace klutch::konnector::internal
