#include "bind/cluster_binding_reconciler.h"

#include <map>
#include <set>

#include "apis/klutch/appclusterbinding.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "bind/names.h"
#include "bind/object_writes.h"
#include "core/duration.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/committer.h"

namespace klutch::bind {

using client::Json;
using client::ObjectPtr;
using reconcile::Result;

namespace {

constexpr std::string_view kHealthy = "Healthy";
constexpr std::string_view kPermissionsReady = "PermissionsReady";
constexpr std::string_view kRbacApiVersion = "rbac.authorization.k8s.io/v1";

Json OwnerIsNamespace(const Json& ns) {
  return Json::array({{{"apiVersion", "v1"},
                       {"kind", "Namespace"},
                       {"name", machinery::Name(ns)},
                       {"uid", machinery::Uid(ns)},
                       {"controller", true}}});
}

Json BinderSubjects(const std::string& cluster_namespace) {
  return Json::array({{{"kind", "ServiceAccount"},
                       {"name", apis::klutch::kBinderName},
                       {"namespace", cluster_namespace}}});
}

}  // namespace

std::optional<core::SystemTime> UnconnectedDeadline(const Json& cb, const Json& ns,
                                                    std::chrono::seconds grace) {
  if (grace.count() <= 0) return std::nullopt;
  if (machinery::Annotation(ns, apis::klutch::kIdentityAnnotation).empty()) return std::nullopt;
  const Json* labels = machinery::Find(cb, {"metadata", "labels"});
  if (labels != nullptr && labels->is_object() &&
      labels->contains(apis::klutch::kAppClusterBindingNameLabel)) {
    return std::nullopt;
  }
  if (!machinery::GetString(cb, {"status", "lastHeartbeatTime"}).empty()) return std::nullopt;
  auto since = core::ParseTime(machinery::GetString(cb, {"metadata", "creationTimestamp"}));
  if (!since) return std::nullopt;
  // Spaces made before binds recorded their time are never collected: an upgraded backend
  // must not delete, at its first pass, a space whose konnector a GitOps pipeline installs
  // later. Binding it again stamps it.
  auto bound = core::ParseTime(machinery::Annotation(ns, apis::klutch::kLastBoundAnnotation));
  if (!bound) return std::nullopt;
  if (*bound > *since) since = bound;
  return *since + grace;
}

Health HeartbeatHealth(const Json& cb, core::SystemTime now, std::chrono::seconds drift) {
  auto False = [](std::string reason, std::string_view severity, std::string message) {
    return reconcile::SeverityCondition{.type = std::string(kHealthy),
                                        .status = "False",
                                        .severity = std::string(severity),
                                        .reason = std::move(reason),
                                        .message = std::move(message)};
  };
  const std::string last_text = machinery::GetString(cb, {"status", "lastHeartbeatTime"});
  auto last = core::ParseTime(last_text);
  if (!last) {
    return {False("FirstHeartbeatPending", reconcile::kSeverityInfo,
                  "waiting for the first heartbeat of the konnector: check that it runs in the "
                  "consumer cluster and can reach this Control Plane"),
            {}};
  }
  auto interval_text = machinery::GetString(cb, {"status", "heartbeatInterval"});
  auto parsed = core::ParseGoDuration(interval_text);
  std::chrono::nanoseconds interval{0};
  if (parsed.ok()) {
    interval = std::chrono::seconds(parsed->seconds) + std::chrono::nanoseconds(parsed->nanos);
  }
  if (interval.count() <= 0) {
    return {False("HeartbeatIntervalMissing", reconcile::kSeverityInfo,
                  "the konnector reports no heartbeat interval; upgrade the konnector"),
            {}};
  }
  if (*last > now + drift) {
    return {False("HeartbeatTimeDrift", reconcile::kSeverityWarning,
                  "the last heartbeat (" + last_text +
                      ") lies in the future; synchronise the "
                      "clocks of the consumer cluster and the Control Plane"),
            Ms(*last - now)};
  }
  const auto deadline =
      *last + 2 * std::chrono::duration_cast<core::SystemTime::duration>(interval);
  if (now > deadline) {
    return {False("HeartbeatTimeout", reconcile::kSeverityError,
                  "no heartbeat since " + last_text + " (expected every " + interval_text +
                      "): check that the konnector runs and can reach this Control Plane"),
            {}};
  }
  return {{.type = std::string(kHealthy), .status = "True"},
          Ms(deadline - now + std::chrono::seconds(1))};
}

Json BinderRules(const std::vector<ObjectPtr>& exports) {
  std::map<std::string, std::set<std::string>> full;    // group -> resources
  std::map<std::string, std::set<std::string>> status;  // group -> resource/status
  for (const ObjectPtr& e : exports) {
    const std::string group = machinery::GetString(*e, {"spec", "group"});
    const std::string plural = machinery::GetString(*e, {"spec", "names", "plural"});
    if (!plural.empty()) {
      full[group].insert(plural);
      status[group].insert(plural + "/status");
    }
    const Json* claims = machinery::Find(*e, {"spec", "permissionClaims"});
    if (claims == nullptr || !claims->is_array()) continue;
    for (const Json& c : *claims) {
      const std::string resource = machinery::GetString(c, {"resource"});
      if (!resource.empty()) full[machinery::GetString(c, {"group"})].insert(resource);
    }
  }
  Json rules = Json::array();
  auto add = [&](const std::map<std::string, std::set<std::string>>& by_group, const Json& verbs) {
    for (const auto& [group, names] : by_group) {
      rules.push_back({{"apiGroups", Json::array({group})},
                       {"resources", Json(std::vector<std::string>(names.begin(), names.end()))},
                       {"verbs", verbs}});
    }
  };
  add(full, Json::array({"create", "delete", "get", "list", "patch", "update", "watch"}));
  add(status, Json::array({"get", "patch", "update"}));
  return rules;
}

struct ClusterBindingReconciler::Pass {
  const Json& cb;
  const Json& ns;  // the cluster namespace
  std::optional<core::SystemTime> collect_at;
  Json modified;  // the ClusterBinding with the conditions this pass sets
  Health health;
  bool health_changed = false;
};

core::Result<Result> ClusterBindingReconciler::Reconcile(const reconcile::Request& request) {
  ObjectPtr cb = ctx_.cluster_bindings.indexer().Get(request.Key());
  if (!cb || machinery::IsBeingDeleted(*cb)) return Result::Done();
  ObjectPtr ns = ctx_.namespaces.indexer().Get(request.ns);
  if (!ns || machinery::IsBeingDeleted(*ns)) return Result::Done();
  // A space no konnector connected to within the grace period is collected.
  const auto grace = ctx_.options.unconnected_cluster_grace;
  const auto collect_at = UnconnectedDeadline(*cb, *ns, grace);
  if (collect_at && ctx_.clock.Now() >= *collect_at) return CollectUnconnected(*ns, grace);
  Pass pass{.cb = *cb, .ns = *ns, .collect_at = collect_at, .modified = *cb};
  CheckHealth(pass);
  const core::Status rbac = EnsureRbac(pass);
  if (!rbac.ok()) return Failed(pass, rbac);
  reconcile::RemoveCondition(pass.modified, kPermissionsReady);
  KLUTCH_RETURN_IF_ERROR(CommitStatus(pass));
  return Recheck(pass);
}

core::Result<Result> ClusterBindingReconciler::CollectUnconnected(const Json& cached_ns,
                                                                  std::chrono::seconds grace) {
  const std::string name = machinery::Name(cached_ns);
  auto live = client::ResourceClient(ctx_.rest, apis::klutch::kClusterBindings, name)
                  .Get(apis::klutch::kClusterBindingName);
  if (!live.ok() && core::IsNotFound(live.status())) return Result::Done();
  if (!live.ok()) return live.status();
  // The live namespace too: a bind moments ago renewed its last-bound time, and the delete
  // below is refused if it changes after this read (resourceVersion precondition).
  client::ResourceClient namespaces(ctx_.rest, client::resources::kNamespaces);
  auto live_ns = namespaces.Get(name);
  if (!live_ns.ok() && core::IsNotFound(live_ns.status())) return Result::Done();
  if (!live_ns.ok()) return live_ns.status();
  const Json& ns = *live_ns;
  auto deadline = UnconnectedDeadline(*live, ns, grace);
  if (!deadline) return Result::Done();
  if (ctx_.clock.Now() < *deadline) return Result::RequeueAfter(Ms(*deadline - ctx_.clock.Now()));
  KLUTCH_LOG(kInfo, "bind",
             "deleting cluster namespace {} of {}: no konnector connected within {} s of its "
             "last bind",
             name, core::GoQuote(machinery::Annotation(ns, apis::klutch::kIdentityAnnotation)),
             grace.count());
  auto deleted = namespaces.Delete(name, {.precondition_uid = machinery::Uid(ns),
                                          .precondition_resource_version = machinery::GetString(
                                              ns, {"metadata", "resourceVersion"})});
  if (!deleted.ok() && core::IsConflict(deleted.status())) return Result::Requeue();  // look again
  if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
  for (const auto& gvr :
       {client::resources::kClusterRoleBindings, client::resources::kClusterRoles}) {
    auto gone = client::ResourceClient(ctx_.rest, gvr).Delete(apis::klutch::BinderRoleName(name));
    if (!gone.ok() && !core::IsNotFound(gone.status())) return gone.status();
  }
  return Result::Done();
}

void ClusterBindingReconciler::CheckHealth(Pass& pass) {
  pass.health = HeartbeatHealth(pass.cb, ctx_.clock.Now(), ctx_.options.heartbeat_drift);
  pass.health_changed =
      reconcile::SetSeverityCondition(pass.modified, pass.health.condition, ctx_.clock);
}

core::Status ClusterBindingReconciler::EnsureRbac(Pass& pass) {
  const std::string ns = machinery::Name(pass.ns);
  KLUTCH_RETURN_IF_ERROR(EnsureRoleBinding(ctx_.rest, ns, std::string(apis::klutch::kBinderName),
                                           "ClusterRole", std::string(apis::klutch::kBinderName),
                                           ns, std::string(apis::klutch::kBinderName)));
  KLUTCH_RETURN_IF_ERROR(EnsureBinderRole(
      pass.ns, BinderRules(ctx_.exports.indexer().ByIndex(client::Indexer::kNamespaceIndex, ns))));
  return EnsureBinderClusterRoleBinding(pass.ns);
}

core::Status ClusterBindingReconciler::EnsureBinderRole(const Json& ns, const Json& rules) {
  client::ResourceClient roles(ctx_.rest, client::resources::kClusterRoles);
  const std::string name = apis::klutch::BinderRoleName(machinery::Name(ns));
  auto existing = roles.Get(name);
  if (!existing.ok() && !core::IsNotFound(existing.status())) return existing.status();
  if (!existing.ok()) {
    Json role = {{"apiVersion", kRbacApiVersion},
                 {"kind", "ClusterRole"},
                 {"metadata", {{"name", name}, {"ownerReferences", OwnerIsNamespace(ns)}}},
                 {"rules", rules}};
    auto created = roles.Create(role, {.field_manager = std::string(kFieldManager)});
    return created.ok() || core::IsAlreadyExists(created.status()) ? core::Status::Ok()
                                                                   : created.status();
  }
  Json modified = *existing;
  modified["rules"] = rules;
  modified["metadata"]["ownerReferences"] = OwnerIsNamespace(ns);
  if (modified == *existing) return core::Status::Ok();
  auto updated = roles.Update(modified, {.field_manager = std::string(kFieldManager)});
  return updated.ok() ? core::Status::Ok() : updated.status();
}

core::Status ClusterBindingReconciler::EnsureBinderClusterRoleBinding(const Json& ns) {
  client::ResourceClient bindings(ctx_.rest, client::resources::kClusterRoleBindings);
  const std::string cns = machinery::Name(ns);
  const std::string name = apis::klutch::BinderRoleName(cns);
  auto existing = bindings.Get(name);
  if (!existing.ok() && !core::IsNotFound(existing.status())) return existing.status();
  if (ctx_.consumer_scope != "Cluster") {
    if (!existing.ok()) return core::Status::Ok();
    auto deleted = bindings.Delete(name);
    return deleted.ok() || core::IsNotFound(deleted.status()) ? core::Status::Ok()
                                                              : deleted.status();
  }
  Json desired = {
      {"apiVersion", kRbacApiVersion},
      {"kind", "ClusterRoleBinding"},
      {"metadata", {{"name", name}, {"ownerReferences", OwnerIsNamespace(ns)}}},
      {"subjects", BinderSubjects(cns)},
      {"roleRef",
       {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", name}}}};
  if (!existing.ok()) {
    auto created = bindings.Create(desired, {.field_manager = std::string(kFieldManager)});
    return created.ok() || core::IsAlreadyExists(created.status()) ? core::Status::Ok()
                                                                   : created.status();
  }
  if ((*existing)["subjects"] == desired["subjects"] &&
      (*existing)["roleRef"] == desired["roleRef"]) {
    return core::Status::Ok();
  }
  // roleRef is immutable: replace the binding.
  auto deleted = bindings.Delete(name);
  if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
  auto created = bindings.Create(desired, {.field_manager = std::string(kFieldManager)});
  return created.ok() ? core::Status::Ok() : created.status();
}

core::Status ClusterBindingReconciler::CommitStatus(Pass& pass) {
  reconcile::SetSummary(pass.modified, ctx_.clock);
  auto committed =
      reconcile::Committer(client::ResourceClient(ctx_.rest, apis::klutch::kClusterBindings),
                           std::string(kFieldManager))
          .CommitStatus(pass.cb, pass.modified);
  if (!committed.ok()) return committed.status();
  const reconcile::SeverityCondition& health = pass.health.condition;
  if (pass.health_changed && health.status == "False" &&
      health.severity != reconcile::kSeverityInfo) {
    ctx_.events.Event(pass.cb, reconcile::kEventTypeWarning, health.reason, health.message);
  }
  return core::Status::Ok();
}

Result ClusterBindingReconciler::Recheck(const Pass& pass) const {
  std::chrono::milliseconds recheck = pass.health.recheck;
  if (pass.collect_at) {
    const auto until = Ms(*pass.collect_at - ctx_.clock.Now());
    if (recheck.count() == 0 || until < recheck) recheck = until;
  }
  return recheck.count() > 0 ? Result::RequeueAfter(recheck) : Result::Done();
}

core::Result<Result> ClusterBindingReconciler::Failed(Pass& pass, const core::Status& rbac) {
  const bool changed = reconcile::MarkFalse(
      pass.modified, kPermissionsReady, "RBACFailed", reconcile::kSeverityError,
      "granting the konnector its permissions failed: " + rbac.message() +
          "; check the backend's own permissions (it needs escalate and bind on roles)",
      ctx_.clock);
  KLUTCH_RETURN_IF_ERROR(CommitStatus(pass));
  if (changed)
    ctx_.events.Event(pass.cb, reconcile::kEventTypeWarning, "RBACFailed", rbac.message());
  return rbac;
}

}  // namespace klutch::bind
