#include "controllers/namespace_reconciler.h"

#include <fmt/format.h>

#include <algorithm>

#include "machinery/json.h"
#include "machinery/object.h"
#include "reconcile/committer.h"

namespace klutch::controllers {

using client::Json;

namespace {
constexpr const char* kNamespaceManager = "klutch-apiserver-namespace";
constexpr const char* kDefaultsManager = "klutch-apiserver-namespace-defaults";

bool Has(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool HasSpecFinalizer(const Json& ns, std::string_view f) {
  const Json* list = machinery::Find(ns, {"spec", "finalizers"});
  if (!list || !list->is_array()) return false;
  for (const auto& x : *list) {
    if (const auto* name = x.get_ptr<const std::string*>(); name && *name == f) return true;
  }
  return false;
}
}  // namespace

core::Result<reconcile::Result> NamespaceReconciler::Reconcile(const reconcile::Request& request) {
  client::ObjectPtr ns = namespaces_.Get(request.name);
  if (!ns || !machinery::IsBeingDeleted(*ns) || !HasSpecFinalizer(*ns, "kubernetes")) {
    core::MutexLock lock(mu_);
    empty_since_.erase(request.name);
    return reconcile::Result::Done();
  }
  // What the server serves now (CRDs come and go).
  KLUTCH_RETURN_IF_ERROR(mapper_.Refresh());
  std::set<std::pair<std::string, std::string>> seen;
  bool remaining = false;
  for (const auto& m : mapper_.All()) {
    if (!m.namespaced || !m.preferred_version || !Has(m.verbs, "list")) continue;
    if (!seen.insert({m.gvr.group, m.gvr.resource}).second) continue;
    client::ResourceClient r(rest_, m.gvr, request.name);
    if (Has(m.verbs, "deletecollection")) {
      auto del = r.DeleteCollection({}, {.propagation_policy = "Background"});
      if (!del.ok() && !core::IsNotFound(del.status())) return del.status();
    }
    // Objects held by finalizers stay until their owners finish.
    auto left = r.List({.limit = 1});
    if (!left.ok()) {
      if (core::IsNotFound(left.status())) continue;
      return left.status();
    }
    if (const Json* items = machinery::Find(*left, {"items"}); items && !items->empty()) {
      remaining = true;
    }
  }
  {
    core::MutexLock lock(mu_);
    if (remaining) {
      empty_since_.erase(request.name);
      // Each pass costs a request per resource type: poll gently while finalizers hold
      // objects (their removal is not an event this controller watches).
      return reconcile::Result::RequeueAfter(std::chrono::milliseconds(500));
    }
    // A create admitted just before the namespace turned Terminating may commit after the
    // lists above: finalize only after a second empty pass at least 200 ms after the first,
    // once such writes have landed. A pass an event brings sooner waits out the rest.
    constexpr std::chrono::milliseconds kSettle(200);
    const core::MonoTime now = clock_.MonotonicNow();
    auto [since, first] = empty_since_.try_emplace(request.name, now);
    if (first) return reconcile::Result::RequeueAfter(kSettle);
    if (now - since->second < kSettle) {
      return reconcile::Result::RequeueAfter(
          std::chrono::ceil<std::chrono::milliseconds>(kSettle - (now - since->second)));
    }
    empty_since_.erase(since);
  }
  Json finalized = *ns;
  Json kept = Json::array();
  for (const auto& f : finalized["spec"]["finalizers"]) {
    if (f != "kubernetes") kept.push_back(f);
  }
  finalized["spec"]["finalizers"] = std::move(kept);
  client::Request put;
  put.verb = "PUT";
  put.path = client::ResourcePath(client::resources::kNamespaces, "", request.name, "finalize");
  put.query.emplace_back("fieldManager", kNamespaceManager);
  put.body = machinery::Dump(finalized);
  auto r = rest_.Do(put);
  if (!r.ok() && !core::IsNotFound(r.status())) return r.status();
  return reconcile::Result::Done();
}

core::Result<reconcile::Result> NamespaceDefaultsReconciler::Reconcile(
    const reconcile::Request& request) {
  const std::string& ns = request.name;
  client::ObjectPtr namespace_obj = namespaces_.Get(ns);
  if (!namespace_obj || machinery::IsBeingDeleted(*namespace_obj)) {
    return reconcile::Result::Done();
  }
  auto tolerate = [](const core::Status& st) {
    // A namespace that started terminating meanwhile refuses new content: fine.
    return st.ok() || core::IsAlreadyExists(st) || st.reason() == core::Reason::kForbidden ||
           core::IsNotFound(st);
  };
  if (!service_accounts_.Get(ns + "/default")) {
    Json account = {{"apiVersion", "v1"},
                    {"kind", "ServiceAccount"},
                    {"metadata", {{"name", "default"}, {"namespace", ns}}}};
    auto res = client::ResourceClient(rest_, client::resources::kServiceAccounts, ns)
                   .Create(account, {.field_manager = kDefaultsManager});
    if (!tolerate(res.status())) return res.status();
  }
  client::ResourceClient cms(rest_, client::resources::kConfigMaps, ns);
  Json want_data = {{"ca.crt", ca_pem_}};
  client::ObjectPtr current = config_maps_.Get(ns + "/" + kRootCaConfigMap);
  if (current) {
    const Json* data = machinery::Find(*current, {"data"});
    if (data && *data == want_data) return reconcile::Result::Done();
    Json fixed = *current;
    fixed["data"] = want_data;
    auto res = reconcile::Committer(cms, kDefaultsManager).Commit(*current, fixed);
    if (!tolerate(res.status())) return res.status();
    return reconcile::Result::Done();
  }
  Json config = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata",
                  {{"name", kRootCaConfigMap},
                   {"namespace", ns},
                   {"annotations",
                    {{"kubernetes.io/description",
                      "The cluster CA bundle, for clients in this namespace to verify the API "
                      "server's certificate."}}}}},
                 {"data", want_data}};
  auto created = cms.Create(config, {.field_manager = kDefaultsManager});
  if (!tolerate(created.status())) return created.status();
  return reconcile::Result::Done();
}

}  // namespace klutch::controllers
