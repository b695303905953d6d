// What authentication and authorization add to each request of `klutch apiserver`, measured
// on the server's own code path (AccessControl::Authenticate, then the RBAC decision for the
// request's attributes) with 1,000 RBAC bindings stored: 950 RoleBindings across 100
// namespaces and 50 ClusterRoleBindings, plus the bootstrap policy. Callers: a client
// certificate user, a static token, a service-account token (cached after its first use, as
// every later request of a client finds it) and, once per run, an uncached service-account
// token (signature check and account lookup). The baseline, measured in the same run, is
// reading one object's stored bytes (RestStorage::GetRaw on the memory store), the least any
// GET does. Prints medians and ratios; asserts nothing about time. `--quick` checks that
// every path gives the expected answer.
//
//   build/bin/klutch-bench-access [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "apiserver/access.h"
#include "apiserver/builtin_resources.h"
#include "apiserver/request_info.h"
#include "apiserver/rest_storage.h"
#include "storage/memory/memory_store.h"
#include "test/bench/timing.h"
#include "test/support/process.h"

namespace klutch::apiserver {
namespace {

constexpr int kNamespaces = 100;
constexpr int kRoleBindings = 950;
constexpr int kClusterRoleBindings = 50;

using bench::MedianNsPerCall;

bool Check(const core::Status& st, const char* what) {
  if (st.ok()) return true;
  std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
  return false;
}

Json Binding(const std::string& kind, const std::string& ns, const std::string& name,
             const std::string& role_kind, const std::string& role, Json subjects) {
  Json meta = {{"name", name}};
  if (!ns.empty()) meta["namespace"] = ns;
  return {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", kind},
      {"metadata", meta},
      {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role}}},
      {"subjects", std::move(subjects)}};
}

