#include "auth/rbac.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "auth/bootstrap_policy.h"
#include "machinery/object.h"

namespace klutch::auth::rbac_test {
namespace {

using machinery::Json;
using Strings = std::vector<std::string>;

// ---- builders -------------------------------------------------------------------------------

Json Rule(Strings verbs, Strings groups, Strings resources, Strings names = {}) {
  Json r = {{"verbs", verbs}, {"apiGroups", groups}, {"resources", resources}};
  if (!names.empty()) r["resourceNames"] = names;
  return r;
}

Json UrlRule(Strings verbs, Strings urls) { return {{"verbs", verbs}, {"nonResourceURLs", urls}}; }

Json Role(const std::string& ns, const std::string& name, Json rules) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "Role"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"rules", rules}};
}

Json ClusterRole(const std::string& name, Json rules, Json labels = nullptr) {
  Json o = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
            {"kind", "ClusterRole"},
            {"metadata", {{"name", name}}},
            {"rules", rules}};
  if (!labels.is_null()) o["metadata"]["labels"] = labels;
  return o;
}

Json Aggregated(const std::string& name, Json selectors, Json labels = nullptr) {
  Json o = ClusterRole(name, nullptr, labels);
  o.erase("rules");
  o["aggregationRule"] = {{"clusterRoleSelectors", selectors}};
  return o;
}

Json UserSubject(const std::string& name) {
  return {{"kind", "User"}, {"apiGroup", "rbac.authorization.k8s.io"}, {"name", name}};
}
Json GroupSubject(const std::string& name) {
  return {{"kind", "Group"}, {"apiGroup", "rbac.authorization.k8s.io"}, {"name", name}};
}
Json SaSubject(const std::string& name, const std::string& ns = "") {
  Json s = {{"kind", "ServiceAccount"}, {"name", name}};
  if (!ns.empty()) s["namespace"] = ns;
  return s;
}

Json RoleBinding(const std::string& ns, const std::string& name, const std::string& role_kind,
                 const std::string& role, Json subjects) {
  return {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "RoleBinding"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role}}},
      {"subjects", subjects}};
}

Json ClusterRoleBinding(const std::string& name, const std::string& role, Json subjects) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "ClusterRoleBinding"},
          {"metadata", {{"name", name}}},
          {"roleRef",
           {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role}}},
          {"subjects", subjects}};
}

UserInfo MakeUser(const std::string& name, Strings groups = {kAuthenticatedGroup}) {
  UserInfo u;
  u.name = name;
  u.groups = std::move(groups);
  return u;
}

Attributes Res(const UserInfo& u, const std::string& verb, const std::string& ns,
               const std::string& group, const std::string& resource,
               const std::string& subresource = "", const std::string& name = "") {
  Attributes a;
  a.user = &u;
  a.verb = verb;
  a.ns = ns;
  a.api_group = group;
  a.api_version = "v1";
  a.resource = resource;
  a.subresource = subresource;
  a.name = name;
  return a;
}

Attributes Url(const UserInfo& u, const std::string& verb, const std::string& path) {
  Attributes a;
  a.user = &u;
  a.verb = verb;
  a.resource_request = false;
  a.path = path;
  return a;
}

PolicyRule P(Strings verbs, Strings groups, Strings resources, Strings names = {},
             Strings urls = {}) {
  return {verbs, groups, resources, names, urls};
}

PolicyRule PUrl(Strings verbs, Strings urls) { return {verbs, {}, {}, {}, urls}; }

bool Allowed(const RbacAuthorizer& rbac, const Attributes& a) { return rbac.Authorize(a).allowed; }

// ---- RuleAllows -----------------------------------------------------------------------------

TEST(RuleAllows, WildcardsMatchAnyVerbGroupAndResource) {
  UserInfo u = MakeUser("u");
  PolicyRule all = P({"*"}, {"*"}, {"*"});
  EXPECT_TRUE(RuleAllows(all, Res(u, "delete", "ns", "apps", "deployments")));
  EXPECT_TRUE(RuleAllows(all, Res(u, "escalate", "", "rbac.authorization.k8s.io", "roles")));
  EXPECT_TRUE(RuleAllows(all, Res(u, "get", "ns", "", "pods", "log", "p")));
  PolicyRule pods_any_verb = P({"*"}, {""}, {"pods"});
  EXPECT_TRUE(RuleAllows(pods_any_verb, Res(u, "patch", "ns", "", "pods")));
  EXPECT_FALSE(RuleAllows(pods_any_verb, Res(u, "patch", "ns", "apps", "pods")));
  EXPECT_FALSE(RuleAllows(pods_any_verb, Res(u, "patch", "ns", "", "services")));
  // A resource rule never grants a non-resource request.
  EXPECT_FALSE(RuleAllows(all, Url(u, "get", "/healthz")));
}

TEST(RuleAllows, SubresourcesNeedTheirOwnRule) {
  UserInfo u = MakeUser("u");
  PolicyRule pods = P({"get"}, {""}, {"pods"});
  PolicyRule logs = P({"get"}, {""}, {"pods/log"});
  EXPECT_TRUE(RuleAllows(pods, Res(u, "get", "ns", "", "pods", "", "p")));
  EXPECT_FALSE(RuleAllows(pods, Res(u, "get", "ns", "", "pods", "log", "p")));
  EXPECT_TRUE(RuleAllows(logs, Res(u, "get", "ns", "", "pods", "log", "p")));
  EXPECT_FALSE(RuleAllows(logs, Res(u, "get", "ns", "", "pods", "", "p")));
  EXPECT_FALSE(RuleAllows(logs, Res(u, "get", "ns", "", "pods", "exec", "p")));
}

TEST(RuleAllows, StarSlashSubresourceMatchesThatSubresourceOfAnyResource) {
  UserInfo u = MakeUser("u");
  PolicyRule scale = P({"update"}, {"*"}, {"*/scale"});
  EXPECT_TRUE(RuleAllows(scale, Res(u, "update", "ns", "apps", "deployments", "scale")));
  EXPECT_TRUE(RuleAllows(scale, Res(u, "update", "ns", "", "replicationcontrollers", "scale")));
  EXPECT_FALSE(RuleAllows(scale, Res(u, "update", "ns", "apps", "deployments")));
  EXPECT_FALSE(RuleAllows(scale, Res(u, "update", "ns", "apps", "deployments", "status")));
  EXPECT_FALSE(RuleAllows(scale, Res(u, "update", "ns", "apps", "deployments", "xscale")));
}

TEST(RuleAllows, ResourceSlashStarIsNotAWildcardAsInKubernetes) {
  UserInfo u = MakeUser("u");
  PolicyRule rule = P({"get"}, {""}, {"pods/*"});
  EXPECT_FALSE(RuleAllows(rule, Res(u, "get", "ns", "", "pods", "log")));
  EXPECT_FALSE(RuleAllows(rule, Res(u, "get", "ns", "", "pods")));
}

TEST(RuleAllows, ResourceNamesAllowOnlyNamedRequests) {
  UserInfo u = MakeUser("u");
  PolicyRule rule = P({"get", "list", "watch", "create", "deletecollection", "update"}, {""},
                      {"configmaps"}, {"cfg"});
  EXPECT_TRUE(RuleAllows(rule, Res(u, "get", "ns", "", "configmaps", "", "cfg")));
  EXPECT_TRUE(RuleAllows(rule, Res(u, "update", "ns", "", "configmaps", "", "cfg")));
  EXPECT_FALSE(RuleAllows(rule, Res(u, "get", "ns", "", "configmaps", "", "other")));
  // Requests without a name: kube's ResourceNameMatches never matches them.
  EXPECT_FALSE(RuleAllows(rule, Res(u, "list", "ns", "", "configmaps")));
  EXPECT_FALSE(RuleAllows(rule, Res(u, "watch", "ns", "", "configmaps")));
  EXPECT_FALSE(RuleAllows(rule, Res(u, "create", "ns", "", "configmaps")));
  EXPECT_FALSE(RuleAllows(rule, Res(u, "deletecollection", "ns", "", "configmaps")));
}

