// §4.10: spec, consumer -> provider.
#include "konnector/spec_reconciler.h"

#include "client/dynamic.h"
#include "core/log.h"
#include "konnector/connection.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

// `object` with our finalizer and the bound annotation (added when missing).
Json WithFinalizerAndBound(const Json& object) {
  Json modified = object;
  if (!machinery::HasFinalizer(object, apis::klutch::kSyncerFinalizer)) {
    Json& meta = machinery::MutableMetadata(modified);
    if (!meta.contains("finalizers") || !meta["finalizers"].is_array()) {
      meta["finalizers"] = Json::array();
    }
    meta["finalizers"].push_back(std::string(apis::klutch::kSyncerFinalizer));
  }
  if (!HasBoundAnnotation(object)) SetAnnotation(modified, apis::klutch::kBoundAnnotation, "true");
  return modified;
}

Json WithoutSyncerFinalizer(const Json& object) {
  Json modified = object;
  Json& meta = machinery::MutableMetadata(modified);
  Json kept = Json::array();
  for (const auto& f : machinery::Finalizers(object)) {
    if (f != apis::klutch::kSyncerFinalizer) kept.push_back(f);
  }
  meta["finalizers"] = std::move(kept);
  return modified;
}

}  // namespace

struct SpecReconciler::Pass {
  const Request& request;
  ObjectPtr consumer;  // the consumer object as cached
  bool has_finalizer = false;
  ProviderPlace place;
  ObjectPtr provider;  // its provider copy, null when none
  Json current;        // the consumer object after EnsureFinalizerAndBound

  client::ResourceClient ProviderClient(SyncerContext& sync) const {
    return client::ResourceClient(sync.connection.provider(), sync.gvr).Namespace(place.ns);
  }
};

core::Result<Result> SpecReconciler::Reconcile(const Request& request) {
  Pass pass{.request = request, .consumer = sync_.consumer.indexer().Get(request.Key())};
  if (!pass.consumer) {
    sync_.latency.Forget("up", request.Key());
    return Result::Done();
  }
  const bool deleting = machinery::IsBeingDeleted(*pass.consumer);
  pass.has_finalizer = machinery::HasFinalizer(*pass.consumer, apis::klutch::kSyncerFinalizer);
  KLUTCH_RUN_STEP(sync_.isolation.Place(request, !deleting || pass.has_finalizer, pass.place));
  pass.provider = sync_.isolation.Get(pass.place.Key());
  if (!pass.provider && !sync_.isolation.HasSynced(pass.place.Key())) {
    return Result::Done();  // the provider cache's first list brings it back
  }
  if (deleting) return Delete(pass);
  KLUTCH_RUN_STEP(EnsureFinalizerAndBound(pass));
  return ApplyToProvider(pass);
}

core::Result<Result> SpecReconciler::Delete(Pass& pass) {
  if (pass.provider && !machinery::IsBeingDeleted(*pass.provider)) {
    KLUTCH_RUN_STEP(DeleteProviderCopy(pass));
  } else if (pass.provider) {
    return PropagateAnnotations(pass);
  }
  return RemoveFinalizer(pass);
}

reconcile::Step SpecReconciler::DeleteProviderCopy(Pass& pass) {
  client::DeleteOptions o;
  o.precondition_uid = machinery::Uid(*pass.provider);
  auto r = pass.ProviderClient(sync_).Delete(pass.place.name, o);
  sync_.ctx.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "delete"}});
  if (!r.ok() && !core::IsNotFound(r.status()) && !core::IsConflict(r.status())) {
    return r.status();
  }
  // The finalizer stays until the copy is gone (ADR 0009): the Control Plane may hold the
  // deletion, and the status it copies down says why. Its delete event (or, when it went at
  // once, the provider cache's) brings this object back.
  if (r.ok()) return Result::Done();
  return reconcile::Continue();
}

core::Result<Result> SpecReconciler::PropagateAnnotations(Pass& pass) {
  // Such as klutch.anynines.com/delete-in-use. A merge patch: an apply without the spec would
  // take the spec away.
  Json changed = Json::object();
  const Json* mine = machinery::Find(*pass.consumer, {"metadata", "annotations"});
  if (mine && mine->is_object()) {
    for (auto it = mine->begin(); it != mine->end(); ++it) {
      if (it.key() == "kubectl.kubernetes.io/last-applied-configuration") continue;
      const auto* value = it->get_ptr<const std::string*>();
      if (!value || Annotation(*pass.provider, it.key()) != *value) {
        changed[it.key()] = *it;
      }
    }
  }
  if (!changed.empty()) {
    auto r = pass.ProviderClient(sync_).Patch(
        pass.place.name, client::PatchType::kMerge,
        machinery::Dump(Json{{"metadata", {{"annotations", changed}}}}),
        {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
    sync_.ctx.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "patch"}});
    if (!r.ok() && !core::IsNotFound(r.status())) return r.status();
  }
  return Result::Done();  // the provider's delete event brings us back
}

core::Result<Result> SpecReconciler::RemoveFinalizer(Pass& pass) {
  if (!pass.has_finalizer) return Result::Done();
  auto r = reconcile::Committer(client::ResourceClient(sync_.ctx.app, sync_.gvr),
                                std::string(apis::klutch::kKonnectorFieldManager))
               .Commit(*pass.consumer, WithoutSyncerFinalizer(*pass.consumer));
  sync_.ctx.metrics.writes.Increment({{"cluster", "app"}, {"verb", "patch"}});
  if (!r.ok() && !core::IsNotFound(r.status())) return r.status();
  sync_.latency.Observe("up", pass.request.Key());
  return Result::Done();
}

