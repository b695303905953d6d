// The steps of kubectl bind (src/kubectl_bind/) on the in-process test cluster: the protocol
// documents as the CLI reads them, the provider kubeconfig Secret, the konnector install and its
// RBAC, export requests and bindings.
#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "core/strings.h"
#include "kubectl_bind/bindings.h"
#include "kubectl_bind/browser_login.h"
#include "kubectl_bind/device_login.h"
#include "kubectl_bind/export_request.h"
#include "kubectl_bind/konnector_install.h"
#include "kubectl_bind/output.h"
#include "kubectl_bind/provider_discovery.h"
#include "kubectl_bind/provider_kubeconfig.h"
#include "kubectl_bind/session.h"
#include "kubectl_bind/status_table.h"
#include "reconcile/conditions.h"
#include "test/support/bind_provider.h"
#include "test/support/cluster_fixture.h"

namespace klutch::kubectl_bind {
namespace {

using client::ResourceClient;
namespace resources = client::resources;
namespace tb = klutch::testing::bind;

std::string ProviderJson(std::string api_version, std::string version, bool with_method = true) {
  Json doc = {{"kind", "BindingProvider"},
              {"apiVersion", api_version},
              {"providerPrettyName", "anynines"},
              {"version", version},
              {"authenticationMethods", Json::array()}};
  if (with_method) {
    doc["authenticationMethods"].push_back(
        {{"method", "OAuth2CodeGrant"},
         {"oauth2CodeGrant", {{"authenticatedURL", "https://backend/authorize"}}}});
  }
  return doc.dump();
}

TEST(BindingProvider, AcceptsWhatUpstreamAcceptsAndSaysWhyNot) {
  auto ok = ParseBindingProvider(ProviderJson("v1alpha1", "v1.4.0"), "https://b/export");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->authenticated_url, "https://backend/authorize");
  EXPECT_EQ(ok->pretty_name, "anynines");
  EXPECT_TRUE(ParseBindingProvider(ProviderJson("v1alpha1", "v0.0.0"), "u").ok());
  EXPECT_TRUE(ParseBindingProvider(ProviderJson("v1alpha1", "v0.3.0"), "u").ok());

  auto group = ParseBindingProvider(ProviderJson("klutch.anynines.com/v1alpha1", "v1.4.0"), "u");
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find("v1alpha1"), std::string::npos);
  auto old = ParseBindingProvider(ProviderJson("v1alpha1", "v0.2.9"), "u");
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("older than v0.3.0"), std::string::npos);
  EXPECT_FALSE(ParseBindingProvider(ProviderJson("v1alpha1", ""), "u").ok());
  EXPECT_FALSE(ParseBindingProvider(ProviderJson("v1alpha1", "banana"), "u").ok());
  EXPECT_FALSE(ParseBindingProvider(ProviderJson("v1alpha1", "v1.0.0", false), "u").ok());
  auto html = ParseBindingProvider("<html>", "https://b/");
  ASSERT_FALSE(html.ok());
  EXPECT_NE(html.status().message().find("/export"), std::string::npos);
}

std::string ResponseJson(const std::string& sid, Json requests = Json()) {
  if (requests.is_null()) {
    requests = Json::array(
        {{{"kind", "APIServiceExportRequest"},
          {"apiVersion", apis::klutch::kApiVersion},
          {"metadata", {{"name", "postgresqlinstances.anynines.com"}}},
          {"spec",
           {{"resources", {{{"group", "anynines.com"}, {"resource", "postgresqlinstances"}}}}}}}});
  }
  return Json({{"kind", "BindingResponse"},
               {"apiVersion", apis::klutch::kApiVersion},
               {"authentication", {{"oauth2CodeGrant", {{"sid", sid}, {"id", "https://idp/1"}}}}},
               {"kubeconfig", core::Base64Encode("apiVersion: v1\n")},
               {"requests", requests}})
      .dump();
}

