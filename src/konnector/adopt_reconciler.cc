// §4.12: objects created on the provider appear on the consumer.
#include "konnector/adopt_reconciler.h"

#include "client/dynamic.h"
#include "core/log.h"
#include "konnector/connection.h"
#include "reconcile/committer.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

}  // namespace

struct AdoptReconciler::Pass {
  const Request& request;    // the provider key
  ObjectPtr provider;        // the provider object
  Request consumer_request;  // the consumer key it maps to
  ObjectPtr consumer;        // the consumer object as cached, null when none
};

core::Result<Result> AdoptReconciler::Reconcile(const Request& request) {
  Pass pass{.request = request, .provider = sync_.isolation.Get(request.Key())};
  if (!pass.provider) return Result::Done();
  if (!sync_.isolation.Ours(*pass.provider)) return Result::Done();
  std::string ckey = sync_.isolation.ConsumerKey(request.Key());
  if (ckey.empty()) return Result::Done();
  pass.consumer_request = Request::FromKey(ckey);
  pass.consumer = sync_.consumer.indexer().Get(ckey);
  if (!pass.consumer) {
    KLUTCH_RUN_STEP(CreateConsumerCopy(pass));
  } else {
    KLUTCH_RETURN_IF_ERROR(MarkConsumerBound(pass));
  }
  KLUTCH_RETURN_IF_ERROR(MarkProviderBound(pass));
  return Result::Done();
}

reconcile::Step AdoptReconciler::CreateConsumerCopy(Pass& pass) {
  const Json& u = *pass.provider;
  const Request& c = pass.consumer_request;
  if (HasBoundAnnotation(u) || machinery::IsBeingDeleted(u)) return Result::Done();
  if (!sync_.consumer.HasSynced()) return Result::Requeue();  // backoff until it has listed
  client::ResourceClient consumer_rc =
      client::ResourceClient(sync_.ctx.app, sync_.gvr).Namespace(c.ns);
  auto live = consumer_rc.Get(c.name);
  if (live.ok()) return Result::Done();
  if (!core::IsNotFound(live.status())) return live.status();
  Json copy = CleanCopy(u, c.ns);
  sync_.isolation.ToConsumer(copy, c);
  SetAnnotation(copy, apis::klutch::kBoundAnnotation, "true");
  auto r = consumer_rc.Create(copy,
                              {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
  sync_.ctx.metrics.writes.Increment({{"cluster", "app"}, {"verb", "create"}});
  if (!r.ok() && !core::IsAlreadyExists(r.status())) {
    if (core::IsInvalid(r.status())) {
      sync_.ctx.metrics.sync_errors.Increment(
          {{"direction", "adopt"}, {"resource", sync_.gvr.GroupResource()}, {"reason", "Invalid"}});
      KLUTCH_LOG(kWarn, "konnector", "the App Cluster refused adopted {} {}: {}", sync_.kind,
                 c.Key(), r.status().message());
      return Result::Done();
    }
    return r.status();
  }
  sync_.latency.Observe("down", pass.request.Key());
  return reconcile::Continue();
}

core::Status AdoptReconciler::MarkConsumerBound(Pass& pass) {
  const Json& d = *pass.consumer;
  if (HasBoundAnnotation(d)) return core::Status::Ok();
  Json marked = d;
  SetAnnotation(marked, apis::klutch::kBoundAnnotation, "true");
  auto r = reconcile::Committer(client::ResourceClient(sync_.ctx.app, sync_.gvr),
                                std::string(apis::klutch::kKonnectorFieldManager))
               .Commit(d, marked);
  sync_.ctx.metrics.writes.Increment({{"cluster", "app"}, {"verb", "patch"}});
  if (!r.ok()) return r.status();
  return core::Status::Ok();
}

core::Status AdoptReconciler::MarkProviderBound(Pass& pass) {
  const Json& u = *pass.provider;
  if (HasBoundAnnotation(u)) return core::Status::Ok();
  // Upstream writes this to the consumer by mistake (§6.5); the provider copy is meant.
  Json patch = {
      {"metadata", {{"annotations", {{std::string(apis::klutch::kBoundAnnotation), "true"}}}}}};
  auto r = client::ResourceClient(sync_.connection.provider(), sync_.gvr)
               .Namespace(machinery::Namespace(u))
               .Patch(machinery::Name(u), client::PatchType::kMerge, machinery::Dump(patch),
                      {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
  sync_.ctx.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "patch"}});
  if (!r.ok() && !core::IsNotFound(r.status())) return r.status();
  return core::Status::Ok();
}

}  // namespace klutch::konnector::internal