TEST(RuleAllows, NonResourceUrlsMatchExactlyOrByStarPrefix) {
  UserInfo u = MakeUser("u");
  PolicyRule rule = PUrl({"get"}, {"/healthz", "/apis/*", "/logs*"});
  EXPECT_TRUE(RuleAllows(rule, Url(u, "get", "/healthz")));
  EXPECT_FALSE(RuleAllows(rule, Url(u, "get", "/healthz/ping")));
  EXPECT_FALSE(RuleAllows(rule, Url(u, "post", "/healthz")));
  EXPECT_TRUE(RuleAllows(rule, Url(u, "get", "/apis/apps/v1")));
  EXPECT_TRUE(RuleAllows(rule, Url(u, "get", "/apis/")));
  EXPECT_FALSE(RuleAllows(rule, Url(u, "get", "/apis")));
  EXPECT_TRUE(RuleAllows(rule, Url(u, "get", "/logs")));
  EXPECT_TRUE(RuleAllows(rule, Url(u, "get", "/logsx/y")));
  EXPECT_FALSE(RuleAllows(rule, Url(u, "get", "/version")));
  EXPECT_TRUE(RuleAllows(PUrl({"*"}, {"*"}), Url(u, "delete", "/anything/at/all")));
  // A URL rule never grants a resource request.
  EXPECT_FALSE(RuleAllows(PUrl({"*"}, {"*"}), Res(u, "get", "ns", "", "pods")));
}

TEST(ParseRules, ToleratesAbsentAndMistypedFields) {
  Json rules = Json::parse(R"([
    {"verbs": ["get", 3, null], "resources": ["pods"]},
    {"nonResourceURLs": ["/x"]},
    "not a rule",
    {"verbs": "get", "apiGroups": [""], "resourceNames": ["a", "b"]}
  ])");
  std::vector<PolicyRule> parsed = ParseRules(rules);
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[0], P({"get"}, {}, {"pods"}));
  EXPECT_EQ(parsed[1], PUrl({}, {"/x"}));
  EXPECT_EQ(parsed[2], P({}, {""}, {}, {"a", "b"}));
  EXPECT_TRUE(ParseRules(nullptr).empty());
  EXPECT_TRUE(ParseRules(Json::object()).empty());
}

TEST(ParseRules, RoundTripsThroughRulesToJson) {
  std::vector<PolicyRule> rules = {P({"get"}, {""}, {"pods"}, {"p"}), PUrl({"get"}, {"/x*"})};
  Json j = RulesToJson(rules);
  EXPECT_EQ(j, Json::parse(R"([
    {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]},
    {"verbs": ["get"], "nonResourceURLs": ["/x*"]}
  ])"));
  EXPECT_EQ(ParseRules(j), rules);
}

// ---- RbacAuthorizer -------------------------------------------------------------------------

TEST(RbacAuthorizer, DeniesEverythingWhenEmptyOrWithoutUser) {
  RbacAuthorizer rbac;
  UserInfo u = MakeUser("alice");
  EXPECT_FALSE(Allowed(rbac, Res(u, "get", "ns", "", "pods")));
  rbac.Replace({ClusterRole("all", Json::array({Rule({"*"}, {"*"}, {"*"})})),
                ClusterRoleBinding("all", "all", {GroupSubject(kAuthenticatedGroup)})});
  Attributes a = Res(u, "get", "ns", "", "pods");
  EXPECT_TRUE(Allowed(rbac, a));
  a.user = nullptr;
  EXPECT_FALSE(Allowed(rbac, a));
}

TEST(RbacAuthorizer, RoleGrantsOnlyInItsNamespace) {
  RbacAuthorizer rbac;
  rbac.Replace({Role("team-a", "reader", Json::array({Rule({"get", "list"}, {""}, {"pods"})})),
                RoleBinding("team-a", "alice-reads", "Role", "reader", {UserSubject("alice")})});
  UserInfo alice = MakeUser("alice");
  UserInfo bob = MakeUser("bob");
  EXPECT_TRUE(Allowed(rbac, Res(alice, "get", "team-a", "", "pods", "", "p")));
  EXPECT_TRUE(Allowed(rbac, Res(alice, "list", "team-a", "", "pods")));
  EXPECT_FALSE(Allowed(rbac, Res(alice, "delete", "team-a", "", "pods", "", "p")));
  EXPECT_FALSE(Allowed(rbac, Res(alice, "list", "team-b", "", "pods")));
  EXPECT_FALSE(Allowed(rbac, Res(alice, "list", "", "", "pods")));  // all namespaces
  EXPECT_FALSE(Allowed(rbac, Res(bob, "list", "team-a", "", "pods")));
}

TEST(RbacAuthorizer, RoleBindingIgnoresARoleOfTheSameNameInAnotherNamespace) {
  RbacAuthorizer rbac;
  rbac.Replace({Role("other", "reader", Json::array({Rule({"get"}, {""}, {"pods"})})),
                RoleBinding("team-a", "b", "Role", "reader", {UserSubject("alice")})});
  UserInfo alice = MakeUser("alice");
  EXPECT_FALSE(Allowed(rbac, Res(alice, "get", "team-a", "", "pods", "", "p")));
  EXPECT_FALSE(Allowed(rbac, Res(alice, "get", "other", "", "pods", "", "p")));
}

TEST(RbacAuthorizer, ClusterRoleBindingGrantsInEveryNamespaceAndClusterWide) {
  RbacAuthorizer rbac;
  rbac.Replace(
      {ClusterRole("node-reader", Json::array({Rule({"get", "list"}, {""}, {"nodes", "pods"})})),
       ClusterRoleBinding("alice-nodes", "node-reader", {UserSubject("alice")})});
  UserInfo alice = MakeUser("alice");
  EXPECT_TRUE(Allowed(rbac, Res(alice, "list", "", "", "nodes")));
  EXPECT_TRUE(Allowed(rbac, Res(alice, "list", "", "", "pods")));
  EXPECT_TRUE(Allowed(rbac, Res(alice, "list", "anywhere", "", "pods")));
  EXPECT_FALSE(Allowed(rbac, Res(alice, "delete", "", "", "nodes", "", "n1")));
}

TEST(RbacAuthorizer, RoleBindingToClusterRoleGrantsInTheBindingNamespaceOnly) {
  RbacAuthorizer rbac;
  rbac.Replace({ClusterRole("secret-reader", Json::array({Rule({"get"}, {""}, {"secrets"})})),
                RoleBinding("team-a", "read-secrets", "ClusterRole", "secret-reader",
                            {UserSubject("alice")})});
  UserInfo alice = MakeUser("alice");
  EXPECT_TRUE(Allowed(rbac, Res(alice, "get", "team-a", "", "secrets", "", "s")));
  EXPECT_FALSE(Allowed(rbac, Res(alice, "get", "team-b", "", "secrets", "", "s")));
  EXPECT_FALSE(Allowed(rbac, Res(alice, "get", "", "", "secrets", "", "s")));
}

