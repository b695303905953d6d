#include "a8s/operator_context.h"

#include <fmt/format.h>

#include "a8s/a8s_names.h"
#include "client/dynamic.h"
#include "core/strings.h"
#include "machinery/json_numbers.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::a8s {

int64_t Generation(const Json& object) {
  const Json* g = machinery::Find(object, {"metadata", "generation"});
  return g != nullptr ? machinery::AsInt64(*g).value_or(0) : 0;
}

engines::PlanLimits AppliedLimits(const InstanceRecord& record) {
  auto spec = ParsePostgresqlSpec(record.applied_spec);
  if (spec.ok()) return spec->limits;
  engines::PlanLimits limits;
  limits.nodes = static_cast<int>(record.ports.size());
  limits.tls = true;
  limits.tls_optional = true;
  return limits;
}

core::Status WriteStatus(OperatorContext& ctx, const client::GroupVersionResource& gvr,
                         const Json& original, const Json& modified) {
  reconcile::Committer committer(
      client::ResourceClient(ctx.rest, gvr, machinery::Namespace(original)), "klutch-operator");
  return committer.CommitStatus(original, modified).status();
}

core::Result<bool> SetFinalizer(OperatorContext& ctx, const client::GroupVersionResource& gvr,
                                const Json& object, bool present) {
  Json modified = object;
  bool changed = present ? machinery::AddFinalizer(modified, kFinalizer)
                         : machinery::RemoveFinalizer(modified, kFinalizer);
  if (!changed) return false;
  reconcile::Committer committer(
      client::ResourceClient(ctx.rest, gvr, machinery::Namespace(object)), "klutch-operator");
  KLUTCH_RETURN_IF_ERROR(committer.Commit(object, modified).status());
  return true;
}

core::Result<reconcile::Result> Failed(OperatorContext& ctx,
                                       const client::GroupVersionResource& gvr, const Json& object,
                                       Json modified, std::string_view reason,
                                       std::string_view message,
                                       std::chrono::milliseconds retry_after) {
  modified["status"]["error"] = std::string(message);
  reconcile::SetCondition(modified,
                          {.type = "Ready",
                           .status = "False",
                           .observed_generation = Generation(object),
                           .reason = std::string(reason),
                           .message = std::string(message)},
                          ctx.clock);
  ctx.events.Event(object, reconcile::kEventTypeWarning, reason, message);
  KLUTCH_RETURN_IF_ERROR(WriteStatus(ctx, gvr, object, modified));
  if (retry_after.count() > 0) return reconcile::Result::RequeueAfter(retry_after);
  return reconcile::Result::Done();
}

void SetProgress(OperatorContext& ctx, Json& modified, int64_t generation, bool in_progress,
                 std::string_view ready, std::string_view reason, std::string_view message) {
  reconcile::SetCondition(modified,
                          {.type = "InProgress",
                           .status = in_progress ? "True" : "False",
                           .observed_generation = generation,
                           .reason = std::string(in_progress ? reason : "NotRunning"),
                           .message = in_progress ? std::string(message) : ""},
                          ctx.clock);
  reconcile::SetCondition(modified,
                          {.type = "Ready",
                           .status = std::string(ready),
                           .observed_generation = generation,
                           .reason = std::string(reason),
                           .message = std::string(message)},
                          ctx.clock);
  modified["status"]["lastObservationTime"] = core::FormatTime(ctx.clock.Now());
}

std::chrono::milliseconds RetryBackoff(OperatorContext& ctx, const Json& object,
                                       std::string_view failed_reason, int64_t retries) {
  auto ready = reconcile::FindCondition(object, "Ready");
  if (!ready || ready->status != "False" || ready->reason != failed_reason) return {};
  auto at = core::ParseTime(machinery::GetString(object, {"status", "lastObservationTime"}));
  if (!at) return {};
  const auto wait = std::chrono::seconds(std::min<int64_t>(60, 5 * std::max<int64_t>(1, retries)));
  const auto since = ctx.clock.Now() - *at;
  if (since >= wait) return {};
  return std::chrono::ceil<std::chrono::milliseconds>(wait - since);
}

core::Result<ResolvedInstance> ResolveServiceInstance(OperatorContext& ctx, const Json& object) {
  const std::string group = machinery::GetString(object, {"spec", "serviceInstance", "apiGroup"});
  const std::string kind = machinery::GetString(object, {"spec", "serviceInstance", "kind"});
  const std::string name = machinery::GetString(object, {"spec", "serviceInstance", "name"});
  const std::string ns = machinery::Namespace(object);
  // Klutch's compositions write kind PostgreSQL, a8s' own examples Postgresql.
  if (group != kPostgresqlGroup || core::ToLower(kind) != "postgresql") {
    return core::Invalid(fmt::format(
        "spec.serviceInstance is a {} of {}; klutch operator serves Postgresql ({}) only", kind,
        group, kPostgresqlGroup));
  }
  auto instance = ctx.postgresqls.indexer().Get(ns + "/" + name);
  if (instance == nullptr) {
    return core::NotFound(
        fmt::format("there is no Postgresql {}/{} ({})", ns, name,
                    FieldOfClaim("spec.serviceInstance.name", "spec.instanceRef")));
  }
  auto record = ctx.store.Get(machinery::Uid(*instance));
  if (!record || !record->provisioned) {
    return core::Unavailable(fmt::format("Postgresql {}/{} has no running servers yet", ns, name));
  }
  return ResolvedInstance{*instance, std::move(*record)};
}

std::string FieldOfClaim(std::string_view field, std::string_view claim_field) {
  return fmt::format("{}, or {} of the claim", field, claim_field);
}

}  // namespace klutch::a8s
