// Per-consumer state: ClusterBinding health and RBAC (§2.6.1) and the consumer quota.
#include <algorithm>
#include <map>
#include <set>

#include "apis/klutch/appclusterbinding.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "bind/internal.h"
#include "bind/names.h"
#include "core/duration.h"
#include "core/log.h"
#include "core/strings.h"
#include "reconcile/committer.h"

namespace klutch::bind::internal {
namespace {

namespace resources = client::resources;
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

// ClusterRole `klutch-binder-<ns>` with `rules`, owned by the cluster Namespace.
core::Status EnsureBinderRole(Context& ctx, const Json& ns, const Json& rules) {
  client::ResourceClient roles(ctx.rest, resources::kClusterRoles);
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

// ClusterRoleBinding `klutch-binder-<ns>`: present exactly in Cluster consumer scope.
core::Status EnsureBinderClusterRoleBinding(Context& ctx, const Json& ns) {
  client::ResourceClient bindings(ctx.rest, resources::kClusterRoleBindings);
  const std::string cns = machinery::Name(ns);
  const std::string name = apis::klutch::BinderRoleName(cns);
  auto existing = bindings.Get(name);
  if (!existing.ok() && !core::IsNotFound(existing.status())) return existing.status();
  if (ctx.consumer_scope != "Cluster") {
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

// Deletes the cluster namespace `ns` of a consumer whose konnector never connected (checked
// again on the live ClusterBinding: the cache may not have its first heartbeat yet), and the
// cluster-scoped RBAC made for it (which the garbage collector would also remove).
core::Result<Result> CollectUnconnected(Context& ctx, const Json& cached_ns,
                                        std::chrono::seconds grace) {
  const std::string name = machinery::Name(cached_ns);
  auto live = client::ResourceClient(ctx.rest, apis::klutch::kClusterBindings, name)
                  .Get(apis::klutch::kClusterBindingName);
  if (!live.ok() && core::IsNotFound(live.status())) return Result::Done();
  if (!live.ok()) return live.status();
  // The live namespace too: a bind moments ago renewed its last-bound time, and the delete
  // below is refused if it changes after this read (resourceVersion precondition).
  auto live_ns = client::ResourceClient(ctx.rest, resources::kNamespaces).Get(name);
  if (!live_ns.ok() && core::IsNotFound(live_ns.status())) return Result::Done();
  if (!live_ns.ok()) return live_ns.status();
  const Json& ns = *live_ns;
  auto deadline = UnconnectedDeadline(*live, ns, grace);
  if (!deadline) return Result::Done();
  if (ctx.clock.Now() < *deadline) return Result::RequeueAfter(Ms(*deadline - ctx.clock.Now()));
  KLUTCH_LOG(kInfo, "bind",
             "deleting cluster namespace {} of {}: no konnector connected within {} s of its "
             "last bind",
             name, core::GoQuote(machinery::Annotation(ns, apis::klutch::kIdentityAnnotation)),
             grace.count());
  auto deleted = client::ResourceClient(ctx.rest, resources::kNamespaces)
                     .Delete(name, {.precondition_uid = machinery::Uid(ns),
                                    .precondition_resource_version =
                                        machinery::GetString(ns, {"metadata", "resourceVersion"})});
  if (!deleted.ok() && core::IsConflict(deleted.status())) return Result::Requeue();  // look again
  if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
  for (const auto& gvr : {resources::kClusterRoleBindings, resources::kClusterRoles}) {
    auto gone = client::ResourceClient(ctx.rest, gvr).Delete(apis::klutch::BinderRoleName(name));
    if (!gone.ok() && !core::IsNotFound(gone.status())) return gone.status();
  }
  return Result::Done();
}

}  // namespace

// ---- ClusterBinding ----

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

core::Result<Result> ReconcileClusterBinding(Context& ctx, const Request& request) {
  ObjectPtr cb = ctx.cluster_bindings.indexer().Get(request.Key());
  if (!cb || machinery::IsBeingDeleted(*cb)) return Result::Done();
  ObjectPtr ns = ctx.namespaces.indexer().Get(request.ns);
  if (!ns || machinery::IsBeingDeleted(*ns)) return Result::Done();

  // A space no konnector connected to within the grace period is collected.
  const auto grace = ctx.options.unconnected_cluster_grace;
  const auto collect_at = UnconnectedDeadline(*cb, *ns, grace);
  if (collect_at && ctx.clock.Now() >= *collect_at) return CollectUnconnected(ctx, *ns, grace);

  Json modified = *cb;
  Health health = HeartbeatHealth(*cb, ctx.clock.Now(), ctx.options.heartbeat_drift);
  const bool health_changed =
      reconcile::SetSeverityCondition(modified, health.condition, ctx.clock);

  // The consumer's RBAC (§2.7).
  core::Status rbac = EnsureRoleBinding(
      ctx.rest, request.ns, std::string(apis::klutch::kBinderName), "ClusterRole",
      std::string(apis::klutch::kBinderName), request.ns, std::string(apis::klutch::kBinderName));
  if (rbac.ok()) {
    rbac = EnsureBinderRole(
        ctx, *ns,
        BinderRules(ctx.exports.indexer().ByIndex(client::Indexer::kNamespaceIndex, request.ns)));
  }
  if (rbac.ok()) rbac = EnsureBinderClusterRoleBinding(ctx, *ns);
  bool rbac_changed;
  if (rbac.ok()) {
    rbac_changed = reconcile::RemoveCondition(modified, kPermissionsReady);
  } else {
    rbac_changed = reconcile::MarkFalse(
        modified, kPermissionsReady, "RBACFailed", reconcile::kSeverityError,
        "granting the konnector its permissions failed: " + rbac.message() +
            "; check the backend's own permissions (it needs escalate and bind on roles)",
        ctx.clock);
  }
  reconcile::SetSummary(modified, ctx.clock);
  auto committed =
      reconcile::Committer(client::ResourceClient(ctx.rest, apis::klutch::kClusterBindings),
                           std::string(kFieldManager))
          .CommitStatus(*cb, modified);
  if (!committed.ok()) return committed.status();
  if (health_changed && health.condition.status == "False" &&
      health.condition.severity != reconcile::kSeverityInfo) {
    ctx.events.Event(*cb, reconcile::kEventTypeWarning, health.condition.reason,
                     health.condition.message);
  }
  if (!rbac.ok()) {
    if (rbac_changed) {
      ctx.events.Event(*cb, reconcile::kEventTypeWarning, "RBACFailed", rbac.message());
    }
    return rbac;
  }
  std::chrono::milliseconds recheck = health.recheck;
  if (collect_at) {
    const auto until = Ms(*collect_at - ctx.clock.Now());
    if (recheck.count() == 0 || until < recheck) recheck = until;
  }
  return recheck.count() > 0 ? Result::RequeueAfter(recheck) : Result::Done();
}

// ---- consumer quota ----

Json QuotaHard(const std::map<std::string, int64_t>& quota, const std::vector<ObjectPtr>& exports) {
  std::map<std::string, int64_t> hard;
  for (const auto& [resource, count] : quota) {
    if (resource != "claims") hard["count/" + resource] = count;
  }
  if (auto claims = quota.find("claims"); claims != quota.end()) {
    for (const ObjectPtr& e : exports) {
      const std::string group = machinery::GetString(*e, {"spec", "group"});
      const std::string plural = machinery::GetString(*e, {"spec", "names", "plural"});
      if (plural.empty()) continue;
      const std::string resource = group.empty() ? plural : plural + "." + group;
      if (!quota.contains(resource)) hard["count/" + resource] = claims->second;
    }
  }
  Json out = Json::object();
  for (const auto& [key, count] : hard) out[key] = std::to_string(count);
  return out;
}

core::Result<Result> ReconcileConsumerQuota(Context& ctx, const Request& request) {
  if (ctx.options.consumer_quota.empty() || ctx.quotas == nullptr) return Result::Done();
  ObjectPtr ns = ctx.namespaces.indexer().Get(request.name);
  if (!ns || machinery::IsBeingDeleted(*ns)) return Result::Done();
  // A cluster namespace made by /bind, or a provider namespace made for one.
  std::string cluster_ns;
  if (!machinery::Annotation(*ns, apis::klutch::kIdentityAnnotation).empty()) {
    cluster_ns = request.name;
  } else {
    const std::string owner =
        machinery::Annotation(*ns, apis::klutch::kApiServiceNamespaceAnnotation);
    const size_t slash = owner.find('/');
    if (slash == std::string::npos) return Result::Done();
    ObjectPtr cluster = ctx.namespaces.indexer().Get(owner.substr(0, slash));
    if (!cluster || machinery::Annotation(*cluster, apis::klutch::kIdentityAnnotation).empty()) {
      return Result::Done();
    }
    cluster_ns = owner.substr(0, slash);
  }
  Json hard =
      QuotaHard(ctx.options.consumer_quota,
                ctx.exports.indexer().ByIndex(client::Indexer::kNamespaceIndex, cluster_ns));
  client::ResourceClient quotas(ctx.rest, kResourceQuotas, request.name);
  const Json labels = {{std::string(kConsumerQuotaLabel), "true"}};
  ObjectPtr cached =
      ctx.quotas->indexer().Get(request.name + "/" + std::string(kConsumerQuotaName));
  if (!cached) {
    Json desired = {
        {"apiVersion", "v1"},
        {"kind", "ResourceQuota"},
        {"metadata",
         {{"name", kConsumerQuotaName}, {"namespace", request.name}, {"labels", labels}}},
        {"spec", {{"hard", hard}}}};
    auto created = quotas.Create(desired, {.field_manager = std::string(kFieldManager)});
    if (created.ok()) return Result::Done();
    if (!core::IsAlreadyExists(created.status())) return created.status();
  }
  KLUTCH_ASSIGN_OR_RETURN(Json existing, quotas.Get(kConsumerQuotaName));
  Json modified = existing;
  modified["spec"]["hard"] = hard;
  machinery::MutableMetadata(modified)["labels"][std::string(kConsumerQuotaLabel)] = "true";
  if (modified == existing) return Result::Done();
  auto updated = quotas.Update(modified, {.field_manager = std::string(kFieldManager)});
  if (!updated.ok()) return updated.status();
  return Result::Done();
}

}  // namespace klutch::bind::internal