int Run(bool quick) {
  testing::TempDir dir("klutch-bench-access");
  storage::MemoryStore store;
  Registry registry;
  registry.SetOwner("builtin", BuiltinResources());
  RestStorage rest(store, registry, core::RealClock::Get());
  WriteOptions w{.field_manager = "bench"};
  auto find = [&](const char* group, const char* plural) {
    return registry.Find(group, "v1", plural);
  };
  const auto ns_kind = find("", "namespaces");
  for (int i = 0; i < kNamespaces; ++i) {
    Json ns = {{"apiVersion", "v1"},
               {"kind", "Namespace"},
               {"metadata", {{"name", "ns-" + std::to_string(i)}}}};
    if (!Check(rest.Create(*ns_kind, "", ns, w).status(), "namespace")) return 1;
  }
  const auto role_kind = find("rbac.authorization.k8s.io", "roles");
  const auto rb_kind = find("rbac.authorization.k8s.io", "rolebindings");
  const auto crb_kind = find("rbac.authorization.k8s.io", "clusterrolebindings");
  for (int i = 0; i < kNamespaces; ++i) {
    std::string ns = "ns-" + std::to_string(i);
    Json role = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                 {"kind", "Role"},
                 {"metadata", {{"name", "cm-reader"}, {"namespace", ns}}},
                 {"rules", Json::array({{{"verbs", {"get", "list", "watch"}},
                                         {"apiGroups", {""}},
                                         {"resources", {"configmaps"}}}})}};
    if (!Check(rest.Create(*role_kind, ns, role, w).status(), "role")) return 1;
  }
  for (int i = 0; i < kRoleBindings; ++i) {
    std::string ns = "ns-" + std::to_string(i % kNamespaces);
    Json subjects = Json::array(
        {{{"kind", "User"}, {"name", "user-" + std::to_string(i)}},
         {{"kind", "Group"}, {"name", "group-" + std::to_string(i % 37)}},
         {{"kind", "ServiceAccount"}, {"name", "sa-" + std::to_string(i)}, {"namespace", ns}}});
    Json b = Binding("RoleBinding", ns, "rb-" + std::to_string(i), i % 2 ? "Role" : "ClusterRole",
                     i % 2 ? "cm-reader" : "view", std::move(subjects));
    if (!Check(rest.Create(*rb_kind, ns, b, w).status(), "rolebinding")) return 1;
  }
  for (int i = 0; i < kClusterRoleBindings; ++i) {
    Json subjects =
        Json::array({{{"kind", "User"}, {"name", "cluster-user-" + std::to_string(i)}}});
    Json b = Binding("ClusterRoleBinding", "", "crb-" + std::to_string(i), "ClusterRole", "view",
                     std::move(subjects));
    if (!Check(rest.Create(*crb_kind, "", b, w).status(), "clusterrolebinding")) return 1;
  }
  // The callers: alice (static token) and a service account, bound in ns-42.
  auto token_file = dir.Write("tokens.csv", "alice-token,alice,u-alice,\"devs\"\n");
  for (const auto& b : {Binding("RoleBinding", "ns-42", "alice", "Role", "cm-reader",
                                Json::array({{{"kind", "User"}, {"name", "alice"}}})),
                        Binding("RoleBinding", "ns-42", "robot", "Role", "cm-reader",
                                Json::array({{{"kind", "ServiceAccount"}, {"name", "robot"}}}))}) {
    if (!Check(rest.Create(*rb_kind, "ns-42", b, w).status(), "binding")) return 1;
  }
  const auto sa_kind = find("", "serviceaccounts");
  Json sa = {{"apiVersion", "v1"},
             {"kind", "ServiceAccount"},
             {"metadata", {{"name", "robot"}, {"namespace", "ns-42"}}}};
  auto created_sa = rest.Create(*sa_kind, "ns-42", sa, w);
  if (!Check(created_sa.status(), "serviceaccount")) return 1;
  const auto cm_kind = find("", "configmaps");
  Json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "settings"}, {"namespace", "ns-42"}}},
             {"data", {{"mode", "fast"}}}};
  if (!Check(rest.Create(*cm_kind, "ns-42", cm, w).status(), "configmap")) return 1;

  AccessOptions options;
  options.token_auth_file = token_file.string();
  auto access = AccessControl::Start(options, dir.path().string(), rest);
  if (!Check(access.status(), "access control")) return 1;
  AccessControl& ac = **access;
  auto issued = ac.tokens().Issue("ns-42", "robot", machinery::Uid(created_sa->object), {},
                                  std::chrono::hours(1), std::nullopt);
  if (!Check(issued.status(), "token")) return 1;

  auto request = [](std::string authorization) {
    http::Request r;
    r.method = "GET";
    r.target = r.path = "/api/v1/namespaces/ns-42/configmaps/settings";
    if (!authorization.empty()) r.headers.Add("Authorization", std::move(authorization));
    return r;
  };
  http::Request cert_req = request("");
  cert_req.client_certificate = http::ClientCertificate{"alice", {"devs"}};
  http::Request token_req = request("Bearer alice-token");
  http::Request sa_req = request("Bearer " + issued->token);
  http::Request denied_req = request("Bearer alice-token");
  denied_req.target = denied_req.path = "/api/v1/namespaces/ns-7/secrets";

  // One request: who, then whether; false when the answer is not `allowed`.
  auto serve = [&](const http::Request& r, bool allowed) {
    RequestInfo info = ParseRequestInfo(r);
    auto caller = ac.Authenticate(r);
    if (!caller.ok()) return false;
    return ac.Decide(ToAttributes(caller->user, info)).allowed == allowed;
  };
  for (auto [r, allowed] : {std::pair{&cert_req, true}, std::pair{&token_req, true},
                            std::pair{&sa_req, true}, std::pair{&denied_req, false}}) {
    if (!serve(*r, allowed)) {
      std::fprintf(stderr, "unexpected answer for %s\n", r->path.c_str());
      return 1;
    }
  }
  if (quick) {
    std::printf("access bench: every path answered as expected\n");
    return 0;
  }

  const int samples = 101;
  const int n = 2000;
  double baseline = MedianNsPerCall(samples, n, [&] {
    auto raw = rest.GetRaw(*cm_kind, "ns-42", "settings");
    if (!raw.ok()) std::abort();
  });
  double cert = MedianNsPerCall(samples, n, [&] { serve(cert_req, true); });
  double token = MedianNsPerCall(samples, n, [&] { serve(token_req, true); });
  double sa_cached = MedianNsPerCall(samples, n, [&] { serve(sa_req, true); });
  double denied = MedianNsPerCall(samples, n, [&] { serve(denied_req, false); });
  // A token's first use: signature, claims and account lookup (fresh tokens each call).
  std::vector<http::Request> fresh;
  for (int i = 0; i < 200; ++i) {
    auto t = ac.tokens().Issue("ns-42", "robot", machinery::Uid(created_sa->object), {},
                               std::chrono::hours(1), std::nullopt);
    if (!t.ok()) return 1;
    fresh.push_back(request("Bearer " + t->token));
  }
  size_t next = 0;
  double sa_first = MedianNsPerCall(9, 20, [&] { serve(fresh[next++ % fresh.size()], true); });

  std::printf("authentication + authorization per request, %d RBAC bindings (+ bootstrap)\n",
              kRoleBindings + kClusterRoleBindings + 2);
  std::printf("  client certificate user          %8.0f ns  (%.2fx baseline)\n", cert,
              cert / baseline);
  std::printf("  static token                     %8.0f ns  (%.2fx baseline)\n", token,
              token / baseline);
  std::printf("  service-account token (cached)   %8.0f ns  (%.2fx baseline)\n", sa_cached,
              sa_cached / baseline);
  std::printf("  denied request (static token)    %8.0f ns  (%.2fx baseline)\n", denied,
              denied / baseline);
  std::printf("  service-account token, first use %8.0f ns  (%.2fx baseline)\n", sa_first,
              sa_first / baseline);
  std::printf("  baseline: RestStorage::GetRaw of one ConfigMap %.0f ns\n", baseline);
  return 0;
}

}  // namespace
}  // namespace klutch::apiserver

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  return klutch::apiserver::Run(quick);
}