TEST(BindingResponse, DecodesEitherBase64AlphabetAndChecksTheSession) {
  std::string json = ResponseJson("aB3xZ9");
  for (std::string encoded : {core::Base64Encode(json), core::Base64UrlEncode(json)}) {
    auto r = DecodeCallbackResponse(encoded, "aB3xZ9");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->kubeconfig, "apiVersion: v1\n");
    EXPECT_EQ(r->id, "https://idp/1");
    ASSERT_EQ(r->requests.size(), 1u);
  }
  auto other = DecodeCallbackResponse(core::Base64Encode(json), "zzzzzz");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("another login session"), std::string::npos);
  EXPECT_FALSE(DecodeCallbackResponse("%%%", "aB3xZ9").ok());
  EXPECT_FALSE(ParseBindingResponse(ResponseJson("s", Json::array()), "s").ok());
  EXPECT_FALSE(
      ParseBindingResponse(
          ResponseJson("s", Json::array({{{"kind", "Secret"}, {"apiVersion", "v1"}}})), "s")
          .ok());
}

TEST(AuthorizeUrl, AddsSortedParametersAndKeepsExistingOnes) {
  auto url = AuthorizeUrl("https://backend:9443/authorize?x=1", 41234, "aB3xZ9", "q1w2e3");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(*url,
            "https://backend:9443/"
            "authorize?x=1&c=q1w2e3&s=aB3xZ9&u=http%3A%2F%2F127.0.0.1%3A41234%2Fcallback");
  EXPECT_FALSE(AuthorizeUrl("not a url", 1, "s", "c").ok());
}

// Issue #23: the backend's /consumer page titled every cluster "Cluster <id>": kubectl bind
// never sent the cluster's name.
TEST(AuthorizeUrl, SendsTheClusterNameAsN) {
  auto url = AuthorizeUrl("https://backend/authorize", 41234, "aB3xZ9", "q1w2e3", "kind-app 1");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(
      *url,
      "https://backend/"
      "authorize?c=q1w2e3&n=kind-app%201&s=aB3xZ9&u=http%3A%2F%2F127.0.0.1%3A41234%2Fcallback");
}

TEST(DeviceAuthorizeForm, SendsTheClusterNameAsNWhenThereIsOne) {
  using Form = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(DeviceAuthorizeForm("aB3xZ9", "q1w2e3", "prod"),
            (Form{{"s", "aB3xZ9"}, {"c", "q1w2e3"}, {"n", "prod"}}));
  EXPECT_EQ(DeviceAuthorizeForm("aB3xZ9", "q1w2e3", ""), (Form{{"s", "aB3xZ9"}, {"c", "q1w2e3"}}));
}

TEST(ClusterNameToSend, FlagElseTheContextWithinTheBackendsLimits) {
  // Without the flag: the kubeconfig's context, unless the backend would refuse it.
  EXPECT_EQ(ClusterNameToSend(std::nullopt, "kind-app-1").value(), "kind-app-1");
  EXPECT_EQ(ClusterNameToSend(std::nullopt, "arn:aws:eks:eu-1:42:cluster/app").value(),
            "arn:aws:eks:eu-1:42:cluster/app");
  EXPECT_EQ(ClusterNameToSend(std::nullopt, std::string(254, 'x')).value(), "");
  EXPECT_EQ(ClusterNameToSend(std::nullopt, "a\tb").value(), "");
  EXPECT_EQ(ClusterNameToSend(std::nullopt, "").value(), "");
  // The flag wins, trimmed; "" sends no name.
  EXPECT_EQ(ClusterNameToSend(" prod ", "kind-app-1").value(), "prod");
  EXPECT_EQ(ClusterNameToSend("", "kind-app-1").value(), "");
  EXPECT_EQ(ClusterNameToSend(std::string(253, 'x'), "").value().size(), 253u);
  // A bad flag is refused here, naming the flag and the limit.
  for (const std::string& bad : {std::string(254, 'x'), std::string("a\nb")}) {
    auto r = ClusterNameToSend(bad, "kind-app-1");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), core::Reason::kBadRequest);
    EXPECT_TRUE(r.status().message().starts_with("--cluster-name ")) << r.status().message();
  }
  EXPECT_NE(ClusterNameToSend(std::string(254, 'x'), "")
                .status()
                .message()
                .find("254 bytes long; at most 253"),
            std::string::npos);
  EXPECT_NE(ClusterNameToSend("a\x1b", "").status().message().find("control characters"),
            std::string::npos);
}

std::string Kubeconfig(const std::string& server, const std::string& ns) {
  return "apiVersion: v1\nkind: Config\nclusters:\n- name: default\n  cluster:\n    server: " +
         server +
         "\nusers:\n- name: default\n  user:\n    token: t\ncontexts:\n- name: default\n"
         "  context:\n    cluster: default\n    user: default\n    namespace: " +
         ns + "\ncurrent-context: default\n";
}