TEST(RbacAuthorizer, GroupSubjectsApplyToMembers) {
  RbacAuthorizer rbac;
  rbac.Replace({Role("ns", "r", Json::array({Rule({"create"}, {"apps"}, {"deployments"})})),
                RoleBinding("ns", "devs", "Role", "r", {GroupSubject("devs")})});
  UserInfo member = MakeUser("carol", {kAuthenticatedGroup, "devs"});
  UserInfo outsider = MakeUser("dave", {kAuthenticatedGroup});
  UserInfo named_like_group = MakeUser("devs", {});
  EXPECT_TRUE(Allowed(rbac, Res(member, "create", "ns", "apps", "deployments")));
  EXPECT_FALSE(Allowed(rbac, Res(outsider, "create", "ns", "apps", "deployments")));
  EXPECT_FALSE(Allowed(rbac, Res(named_like_group, "create", "ns", "apps", "deployments")));
}

TEST(RbacAuthorizer, ServiceAccountSubjectsDefaultToTheBindingNamespace) {
  RbacAuthorizer rbac;
  Json rules = Json::array({Rule({"get"}, {""}, {"configmaps"})});
  rbac.Replace(
      {ClusterRole("cm", rules),
       // no namespace: the binding's (team-a)
       RoleBinding("team-a", "local", "ClusterRole", "cm", {SaSubject("builder")}),
       // explicit namespace: another namespace's account, granted in team-b
       RoleBinding("team-b", "remote", "ClusterRole", "cm", {SaSubject("deployer", "team-a")}),
       // a ClusterRoleBinding's account without namespace applies to nobody
       ClusterRoleBinding("nobody", "cm", {SaSubject("builder")})});
  UserInfo builder = MakeUser("system:serviceaccount:team-a:builder",
                              {kServiceAccountsGroup, "system:serviceaccounts:team-a"});
  UserInfo deployer = MakeUser("system:serviceaccount:team-a:deployer", {});
  UserInfo other_builder = MakeUser("system:serviceaccount:team-b:builder", {});
  EXPECT_TRUE(Allowed(rbac, Res(builder, "get", "team-a", "", "configmaps", "", "c")));
  EXPECT_FALSE(Allowed(rbac, Res(builder, "get", "team-b", "", "configmaps", "", "c")));
  EXPECT_FALSE(Allowed(rbac, Res(builder, "get", "", "", "configmaps", "", "c")));
  EXPECT_TRUE(Allowed(rbac, Res(deployer, "get", "team-b", "", "configmaps", "", "c")));
  EXPECT_FALSE(Allowed(rbac, Res(deployer, "get", "team-a", "", "configmaps", "", "c")));
  EXPECT_FALSE(Allowed(rbac, Res(other_builder, "get", "team-b", "", "configmaps", "", "c")));
  EXPECT_FALSE(Allowed(rbac, Res(other_builder, "get", "team-a", "", "configmaps", "", "c")));
}

TEST(RbacAuthorizer, ReasonNamesBindingRoleAndSubjectLikeKube) {
  RbacAuthorizer rbac;
  rbac.Replace({ClusterRole("view-pods", Json::array({Rule({"get"}, {""}, {"pods"})})),
                ClusterRoleBinding("alice-pods", "view-pods", {UserSubject("alice")}),
                RoleBinding("ns", "sa-pods", "ClusterRole", "view-pods", {SaSubject("sa")})});
  UserInfo alice = MakeUser("alice");
  UserInfo sa = MakeUser("system:serviceaccount:ns:sa", {});
  Decision d = rbac.Authorize(Res(alice, "get", "x", "", "pods", "", "p"));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(
      d.reason,
      R"(RBAC: allowed by ClusterRoleBinding "alice-pods" of ClusterRole "view-pods" to User "alice")");
  d = rbac.Authorize(Res(sa, "get", "ns", "", "pods", "", "p"));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(
      d.reason,
      R"(RBAC: allowed by RoleBinding "sa-pods/ns" of ClusterRole "view-pods" to ServiceAccount "sa/ns")");
}

TEST(RbacAuthorizer, MissingRoleGrantsNothingUntilItAppears) {
  RbacAuthorizer rbac;
  rbac.Replace({RoleBinding("ns", "b", "Role", "later", {UserSubject("alice")}),
                ClusterRoleBinding("c", "absent", {UserSubject("alice")})});
  UserInfo alice = MakeUser("alice");
  Decision d = rbac.Authorize(Res(alice, "get", "ns", "", "pods", "", "p"));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, R"(RBAC: [clusterrole.rbac.authorization.k8s.io "absent" not found, )"
                      R"(role.rbac.authorization.k8s.io "later" not found])");
  rbac.Upsert(Role("ns", "later", Json::array({Rule({"get"}, {""}, {"pods"})})));
  EXPECT_TRUE(Allowed(rbac, Res(alice, "get", "ns", "", "pods", "", "p")));
}

TEST(RbacAuthorizer, UpsertAndRemoveChangeDecisions) {
  RbacAuthorizer rbac;
  UserInfo alice = MakeUser("alice");
  Attributes get_pod = Res(alice, "get", "ns", "", "pods", "", "p");
  Attributes delete_pod = Res(alice, "delete", "ns", "", "pods", "", "p");
  rbac.Upsert(Role("ns", "r", Json::array({Rule({"get"}, {""}, {"pods"})})));
  EXPECT_FALSE(Allowed(rbac, get_pod));
  rbac.Upsert(RoleBinding("ns", "b", "Role", "r", {UserSubject("alice")}));
  EXPECT_TRUE(Allowed(rbac, get_pod));
  EXPECT_FALSE(Allowed(rbac, delete_pod));
  // Changing the role's rules applies to the existing binding.
  rbac.Upsert(Role("ns", "r", Json::array({Rule({"get", "delete"}, {""}, {"pods"})})));
  EXPECT_TRUE(Allowed(rbac, delete_pod));
  // Changing the binding's subjects.
  rbac.Upsert(RoleBinding("ns", "b", "Role", "r", {UserSubject("bob")}));
  EXPECT_FALSE(Allowed(rbac, get_pod));
  rbac.Upsert(RoleBinding("ns", "b", "Role", "r", {UserSubject("alice")}));
  EXPECT_TRUE(Allowed(rbac, get_pod));
  rbac.Remove("Role", "ns", "r");
  EXPECT_FALSE(Allowed(rbac, get_pod));
  rbac.Upsert(Role("ns", "r", Json::array({Rule({"get"}, {""}, {"pods"})})));
  EXPECT_TRUE(Allowed(rbac, get_pod));
  rbac.Remove("RoleBinding", "ns", "b");
  EXPECT_FALSE(Allowed(rbac, get_pod));
  rbac.Remove("RoleBinding", "ns", "absent");  // no-op
  rbac.Remove("Pod", "ns", "r");               // other kinds: no-op
  EXPECT_FALSE(Allowed(rbac, get_pod));

  rbac.Upsert(ClusterRole("cr", Json::array({Rule({"get"}, {""}, {"pods"})})));
  rbac.Upsert(ClusterRoleBinding("crb", "cr", {UserSubject("alice")}));
  EXPECT_TRUE(Allowed(rbac, get_pod));
  rbac.Remove("ClusterRoleBinding", "", "crb");
  EXPECT_FALSE(Allowed(rbac, get_pod));
  rbac.Upsert(ClusterRoleBinding("crb", "cr", {UserSubject("alice")}));
  rbac.Remove("ClusterRole", "", "cr");
  EXPECT_FALSE(Allowed(rbac, get_pod));
}

