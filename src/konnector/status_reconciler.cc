// §4.11: status, provider -> consumer; and upstream leftovers of consumer deletions.
#include "konnector/status_reconciler.h"

#include "client/dynamic.h"
#include "konnector/connection.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

}  // namespace

struct StatusReconciler::Pass {
  const Request& request;    // the provider key
  ObjectPtr provider;        // the provider copy
  Request consumer_request;  // the consumer key it maps to
  ObjectPtr consumer;        // the consumer object as cached, null when none
};

core::Result<Result> StatusReconciler::Reconcile(const Request& request) {
  Pass pass{.request = request, .provider = sync_.isolation.Get(request.Key())};
  if (!pass.provider) {
    sync_.latency.Forget("down", request.Key());
    return Result::Done();
  }
  if (!sync_.isolation.Ours(*pass.provider)) return Result::Done();
  std::string ckey = sync_.isolation.ConsumerKey(request.Key());
  if (ckey.empty()) return Result::Done();
  pass.consumer_request = Request::FromKey(ckey);
  pass.consumer = sync_.consumer.indexer().Get(ckey);
  if (!pass.consumer) return DeleteLeftover(pass);
  return PropagateStatus(pass);
}

core::Result<Result> StatusReconciler::DeleteLeftover(Pass& pass) {
  const Json& u = *pass.provider;
  if (!HasBoundAnnotation(u) || machinery::IsBeingDeleted(u)) return Result::Done();
  if (!sync_.consumer.HasSynced()) return Result::Requeue();  // backoff until it has listed
  // The cache may lag a fresh create: only the API server may say it is gone.
  auto live = client::ResourceClient(sync_.ctx.app, sync_.gvr)
                  .Namespace(pass.consumer_request.ns)
                  .Get(pass.consumer_request.name);
  if (live.ok()) return Result::Done();
  if (!core::IsNotFound(live.status())) return live.status();
  client::DeleteOptions o;
  o.precondition_uid = machinery::Uid(u);
  auto r = client::ResourceClient(sync_.connection.provider(), sync_.gvr, machinery::Namespace(u))
               .Delete(machinery::Name(u), o);
  sync_.ctx.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "delete"}});
  if (!r.ok() && !core::IsNotFound(r.status()) && !core::IsConflict(r.status())) {
    return r.status();
  }
  return Result::Done();
}

Json StatusReconciler::DesiredConsumer(const Pass& pass) const {
  const Json& d = *pass.consumer;
  Json modified = d;
  const Json* ustatus = machinery::Find(*pass.provider, {"status"});
  auto synced = reconcile::FindCondition(d, kSyncedCondition);
  if (ustatus) {
    // In the developer's names: their namespace, not the Control Plane's.
    modified["status"] =
        sync_.isolation.StatusToConsumer(*ustatus, pass.request.ns, pass.consumer_request.ns);
  } else {
    modified.erase("status");
  }
  if (synced) reconcile::SetCondition(modified, *synced, sync_.ctx.clock);
  return modified;
}

core::Result<Result> StatusReconciler::PropagateStatus(Pass& pass) {
  const Json& d = *pass.consumer;
  Json modified = DesiredConsumer(pass);
  const Json* before = machinery::Find(d, {"status"});
  const Json* after = machinery::Find(modified, {"status"});
  if ((before ? *before : Json()) == (after ? *after : Json())) {
    sync_.latency.Observe("down", pass.request.Key());
    return Result::Done();
  }
  // Synced=True rides along with a status write; it never costs a write of its own.
  if (!reconcile::FindCondition(d, kSyncedCondition) && Covers(SpecOf(*pass.provider), SpecOf(d))) {
    reconcile::SetCondition(modified,
                            {.type = std::string(kSyncedCondition),
                             .status = std::string(reconcile::kConditionTrue),
                             .observed_generation = Generation(d),
                             .reason = "Synced",
                             .message = "spec is in sync with the Control Plane"},
                            sync_.ctx.clock);
  }
  auto r = reconcile::Committer(client::ResourceClient(sync_.ctx.app, sync_.gvr),
                                std::string(apis::klutch::kKonnectorFieldManager))
               .CommitStatus(d, modified);
  sync_.ctx.metrics.writes.Increment({{"cluster", "app"}, {"verb", "patch"}});
  if (!r.ok()) {
    if (core::IsInvalid(r.status())) {
      sync_.ctx.metrics.sync_errors.Increment(
          {{"direction", "down"}, {"resource", sync_.gvr.GroupResource()}, {"reason", "Invalid"}});
      sync_.ctx.app_events.Event(
          d, "Warning", "StatusSyncFailed",
          "the App Cluster refused the status from the Control Plane: " + r.status().message());
      return Result::Done();
    }
    return r.status();
  }
  // A condition that turned False says so where the developer looks: `kubectl describe`.
  for (const ConditionNews& n : FalseConditionNews(before, after, kSyncedCondition)) {
    sync_.ctx.app_events.Event(*r, n.event_type, n.reason, n.message);
  }
  sync_.latency.Observe("down", pass.request.Key());
  return Result::Done();
}

}  // namespace klutch::konnector::internal