class KubectlBindSteps : public klutch::testing::ClusterTest {
 protected:
  void SetUp() override { StartCluster({.clock = &core::RealClock::Get()}); }
  client::RestClient& app() { return cluster_->admin(); }
  BindOutput Out() { return BindOutput{.err = &log_, .ask = {}}; }
  std::ostringstream log_;
};

TEST_F(KubectlBindSteps, ProviderKubeconfigSecretIsReusedPerServerAndNamespace) {
  ASSERT_TRUE(EnsureBindNamespace(app()).ok());
  auto first =
      StoreProviderKubeconfig(app(), Kubeconfig("https://p:6443", "cluster-a"), false, Out());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->starts_with("kubeconfig-"));
  auto again =
      StoreProviderKubeconfig(app(), Kubeconfig("https://p:6443", "cluster-a"), false, Out());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  auto other =
      StoreProviderKubeconfig(app(), Kubeconfig("https://p:6443", "cluster-b"), false, Out());
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *first);
  auto dry = StoreProviderKubeconfig(app(), Kubeconfig("https://q:6443", "cluster-a"), true, Out());
  ASSERT_TRUE(dry.ok());
  EXPECT_EQ(*dry, "");
  auto list = Resource(resources::kSecrets, apis::klutch::kBindNamespace).List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ((*list)["items"].size(), 2u);
  auto missing_ns = StoreProviderKubeconfig(
      app(),
      "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: "
      "https://p\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n"
      "- name: u\n  user: {}\ncurrent-context: c\n",
      false, Out());
  ASSERT_FALSE(missing_ns.ok());
  EXPECT_NE(missing_ns.status().message().find("namespace"), std::string::npos);
}