TEST(RbacAuthorizer, ApplyTakesABatchOfUpsertsAndRemovalsInOrder) {
  RbacAuthorizer rbac;
  UserInfo alice = MakeUser("alice");
  Attributes get_pod = Res(alice, "get", "ns", "", "pods", "", "p");
  Json role = Role("ns", "r", Json::array({Rule({"get"}, {""}, {"pods"})}));
  Json binding = RoleBinding("ns", "b", "Role", "r", {UserSubject("alice")});
  rbac.Apply({{role}, {binding}});
  EXPECT_TRUE(Allowed(rbac, get_pod));
  // Removed then re-created in one batch: the later change wins.
  rbac.Apply({{binding, true}, {role, true}, {role}});
  EXPECT_FALSE(Allowed(rbac, get_pod));
  rbac.Apply({{binding}});
  EXPECT_TRUE(Allowed(rbac, get_pod));
  rbac.Apply({});
  EXPECT_TRUE(Allowed(rbac, get_pod));
}

TEST(RbacAuthorizer, ReplaceForgetsObjectsNotInTheNewSet) {
  RbacAuthorizer rbac;
  UserInfo alice = MakeUser("alice");
  rbac.Replace({ClusterRole("cr", Json::array({Rule({"get"}, {""}, {"pods"})})),
                ClusterRoleBinding("crb", "cr", {UserSubject("alice")})});
  EXPECT_TRUE(Allowed(rbac, Res(alice, "get", "ns", "", "pods", "", "p")));
  rbac.Replace({ClusterRole("cr", Json::array({Rule({"get"}, {""}, {"pods"})}))});
  EXPECT_FALSE(Allowed(rbac, Res(alice, "get", "ns", "", "pods", "", "p")));
}

TEST(RbacAuthorizer, AggregatedClusterRolesFollowLabelChanges) {
  RbacAuthorizer rbac;
  Json selector = Json::array({{{"matchLabels", {{"example.com/aggregate-to-ops", "true"}}}}});
  rbac.Replace({Aggregated("ops", selector),
                ClusterRole("pods", Json::array({Rule({"get"}, {""}, {"pods"})}),
                            {{"example.com/aggregate-to-ops", "true"}}),
                RoleBinding("ns", "ops", "ClusterRole", "ops", {UserSubject("alice")})});
  UserInfo alice = MakeUser("alice");
  Attributes get_pod = Res(alice, "get", "ns", "", "pods", "", "p");
  Attributes get_svc = Res(alice, "get", "ns", "", "services", "", "s");
  EXPECT_TRUE(Allowed(rbac, get_pod));
  EXPECT_FALSE(Allowed(rbac, get_svc));
  rbac.Upsert(ClusterRole("services", Json::array({Rule({"get"}, {""}, {"services"})}),
                          {{"example.com/aggregate-to-ops", "true"}}));
  EXPECT_TRUE(Allowed(rbac, get_svc));
  rbac.Upsert(ClusterRole("pods", Json::array({Rule({"get"}, {""}, {"pods"})}),
                          {{"example.com/aggregate-to-ops", "false"}}));
  EXPECT_FALSE(Allowed(rbac, get_pod));
  EXPECT_TRUE(Allowed(rbac, get_svc));
}

TEST(RbacAuthorizer, RulesForCombinesClusterAndNamespaceBindingsOnce) {
  RbacAuthorizer rbac;
  rbac.Replace({ClusterRole("a", Json::array({Rule({"get"}, {""}, {"nodes"})})),
                ClusterRoleBinding("a", "a", {UserSubject("alice"), GroupSubject("g")}),
                Role("ns", "b", Json::array({Rule({"get"}, {""}, {"pods"})})),
                RoleBinding("ns", "b", "Role", "b", {GroupSubject("g")}),
                Role("other", "c", Json::array({Rule({"get"}, {""}, {"secrets"})})),
                RoleBinding("other", "c", "Role", "c", {UserSubject("alice")})});
  UserInfo alice = MakeUser("alice", {"g"});
  EXPECT_EQ(rbac.RulesFor(alice, "ns"),
            (std::vector<PolicyRule>{P({"get"}, {""}, {"nodes"}), P({"get"}, {""}, {"pods"})}));
  EXPECT_EQ(rbac.RulesFor(alice, ""), (std::vector<PolicyRule>{P({"get"}, {""}, {"nodes"})}));
  EXPECT_EQ(rbac.RulesFor(alice, "other"),
            (std::vector<PolicyRule>{P({"get"}, {""}, {"nodes"}), P({"get"}, {""}, {"secrets"})}));
  EXPECT_TRUE(rbac.RulesFor(MakeUser("nobody", {}), "ns").empty());
}

TEST(RbacAuthorizer, ReadersSeeWholeSnapshotsWhileWritersUpdate) {
  RbacAuthorizer rbac;
  rbac.Replace({Role("ns", "r", Json::array({Rule({"get"}, {""}, {"pods"})}))});
  UserInfo alice = MakeUser("alice");
  std::atomic<bool> done{false};
  std::atomic<int> allowed{0};
  std::thread reader([&] {
    Attributes a = Res(alice, "get", "ns", "", "pods", "", "p");
    Attributes never = Res(alice, "delete", "ns", "", "pods", "", "p");
    while (!done.load()) {
      if (rbac.Authorize(a).allowed) allowed.fetch_add(1);
      EXPECT_FALSE(rbac.Authorize(never).allowed);
    }
  });
  for (int i = 0; i < 200; ++i) {
    rbac.Upsert(RoleBinding("ns", "b", "Role", "r", {UserSubject("alice")}));
    rbac.Remove("RoleBinding", "ns", "b");
  }
  rbac.Upsert(RoleBinding("ns", "b", "Role", "r", {UserSubject("alice")}));
  while (allowed.load() == 0) std::this_thread::yield();  // the reader sees the final state
  done = true;
  reader.join();
  EXPECT_TRUE(Allowed(rbac, Res(alice, "get", "ns", "", "pods", "", "p")));
}

// ---- Bootstrap policy -----------------------------------------------------------------------

class BootstrapPolicyTest : public testing::Test {
 protected:
  void SetUp() override { rbac_.Replace(BootstrapPolicy()); }
  RbacAuthorizer rbac_;
};

TEST_F(BootstrapPolicyTest, MastersMayDoAnything) {
  UserInfo admin = MakeUser("kubernetes-admin", {kMastersGroup, kAuthenticatedGroup});
  Decision d = rbac_.Authorize(Res(admin, "delete", "kube-system", "apps", "deployments"));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(
      d.reason,
      R"(RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters")");
  EXPECT_TRUE(Allowed(
      rbac_, Res(admin, "escalate", "", "rbac.authorization.k8s.io", "clusterroles", "", "x")));
  EXPECT_TRUE(Allowed(rbac_, Res(admin, "get", "", "example.com", "widgets", "status", "w")));
  EXPECT_TRUE(Allowed(rbac_, Url(admin, "post", "/logs/anything")));
  // It is the binding, not the group name: without it masters are ordinary users.
  rbac_.Remove("ClusterRoleBinding", "", "cluster-admin");
  EXPECT_FALSE(Allowed(rbac_, Res(admin, "delete", "kube-system", "apps", "deployments")));
}

TEST_F(BootstrapPolicyTest, AuthenticatedUsersMayReviewThemselvesAndDiscover) {
  UserInfo u = MakeUser("alice");
  for (const char* r : {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}) {
    EXPECT_TRUE(Allowed(rbac_, Res(u, "create", "", "authorization.k8s.io", r))) << r;
  }
  EXPECT_TRUE(Allowed(rbac_, Res(u, "create", "", "authentication.k8s.io", "selfsubjectreviews")));
  EXPECT_FALSE(
      Allowed(rbac_, Res(u, "create", "", "authorization.k8s.io", "subjectaccessreviews")));
  for (const char* path : {"/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/version/",
                           "/healthz", "/livez", "/readyz", "/openapi/v2"}) {
    EXPECT_TRUE(Allowed(rbac_, Url(u, "get", path))) << path;
  }
  EXPECT_FALSE(Allowed(rbac_, Url(u, "get", "/metrics")));
  EXPECT_FALSE(Allowed(rbac_, Url(u, "post", "/api")));
  EXPECT_FALSE(Allowed(rbac_, Res(u, "list", "default", "", "pods")));
  EXPECT_FALSE(Allowed(rbac_, Res(u, "list", "", "", "namespaces")));
}

