#include "bind/consumer_quota_reconciler.h"

#include "apis/klutch/clusterbinding.h"
#include "bind/names.h"
#include "machinery/object.h"

namespace klutch::bind {

using client::Json;
using client::ObjectPtr;
using reconcile::Result;

struct ConsumerQuotaReconciler::Pass {
  const std::string ns;  // the namespace the quota is in
  client::ResourceClient quotas;
  Json hard;  // spec.hard as wanted
};

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

core::Result<Result> ConsumerQuotaReconciler::Reconcile(const reconcile::Request& request) {
  if (ctx_.options.consumer_quota.empty() || ctx_.quotas == nullptr) return Result::Done();
  ObjectPtr ns = ctx_.namespaces.indexer().Get(request.name);
  if (!ns || machinery::IsBeingDeleted(*ns)) return Result::Done();
  const std::optional<std::string> cluster_ns = ClusterNamespaceOf(*ns);
  if (!cluster_ns) return Result::Done();
  Pass pass{.ns = request.name,
            .quotas = client::ResourceClient(ctx_.rest, kResourceQuotas, request.name),
            .hard = QuotaHard(
                ctx_.options.consumer_quota,
                ctx_.exports.indexer().ByIndex(client::Indexer::kNamespaceIndex, *cluster_ns))};
  KLUTCH_RUN_STEP(CreateQuota(pass));
  return UpdateQuota(pass);
}

std::optional<std::string> ConsumerQuotaReconciler::ClusterNamespaceOf(const Json& ns) const {
  // A cluster namespace made by /bind, or a provider namespace made for one.
  if (!machinery::Annotation(ns, apis::klutch::kIdentityAnnotation).empty()) {
    return machinery::Name(ns);
  }
  const std::string owner = machinery::Annotation(ns, apis::klutch::kApiServiceNamespaceAnnotation);
  const size_t slash = owner.find('/');
  if (slash == std::string::npos) return std::nullopt;
  ObjectPtr cluster = ctx_.namespaces.indexer().Get(owner.substr(0, slash));
  if (!cluster || machinery::Annotation(*cluster, apis::klutch::kIdentityAnnotation).empty()) {
    return std::nullopt;
  }
  return owner.substr(0, slash);
}

reconcile::Step ConsumerQuotaReconciler::CreateQuota(Pass& pass) {
  if (ctx_.quotas->indexer().Get(pass.ns + "/" + std::string(kConsumerQuotaName))) {
    return reconcile::Continue();
  }
  Json desired = {{"apiVersion", "v1"},
                  {"kind", "ResourceQuota"},
                  {"metadata",
                   {{"name", kConsumerQuotaName},
                    {"namespace", pass.ns},
                    {"labels", {{std::string(kConsumerQuotaLabel), "true"}}}}},
                  {"spec", {{"hard", pass.hard}}}};
  auto created = pass.quotas.Create(desired, {.field_manager = std::string(kFieldManager)});
  if (created.ok()) return Result::Done();
  if (!core::IsAlreadyExists(created.status())) return created.status();
  return reconcile::Continue();
}

core::Result<Result> ConsumerQuotaReconciler::UpdateQuota(Pass& pass) {
  KLUTCH_ASSIGN_OR_RETURN(Json existing, pass.quotas.Get(kConsumerQuotaName));
  Json modified = existing;
  modified["spec"]["hard"] = pass.hard;
  machinery::MutableMetadata(modified)["labels"][std::string(kConsumerQuotaLabel)] = "true";
  if (modified == existing) return Result::Done();
  auto updated = pass.quotas.Update(modified, {.field_manager = std::string(kFieldManager)});
  if (!updated.ok()) return updated.status();
  return Result::Done();
}

}  // namespace klutch::bind