TEST_F(KubectlBindSteps, KonnectorInstallsOnceAndUpgradesOnlyOurOlderImages) {
  ASSERT_TRUE(InstallKonnector(app(), {}, Out()).ok()) << log_.str();
  auto deployment =
      Resource(resources::kDeployments, apis::klutch::kBindNamespace).Get("konnector");
  ASSERT_TRUE(deployment.ok());
  EXPECT_EQ(
      machinery::GetString((*deployment)["spec"]["template"]["spec"]["containers"][0], {"image"}),
      std::string("klutch:") + kCliVersion);
  EXPECT_TRUE(Exists(resources::kServiceAccounts, apis::klutch::kBindNamespace, "konnector"));
  EXPECT_TRUE(Exists(resources::kClusterRoles, "", "klutch-bind-konnector"));
  EXPECT_TRUE(Exists(resources::kClusterRoleBindings, "", kBoundResourcesRole));

  // A foreign image is left alone; --konnector-image forces it.
  Json d = *deployment;
  d["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example/konnector:v9";
  ASSERT_TRUE(Resource(resources::kDeployments, apis::klutch::kBindNamespace).Update(d).ok());
  ASSERT_TRUE(InstallKonnector(app(), {}, Out()).ok());
  auto kept = Resource(resources::kDeployments, apis::klutch::kBindNamespace).Get("konnector");
  EXPECT_EQ(machinery::GetString((*kept)["spec"]["template"]["spec"]["containers"][0], {"image"}),
            "registry.example/konnector:v9");
  ASSERT_TRUE(InstallKonnector(app(), {.image = "klutch:v0.0.1", .force = true}, Out()).ok());
  // Ours but older: upgraded to this CLI's version.
  ASSERT_TRUE(InstallKonnector(app(), {}, Out()).ok());
  auto upgraded = Resource(resources::kDeployments, apis::klutch::kBindNamespace).Get("konnector");
  EXPECT_EQ(
      machinery::GetString((*upgraded)["spec"]["template"]["spec"]["containers"][0], {"image"}),
      std::string("klutch:") + kCliVersion);
  EXPECT_NE(log_.str().find("Upgrading the konnector"), std::string::npos);

  std::vector<Json> printed;
  ASSERT_TRUE(
      InstallKonnector(app(), {.force = true, .dry_run = true, .printed = &printed}, Out()).ok());
  EXPECT_GE(printed.size(), 5u);
}

TEST(KonnectorImageAt, TagsTheDefaultImageWithASemanticVersionOnly) {
  for (const char* good : {"v1.4.0", "v1.4.0-rc.1"}) {
    auto r = KonnectorImageAt(good);
    ASSERT_TRUE(r.ok()) << good << ": " << r.status().ToString();
    EXPECT_EQ(*r, std::string("klutch:") + good);
  }
  for (const char* bad : {"1.4.0", "v1.4", "latest", "", "v1.4.0 --x", "v1.4.0-rc 1", "v1.4.0+b"}) {
    auto r = KonnectorImageAt(bad);
    EXPECT_EQ(r.status().reason(), core::Reason::kBadRequest) << bad;
  }
}

TEST_F(KubectlBindSteps, BoundResourcesAreGrantedOnceWithTheirStatus) {
  Json claims =
      Json::array({tb::PermissionClaim("secrets", "Provider"),
                   {{"group", "example.com"}, {"resource", "widgets"}, {"version", "v1"}}});
  ASSERT_TRUE(GrantBoundResource(app(), "db.example", "things", claims, false, Out()).ok());
  ASSERT_TRUE(GrantBoundResource(app(), "db.example", "things", claims, false, Out()).ok());
  auto role = Resource(resources::kClusterRoles).Get(kBoundResourcesRole);
  ASSERT_TRUE(role.ok());
  const Json& rules = (*role)["rules"];
  ASSERT_EQ(rules.size(), 3u) << rules.dump();
  EXPECT_EQ(rules[0]["resources"], Json::array({"things"}));
  EXPECT_EQ(rules[1]["resources"], Json::array({"things/status"}));
  EXPECT_EQ(rules[2]["apiGroups"], Json::array({"example.com"}));
  EXPECT_TRUE(Exists(resources::kClusterRoleBindings, "", kBoundResourcesRole));
  // Rights over the cluster itself are refused, and nothing is written.
  for (const auto& [g, r] : std::vector<std::pair<std::string, std::string>>{
           {"rbac.authorization.k8s.io", "clusterrolebindings"},
           {"", "serviceaccounts"},
           {"", "pods/exec"},
           {"db.example", "*"},
           {"apps", "deployments"}}) {
    core::Status refused = GrantBoundResource(app(), g, r, Json::array(), false, Out());
    EXPECT_EQ(refused.reason(), core::Reason::kForbidden) << g << "/" << r;
  }
  Json bad_claim = Json::array({{{"group", "rbac.authorization.k8s.io"}, {"resource", "roles"}}});
  EXPECT_FALSE(GrantBoundResource(app(), "db.example", "gadgets", bad_claim, false, Out()).ok());
  auto unchanged = Resource(resources::kClusterRoles).Get(kBoundResourcesRole);
  EXPECT_EQ((*unchanged)["rules"].size(), 3u);
  // Covered by an existing rule: nothing added.
  ASSERT_TRUE(
      GrantBoundResource(app(), "example.com", "widgets", Json::array(), false, Out()).ok());
  auto after = Resource(resources::kClusterRoles).Get(kBoundResourcesRole);
  EXPECT_EQ((*after)["rules"].size(), 4u);  // widgets/status was new, widgets was not
}

TEST_F(KubectlBindSteps, ExportRequestWaitsForTheProviderAndReportsRefusals) {
  ASSERT_TRUE(tb::InstallBindCrds(app()).ok());
  Create(resources::kNamespaces,
         {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "cluster-x"}}}});
  auto request = ParseExportRequest(
      "apiVersion: klutch.anynines.com/v1alpha1\nkind: APIServiceExportRequest\nmetadata:\n  "
      "name: pg\nspec:\n  resources:\n  - group: anynines.com\n    resource: postgresqlinstances\n",
      "request.yaml");
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  // The backend's part, played here: accept the first request, refuse the second.
  std::thread backend([&] {
    ResourceClient sers(app(), tb::kApiServiceExportRequests, "cluster-x");
    int handled = 0;
    for (int i = 0; i < 200 && handled < 2; ++i) {
      auto list = sers.List();
      if (list.ok()) {
        for (Json item : (*list)["items"]) {
          if (!machinery::GetString(item, {"status", "phase"}).empty() &&
              machinery::GetString(item, {"status", "phase"}) != "Pending") {
            continue;
          }
          bool first = machinery::Name(item) == "pg";
          item["status"] = {{"phase", first ? "Succeeded" : "Failed"}};
          if (!first) item["status"]["terminalMessage"] = "CRD nothere.anynines.com not found";
          if (sers.UpdateStatus(item).ok()) ++handled;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  auto done = CreateExportRequest(app(), "cluster-x", *request, std::chrono::seconds(20), Out());
  auto refused = CreateExportRequest(app(), "cluster-x", *request, std::chrono::seconds(20), Out());
  backend.join();
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(machinery::GetString(*done, {"status", "phase"}), "Succeeded");
  // The same name again: created under a generated name, then refused with the message.
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("nothere"), std::string::npos);

  EXPECT_FALSE(ParseExportRequest("kind: Secret\napiVersion: v1\n", "x").ok());
  EXPECT_FALSE(ParseExportRequest("apiVersion: klutch.anynines.com/v1alpha1\nkind: "
                                  "APIServiceExportRequest\nspec:\n  resources: []\n",
                                  "x")
                   .ok());
}

TEST_F(KubectlBindSteps, BindingsAreCreatedOnceAndRefuseAnotherProvider) {
  ASSERT_TRUE(tb::InstallBindCrd(app(), "klutch.anynines.com_apiservicebindings.yaml").ok());
  ASSERT_TRUE(EnsureBindNamespace(app()).ok());
  Json request = {{"spec",
                   {{"resources",
                     {{{"group", "anynines.com"},
                       {"resource", "postgresqlinstances"},
                       {"permissionClaims", {tb::PermissionClaim("secrets", "Provider")}}}}}}}};
  // No terminal to ask and no --accept-permission-claims: a clear refusal, nothing created.
  auto refused = CreateBindings(app(), request, "kubeconfig-abc", {}, false, nullptr, Out());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--accept-permission-claims"), std::string::npos);
  EXPECT_FALSE(Exists(tb::kApiServiceBindings, apis::klutch::kBindNamespace,
                      "postgresqlinstances.anynines.com"));

  BindOutput answering = Out();
  int asked = 0;
  answering.ask = [&](const std::string&) -> std::optional<std::string> {
    return ++asked == 1 ? "maybe" : "Y";
  };
  auto made = CreateBindings(app(), request, "kubeconfig-abc", {}, false, nullptr, answering);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(asked, 2);
  auto binding = Resource(tb::kApiServiceBindings, apis::klutch::kBindNamespace).Get(made->front());
  ASSERT_TRUE(binding.ok());
  EXPECT_EQ((*binding)["spec"]["permissionClaims"][0]["state"], "Accepted");
  EXPECT_EQ(machinery::GetString(*binding, {"spec", "kubeconfigSecretRef", "name"}),
            "kubeconfig-abc");

  auto again =
      CreateBindings(app(), request, "kubeconfig-abc", {.accept_all = true}, false, nullptr, Out());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto other = CreateBindings(app(), request, "kubeconfig-other", {.accept_all = true}, false,
                              nullptr, Out());
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("another service provider"), std::string::npos);

  auto table = BindingsTable(app(), *made);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_NE(table->find("postgresqlinstances.anynines.com"), std::string::npos) << *table;
  EXPECT_NE(table->find("NAME"), std::string::npos);
}

TEST(BindingResponse, DisplayNameIsTheNameAPersonKnowsElseTheSubject) {
  Json doc = *machinery::ParseJson(ResponseJson("s1"));
  doc["authentication"]["oauth2CodeGrant"]["id"] = "https://127.0.0.1:5/api/oidc/lOxyAb";
  auto bare = ParseBindingResponse(doc.dump(), "s1");
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(DisplayName(*bare), "lOxyAb");  // never the issuer URL
  doc["authentication"]["oauth2CodeGrant"]["displayName"] = "demo";
  auto named = ParseBindingResponse(doc.dump(), "s1");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(DisplayName(*named), "demo");
}

// Issue #23: `kubectl bind --headless --api A --api B` without a terminal bound A, then failed
// on B's claim. Every question of every API is decided first; without a terminal the one error
// lists them all and nothing is written.
TEST_F(KubectlBindSteps, ClaimsOfEveryApiAreDecidedBeforeAnyIsBound) {
  ASSERT_TRUE(tb::InstallBindCrd(app(), "klutch.anynines.com_apiservicebindings.yaml").ok());
  ASSERT_TRUE(EnsureBindNamespace(app()).ok());
  auto api = [](const std::string& resource, Json claims) {
    return Json{{"group", "anynines.com"}, {"resource", resource}, {"permissionClaims", claims}};
  };
  Json secrets = tb::PermissionClaim("secrets", "Provider");
  secrets["required"] = true;
  std::vector<Json> requests = {
      {{"spec", {{"resources", {api("postgresqlinstances", Json::array())}}}}},
      {{"spec",
        {{"resources",
          {api("servicebindings", {secrets, tb::PermissionClaim("configmaps", "Consumer")})}}}}},
      {{"spec", {{"resources", {api("backups", {tb::PermissionClaim("secrets", "Provider")})}}}}}};
  auto questions = ClaimQuestions(app(), RequestedApis(requests));
  ASSERT_TRUE(questions.ok()) << questions.status().ToString();
  ASSERT_EQ(questions->size(), 3u);
  EXPECT_EQ((*questions)[0].binding, "servicebindings.anynines.com");
  EXPECT_EQ((*questions)[0].Text(),
            "The provider wants to create and update secrets objects it provides in your "
            "cluster (required for the API to work)");
  EXPECT_EQ((*questions)[1].Text(),
            "The provider wants to read and update configmaps objects you create in your "
            "cluster");

  auto refused = DecideClaims(*questions, false, Out());
  ASSERT_FALSE(refused.ok());
  const std::string& message = refused.status().message();
  EXPECT_NE(message.find("1. servicebindings.anynines.com: The provider wants to create and "
                         "update secrets"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("2. servicebindings.anynines.com: The provider wants to read and "
                         "update configmaps"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("3. backups.anynines.com"), std::string::npos) << message;
  EXPECT_NE(message.find("nothing was bound"), std::string::npos) << message;
  EXPECT_NE(message.find("--accept-permission-claims"), std::string::npos) << message;

  BindOutput answering = Out();
  std::vector<std::string> prompts;
  answering.ask = [&](const std::string& prompt) -> std::optional<std::string> {
    prompts.push_back(prompt);
    return prompts.size() == 2 ? "n" : " Yes ";
  };
  auto answers = DecideClaims(*questions, false, answering);
  ASSERT_TRUE(answers.ok()) << answers.status().ToString();
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_TRUE(prompts[0].starts_with("servicebindings.anynines.com: The provider wants"));
  EXPECT_EQ(answers->Find("servicebindings.anynines.com", "", "secrets"), true);
  EXPECT_EQ(answers->Find("servicebindings.anynines.com", "", "configmaps"), false);
  EXPECT_EQ(answers->Find("backups.anynines.com", "", "secrets"), true);
  EXPECT_EQ(answers->Find("backups.anynines.com", "", "widgets"), std::nullopt);

  // Bound with the answers: no question left to ask, the states as answered.
  for (const Json& request : requests) {
    auto made = CreateBindings(app(), request, "kubeconfig-abc", *answers, false, nullptr, Out());
    ASSERT_TRUE(made.ok()) << made.status().ToString();
  }
  auto binding = Resource(tb::kApiServiceBindings, apis::klutch::kBindNamespace)
                     .Get("servicebindings.anynines.com");
  ASSERT_TRUE(binding.ok());
  EXPECT_EQ((*binding)["spec"]["permissionClaims"][0]["state"], "Accepted");
  EXPECT_EQ((*binding)["spec"]["permissionClaims"][1]["state"], "Rejected");
  // Bound APIs ask nothing again.
  auto again = ClaimQuestions(app(), RequestedApis(requests));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

TEST_F(KubectlBindSteps, BindingsNotReadySayWhatTheyWaitFor) {
  ASSERT_TRUE(tb::InstallBindCrd(app(), "klutch.anynines.com_apiservicebindings.yaml").ok());
  ASSERT_TRUE(EnsureBindNamespace(app()).ok());
  Json request = {{"spec",
                   {{"resources",
                     {{{"group", "anynines.com"}, {"resource", "postgresqlinstances"}},
                      {{"group", "anynines.com"}, {"resource", "backups"}},
                      {{"group", "anynines.com"}, {"resource", "restores"}}}}}}};
  auto made = CreateBindings(app(), request, "kubeconfig-abc", {}, false, nullptr, Out());
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  ResourceClient bindings = Resource(tb::kApiServiceBindings, apis::klutch::kBindNamespace);
  // As the konnector reports: backups not ready with its reason, restores ready.
  auto report = [&](const std::string& name, bool ready, const std::string& message) {
    auto b = bindings.Get(name);
    ASSERT_TRUE(b.ok());
    Json status = *b;
    status["status"]["providerPrettyName"] = "anynines";
    if (ready) {
      reconcile::MarkTrue(status, "Ready", core::RealClock::Get());
    } else {
      reconcile::MarkFalse(status, "Ready", "NotConnected", "Warning", message,
                           core::RealClock::Get());
    }
    ASSERT_TRUE(bindings.UpdateStatus(status).ok());
  };
  report("backups.anynines.com", false, "the CRD is not established yet");
  report("restores.anynines.com", true, "");

  auto waiting = WaitForBindingsReady(app(), *made, std::chrono::milliseconds(0), Out());
  ASSERT_TRUE(waiting.ok()) << waiting.status().ToString();
  ASSERT_EQ(waiting->size(), 2u);
  EXPECT_NE((*waiting)[0].find("postgresqlinstances.anynines.com waits for the konnector to "
                               "pick it up"),
            std::string::npos)
      << (*waiting)[0];
  EXPECT_NE((*waiting)[1].find("backups.anynines.com is not Ready yet: the CRD is not "
                               "established yet"),
            std::string::npos)
      << (*waiting)[1];
  auto table = BindingsTable(app(), *made);
  ASSERT_TRUE(table.ok());
  EXPECT_NE(table->find("Waiting for the konnector to pick this binding up"), std::string::npos)
      << *table;
  EXPECT_NE(table->find("anynines"), std::string::npos) << *table;

  // A binding that becomes Ready while it waits ends the wait.
  std::thread later([&] {
    report("postgresqlinstances.anynines.com", true, "");
    report("backups.anynines.com", true, "");
  });
  auto done = WaitForBindingsReady(app(), *made, std::chrono::seconds(60), Out());
  later.join();
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->empty());
}

// The other ways binding could stop half way are found before anything is written too: an API
// bound from another provider, a claim on the cluster's own machinery; all in one error.
TEST_F(KubectlBindSteps, BindabilityIsCheckedForEveryApiBeforeAnyIsBound) {
  ASSERT_TRUE(tb::InstallBindCrd(app(), "klutch.anynines.com_apiservicebindings.yaml").ok());
  ASSERT_TRUE(EnsureBindNamespace(app()).ok());
  Json taken = {{"spec", {{"resources", {{{"group", "anynines.com"}, {"resource", "backups"}}}}}}};
  ASSERT_TRUE(CreateBindings(app(), taken, "kubeconfig-other", {}, false, nullptr, Out()).ok());
  Json roles = tb::PermissionClaim("roles", "Provider");
  roles["group"] = "rbac.authorization.k8s.io";
  std::vector<Json> apis = {
      {{"group", "anynines.com"}, {"resource", "postgresqlinstances"}},
      {{"group", "anynines.com"}, {"resource", "restores"}, {"permissionClaims", {roles}}},
      {{"group", "anynines.com"}, {"resource", "backups"}}};
  EXPECT_TRUE(CheckBindable(app(), {apis[0]}, "").ok());
  EXPECT_TRUE(CheckBindable(app(), {apis[2]}, "kubeconfig-other").ok());
  core::Status refused = CheckBindable(app(), apis, "kubeconfig-abc");
  ASSERT_FALSE(refused.ok());
  const std::string& message = refused.message();
  EXPECT_NE(message.find("binds none"), std::string::npos) << message;
  EXPECT_NE(message.find("1. restores.anynines.com: the provider asks the konnector to manage "
                         "roles.rbac.authorization.k8s.io"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("2. backups.anynines.com: already bound from another service provider "
                         "(secret klutch-bind/kubeconfig-other)"),
            std::string::npos)
      << message;
  EXPECT_EQ(refused.reason(), core::Reason::kForbidden);
  EXPECT_FALSE(CheckGrantable("", "pods", Json::array()).ok());
  EXPECT_TRUE(
      CheckGrantable("anynines.com", "backups", {tb::PermissionClaim("secrets", "Provider")}).ok());
}

}  // namespace
}  // namespace klutch::kubectl_bind