TEST_F(BootstrapPolicyTest, UnauthenticatedMayReadHealthAndVersionOnly) {
  UserInfo anon = MakeUser(kAnonymousUser, {kUnauthenticatedGroup});
  for (const char* path : {"/healthz", "/livez", "/readyz", "/version", "/version/"}) {
    EXPECT_TRUE(Allowed(rbac_, Url(anon, "get", path))) << path;
  }
  EXPECT_FALSE(Allowed(rbac_, Url(anon, "get", "/api")));
  EXPECT_FALSE(Allowed(rbac_, Url(anon, "get", "/apis/apps")));
  EXPECT_FALSE(Allowed(rbac_, Url(anon, "post", "/healthz")));
  EXPECT_FALSE(
      Allowed(rbac_, Res(anon, "create", "", "authorization.k8s.io", "selfsubjectaccessreviews")));
}

TEST_F(BootstrapPolicyTest, ViewBoundInANamespaceReadsButDoesNotWriteOrReadSecrets) {
  rbac_.Upsert(RoleBinding("team", "viewers", "ClusterRole", "view", {UserSubject("vic")}));
  UserInfo vic = MakeUser("vic");
  EXPECT_TRUE(Allowed(rbac_, Res(vic, "get", "team", "", "pods", "", "p")));
  EXPECT_TRUE(Allowed(rbac_, Res(vic, "list", "team", "", "pods")));
  EXPECT_TRUE(Allowed(rbac_, Res(vic, "get", "team", "", "pods", "log", "p")));
  EXPECT_TRUE(Allowed(rbac_, Res(vic, "watch", "team", "apps", "deployments")));
  EXPECT_TRUE(Allowed(rbac_, Res(vic, "get", "team", "", "namespaces", "", "team")));
  EXPECT_FALSE(Allowed(rbac_, Res(vic, "get", "team", "", "secrets", "", "s")));
  EXPECT_FALSE(Allowed(rbac_, Res(vic, "list", "team", "", "secrets")));
  EXPECT_FALSE(Allowed(rbac_, Res(vic, "create", "team", "", "pods")));
  EXPECT_FALSE(Allowed(rbac_, Res(vic, "get", "team", "", "pods", "exec", "p")));
  EXPECT_FALSE(Allowed(rbac_, Res(vic, "get", "other", "", "pods", "", "p")));
}

TEST_F(BootstrapPolicyTest, EditReadsAndWritesSecretsButNotRbac) {
  rbac_.Upsert(RoleBinding("team", "editors", "ClusterRole", "edit", {GroupSubject("devs")}));
  UserInfo dev = MakeUser("eve", {kAuthenticatedGroup, "devs"});
  EXPECT_TRUE(Allowed(rbac_, Res(dev, "get", "team", "", "secrets", "", "s")));
  EXPECT_TRUE(Allowed(rbac_, Res(dev, "create", "team", "", "secrets")));
  EXPECT_TRUE(Allowed(rbac_, Res(dev, "create", "team", "", "pods")));
  EXPECT_TRUE(Allowed(rbac_, Res(dev, "get", "team", "", "pods", "", "p")));  // from view
  EXPECT_TRUE(Allowed(rbac_, Res(dev, "patch", "team", "apps", "deployments", "scale", "d")));
  EXPECT_TRUE(Allowed(rbac_, Res(dev, "update", "team", "coordination.k8s.io", "leases", "", "l")));
  EXPECT_FALSE(Allowed(rbac_, Res(dev, "create", "team", "rbac.authorization.k8s.io", "roles")));
  EXPECT_FALSE(Allowed(rbac_, Res(dev, "update", "team", "", "resourcequotas", "", "q")));
  EXPECT_FALSE(Allowed(rbac_, Res(dev, "delete", "team", "", "namespaces", "", "team")));
}

TEST_F(BootstrapPolicyTest, AdminManagesRolesInItsNamespace) {
  rbac_.Upsert(RoleBinding("team", "admins", "ClusterRole", "admin", {UserSubject("ann")}));
  UserInfo ann = MakeUser("ann");
  EXPECT_TRUE(Allowed(rbac_, Res(ann, "create", "team", "rbac.authorization.k8s.io", "roles")));
  EXPECT_TRUE(
      Allowed(rbac_, Res(ann, "delete", "team", "rbac.authorization.k8s.io", "rolebindings")));
  EXPECT_TRUE(Allowed(rbac_, Res(ann, "get", "team", "", "secrets", "", "s")));
  EXPECT_FALSE(Allowed(rbac_, Res(ann, "create", "", "rbac.authorization.k8s.io", "clusterroles")));
}

TEST(BootstrapPolicy, ObjectsCarryKubeMetadata) {
  std::vector<Json> policy = BootstrapPolicy();
  std::vector<std::string> roles, bindings;
  for (const Json& o : policy) {
    EXPECT_EQ(machinery::ApiVersionOf(o), "rbac.authorization.k8s.io/v1");
    EXPECT_EQ(machinery::GetString(o, {"metadata", "labels", "kubernetes.io/bootstrapping"}),
              "rbac-defaults");
    EXPECT_EQ(machinery::GetString(
                  o, {"metadata", "annotations", "rbac.authorization.kubernetes.io/autoupdate"}),
              "true");
    (machinery::Kind(o) == "ClusterRole" ? roles : bindings).push_back(machinery::Name(o));
  }
  for (const char* want : {"cluster-admin", "admin", "edit", "view", "system:aggregate-to-admin",
                           "system:aggregate-to-edit", "system:aggregate-to-view",
                           "system:discovery", "system:basic-user", "system:public-info-viewer"}) {
    EXPECT_NE(std::find(roles.begin(), roles.end(), want), roles.end()) << want;
  }
  for (const char* want :
       {"cluster-admin", "system:discovery", "system:basic-user", "system:public-info-viewer"}) {
    EXPECT_NE(std::find(bindings.begin(), bindings.end(), want), bindings.end()) << want;
  }
  for (const Json& o : policy) {
    if (machinery::Name(o) == "system:public-info-viewer" &&
        machinery::Kind(o) == "ClusterRoleBinding") {
      EXPECT_EQ(o["subjects"], Json::parse(R"([
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"},
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
         "name": "system:unauthenticated"}])"));
    }
    if (machinery::Name(o) == "edit") {
      EXPECT_EQ(machinery::GetString(
                    o, {"metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-admin"}),
                "true");
    }
  }
}

// ---- Aggregation ----------------------------------------------------------------------------

const Json* FindByName(const std::vector<Json>& objs, const std::string& kind,
                       const std::string& name) {
  for (const auto& o : objs) {
    if (machinery::Kind(o) == kind && machinery::Name(o) == name) return &o;
  }
  return nullptr;
}