core::Status SpecReconciler::EnsureFinalizerAndBound(Pass& pass) {
  pass.current = *pass.consumer;
  Json marked = WithFinalizerAndBound(*pass.consumer);
  if (marked == *pass.consumer) return core::Status::Ok();
  auto r = reconcile::Committer(client::ResourceClient(sync_.ctx.app, sync_.gvr),
                                std::string(apis::klutch::kKonnectorFieldManager))
               .Commit(*pass.consumer, marked);
  sync_.ctx.metrics.writes.Increment({{"cluster", "app"}, {"verb", "patch"}});
  if (!r.ok()) return r.status();
  pass.current = *r;
  return core::Status::Ok();
}

Json SpecReconciler::DesiredCopy(const Pass& pass) const {
  // The consumer's spec, labels and annotations (but kubectl's last-applied copy), the bound
  // annotation, and where the isolation strategy places it (for cluster-scoped objects the
  // prefixed name, cluster-namespace annotation and Namespace owner).
  const Json& current = pass.current;
  Json apply = {{"apiVersion", machinery::ApiVersionOf(current)},
                {"kind", machinery::Kind(current)},
                {"metadata", {{"name", pass.request.name}}}};
  if (const Json* labels = machinery::Find(current, {"metadata", "labels"})) {
    apply["metadata"]["labels"] = *labels;
  }
  if (const Json* annotations = machinery::Find(current, {"metadata", "annotations"});
      annotations && annotations->is_object()) {
    Json copied = *annotations;
    copied.erase("kubectl.kubernetes.io/last-applied-configuration");
    if (!copied.empty()) apply["metadata"]["annotations"] = std::move(copied);
  }
  SetAnnotation(apply, apis::klutch::kBoundAnnotation, "true");
  sync_.isolation.ToProvider(apply, pass.place);
  if (!SpecOf(current).is_null()) apply["spec"] = SpecOf(current);
  return apply;
}

core::Result<Result> SpecReconciler::ApplyToProvider(Pass& pass) {
  // Server-side applied with force, so the konnector owns these fields and fields the provider
  // adds stay its own.
  const std::string& key = pass.request.Key();
  Json apply = DesiredCopy(pass);
  const std::string hash = JsonHash(apply);
  const ObjectPtr& u = pass.provider;
  if (u && Annotation(*u, apis::klutch::kAppliedHashAnnotation) == hash &&
      Covers(SpecOf(*u), SpecOf(pass.current))) {
    sync_.latency.Observe("up", key);
    MarkSynced(pass.current, true, "Synced", "spec is in sync with the Control Plane");
    return Result::Done();
  }
  SetAnnotation(apply, apis::klutch::kAppliedHashAnnotation, hash);
  auto r = pass.ProviderClient(sync_).Patch(
      pass.place.name, client::PatchType::kApply, machinery::Dump(apply),
      {.field_manager = std::string(apis::klutch::kKonnectorFieldManager), .force = true});
  sync_.ctx.metrics.writes.Increment({{"cluster", "provider"}, {"verb", u ? "apply" : "create"}});
  if (!r.ok()) {
    if (core::IsInvalid(r.status())) {
      MarkSynced(pass.current, false, "ProviderRejected",
                 "the Control Plane refused " + sync_.kind + " " + key + ": " +
                     r.status().message() + "; fix the spec and apply again");
      return Result::Done();  // the next edit of the object tries again
    }
    return r.status();
  }
  sync_.latency.Observe("up", key);
  MarkSynced(pass.current, true, "Synced", "spec is in sync with the Control Plane");
  return Result::Done();
}

void SpecReconciler::MarkSynced(const Json& consumer, bool ok, std::string_view reason,
                                const std::string& message) {
  Json modified = consumer;
  reconcile::Condition c{
      .type = std::string(kSyncedCondition),
      .status = std::string(ok ? reconcile::kConditionTrue : reconcile::kConditionFalse),
      .observed_generation = Generation(consumer),
      .reason = std::string(reason),
      .message = message};
  if (ok) {
    // Only a failure is reported eagerly; success replaces an earlier failure.
    auto existing = reconcile::FindCondition(consumer, kSyncedCondition);
    if (!existing || existing->status == reconcile::kConditionTrue) return;
  }
  if (!reconcile::SetCondition(modified, c, sync_.ctx.clock)) return;
  auto r = reconcile::Committer(client::ResourceClient(sync_.ctx.app, sync_.gvr),
                                std::string(apis::klutch::kKonnectorFieldManager))
               .CommitStatus(consumer, modified);
  sync_.ctx.metrics.writes.Increment({{"cluster", "app"}, {"verb", "patch"}});
  if (!ok) {
    sync_.ctx.app_events.Event(consumer, "Warning", reason, message);
    sync_.ctx.metrics.sync_errors.Increment({{"direction", "up"},
                                             {"resource", sync_.gvr.GroupResource()},
                                             {"reason", std::string(reason)}});
  }
  if (!r.ok() && !core::IsConflict(r.status())) {
    KLUTCH_LOG(kWarn, "konnector", "setting Synced on {}: {}", client::ObjectKey(consumer),
               r.status().message());
  }
}

}  // namespace klutch::konnector::internal
