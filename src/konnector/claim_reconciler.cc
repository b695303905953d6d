// §4.13: claimed Secrets and ConfigMaps, copied by their owner.
#include "konnector/claim_reconciler.h"

#include "apis/klutch/apiserviceexport.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "konnector/connection.h"
#include "reconcile/step.h"

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

struct ClaimReconciler::Pass {
  const Request& request;  // the provider key
  std::string pns, cns;    // the provider and consumer namespace
  ObjectPtr p, c;          // the provider and consumer object, null when none (or not claimed)
  std::string p_owner, c_owner;  // their owner annotations
  bool provider_owns = false;
  ObjectPtr source, copy;  // the owner's object and the other side's

  client::ResourceClient SourceClient(Connection& connection, Context& ctx,
                                      const client::GroupVersionResource& gvr) const {
    return client::ResourceClient(provider_owns ? connection.provider() : ctx.app, gvr,
                                  provider_owns ? pns : cns);
  }
  client::ResourceClient CopyClient(Connection& connection, Context& ctx,
                                    const client::GroupVersionResource& gvr) const {
    return client::ResourceClient(provider_owns ? ctx.app : connection.provider(), gvr,
                                  provider_owns ? cns : pns);
  }
  std::string SourceCluster() const { return provider_owns ? "provider" : "app"; }
  std::string CopyCluster() const { return provider_owns ? "app" : "provider"; }
  std::string Owner() const { return std::string(provider_owns ? kProvider : kConsumer); }
};

ClaimReconciler::ClaimReconciler(Connection& connection, client::GroupVersionResource gvr,
                                 std::string owner, std::vector<std::string> names,
                                 client::Informer& consumer,
                                 client::MultiNamespaceInformer& provider)
    : connection_(connection),
      ctx_(connection.ctx()),
      gvr_(std::move(gvr)),
      owner_(std::move(owner)),
      names_(std::move(names)),
      consumer_(consumer),
      provider_(provider) {}

std::string ClaimReconciler::EffectiveOwner(const Json& object, bool provider_side) {
  std::string a = Annotation(object, apis::klutch::kResourceOwnerAnnotation);
  if (a == kProvider || a == kConsumer) return a;
  return std::string(provider_side ? kProvider : kConsumer);
}

bool ClaimReconciler::Matches(const Json& object) const {
  if (ClusterManaged(gvr_.group, gvr_.resource, object)) return false;
  if (names_.empty()) return true;
  for (const auto& n : names_) {
    if (n == "*" || n == machinery::Name(object)) return true;
  }
  return false;
}

core::Result<Result> ClaimReconciler::Reconcile(const Request& request) {
  Pass pass{
      .request = request, .pns = request.ns, .cns = connection_.ConsumerNamespaceFor(request.ns)};
  if (pass.cns.empty()) return Result::Done();  // the APIServiceNamespace's event brings it back
  // A first list in progress: "not cached" does not mean "absent" yet; back off.
  if (!provider_.HasSynced(pass.pns) || !consumer_.HasSynced()) return Result::Requeue();
  pass.p = provider_.Get(request.Key());
  pass.c = consumer_.indexer().Get(pass.cns + "/" + request.name);
  if (pass.p && !Matches(*pass.p)) pass.p = nullptr;
  if (pass.c && !Matches(*pass.c)) pass.c = nullptr;
  if (!pass.p && !pass.c) return Result::Done();
  if (!DecideOwner(pass)) return Result::Done();
  if (ReportConflict(pass)) return Result::Done();
  return Sync(pass);
}

bool ClaimReconciler::DecideOwner(Pass& pass) const {
  // The owner is what the source says. A copy edited to claim otherwise is still a copy:
  // P annotated Provider owns C whatever C's annotation now says, and the other way round.
  const ObjectPtr& p = pass.p;
  const ObjectPtr& c = pass.c;
  pass.p_owner = p ? Annotation(*p, apis::klutch::kResourceOwnerAnnotation) : "";
  pass.c_owner = c ? Annotation(*c, apis::klutch::kResourceOwnerAnnotation) : "";
  std::string owner;
  if (pass.p_owner == kProvider || (p && pass.p_owner.empty() && pass.c_owner != kConsumer)) {
    owner = kProvider;
  } else if (pass.c_owner == kConsumer || (c && pass.c_owner.empty() && !p)) {
    owner = kConsumer;
  } else if (pass.p_owner == kConsumer) {
    owner = kConsumer;  // a copy whose source is gone or not yet seen
  } else {
    owner = kProvider;
  }
  if (!owner_.empty() && owner != owner_) return false;
  pass.provider_owns = owner == kProvider;
  pass.source = pass.provider_owns ? p : c;
  pass.copy = pass.provider_owns ? c : p;
  return true;
}