TEST(AggregatedRules, AdminIsEditPlusAggregateToAdminInNameOrder) {
  std::vector<Json> roles;
  for (const Json& o : BootstrapPolicy()) {
    if (machinery::Kind(o) == "ClusterRole") roles.push_back(o);
  }
  const Json* admin = FindByName(roles, "ClusterRole", "admin");
  const Json* edit = FindByName(roles, "ClusterRole", "edit");
  const Json* to_admin = FindByName(roles, "ClusterRole", "system:aggregate-to-admin");
  ASSERT_TRUE(admin && edit && to_admin);
  std::optional<Json> rules = AggregatedRules(*admin, roles);
  ASSERT_TRUE(rules.has_value());
  std::vector<PolicyRule> want = ParseRules((*edit)["rules"]);
  for (const auto& r : ParseRules((*to_admin)["rules"])) want.push_back(r);
  EXPECT_EQ(ParseRules(*rules), want);
  EXPECT_EQ(*rules, (*admin)["rules"]);  // BootstrapPolicy ships resolved roles

  // A new role labelled for admin joins, in name order; dropping the label removes it again.
  Json extra =
      ClusterRole("aaa-widgets", Json::array({Rule({"get"}, {"example.com"}, {"widgets"})}),
                  {{"rbac.authorization.k8s.io/aggregate-to-admin", "true"}});
  roles.push_back(extra);
  rules = AggregatedRules(*FindByName(roles, "ClusterRole", "admin"), roles);
  ASSERT_TRUE(rules.has_value());
  EXPECT_EQ(ParseRules(*rules).front(), P({"get"}, {"example.com"}, {"widgets"}));
  EXPECT_EQ(ParseRules(*rules).size(), want.size() + 1);
  roles.back()["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] = "false";
  rules = AggregatedRules(*FindByName(roles, "ClusterRole", "admin"), roles);
  EXPECT_EQ(ParseRules(*rules), want);
}

TEST(AggregatedRules, SelectorsUnionWithoutDuplicatesOrSelf) {
  Json shared = Rule({"get"}, {""}, {"pods"});
  std::vector<Json> all = {
      ClusterRole("b", Json::array({shared, Rule({"list"}, {""}, {"pods"})}),
                  {{"tier", "web"}, {"team", "x"}}),
      ClusterRole("a", Json::array({shared}), {{"tier", "db"}}),
      ClusterRole("c", Json::array({Rule({"get"}, {""}, {"secrets"})}), {{"legacy", "yes"}}),
      ClusterRole("d", Json::array({Rule({"get"}, {""}, {"nodes"})}), {{"tier", "cache"}}),
  };
  Json target = Aggregated(
      "agg",
      Json::array({
          {{"matchExpressions",
            Json::array({{{"key", "tier"}, {"operator", "In"}, {"values", {"web", "db"}}}})}},
          {{"matchExpressions", Json::array({{{"key", "legacy"}, {"operator", "Exists"}}})}},
      }),
      {{"tier", "web"}});
  target["rules"] = Json::array({Rule({"*"}, {"*"}, {"*"})});  // stale rules are replaced
  all.push_back(target);
  std::optional<Json> rules = AggregatedRules(target, all);
  ASSERT_TRUE(rules.has_value());
  EXPECT_EQ(ParseRules(*rules),
            (std::vector<PolicyRule>{P({"get"}, {""}, {"pods"}), P({"list"}, {""}, {"pods"}),
                                     P({"get"}, {""}, {"secrets"})}));

  Json not_in = Aggregated(
      "agg2",
      Json::array(
          {{{"matchExpressions",
             Json::array({{{"key", "tier"}, {"operator", "NotIn"}, {"values", {"web", "db"}}},
                          {{"key", "legacy"}, {"operator", "DoesNotExist"}}})}}}));
  rules = AggregatedRules(not_in, all);
  ASSERT_TRUE(rules.has_value());
  // d (tier=cache) and agg (tier=web): NotIn excludes it; agg2 itself is not in the list.
  EXPECT_EQ(ParseRules(*rules), (std::vector<PolicyRule>{P({"get"}, {""}, {"nodes"})}));

  EXPECT_FALSE(AggregatedRules(all[0], all).has_value());
  Json bad_selector =
      Aggregated("bad", Json::array({{{"matchExpressions",
                                       Json::array({{{"key", "tier"}, {"operator", "Bogus"}}})}}}));
  rules = AggregatedRules(bad_selector, all);
  ASSERT_TRUE(rules.has_value());
  EXPECT_TRUE(rules->empty());
}

TEST(ResolveAggregation, ResolvesChainsOfAggregatedRoles) {
  std::vector<Json> objs = {
      Aggregated("top", Json::array({{{"matchLabels", {{"to-top", "true"}}}}})),
      Aggregated("middle", Json::array({{{"matchLabels", {{"to-middle", "true"}}}}}),
                 {{"to-top", "true"}}),
      ClusterRole("leaf", Json::array({Rule({"get"}, {""}, {"pods"})}), {{"to-middle", "true"}}),
      ClusterRoleBinding("ignored", "top", {UserSubject("u")}),
  };
  EXPECT_EQ(ResolveAggregation(objs), 2);
  Json want = RulesToJson({P({"get"}, {""}, {"pods"})});
  EXPECT_EQ(objs[0]["rules"], want);
  EXPECT_EQ(objs[1]["rules"], want);
  EXPECT_FALSE(objs[3].contains("rules"));
  EXPECT_EQ(ResolveAggregation(objs), 0);  // already resolved
}

// ---- Covers ---------------------------------------------------------------------------------

TEST(Covers, WildcardOwnerCoversEverything) {
  std::vector<PolicyRule> owner = {P({"*"}, {"*"}, {"*"}), PUrl({"*"}, {"*"})};
  std::vector<PolicyRule> requested = {P({"get", "escalate"}, {"", "apps"}, {"pods", "x/y"}),
                                       P({"*"}, {"*"}, {"*"}, {"n"}), PUrl({"get"}, {"/a", "*"})};
  EXPECT_TRUE(Covers(owner, requested, nullptr));
}

TEST(Covers, RequestedWildcardsNeedWildcardOwners) {
  std::vector<PolicyRule> owner = {
      P({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}, {""},
        {"pods"})};
  std::vector<PolicyRule> missing;
  EXPECT_FALSE(Covers(owner, {P({"*"}, {""}, {"pods"})}, &missing));
  EXPECT_EQ(missing, (std::vector<PolicyRule>{P({"*"}, {""}, {"pods"})}));
  EXPECT_FALSE(Covers(owner, {P({"get"}, {"*"}, {"pods"})}, nullptr));
  EXPECT_FALSE(Covers(owner, {P({"get"}, {""}, {"*"})}, nullptr));
  EXPECT_TRUE(Covers({P({"*"}, {"*"}, {"pods"})}, {P({"*"}, {"*"}, {"pods"})}, nullptr));
}

TEST(Covers, ResourceNamesAndSubresources) {
  // Unrestricted owner covers named pieces; named owner covers only its names.
  EXPECT_TRUE(
      Covers({P({"get"}, {""}, {"secrets"})}, {P({"get"}, {""}, {"secrets"}, {"a"})}, nullptr));
  EXPECT_TRUE(Covers({P({"get"}, {""}, {"secrets"}, {"a", "b"})},
                     {P({"get"}, {""}, {"secrets"}, {"b"})}, nullptr));
  std::vector<PolicyRule> missing;
  EXPECT_FALSE(Covers({P({"get"}, {""}, {"secrets"}, {"a"})},
                      {P({"get"}, {""}, {"secrets"}, {"a", "c"}), P({"get"}, {""}, {"secrets"})},
                      &missing));
  EXPECT_EQ(missing, (std::vector<PolicyRule>{P({"get"}, {""}, {"secrets"}, {"c"}),
                                              P({"get"}, {""}, {"secrets"})}));
  // "*/scale" covers any resource's scale; "pods" does not cover "pods/log".
  EXPECT_TRUE(Covers({P({"update"}, {"apps"}, {"*/scale"})},
                     {P({"update"}, {"apps"}, {"deployments/scale", "statefulsets/scale"})},
                     nullptr));
  EXPECT_FALSE(Covers({P({"get"}, {""}, {"pods"})}, {P({"get"}, {""}, {"pods/log"})}, nullptr));
  EXPECT_FALSE(Covers({P({"update"}, {"apps"}, {"*/scale"})},
                      {P({"update"}, {"apps"}, {"deployments"})}, nullptr));
}

TEST(Covers, NonResourceUrls) {
  std::vector<PolicyRule> owner = {PUrl({"get"}, {"/apis/*", "/healthz"})};
  EXPECT_TRUE(Covers(owner, {PUrl({"get"}, {"/apis/apps", "/apis/*", "/healthz"})}, nullptr));
  std::vector<PolicyRule> missing;
  EXPECT_FALSE(Covers(owner, {PUrl({"get", "post"}, {"/healthz/x", "/healthz"})}, &missing));
  EXPECT_EQ(missing,
            (std::vector<PolicyRule>{PUrl({"get"}, {"/healthz/x"}), PUrl({"post"}, {"/healthz/x"}),
                                     PUrl({"post"}, {"/healthz"})}));
  // A resource rule never covers URLs, nor a URL rule resources.
  EXPECT_FALSE(Covers({P({"*"}, {"*"}, {"*"})}, {PUrl({"get"}, {"/x"})}, nullptr));
  EXPECT_FALSE(Covers({PUrl({"*"}, {"*"})}, {P({"get"}, {""}, {"pods"})}, nullptr));
}

TEST(Covers, PiecesAreCoveredByOneOwnerRuleEach) {
  // get from one rule, list from another: each piece is covered separately.
  EXPECT_TRUE(Covers({P({"get"}, {""}, {"pods"}), P({"list"}, {""}, {"pods"})},
                     {P({"get", "list"}, {""}, {"pods"})}, nullptr));
  std::vector<PolicyRule> missing;
  EXPECT_FALSE(Covers({P({"get"}, {""}, {"pods"})}, {P({"get", "delete"}, {"", "apps"}, {"pods"})},
                      &missing));
  EXPECT_EQ(missing,
            (std::vector<PolicyRule>{P({"delete"}, {""}, {"pods"}), P({"get"}, {"apps"}, {"pods"}),
                                     P({"delete"}, {"apps"}, {"pods"})}));
}

TEST(CompactString, FormatsLikeKube) {
  EXPECT_EQ(
      CompactString(P({"get", "list"}, {""}, {"secrets"}, {"a"})),
      R"({APIGroups:[""], Resources:["secrets"], ResourceNames:["a"], Verbs:["get" "list"]})");
  EXPECT_EQ(CompactString(PUrl({"get"}, {"/healthz"})),
            R"({NonResourceURLs:["/healthz"], Verbs:["get"]})");
  EXPECT_EQ(CompactRules({P({"get"}, {""}, {"pods"}), PUrl({"get"}, {"/x"}),
                          P({"list"}, {""}, {"pods"}), P({"get"}, {"apps"}, {"pods"})}),
            (std::vector<PolicyRule>{PUrl({"get"}, {"/x"}), P({"get", "list"}, {""}, {"pods"}),
                                     P({"get"}, {"apps"}, {"pods"})}));
}

// ---- ConfirmNoEscalation --------------------------------------------------------------------

class EscalationTest : public testing::Test {
 protected:
  void SetUp() override {
    std::vector<Json> objs = BootstrapPolicy();
    objs.push_back(Role("team", "pod-manager",
                        Json::array({Rule({"get", "list", "create", "delete"}, {""}, {"pods"}),
                                     Rule({"get"}, {""}, {"configmaps"}, {"settings"})})));
    objs.push_back(
        RoleBinding("team", "alice-pods", "Role", "pod-manager", {UserSubject("alice")}));
    rbac_.Replace(objs);
  }
  RbacAuthorizer rbac_;
  UserInfo alice_ = MakeUser("alice");
};

TEST_F(EscalationTest, RoleWithHeldRulesIsAllowed) {
  Json role = Role("team", "sub",
                   Json::array({Rule({"get", "list"}, {""}, {"pods"}),
                                Rule({"get"}, {""}, {"configmaps"}, {"settings"})}));
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, role).ok());
  // Rules held through the bootstrap bindings count too (discovery URLs, self reviews).
  Json discovery =
      Role("team", "d",
           Json::array({Rule({"create"}, {"authorization.k8s.io"}, {"selfsubjectaccessreviews"})}));
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, discovery).ok());
}

