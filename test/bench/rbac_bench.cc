// Benchmark of the RBAC authorizer with 1,000 bindings in place (950 RoleBindings across 100
// namespaces, 50 ClusterRoleBindings, subjects users, groups and service accounts) plus the
// bootstrap policy: Authorize for a user holding a namespaced RoleBinding, allowed and denied,
// against a baseline measured in the same run (one std::unordered_map lookup of the user name
// among 1,000 names). Also the cost of one change (Upsert rebuilds the snapshot). Prints median
// numbers and ratios; asserts nothing about time. `--quick` checks the decisions only.
//
//   build/bin/klutch-bench-rbac [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "auth/bootstrap_policy.h"
#include "auth/rbac.h"
#include "test/bench/timing.h"

namespace klutch::auth {
namespace {

using machinery::Json;

constexpr int kNamespaces = 100;
constexpr int kRoleBindings = 950;
constexpr int kClusterRoleBindings = 50;

// Median over `samples` batches of `n` calls of the nanoseconds per call.
using bench::MedianNsPerCall;

Json Rule(std::vector<std::string> verbs, std::vector<std::string> groups,
          std::vector<std::string> resources) {
  return {{"verbs", verbs}, {"apiGroups", groups}, {"resources", resources}};
}

Json Subject(const std::string& kind, const std::string& name, const std::string& ns = "") {
  Json s = {{"kind", kind}, {"name", name}};
  if (!ns.empty()) s["namespace"] = ns;
  return s;
}

std::vector<Json> Policy() {
  std::vector<Json> objs = BootstrapPolicy();
  for (int c = 0; c < 10; ++c) {
    objs.push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "ClusterRole"},
                    {"metadata", {{"name", "cluster-role-" + std::to_string(c)}}},
                    {"rules", Json::array({Rule({"get", "list", "watch"}, {"example.com"},
                                                {"widgets-" + std::to_string(c)}),
                                           Rule({"get"}, {""}, {"nodes"})})}});
  }
  for (int n = 0; n < kNamespaces; ++n) {
    std::string ns = "ns-" + std::to_string(n);
    for (const char* name : {"app-reader", "app-writer"}) {
      bool writer = std::strcmp(name, "app-writer") == 0;
      std::vector<std::string> verbs =
          writer ? std::vector<std::string>{"create", "update", "patch", "delete"}
                 : std::vector<std::string>{"get", "list", "watch"};
      objs.push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                      {"kind", "Role"},
                      {"metadata", {{"name", name}, {"namespace", ns}}},
                      {"rules", Json::array({Rule(verbs, {""}, {"pods", "services", "configmaps"}),
                                             Rule(verbs, {"apps"}, {"deployments"}),
                                             Rule({"get"}, {""}, {"pods/log"})})}});
    }
  }
  for (int i = 0; i < kRoleBindings; ++i) {
    std::string ns = "ns-" + std::to_string(i % kNamespaces);
    Json subjects = Json::array({Subject("User", "user-" + std::to_string(i)),
                                 Subject("Group", "team-" + std::to_string(i % 20)),
                                 Subject("ServiceAccount", "sa-" + std::to_string(i))});
    objs.push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "RoleBinding"},
                    {"metadata", {{"name", "rb-" + std::to_string(i)}, {"namespace", ns}}},
                    {"roleRef",
                     {{"apiGroup", "rbac.authorization.k8s.io"},
                      {"kind", i % 3 == 0 ? "ClusterRole" : "Role"},
                      {"name", i % 3 == 0 ? "view" : (i % 2 ? "app-writer" : "app-reader")}}},
                    {"subjects", subjects}});
  }
  for (int i = 0; i < kClusterRoleBindings; ++i) {
    objs.push_back(
        {{"apiVersion", "rbac.authorization.k8s.io/v1"},
         {"kind", "ClusterRoleBinding"},
         {"metadata", {{"name", "crb-" + std::to_string(i)}}},
         {"roleRef",
          {{"apiGroup", "rbac.authorization.k8s.io"},
           {"kind", "ClusterRole"},
           {"name", "cluster-role-" + std::to_string(i % 10)}}},
         {"subjects", Json::array({Subject("User", "cluster-user-" + std::to_string(i)),
                                   Subject("Group", "cluster-group-" + std::to_string(i % 7)),
                                   Subject("ServiceAccount", "ops", "ns-" + std::to_string(i))})}});
  }
  // The user measured: one RoleBinding of its own (to the reader role of ns-42); its group
  // team-7 is bound in other namespaces by the RoleBindings above.
  objs.push_back(
      {{"apiVersion", "rbac.authorization.k8s.io/v1"},
       {"kind", "RoleBinding"},
       {"metadata", {{"name", "alice"}, {"namespace", "ns-42"}}},
       {"roleRef",
        {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "app-reader"}}},
       {"subjects", Json::array({Subject("User", "alice")})}});
  return objs;
}