bool ClaimReconciler::ReportConflict(const Pass& pass) {
  // An object of the same name the other side made on its own (no owner annotation) is not
  // ours to overwrite: say so and leave both alone.
  const std::string& copy_owner = pass.provider_owns ? pass.c_owner : pass.p_owner;
  if (!pass.source || !pass.copy || !copy_owner.empty()) return false;
  const std::string& name = pass.request.name;
  if (pass.provider_owns) {
    ctx_.app_events.Event(*pass.copy, "Warning", "ClaimedNameConflict",
                          "the Control Plane provides a " + gvr_.resource + " named " + name +
                              " here; rename or delete this one to receive it");
  } else {
    ctx_.app_events.Event(*pass.source, "Warning", "ClaimedNameConflict",
                          "the Control Plane already has a " + gvr_.resource + " named " + name +
                              " of its own; rename this one to sync it");
  }
  return true;
}

core::Result<Result> ClaimReconciler::Sync(Pass& pass) {
  if (!pass.source || machinery::IsBeingDeleted(*pass.source)) return DeleteCopy(pass);
  if (!pass.copy) {
    // Not in our cache is not absent: a watch lags, and another claim's reconciler on the same
    // resource (a Consumer claim beside a Provider claim) may have stamped the other side's
    // object its own meanwhile. Stamping ours and writing the copy on a cache miss let a
    // consumer's own Secret be taken for a copy and overwritten; look for it live first, and
    // decide again with what is there.
    auto live = pass.CopyClient(connection_, ctx_, gvr_).Get(pass.request.name);
    if (live.ok()) {
      auto found = std::make_shared<const Json>(std::move(*live));
      if (Matches(*found)) {
        (pass.provider_owns ? pass.c : pass.p) = std::move(found);
        if (!DecideOwner(pass)) return Result::Done();
        if (ReportConflict(pass)) return Result::Done();
        if (!pass.source || machinery::IsBeingDeleted(*pass.source)) return DeleteCopy(pass);
      }
    } else if (!core::IsNotFound(live.status())) {
      return live.status();
    }
  }
  KLUTCH_RUN_STEP(MarkOwner(pass));
  return UpdateCopy(pass);
}

core::Result<Result> ClaimReconciler::DeleteCopy(Pass& pass) {
  const std::string& name = pass.request.name;
  if (!pass.source) {
    auto live = pass.SourceClient(connection_, ctx_, gvr_).Get(name);
    if (live.ok()) return Result::Done();  // our cache is behind; its event follows
    if (!core::IsNotFound(live.status())) return live.status();
  }
  if (!pass.copy) return Result::Done();
  client::DeleteOptions o;
  o.precondition_uid = machinery::Uid(*pass.copy);
  auto r = pass.CopyClient(connection_, ctx_, gvr_).Delete(name, o);
  ctx_.metrics.writes.Increment({{"cluster", pass.CopyCluster()}, {"verb", "delete"}});
  if (!r.ok() && !core::IsNotFound(r.status()) && !core::IsConflict(r.status())) {
    return r.status();
  }
  return Result::Done();
}

reconcile::Step ClaimReconciler::MarkOwner(Pass& pass) {
  const std::string owner = pass.Owner();
  if (Annotation(*pass.source, apis::klutch::kResourceOwnerAnnotation) == owner) {
    return reconcile::Continue();
  }
  Json patch = {
      {"metadata",
       {{"annotations", {{std::string(apis::klutch::kResourceOwnerAnnotation), owner}}}}}};
  auto r = pass.SourceClient(connection_, ctx_, gvr_)
               .Patch(pass.request.name, client::PatchType::kMerge, machinery::Dump(patch),
                      {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
  ctx_.metrics.writes.Increment({{"cluster", pass.SourceCluster()}, {"verb", "patch"}});
  if (!r.ok()) return r.status();
  return Result::Done();  // the annotated object's event brings us back
}

core::Result<Result> ClaimReconciler::UpdateCopy(Pass& pass) {
  const std::string& name = pass.request.name;
  client::ResourceClient copy_rc = pass.CopyClient(connection_, ctx_, gvr_);
  Json desired = CleanCopy(*pass.source, pass.provider_owns ? pass.cns : pass.pns);
  if (!pass.copy) {
    auto r = copy_rc.Create(desired,
                            {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
    ctx_.metrics.writes.Increment({{"cluster", pass.CopyCluster()}, {"verb", "create"}});
    if (!r.ok() && !core::IsAlreadyExists(r.status())) return r.status();
    return Result::Done();
  }
  if (SameContent(desired, *pass.copy)) return Result::Done();
  // The owner wins every field of the copy.
  Json replaced = *pass.copy;
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
  ctx_.metrics.writes.Increment({{"cluster", pass.CopyCluster()}, {"verb", "update"}});
  if (!r.ok()) {
    if (core::IsInvalid(r.status())) {
      KLUTCH_LOG(kWarn, "konnector", "{} refused the copy of claimed {} {}: {}", pass.CopyCluster(),
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