TEST_F(EscalationTest, RoleWithMoreRulesIsForbiddenWithKubesMessage) {
  Json role = Role("team", "super",
                   Json::array({Rule({"get", "list"}, {""}, {"pods", "secrets"}),
                                Rule({"get"}, {""}, {"configmaps"})}));
  core::Status s = rbac_.ConfirmNoEscalation(alice_, role);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), core::Reason::kForbidden);
  EXPECT_EQ(s.code(), 403);
  EXPECT_EQ(s.message(),
            "roles.rbac.authorization.k8s.io \"super\" is forbidden: user \"alice\" "
            "(groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not "
            "currently held:\n"
            "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"get\"]}\n"
            "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}");
  ASSERT_TRUE(s.details().has_value());
  EXPECT_EQ(s.details()->name, "super");
  EXPECT_EQ(s.details()->group, "rbac.authorization.k8s.io");
  EXPECT_EQ(s.details()->kind, "roles");
}

TEST_F(EscalationTest, GroupsAreQuotedLikeGo) {
  UserInfo u = MakeUser("bob", {"system:authenticated", "dev \"ops\""});
  Json role = Role("team", "r", Json::array({Rule({"get"}, {""}, {"secrets"})}));
  core::Status s = rbac_.ConfirmNoEscalation(u, role);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(R"(user "bob" (groups=["system:authenticated" "dev \"ops\""]))"),
            std::string::npos)
      << s.message();
}

TEST_F(EscalationTest, RulesHeldInAnotherNamespaceDoNotCount) {
  Json role = Role("elsewhere", "r", Json::array({Rule({"get"}, {""}, {"pods"})}));
  EXPECT_EQ(rbac_.ConfirmNoEscalation(alice_, role).reason(), core::Reason::kForbidden);
  Json cluster_role = ClusterRole("r", Json::array({Rule({"get"}, {""}, {"pods"})}));
  core::Status s = rbac_.ConfirmNoEscalation(alice_, cluster_role);
  EXPECT_EQ(s.reason(), core::Reason::kForbidden);
  EXPECT_EQ(s.message().rfind("clusterroles.rbac.authorization.k8s.io \"r\" is forbidden: ", 0), 0u)
      << s.message();
}

TEST_F(EscalationTest, NonResourceUrlsHeldCanBeGranted) {
  Json discovery = ClusterRole("d", Json::array({UrlRule({"get"}, {"/apis/*", "/version"})}));
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, discovery).ok());
  Json metrics = ClusterRole("m", Json::array({UrlRule({"get"}, {"/metrics", "/api"})}));
  core::Status s = rbac_.ConfirmNoEscalation(alice_, metrics);
  ASSERT_EQ(s.reason(), core::Reason::kForbidden);
  EXPECT_TRUE(s.message().ends_with(
      "not currently held:\n{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"))
      << s.message();
}