int Run(bool quick) {
  const int samples = quick ? 3 : 201;
  const int n = quick ? 100 : 5000;

  std::vector<Json> objs = Policy();
  RbacAuthorizer rbac;
  rbac.Replace(objs);

  UserInfo alice;
  alice.name = "alice";
  alice.groups = {kAuthenticatedGroup, "team-7"};
  Attributes allowed;
  allowed.user = &alice;
  allowed.verb = "get";
  allowed.ns = "ns-42";
  allowed.api_version = "v1";
  allowed.resource = "pods";
  allowed.name = "web-0";
  Attributes denied = allowed;
  denied.verb = "delete";
  denied.resource = "secrets";
  Attributes cluster_denied = allowed;
  cluster_denied.ns = "";
  cluster_denied.verb = "list";

  Decision d = rbac.Authorize(allowed);
  if (!d.allowed || rbac.Authorize(denied).allowed || rbac.Authorize(cluster_denied).allowed) {
    std::fprintf(stderr, "unexpected decision (allowed: %s)\n", d.reason.c_str());
    return 1;
  }

  std::unordered_map<std::string, int> users;
  for (int i = 0; i < 1000; ++i) users.emplace("user-" + std::to_string(i), i);
  users.emplace("alice", -1);

  volatile size_t sink = 0;
  double allowed_ns =
      MedianNsPerCall(samples, n, [&] { sink = sink + rbac.Authorize(allowed).allowed; });
  double denied_ns =
      MedianNsPerCall(samples, n, [&] { sink = sink + rbac.Authorize(denied).allowed; });
  double cluster_ns =
      MedianNsPerCall(samples, n, [&] { sink = sink + rbac.Authorize(cluster_denied).allowed; });
  double baseline_ns = MedianNsPerCall(samples, n, [&] {
    auto it = users.find(alice.name);
    sink = sink + static_cast<size_t>(it->second);
  });

  Json change = objs.back();
  const int upserts = quick ? 2 : 50;
  double upsert_ns = MedianNsPerCall(quick ? 1 : 5, upserts, [&] { rbac.Upsert(change); });

  std::printf(
      "RBAC authorizer, %d RoleBindings in %d namespaces + %d ClusterRoleBindings "
      "(+ bootstrap policy), median of %d batches of %d calls\n",
      kRoleBindings + 1, kNamespaces, kClusterRoleBindings, samples, n);
  std::printf("  allowed (own RoleBinding)    %8.1f ns/request  (%.1fx baseline)\n", allowed_ns,
              allowed_ns / baseline_ns);
  std::printf("  denied in namespace          %8.1f ns/request  (%.1fx baseline)\n", denied_ns,
              denied_ns / baseline_ns);
  std::printf("  denied cluster-wide          %8.1f ns/request  (%.1fx baseline)\n", cluster_ns,
              cluster_ns / baseline_ns);
  std::printf("  baseline: unordered_map<string,int>::find of the user name %.1f ns\n",
              baseline_ns);
  std::printf("  one change (Upsert, snapshot rebuilt)  %.3f ms\n", upsert_ns / 1e6);
  return 0;
}

}  // namespace
}  // namespace klutch::auth

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  return klutch::auth::Run(quick);
}
