#include "controllers/access_reconcilers.h"

#include "auth/rbac.h"
#include "auth/service_account.h"
#include "client/dynamic.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::controllers {

using machinery::Json;

namespace {

constexpr const char* kAggregationManager = "clusterrole-aggregation-controller";
constexpr const char* kTokensManager = "tokens-controller";
constexpr const char* kAccountNameAnnotation = "kubernetes.io/service-account.name";
constexpr const char* kAccountUidAnnotation = "kubernetes.io/service-account.uid";

}  // namespace

core::Result<reconcile::Result> ClusterRoleAggregationReconciler::Reconcile(
    const reconcile::Request& request) {
  client::ObjectPtr role = cluster_roles_.Get(request.name);
  if (!role || !machinery::Find(*role, {"aggregationRule"})) return reconcile::Result::Done();
  std::vector<Json> all;
  for (const auto& r : cluster_roles_.List()) all.push_back(*r);
  std::optional<Json> rules = auth::AggregatedRules(*role, all);
  if (!rules) return reconcile::Result::Done();
  const Json* current = machinery::Find(*role, {"rules"});
  const bool current_empty = !current || current->is_null() || current->empty();
  if ((current && *current == *rules) || (current_empty && rules->empty())) {
    return reconcile::Result::Done();
  }
  Json updated = *role;
  updated["rules"] = std::move(*rules);
  auto res = client::ResourceClient(rest_, client::resources::kClusterRoles)
                 .Update(updated, {.field_manager = kAggregationManager});
  if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
  return reconcile::Result::Done();
}

core::Result<reconcile::Result> ServiceAccountTokenReconciler::Reconcile(
    const reconcile::Request& request) {
  client::ObjectPtr secret = secrets_.Get(request.ns + "/" + request.name);
  if (!secret || machinery::IsBeingDeleted(*secret)) return reconcile::Result::Done();
  if (machinery::GetString(*secret, {"type"}) != auth::kServiceAccountTokenSecretType) {
    return reconcile::Result::Done();
  }
  const std::string account =
      machinery::GetString(*secret, {"metadata", "annotations", kAccountNameAnnotation});
  if (account.empty()) return reconcile::Result::Done();
  client::ResourceClient secrets(rest_, client::resources::kSecrets, request.ns);

  // The cache may lag behind a just-created account: ask the server before deleting.
  std::string uid;
  if (client::ObjectPtr sa = service_accounts_.Get(request.ns + "/" + account)) {
    uid = machinery::Uid(*sa);
  } else {
    auto live =
        client::ResourceClient(rest_, client::resources::kServiceAccounts, request.ns).Get(account);
    if (live.ok()) {
      uid = machinery::Uid(*live);
    } else if (!core::IsNotFound(live.status())) {
      return live.status();
    }
  }
  const std::string recorded =
      machinery::GetString(*secret, {"metadata", "annotations", kAccountUidAnnotation});
  if (uid.empty() || (!recorded.empty() && recorded != uid)) {
    client::DeleteOptions del;
    del.precondition_uid = machinery::Uid(*secret);
    auto res = secrets.Delete(request.name, del);
    if (!res.ok() && !core::IsNotFound(res.status()) && !core::IsConflict(res.status())) {
      return res.status();
    }
    return reconcile::Result::Done();
  }
  const Json* data = machinery::Find(*secret, {"data"});
  const bool complete = recorded == uid && data && data->is_object() && data->contains("token") &&
                        data->contains("ca.crt") && data->contains("namespace");
  if (complete) return reconcile::Result::Done();

  KLUTCH_ASSIGN_OR_RETURN(std::string token, issue_(request.ns, account, uid, request.name));
  Json updated = *secret;
  updated["metadata"]["annotations"][kAccountUidAnnotation] = uid;
  Json& d = updated["data"];
  if (!d.is_object()) d = Json::object();
  d["token"] = core::Base64Encode(token);
  d["ca.crt"] = core::Base64Encode(ca_pem_);
  d["namespace"] = core::Base64Encode(request.ns);
  auto res = secrets.Update(updated, {.field_manager = kTokensManager});
  if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
  return reconcile::Result::Done();
}

}  // namespace klutch::controllers