TEST_F(EscalationTest, EscalateVerbAllowsAnyRules) {
  rbac_.Upsert(Role("team", "escalator",
                    Json::array({Rule({"escalate"}, {"rbac.authorization.k8s.io"}, {"roles"})})));
  rbac_.Upsert(RoleBinding("team", "alice-escalates", "Role", "escalator", {UserSubject("alice")}));
  Json role = Role("team", "super", Json::array({Rule({"*"}, {"*"}, {"*"})}));
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, role).ok());
  // Only in that namespace.
  Json elsewhere = Role("other", "super", Json::array({Rule({"*"}, {"*"}, {"*"})}));
  EXPECT_FALSE(rbac_.ConfirmNoEscalation(alice_, elsewhere).ok());
}

TEST_F(EscalationTest, EscalateRestrictedByNameAppliesToUpdatesOnly) {
  rbac_.Upsert(
      Role("team", "escalator",
           Json::array({Rule({"escalate"}, {"rbac.authorization.k8s.io"}, {"roles"}, {"super"})})));
  rbac_.Upsert(RoleBinding("team", "alice-escalates", "Role", "escalator", {UserSubject("alice")}));
  Json role = Role("team", "super", Json::array({Rule({"get"}, {""}, {"secrets"})}));
  EXPECT_FALSE(rbac_.ConfirmNoEscalation(alice_, role).ok());  // create: no name in the request
  Json old = Role("team", "super", Json::array());
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, role, &old).ok());
  Json other = Role("team", "other", Json::array({Rule({"get"}, {""}, {"secrets"})}));
  Json other_old = Role("team", "other", Json::array());
  EXPECT_FALSE(rbac_.ConfirmNoEscalation(alice_, other, &other_old).ok());
}

TEST_F(EscalationTest, BindingToCoveredRoleIsAllowedOtherwiseForbidden) {
  rbac_.Upsert(RoleBinding("team", "alice-edits", "ClusterRole", "edit", {UserSubject("alice")}));
  Json view = RoleBinding("team", "bob-views", "ClusterRole", "view", {UserSubject("bob")});
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, view).ok());
  Json own_role = RoleBinding("team", "bob-pods", "Role", "pod-manager", {UserSubject("bob")});
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, own_role).ok());
  Json admin = RoleBinding("team", "bob-admin", "ClusterRole", "admin", {UserSubject("bob")});
  core::Status s = rbac_.ConfirmNoEscalation(alice_, admin);
  ASSERT_EQ(s.reason(), core::Reason::kForbidden);
  EXPECT_EQ(s.message(),
            "rolebindings.rbac.authorization.k8s.io \"bob-admin\" is forbidden: user \"alice\" "
            "(groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not "
            "currently held:\n"
            "{APIGroups:[\"authorization.k8s.io\"], Resources:[\"localsubjectaccessreviews\"], "
            "Verbs:[\"create\"]}\n"
            "{APIGroups:[\"rbac.authorization.k8s.io\"], Resources:[\"rolebindings\"], "
            "Verbs:[\"create\" \"delete\" \"deletecollection\" \"get\" \"list\" \"patch\" "
            "\"update\" \"watch\"]}\n"
            "{APIGroups:[\"rbac.authorization.k8s.io\"], Resources:[\"roles\"], "
            "Verbs:[\"create\" \"delete\" \"deletecollection\" \"get\" \"list\" \"patch\" "
            "\"update\" \"watch\"]}");
  // A ClusterRoleBinding needs the rules cluster-wide.
  Json cluster_view = ClusterRoleBinding("bob-views", "view", {UserSubject("bob")});
  EXPECT_EQ(rbac_.ConfirmNoEscalation(alice_, cluster_view).reason(), core::Reason::kForbidden);
}

TEST_F(EscalationTest, BindVerbAllowsBindingTheNamedRole) {
  rbac_.Upsert(Role(
      "team", "binder",
      Json::array({Rule({"bind"}, {"rbac.authorization.k8s.io"}, {"clusterroles"}, {"admin"})})));
  rbac_.Upsert(RoleBinding("team", "alice-binds", "Role", "binder", {UserSubject("alice")}));
  Json admin = RoleBinding("team", "bob-admin", "ClusterRole", "admin", {UserSubject("bob")});
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, admin).ok());
  Json edit = RoleBinding("team", "bob-edit", "ClusterRole", "edit", {UserSubject("bob")});
  EXPECT_EQ(rbac_.ConfirmNoEscalation(alice_, edit).reason(), core::Reason::kForbidden);
  Json elsewhere = RoleBinding("other", "bob-admin", "ClusterRole", "admin", {UserSubject("bob")});
  EXPECT_EQ(rbac_.ConfirmNoEscalation(alice_, elsewhere).reason(), core::Reason::kForbidden);
}

TEST_F(EscalationTest, BindingToMissingRoleIsNotFound) {
  Json b = RoleBinding("team", "b", "Role", "absent", {UserSubject("bob")});
  core::Status s = rbac_.ConfirmNoEscalation(alice_, b);
  EXPECT_EQ(s.reason(), core::Reason::kNotFound);
  EXPECT_EQ(s.message(), R"(roles.rbac.authorization.k8s.io "absent" not found)");
  Json bad_kind = RoleBinding("team", "b", "Group", "x", {UserSubject("bob")});
  EXPECT_EQ(rbac_.ConfirmNoEscalation(alice_, bad_kind).reason(), core::Reason::kBadRequest);
  EXPECT_EQ(rbac_.ConfirmNoEscalation(alice_, Json{{"kind", "Pod"}}).reason(),
            core::Reason::kBadRequest);
}

TEST_F(EscalationTest, MastersMayGrantAnything) {
  UserInfo root = MakeUser("root", {kMastersGroup});
  EXPECT_TRUE(
      rbac_.ConfirmNoEscalation(root, ClusterRole("x", Json::array({Rule({"*"}, {"*"}, {"*"})})))
          .ok());
  EXPECT_TRUE(
      rbac_
          .ConfirmNoEscalation(root, ClusterRoleBinding("x", "cluster-admin", {UserSubject("bob")}))
          .ok());
}

TEST_F(EscalationTest, AggregationRuleNeedsFullAuthority) {
  rbac_.Upsert(ClusterRoleBinding("alice-admin", "admin", {UserSubject("alice")}));
  Json agg = Aggregated("agg", Json::array({{{"matchLabels", {{"a", "b"}}}}}));
  core::Status s = rbac_.ConfirmNoEscalation(alice_, agg);
  ASSERT_EQ(s.reason(), core::Reason::kForbidden);
  EXPECT_EQ(s.message(),
            "clusterroles.rbac.authorization.k8s.io \"agg\" is forbidden: must have "
            "cluster-admin privileges to use the aggregationRule");
  // Removing the rule from an aggregated role is checked the same way.
  Json plain = ClusterRole("agg", Json::array());
  EXPECT_EQ(rbac_.ConfirmNoEscalation(alice_, plain, &agg).reason(), core::Reason::kForbidden);
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, plain).ok());
  rbac_.Upsert(ClusterRoleBinding("alice-root", "cluster-admin", {UserSubject("alice")}));
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, agg).ok());
}

TEST_F(EscalationTest, UpdatesTouchingOnlyGarbageCollectionFieldsAreAllowed) {
  Json old = RoleBinding("team", "b", "ClusterRole", "cluster-admin", {UserSubject("bob")});
  Json next = old;
  next["metadata"]["finalizers"] = {"example.com/keep"};
  next["metadata"]["ownerReferences"] = Json::array({{{"kind", "X"}, {"name", "y"}}});
  EXPECT_TRUE(rbac_.ConfirmNoEscalation(alice_, next, &old).ok());
  next["subjects"].push_back(UserSubject("mallory"));
  EXPECT_EQ(rbac_.ConfirmNoEscalation(alice_, next, &old).reason(), core::Reason::kForbidden);
}

}  // namespace
}  // namespace klutch::auth::rbac_test
