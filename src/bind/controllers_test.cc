// The backend controllers and provisioning on the in-process TestCluster with simulated time
// (ADR 0008): export requests become exports (and fail, and are collected, on time), exports
// follow their CRDs, consumer namespaces appear with their RBAC, ClusterBinding health follows
// heartbeats, tokens are renewed before they expire, provisioning is idempotent, and one
// consumer's credentials reach nothing of another's.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/appclusterbinding.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "bind/backend_controllers.h"
#include "bind/catalog.h"
#include "bind/consumer_quota_reconciler.h"
#include "bind/names.h"
#include "bind/provision.h"
#include "bind/snapshot.h"
#include "core/strings.h"
#include "reconcile/conditions.h"
#include "serving/kubeconfig.h"
#include "test/support/cluster_fixture.h"

namespace klutch::bind {
namespace {

namespace fs = std::filesystem;
using client::ResourceClient;
using machinery::Json;
namespace resources = client::resources;

const client::GroupVersionResource kWidgets{"example.com", "v1", "widgets"};

class BindControllersTest : public testing::ClusterTest {
 protected:
  void SetUp() override { Start(); }

  void Start(std::string scope = "Namespaced", bool control_plane_mode = false,
             const std::function<void(BackendControllersOptions&)>& adjust = nullptr) {
    StartCluster();
    ASSERT_TRUE(
        InstallProviderCrds(cluster_->admin(), control_plane_mode, std::chrono::seconds(30)).ok());
    manager_ = std::make_unique<reconcile::Manager>(
        cluster_->admin(), reconcile::ManagerOptions{.name = "klutch-backend", .clock = &clock_});
    options_ = {.consumer_scope = scope,
                .control_plane_mode = control_plane_mode,
                .provision = Provision(),
                .konnector_image = "registry.example/klutch:v1",
                .clock = &clock_};
    if (adjust) adjust(options_);
    controllers_ = std::make_unique<BackendControllers>(*manager_, options_);
    ASSERT_TRUE(controllers_->Setup().ok());
    ASSERT_TRUE(manager_->Start().ok());
    Create(resources::kNamespaces, Namespace("crossplane-system"));
  }

  void TearDown() override {
    if (manager_) manager_->Stop();
    if (controllers_) controllers_->Stop();
  }

  ProvisionOptions Provision() {
    return {.pretty_name = "test-provider", .token_ttl = std::chrono::hours(1), .clock = &clock_};
  }

  static Json Namespace(const std::string& name) {
    return {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
  }

  static Json Template(const std::string& group, const std::string& resource,
                       Json claims = Json::array()) {
    return {{"apiVersion", "example-backend.klutch.anynines.com/v1alpha1"},
            {"kind", "APIServiceExportTemplate"},
            {"metadata", {{"name", resource}, {"namespace", "crossplane-system"}}},
            {"spec",
             {{"APIServiceSelector", {{"group", group}, {"resource", resource}}},
              {"permissionClaims", claims}}}};
  }

  static Json SecretClaim() {
    return {{"group", ""},
            {"resource", "secrets"},
            {"version", "v1"},
            {"selector", {{"owner", "Provider"}}}};
  }

  static Json Request(const std::string& ns, const std::string& name, const std::string& group,
                      const std::string& resource) {
    return {{"apiVersion", "klutch.anynines.com/v1alpha1"},
            {"kind", "APIServiceExportRequest"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec", {{"resources", Json::array({{{"group", group}, {"resource", resource}}})}}}};
  }

  // A consumer with an offered widgets API: its cluster namespace.
  std::string Consumer(const std::string& identity = "alice#abc123") {
    auto access = ProvisionConsumer(cluster_->admin(), Provision(), identity, "https://idp");
    EXPECT_TRUE(access.ok()) << access.status().ToString();
    return access.ok() ? access->cluster_namespace : "";
  }

  void OfferWidgets(Json claims = Json::array({SecretClaim()})) {
    Create(resources::kCustomResourceDefinitions, Crd("example.com", "widgets", "Widget"));
    Create(apis::klutch::kApiServiceExportTemplates, Template("example.com", "widgets", claims));
    ASSERT_TRUE(AdvanceUntil([&] {
      auto crd = Resource(resources::kCustomResourceDefinitions).Get("widgets.example.com");
      return crd.ok() && reconcile::IsConditionTrue(*crd, "Established");
    }));
  }

  Json Get(const client::GroupVersionResource& gvr, const std::string& ns,
           const std::string& name) {
    auto r = Resource(gvr, ns).Get(name);
    return r.ok() ? *r : Json();
  }

  std::string Condition(const Json& o, const std::string& type, const char* field = "status") {
    auto c = reconcile::FindSeverityCondition(o, type);
    if (!c) return "";
    if (std::string(field) == "reason") return c->reason;
    if (std::string(field) == "message") return c->message;
    return c->status;
  }

  bool HasEvent(const std::string& ns, const std::string& object, const std::string& reason) {
    auto events = Resource(resources::kEvents, ns).List();
    if (!events.ok()) return false;
    for (const Json& e : (*events)["items"]) {
      if (machinery::GetString(e, {"involvedObject", "name"}) == object &&
          machinery::GetString(e, {"reason"}) == reason) {
        return true;
      }
    }
    return false;
  }

  static std::string TokenOf(const std::string& kubeconfig) {
    auto parsed = machinery::ParseYaml(kubeconfig);
    if (!parsed.ok()) return "";
    return machinery::GetString((*parsed)["users"][0], {"user", "token"});
  }

  std::string SecretKubeconfig(const std::string& ns) {
    Json secret = Get(resources::kSecrets, ns, "kubeconfig");
    return core::Base64Decode(machinery::GetString(secret, {"data", "kubeconfig"})).value_or("");
  }

  std::unique_ptr<reconcile::Manager> manager_;
  BackendControllersOptions options_;
  std::unique_ptr<BackendControllers> controllers_;
};

// ---- export requests ----

TEST_F(BindControllersTest, ExportRequestCreatesTheExportWithSnapshotHashAndTemplateClaims) {
  OfferWidgets();
  const std::string ns = Consumer();
  Create(apis::klutch::kApiServiceExportRequests,
         Request(ns, "widgets.example.com", "example.com", "widgets"));
  Json exported;
  ASSERT_TRUE(AdvanceUntil([&] {
    exported = Get(apis::klutch::kApiServiceExports, ns, "widgets.example.com");
    return exported.is_object();
  }));
  Json crd = Get(resources::kCustomResourceDefinitions, "", "widgets.example.com");
  auto snapshot = CrdSnapshot(crd);
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(machinery::Annotation(exported, apis::klutch::kSourceSpecHashAnnotation),
            SnapshotHash(*snapshot));
  EXPECT_EQ(exported["spec"]["informerScope"], "Namespaced");
  EXPECT_EQ(exported["spec"]["group"], "example.com");
  EXPECT_EQ(exported["spec"]["permissionClaims"][0]["resource"], "secrets");
  EXPECT_FALSE(exported["spec"].contains("clusterScopedIsolation"));

  Json ser;
  ASSERT_TRUE(AdvanceUntil([&] {
    ser = Get(apis::klutch::kApiServiceExportRequests, ns, "widgets.example.com");
    return machinery::GetString(ser, {"status", "phase"}) == "Succeeded";
  }));
  EXPECT_EQ(Condition(ser, "ExportsReady"), "True");
  EXPECT_EQ(Condition(ser, "Ready"), "True");
  // The export reports itself in step with its CRD.
  ASSERT_TRUE(AdvanceUntil([&] {
    return Condition(Get(apis::klutch::kApiServiceExports, ns, "widgets.example.com"),
                     "ProviderInSync") == "True";
  }));
}

TEST_F(BindControllersTest, MissingCrdFailsAfterAMinuteAndTheRequestGoesAfterTenMinutes) {
  const std::string ns = Consumer();
  Create(apis::klutch::kApiServiceExportRequests, Request(ns, "gadgets", "example.com", "gadgets"));
  Json ser;
  ASSERT_TRUE(AdvanceUntil([&] {
    ser = Get(apis::klutch::kApiServiceExportRequests, ns, "gadgets");
    return Condition(ser, "ExportsReady", "reason") == "CRDNotFound";
  }));
  EXPECT_EQ(machinery::GetString(ser, {"status", "phase"}), "Pending");
  EXPECT_EQ(Condition(ser, "Ready"), "False");
  EXPECT_NE(Condition(ser, "ExportsReady", "message").find("gadgets.example.com"),
            std::string::npos);
  ASSERT_TRUE(AdvanceUntil([&] { return HasEvent(ns, "gadgets", "CRDNotFound"); }));

  // No event happens after this point: the controller's own timed requeue moves the phase.
  ASSERT_TRUE(AdvanceUntil(
      [&] {
        ser = Get(apis::klutch::kApiServiceExportRequests, ns, "gadgets");
        return machinery::GetString(ser, {"status", "phase"}) == "Failed";
      },
      std::chrono::seconds(2)));
  EXPECT_NE(machinery::GetString(ser, {"status", "terminalMessage"}).find("does not exist"),
            std::string::npos);
  const auto failed_at = clock_.Now();
  ASSERT_TRUE(
      AdvanceUntil([&] { return !Exists(apis::klutch::kApiServiceExportRequests, ns, "gadgets"); },
                   std::chrono::seconds(10)));
  EXPECT_GE(clock_.Now() - failed_at, std::chrono::minutes(8));
}

TEST_F(BindControllersTest, CrdWithoutTemplateIsNotExported) {
  Create(resources::kCustomResourceDefinitions, Crd("example.com", "secretthings", "SecretThing"));
  const std::string ns = Consumer();
  ASSERT_TRUE(AdvanceUntil([&] {
    return Resource(resources::kCustomResourceDefinitions).Get("secretthings.example.com").ok();
  }));
  Create(apis::klutch::kApiServiceExportRequests, Request(ns, "r", "example.com", "secretthings"));
  ASSERT_TRUE(AdvanceUntil([&] {
    return Condition(Get(apis::klutch::kApiServiceExportRequests, ns, "r"), "ExportsReady",
                     "reason") == "CRDNotOffered";
  }));
  EXPECT_FALSE(Exists(apis::klutch::kApiServiceExports, ns, "secretthings.example.com"));
}

TEST_F(BindControllersTest, ExportFollowsItsCrdAndGoesWithIt) {
  OfferWidgets();
  const std::string ns = Consumer();
  Create(apis::klutch::kApiServiceExportRequests, Request(ns, "w", "example.com", "widgets"));
  std::string hash;
  ASSERT_TRUE(AdvanceUntil([&] {
    hash = machinery::Annotation(Get(apis::klutch::kApiServiceExports, ns, "widgets.example.com"),
                                 apis::klutch::kSourceSpecHashAnnotation);
    return !hash.empty();
  }));
  ResourceClient crds = Resource(resources::kCustomResourceDefinitions);
  Json crd = Get(resources::kCustomResourceDefinitions, "", "widgets.example.com");
  crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "Widgets, v2.";
  ASSERT_TRUE(crds.Update(crd).ok());
  Json exported;
  ASSERT_TRUE(AdvanceUntil([&] {
    exported = Get(apis::klutch::kApiServiceExports, ns, "widgets.example.com");
    return machinery::Annotation(exported, apis::klutch::kSourceSpecHashAnnotation) != hash;
  }));
  EXPECT_EQ(exported["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"],
            "Widgets, v2.");
  EXPECT_EQ(exported["spec"]["permissionClaims"][0]["resource"], "secrets");  // kept
  ASSERT_TRUE(crds.Delete("widgets.example.com").ok());
  ASSERT_TRUE(AdvanceUntil(
      [&] { return !Exists(apis::klutch::kApiServiceExports, ns, "widgets.example.com"); }));
}

// ---- namespaces ----

TEST_F(BindControllersTest, ServiceNamespaceGetsAProviderNamespaceWithRbac) {
  const std::string ns = Consumer();
  Create(apis::klutch::kApiServiceNamespaces, {{"apiVersion", "klutch.anynines.com/v1alpha1"},
                                               {"kind", "APIServiceNamespace"},
                                               {"metadata", {{"name", "dev"}, {"namespace", ns}}},
                                               {"spec", Json::object()}});
  const std::string target = ns + "-dev";
  ASSERT_TRUE(AdvanceUntil([&] {
    return machinery::GetString(Get(apis::klutch::kApiServiceNamespaces, ns, "dev"),
                                {"status", "namespace"}) == target;
  }));
  Json provider_ns = Get(resources::kNamespaces, "", target);
  EXPECT_EQ(machinery::Annotation(provider_ns, apis::klutch::kApiServiceNamespaceAnnotation),
            ns + "/dev");
  Json rb = Get(resources::kRoleBindings, target, "klutch-binder");
  EXPECT_EQ(rb["roleRef"]["name"], "klutch-binder-" + ns);
  EXPECT_EQ(rb["subjects"][0]["namespace"], ns);

  ASSERT_TRUE(Resource(apis::klutch::kApiServiceNamespaces, ns).Delete("dev").ok());
  ASSERT_TRUE(AdvanceUntil([&] {
    Json gone = Get(resources::kNamespaces, "", target);
    return !gone.is_object() || machinery::IsBeingDeleted(gone);
  }));
}

TEST_F(BindControllersTest, ServiceNamespaceNeverTakesOverAForeignNamespace) {
  const std::string ns = Consumer();
  Create(resources::kNamespaces, Namespace(ns + "-prod"));
  Create(apis::klutch::kApiServiceNamespaces, {{"apiVersion", "klutch.anynines.com/v1alpha1"},
                                               {"kind", "APIServiceNamespace"},
                                               {"metadata", {{"name", "prod"}, {"namespace", ns}}},
                                               {"spec", Json::object()}});
  ASSERT_TRUE(AdvanceUntil([&] { return HasEvent(ns, "prod", "NamespaceConflict"); }));
  EXPECT_EQ(machinery::GetString(Get(apis::klutch::kApiServiceNamespaces, ns, "prod"),
                                 {"status", "namespace"}),
            "");
  EXPECT_FALSE(Exists(resources::kRoleBindings, ns + "-prod", "klutch-binder"));
}

// ---- ClusterBinding: health and RBAC ----

TEST_F(BindControllersTest, ClusterBindingHealthFollowsHeartbeatsAndTimesOutWithoutEvents) {
  const std::string ns = Consumer();
  Json cb;
  ASSERT_TRUE(AdvanceUntil([&] {
    cb = Get(apis::klutch::kClusterBindings, ns, "cluster");
    return Condition(cb, "Healthy", "reason") == "FirstHeartbeatPending";
  }));
  EXPECT_EQ(cb["spec"]["providerPrettyName"], "test-provider");
  Json beat = {
      {"status",
       {{"lastHeartbeatTime", core::FormatTime(clock_.Now())}, {"heartbeatInterval", "30s"}}}};
  ASSERT_TRUE(Resource(apis::klutch::kClusterBindings, ns)
                  .Patch("cluster", client::PatchType::kMerge, machinery::Dump(beat), {}, "status")
                  .ok());
  ASSERT_TRUE(AdvanceUntil([&] {
    cb = Get(apis::klutch::kClusterBindings, ns, "cluster");
    return Condition(cb, "Healthy") == "True";
  }));
  EXPECT_EQ(Condition(cb, "Ready"), "True");
  // No more heartbeats: the timed recheck notices after 2 intervals.
  ASSERT_TRUE(AdvanceUntil(
      [&] {
        cb = Get(apis::klutch::kClusterBindings, ns, "cluster");
        return Condition(cb, "Healthy", "reason") == "HeartbeatTimeout";
      },
      std::chrono::seconds(1)));
  EXPECT_EQ(Condition(cb, "Ready"), "False");
  ASSERT_TRUE(AdvanceUntil([&] { return HasEvent(ns, "cluster", "HeartbeatTimeout"); }));
}

TEST_F(BindControllersTest, BinderRbacIsExactAndNeverClusterWideInNamespacedScope) {
  OfferWidgets();
  const std::string ns = Consumer();
  Create(apis::klutch::kApiServiceExportRequests, Request(ns, "w", "example.com", "widgets"));
  Json role;
  ASSERT_TRUE(AdvanceUntil([&] {
    role = Get(resources::kClusterRoles, "", "klutch-binder-" + ns);
    return role.is_object() && role["rules"].size() == 3;
  }));
  const Json all = {"create", "delete", "get", "list", "patch", "update", "watch"};
  EXPECT_EQ(
      role["rules"],
      Json::array({{{"apiGroups", {""}}, {"resources", {"secrets"}}, {"verbs", all}},
                   {{"apiGroups", {"example.com"}}, {"resources", {"widgets"}}, {"verbs", all}},
                   {{"apiGroups", {"example.com"}},
                    {"resources", {"widgets/status"}},
                    {"verbs", {"get", "patch", "update"}}}}));
  EXPECT_EQ(role["metadata"]["ownerReferences"][0]["kind"], "Namespace");
  EXPECT_EQ(role["metadata"]["ownerReferences"][0]["name"], ns);
  Json rb = Get(resources::kRoleBindings, ns, "klutch-binder");
  EXPECT_EQ(rb["roleRef"]["name"], "klutch-binder");
  EXPECT_EQ(Get(resources::kClusterRoles, "", "klutch-binder")["rules"],
            BinderClusterRole()["rules"]);

  // Many reconciles later (each heartbeat queues one), still no cluster-wide binding and the
  // role is unchanged.
  const std::string rv = machinery::ResourceVersion(role);
  for (int i = 0; i < 6; ++i) {
    Json beat = {
        {"status",
         {{"lastHeartbeatTime", core::FormatTime(clock_.Now())}, {"heartbeatInterval", "30s"}}}};
    ASSERT_TRUE(
        Resource(apis::klutch::kClusterBindings, ns)
            .Patch("cluster", client::PatchType::kMerge, machinery::Dump(beat), {}, "status")
            .ok());
    ASSERT_TRUE(AdvanceAndSettle(std::chrono::seconds(5)));
    EXPECT_FALSE(Exists(resources::kClusterRoleBindings, "", "klutch-binder-" + ns)) << i;
  }
  EXPECT_EQ(machinery::ResourceVersion(Get(resources::kClusterRoles, "", "klutch-binder-" + ns)),
            rv);
}

class BindControllersClusterScopeTest : public BindControllersTest {
 protected:
  void SetUp() override { Start("cluster"); }
};

TEST_F(BindControllersClusterScopeTest, ClusterScopeBindsTheRoleClusterWide) {
  const std::string ns = Consumer();
  Json crb;
  ASSERT_TRUE(AdvanceUntil([&] {
    crb = Get(resources::kClusterRoleBindings, "", "klutch-binder-" + ns);
    return crb.is_object();
  }));
  EXPECT_EQ(crb["roleRef"]["name"], "klutch-binder-" + ns);
  EXPECT_EQ(crb["subjects"][0]["name"], "klutch-binder");
  EXPECT_EQ(crb["subjects"][0]["namespace"], ns);

  // Cluster-scoped CRDs are offered in Cluster scope, with the isolation setting.
  Json crd = Crd("example.com", "clusterwidgets", "ClusterWidget");
  crd["spec"]["scope"] = "Cluster";
  Create(resources::kCustomResourceDefinitions, crd);
  Create(apis::klutch::kApiServiceExportTemplates, Template("example.com", "clusterwidgets"));
  Create(apis::klutch::kApiServiceExportRequests,
         Request(ns, "cw", "example.com", "clusterwidgets"));
  Json exported;
  ASSERT_TRUE(AdvanceUntil([&] {
    exported = Get(apis::klutch::kApiServiceExports, ns, "clusterwidgets.example.com");
    return exported.is_object();
  }));
  EXPECT_EQ(exported["spec"]["informerScope"], "Cluster");
  EXPECT_EQ(exported["spec"]["clusterScopedIsolation"], "Prefixed");
}

// ---- provisioning and tokens ----

TEST_F(BindControllersTest, ProvisioningIsIdempotentPerIdentity) {
  auto first = ProvisionConsumer(cluster_->admin(), Provision(), "alice#c1", "https://idp");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto again = ProvisionConsumer(cluster_->admin(), Provision(), "alice#c1", "https://idp");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->cluster_namespace, again->cluster_namespace);
  auto other = ProvisionConsumer(cluster_->admin(), Provision(), "alice#c2", "https://idp");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->cluster_namespace, first->cluster_namespace);
  // A prefix of an identity is another identity.
  auto prefix = ProvisionConsumer(cluster_->admin(), Provision(), "alice#c", "https://idp");
  ASSERT_TRUE(prefix.ok());
  EXPECT_NE(prefix->cluster_namespace, first->cluster_namespace);
  EXPECT_TRUE(first->cluster_namespace.starts_with("cluster-"));

  Json ns = Get(resources::kNamespaces, "", first->cluster_namespace);
  EXPECT_EQ(machinery::Annotation(ns, apis::klutch::kIdentityAnnotation), "alice#c1");
  EXPECT_EQ(machinery::Annotation(ns, apis::klutch::kIssuerAnnotation), "https://idp");
  auto kubeconfig = machinery::ParseYaml(first->kubeconfig);
  ASSERT_TRUE(kubeconfig.ok());
  EXPECT_EQ((*kubeconfig)["contexts"][0]["context"]["namespace"], first->cluster_namespace);
  EXPECT_EQ((*kubeconfig)["current-context"], "default");
  EXPECT_EQ((*kubeconfig)["clusters"][0]["cluster"]["server"], cluster_->admin().config().server);
  EXPECT_EQ(SecretKubeconfig(first->cluster_namespace), again->kubeconfig);

  EXPECT_TRUE(core::IsInvalid(ProvisionConsumer(cluster_->admin(), Provision(), "", "").status()));
  ProvisionOptions http = Provision();
  http.external_address = "http://plain";
  EXPECT_TRUE(core::IsInvalid(ProvisionConsumer(cluster_->admin(), http, "bob#1", "").status()));
}

TEST_F(BindControllersTest, KubeconfigUsesTheExternalAddressCaAndServerName) {
  ProvisionOptions options = Provision();
  options.external_address = "https://bind.example:6443";
  options.external_ca_pem = "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n";
  options.external_server_name = "api.example";
  auto access = ProvisionConsumer(cluster_->admin(), options, "carol#1");
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  auto parsed = machinery::ParseYaml(access->kubeconfig);
  ASSERT_TRUE(parsed.ok());
  const Json& cluster = (*parsed)["clusters"][0]["cluster"];
  EXPECT_EQ(cluster["server"], "https://bind.example:6443");
  EXPECT_EQ(cluster["tls-server-name"], "api.example");
  EXPECT_EQ(core::Base64Decode(cluster["certificate-authority-data"].get<std::string>()),
            options.external_ca_pem);
}

TEST_F(BindControllersTest, TokenIsRenewedWhenHalfItsLifetimeIsGone) {
  const std::string ns = Consumer();
  const std::string first = TokenOf(SecretKubeconfig(ns));
  ASSERT_FALSE(first.empty());
  Json secret = Get(resources::kSecrets, ns, "kubeconfig");
  auto issued =
      core::ParseTime(machinery::Annotation(secret, apis::klutch::kTokenIssuedAnnotation));
  auto expires =
      core::ParseTime(machinery::Annotation(secret, apis::klutch::kTokenExpiresAnnotation));
  ASSERT_TRUE(issued && expires);
  EXPECT_EQ(*expires - *issued, std::chrono::hours(1));
  // The token works at once: the konnector can read its ClusterBinding with it.
  EXPECT_TRUE(ResourceClient(*cluster_->ClientWithToken(first), apis::klutch::kClusterBindings, ns)
                  .Get("cluster")
                  .ok());

  // (Two tokens issued within one wall-clock second may be equal: the issue time tells.)
  std::string renewed;
  ASSERT_TRUE(AdvanceUntil(
      [&] {
        Json now = Get(resources::kSecrets, ns, "kubeconfig");
        renewed = TokenOf(SecretKubeconfig(ns));
        return machinery::Annotation(now, apis::klutch::kTokenIssuedAnnotation) !=
               machinery::Annotation(secret, apis::klutch::kTokenIssuedAnnotation);
      },
      std::chrono::seconds(20)));
  EXPECT_FALSE(renewed.empty());
  // Renewed at half its lifetime, not before.
  Json renewed_secret = Get(resources::kSecrets, ns, "kubeconfig");
  auto reissued =
      core::ParseTime(machinery::Annotation(renewed_secret, apis::klutch::kTokenIssuedAnnotation));
  ASSERT_TRUE(reissued);
  EXPECT_GE(*reissued - *issued, std::chrono::minutes(30));
  EXPECT_LE(*reissued - *issued, std::chrono::minutes(31));
  EXPECT_GT(*core::ParseTime(
                machinery::Annotation(renewed_secret, apis::klutch::kTokenExpiresAnnotation)),
            *expires);
  EXPECT_TRUE(
      ResourceClient(*cluster_->ClientWithToken(renewed), apis::klutch::kClusterBindings, ns)
          .Get("cluster")
          .ok());
}

TEST_F(BindControllersTest, DeletedKubeconfigSecretIsRecreatedWithAFreshToken) {
  const std::string ns = Consumer();
  ASSERT_TRUE(Resource(resources::kSecrets, ns).Delete("kubeconfig").ok());
  // The next ClusterBinding event (here: a heartbeat) brings the refresh controller back.
  Json beat = {
      {"status",
       {{"lastHeartbeatTime", core::FormatTime(clock_.Now())}, {"heartbeatInterval", "30s"}}}};
  ASSERT_TRUE(Resource(apis::klutch::kClusterBindings, ns)
                  .Patch("cluster", client::PatchType::kMerge, machinery::Dump(beat), {}, "status")
                  .ok());
  ASSERT_TRUE(AdvanceUntil([&] { return !TokenOf(SecretKubeconfig(ns)).empty(); }));
}

TEST_F(BindControllersTest, ConcurrentFirstBindsOfOneIdentitySettleOnOneNamespace) {
  std::vector<std::string> namespaces(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < namespaces.size(); ++i) {
    threads.emplace_back([&, i] {
      auto access = ProvisionConsumer(cluster_->admin(), Provision(), "dave#same", "https://idp");
      if (access.ok()) namespaces[i] = access->cluster_namespace;
    });
  }
  for (auto& t : threads) t.join();
  // Every caller got the same namespace, the only one carrying the identity.
  auto list = Resource(resources::kNamespaces).List();
  ASSERT_TRUE(list.ok());
  std::set<std::string> kept;
  for (const Json& ns : (*list)["items"]) {
    if (machinery::Annotation(ns, apis::klutch::kIdentityAnnotation) == "dave#same") {
      kept.insert(machinery::Name(ns));
    }
  }
  ASSERT_EQ(kept.size(), 1u);
  for (const std::string& ns : namespaces) EXPECT_EQ(ns, *kept.begin());
}

// ---- isolation ----

TEST_F(BindControllersTest, OneConsumerReachesNothingOfAnother) {
  OfferWidgets();
  auto one = ProvisionConsumer(cluster_->admin(), Provision(), "alice#c1", "https://idp");
  auto two = ProvisionConsumer(cluster_->admin(), Provision(), "bob#c2", "https://idp");
  ASSERT_TRUE(one.ok() && two.ok());
  const std::string ns1 = one->cluster_namespace, ns2 = two->cluster_namespace;
  for (const std::string& ns : {ns1, ns2}) {
    Create(apis::klutch::kApiServiceExportRequests, Request(ns, "w", "example.com", "widgets"));
    Create(apis::klutch::kApiServiceNamespaces, {{"apiVersion", "klutch.anynines.com/v1alpha1"},
                                                 {"kind", "APIServiceNamespace"},
                                                 {"metadata", {{"name", "dev"}, {"namespace", ns}}},
                                                 {"spec", Json::object()}});
  }
  for (const std::string& ns : {ns1, ns2}) {
    ASSERT_TRUE(AdvanceUntil([&] {
      return Exists(resources::kRoleBindings, ns + "-dev", "klutch-binder") &&
             Get(resources::kClusterRoles, "", "klutch-binder-" + ns)["rules"].size() == 3;
    }));
  }
  Create(kWidgets, {{"apiVersion", "example.com/v1"},
                    {"kind", "Widget"},
                    {"metadata", {{"name", "db"}, {"namespace", ns2 + "-dev"}}}});
  Create(resources::kSecrets, {{"apiVersion", "v1"},
                               {"kind", "Secret"},
                               {"metadata", {{"name", "db-creds"}, {"namespace", ns2 + "-dev"}}},
                               {"stringData", {{"password", "x"}}}});
  Create(resources::kSecrets,
         {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", "broker"}, {"namespace", "crossplane-system"}}},
          {"stringData", {{"password", "x"}}}});

  auto consumer1 = cluster_->ClientWithToken(TokenOf(one->kubeconfig));
  auto forbidden = [&](const core::Status& s, const std::string& what) {
    EXPECT_EQ(s.reason(), core::Reason::kForbidden) << what << ": " << s.ToString();
  };
  // Its own things work.
  EXPECT_TRUE(ResourceClient(*consumer1, apis::klutch::kClusterBindings, ns1).Get("cluster").ok());
  EXPECT_TRUE(ResourceClient(*consumer1, resources::kSecrets, ns1).List().ok());
  EXPECT_TRUE(ResourceClient(*consumer1, kWidgets, ns1 + "-dev").List().ok());
  EXPECT_TRUE(ResourceClient(*consumer1, resources::kSecrets, ns1 + "-dev").List().ok());
  // The other's do not.
  forbidden(ResourceClient(*consumer1, apis::klutch::kClusterBindings, ns2).Get("cluster").status(),
            "other ClusterBinding");
  forbidden(ResourceClient(*consumer1, resources::kSecrets, ns2).Get("kubeconfig").status(),
            "other kubeconfig Secret");
  forbidden(ResourceClient(*consumer1, resources::kSecrets, ns2).List().status(), "other Secrets");
  forbidden(ResourceClient(*consumer1, apis::klutch::kApiServiceExportRequests, ns2)
                .Create(Request(ns2, "evil", "example.com", "widgets"))
                .status(),
            "request in the other namespace");
  forbidden(ResourceClient(*consumer1, kWidgets, ns2 + "-dev").Get("db").status(), "other claim");
  forbidden(ResourceClient(*consumer1, kWidgets, ns2 + "-dev")
                .Create({{"apiVersion", "example.com/v1"},
                         {"kind", "Widget"},
                         {"metadata", {{"name", "evil"}, {"namespace", ns2 + "-dev"}}}})
                .status(),
            "claim in the other provider namespace");
  forbidden(ResourceClient(*consumer1, resources::kSecrets, ns2 + "-dev").Get("db-creds").status(),
            "other credentials");
  forbidden(ResourceClient(*consumer1, resources::kSecrets, "crossplane-system").List().status(),
            "provider Secrets");
  forbidden(ResourceClient(*consumer1, kWidgets).List().status(), "claims cluster-wide");
  forbidden(ResourceClient(*consumer1, resources::kNamespaces).List().status(), "namespaces");
  // Its own status subresource is writable only through status, not the provider's objects.
  forbidden(ResourceClient(*consumer1, apis::klutch::kApiServiceNamespaces, ns1)
                .Patch("dev", client::PatchType::kMerge,
                       R"({"status":{"namespace":"crossplane-system"}})", {}, "status")
                .status(),
            "ASN status");
}

// ---- the upstream example templates apply unchanged ----

TEST_F(BindControllersTest, UpstreamExampleTemplatesApplyUnchanged) {
  const fs::path dir = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/bind/deploy/resources";
  int applied = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (!file.ends_with("_apiserviceexporttemplate.yaml")) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    auto object = machinery::ParseYaml(text.str());
    ASSERT_TRUE(object.ok()) << file;
    auto created = Resource(apis::klutch::kApiServiceExportTemplates, machinery::Namespace(*object))
                       .Create(*object);
    EXPECT_TRUE(created.ok()) << file << ": " << created.status().ToString();
    ++applied;
  }
  EXPECT_GE(applied, 5);
  // And our own templates too.
  const fs::path ours = fs::path(KLUTCH_SOURCE_DIR) / "deploy/backend/templates";
  if (fs::exists(ours)) {
    for (const auto& entry : fs::directory_iterator(ours)) {
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      auto object = machinery::ParseYaml(text.str());
      ASSERT_TRUE(object.ok()) << entry.path();
      (*object)["metadata"]["name"] = "ours-" + machinery::Name(*object);
      auto created =
          Resource(apis::klutch::kApiServiceExportTemplates, machinery::Namespace(*object))
              .Create(*object);
      EXPECT_TRUE(created.ok()) << entry.path() << ": " << created.status().ToString();
    }
  }
}

// ---- the catalog ----

TEST_F(BindControllersTest, CatalogListsOfferedApisWithDescriptionPlansAndClaims) {
  Json crd = Crd("example.com", "widgets", "Widget");
  Json& schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
  schema["description"] = "Widgets for everyone.";
  schema["properties"] = {
      {"spec",
       {{"type", "object"},
        {"properties", {{"plan", {{"type", "string"}, {"enum", {"small", "large"}}}}}}}}};
  Create(resources::kCustomResourceDefinitions, crd);
  Json cluster_crd = Crd("example.com", "clusterwidgets", "ClusterWidget");
  cluster_crd["spec"]["scope"] = "Cluster";
  Create(resources::kCustomResourceDefinitions, cluster_crd);
  Create(apis::klutch::kApiServiceExportTemplates,
         Template("example.com", "widgets", Json::array({SecretClaim()})));
  Create(apis::klutch::kApiServiceExportTemplates, Template("example.com", "clusterwidgets"));
  Create(apis::klutch::kApiServiceExportTemplates, Template("example.com", "nothere"));

  auto namespaced = ListOfferedApis(cluster_->admin(), "Namespaced");
  ASSERT_TRUE(namespaced.ok()) << namespaced.status().ToString();
  ASSERT_EQ(namespaced->size(), 1u);
  const OfferedApi& api = namespaced->front();
  EXPECT_EQ(api.resource, "widgets");
  EXPECT_EQ(api.kind, "Widget");
  EXPECT_EQ(api.scope, "Namespaced");
  EXPECT_EQ(api.description, "Widgets for everyone.");
  EXPECT_EQ(api.plans, (std::vector<std::string>{"small", "large"}));
  EXPECT_EQ(api.versions, (std::vector<std::string>{"v1"}));
  EXPECT_EQ(api.permission_claims.size(), 1u);
  EXPECT_EQ(api.template_namespace, "crossplane-system");
  auto cluster = ListOfferedApis(cluster_->admin(), "Cluster");
  ASSERT_TRUE(cluster.ok());
  ASSERT_EQ(cluster->size(), 2u);
  EXPECT_EQ((*cluster)[0].resource, "clusterwidgets");  // sorted by CRD name

  EXPECT_TRUE(FindOfferedApi(cluster_->admin(), "Namespaced", "example.com", "widgets").ok());
  auto missing = FindOfferedApi(cluster_->admin(), "Namespaced", "example.com", "clusterwidgets");
  EXPECT_TRUE(core::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("clusterwidgets.example.com"), std::string::npos);
}

// ---- control-plane mode ----

class AppClusterBindingTest : public BindControllersTest {
 protected:
  void SetUp() override { Start("Namespaced", /*control_plane_mode=*/true); }

  void Platform() {
    Create(resources::kNamespaces, Namespace("platform"));
    const std::string kubeconfig = serving::KubeconfigYaml(
        {.name = "app", .server = "https://127.0.0.1:1", .ca_pem = "", .token = "app-token"});
    Create(resources::kSecrets,
           {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", "app1-kubeconfig"}, {"namespace", "platform"}}},
            {"data", {{"kubeconfig", core::Base64Encode(kubeconfig)}}}});
  }

  static Json Binding(const std::string& name, const std::string& secret) {
    return {{"apiVersion", "klutch.anynines.com/v1alpha1"},
            {"kind", "AppClusterBinding"},
            {"metadata", {{"name", name}, {"namespace", "platform"}}},
            {"spec",
             {{"kubeconfigSecretRef",
               {{"name", secret}, {"namespace", "platform"}, {"key", "kubeconfig"}}},
              {"apiExports", Json::array({{{"group", "example.com"}, {"resource", "widgets"}}})},
              {"konnector",
               {{"deploy", true},
                {"overrides",
                 {{"image", "custom/konnector:v2"},
                  {"env", Json::array({{{"name", "EXTRA"}, {"value", "1"}}})},
                  {"tty", false}}}}}}}};
  }
};

TEST_F(AppClusterBindingTest, CreatesTheRootNamespaceAndEverythingInItThenCleansUp) {
  OfferWidgets();
  Platform();
  Create(apis::klutch::kAppClusterBindings, Binding("app1", "app1-kubeconfig"));
  const std::string root = "klutch-bind-platform-app1";
  Json acb;
  ASSERT_TRUE(AdvanceUntil([&] {
    acb = Get(apis::klutch::kAppClusterBindings, "platform", "app1");
    return Condition(acb, "Ready") == "True";
  })) << acb.dump(1);
  EXPECT_EQ(Condition(acb, "SecretValid"), "True");
  EXPECT_EQ(Condition(acb, "KonnectorDeployed"), "True");
  EXPECT_TRUE(machinery::HasFinalizer(acb, apis::klutch::kAppClusterBindingFinalizer));

  Json ns = Get(resources::kNamespaces, "", root);
  EXPECT_EQ(ns["metadata"]["labels"][std::string(apis::klutch::kAppClusterBindingNameLabel)],
            "app1");
  EXPECT_EQ(ns["metadata"]["labels"][std::string(apis::klutch::kAppClusterBindingNamespaceLabel)],
            "platform");
  EXPECT_TRUE(Exists(resources::kServiceAccounts, root, "klutch-binder"));
  Json mirrored = Get(resources::kSecrets, root, "app1-kubeconfig");
  EXPECT_EQ(mirrored["data"], Get(resources::kSecrets, "platform", "app1-kubeconfig")["data"]);
  Json cb = Get(apis::klutch::kClusterBindings, root, "cluster");
  EXPECT_EQ(cb["spec"]["providerPrettyName"], "app1");
  EXPECT_EQ(cb["spec"]["kubeconfigSecretRef"]["name"], "app1-kubeconfig");
  EXPECT_TRUE(Exists(resources::kRoles, root, "control-plane-connector"));
  EXPECT_EQ(Get(resources::kRoleBindings, root, "control-plane-connector")["subjects"][0]["name"],
            "klutch-binder");
  Json binding = Get(apis::klutch::kApiServiceBindings, root, "widgets.example.com");
  EXPECT_EQ(binding["spec"]["kubeconfigSecretRef"]["namespace"], root);
  EXPECT_EQ(binding["spec"]["permissionClaims"][0]["state"], "Accepted");
  ASSERT_TRUE(AdvanceUntil(
      [&] { return Exists(apis::klutch::kApiServiceExports, root, "widgets.example.com"); }));

  Json deployment = Get(resources::kDeployments, root, "konnector-app1");
  const Json& container = deployment["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(container["image"], "custom/konnector:v2");
  EXPECT_EQ(container["command"], Json::array({"klutch", "konnector"}));
  const Json args = container["args"];
  for (const std::string& want : std::vector<std::string>{
           "--control-plane-mode", "--app-cluster-kubeconfig-secret-name=app1-kubeconfig",
           "--app-cluster-kubeconfig-secret-namespace=" + root,
           "--app-cluster-kubeconfig-secret-key=kubeconfig", "--binding-root-namespace=" + root}) {
    EXPECT_NE(std::find(args.begin(), args.end(), Json(want)), args.end()) << want;
  }
  std::set<std::string> env;
  for (const Json& e : container["env"]) env.insert(e["name"].get<std::string>());
  EXPECT_EQ(env, (std::set<std::string>{"EXTRA", "POD_NAME", "POD_NAMESPACE"}));
  EXPECT_FALSE(container.contains("tty"));  // empty overrides are dropped
  EXPECT_EQ(deployment["spec"]["template"]["spec"]["serviceAccountName"], "klutch-binder");
  // The App Cluster's kubeconfig is never replaced by a token of ours.
  ASSERT_TRUE(AdvanceAndSettle(std::chrono::seconds(5)));
  EXPECT_EQ(Get(resources::kSecrets, root, "app1-kubeconfig")["data"], mirrored["data"]);

  ASSERT_TRUE(Resource(apis::klutch::kAppClusterBindings, "platform").Delete("app1").ok());
  ASSERT_TRUE(
      AdvanceUntil([&] { return !Exists(apis::klutch::kAppClusterBindings, "platform", "app1"); },
                   std::chrono::milliseconds(500)));
  EXPECT_FALSE(Exists(apis::klutch::kApiServiceBindings, root, "widgets.example.com"));
  EXPECT_FALSE(Exists(resources::kNamespaces, "", root));
}

TEST_F(AppClusterBindingTest, RemovingAnApiDeletesItsBindingAndExport) {
  OfferWidgets();
  Platform();
  Json acb = Binding("app2", "app1-kubeconfig");
  acb["spec"]["konnector"]["deploy"] = false;
  Create(apis::klutch::kAppClusterBindings, acb);
  const std::string root = "klutch-bind-platform-app2";
  ASSERT_TRUE(AdvanceUntil(
      [&] { return Exists(apis::klutch::kApiServiceExports, root, "widgets.example.com"); }));
  EXPECT_FALSE(Exists(resources::kDeployments, root, "konnector-app2"));
  // A merge patch, not Get + Update: the controller may still be writing the binding (its
  // finalizer, its status), and a PUT with the resourceVersion read before would conflict.
  auto set_exports = [&](const Json& exports) {
    return Resource(apis::klutch::kAppClusterBindings, "platform")
        .Patch("app2", client::PatchType::kMerge,
               machinery::Dump(Json{{"spec", {{"apiExports", exports}}}}))
        .ok();
  };
  ASSERT_TRUE(set_exports(Json::array()));
  ASSERT_TRUE(AdvanceUntil([&] {
    return !Exists(apis::klutch::kApiServiceExports, root, "widgets.example.com") &&
           !Exists(apis::klutch::kApiServiceBindings, root, "widgets.example.com");
  }));
  // An API no template offers is reported.
  ASSERT_TRUE(set_exports(Json::array({{{"group", "example.com"}, {"resource", "nothing"}}})));
  ASSERT_TRUE(AdvanceUntil([&] {
    Json now = Get(apis::klutch::kAppClusterBindings, "platform", "app2");
    return Condition(now, "ResourcesReady", "reason") == "ProvisioningFailed" &&
           Condition(now, "ResourcesReady", "message").find("nothing.example.com") !=
               std::string::npos;
  }));
}

TEST_F(AppClusterBindingTest, MissingOrUnsafeKubeconfigIsReported) {
  Platform();
  Create(apis::klutch::kAppClusterBindings, Binding("nosecret", "missing"));
  ASSERT_TRUE(AdvanceUntil([&] {
    return Condition(Get(apis::klutch::kAppClusterBindings, "platform", "nosecret"), "SecretValid",
                     "reason") == "KubeconfigSecretNotFound";
  }));
  EXPECT_TRUE(
      AdvanceUntil([&] { return HasEvent("platform", "nosecret", "KubeconfigSecretNotFound"); }));
  EXPECT_FALSE(Exists(resources::kNamespaces, "", "klutch-bind-platform-nosecret"));

  const std::string exec_config =
      "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://x\n"
      "users:\n- name: u\n  user:\n    tokenFile: /etc/passwd\ncontexts:\n- name: c\n"
      "  context:\n    cluster: c\n    user: u\ncurrent-context: c\n";
  Create(resources::kSecrets, {{"apiVersion", "v1"},
                               {"kind", "Secret"},
                               {"metadata", {{"name", "unsafe"}, {"namespace", "platform"}}},
                               {"data", {{"kubeconfig", core::Base64Encode(exec_config)}}}});
  Create(apis::klutch::kAppClusterBindings, Binding("unsafe", "unsafe"));
  Json acb;
  ASSERT_TRUE(AdvanceUntil([&] {
    acb = Get(apis::klutch::kAppClusterBindings, "platform", "unsafe");
    return Condition(acb, "SecretValid", "reason") == "KubeconfigSecretInvalid";
  }));
  EXPECT_NE(Condition(acb, "SecretValid", "message").find("files"), std::string::npos);
  EXPECT_EQ(Condition(acb, "Ready"), "False");
}

// ---- limits per consumer: clusters per user, unconnected spaces, object quotas ----

class ConsumerLimitsTest : public BindControllersTest {
 protected:
  void SetUp() override {
    Start("Namespaced", false, [](BackendControllersOptions& o) {
      o.unconnected_cluster_grace = std::chrono::hours(1);
      o.consumer_quota = {{"claims", 7},
                          {"secrets", 20},
                          {"configmaps", 10},
                          {"apiservicenamespaces.klutch.anynines.com", 5}};
    });
  }

  void Heartbeat(const std::string& ns) {
    Json beat = {
        {"status",
         {{"lastHeartbeatTime", core::FormatTime(clock_.Now())}, {"heartbeatInterval", "30s"}}}};
    ASSERT_TRUE(
        Resource(apis::klutch::kClusterBindings, ns)
            .Patch("cluster", client::PatchType::kMerge, machinery::Dump(beat), {}, "status")
            .ok());
  }

  bool Live(const std::string& ns) {
    Json o = Get(resources::kNamespaces, "", ns);
    return o.is_object() && !machinery::IsBeingDeleted(o);
  }

  Json Hard(const std::string& ns) {
    Json quota = Get(kResourceQuotas, ns, "klutch-consumer");
    const Json* hard = machinery::Find(quota, {"spec", "hard"});
    return hard ? *hard : Json();
  }
};

TEST_F(ConsumerLimitsTest, ClustersPerUserAreLimitedAndRebindingIsNot) {
  ProvisionOptions limited = Provision();
  limited.max_clusters_per_user = 2;
  auto bind = [&](const std::string& identity, const std::string& issuer = "https://idp") {
    return ProvisionConsumer(cluster_->admin(), limited, identity, issuer);
  };
  auto c1 = bind("alice#c1");
  ASSERT_TRUE(c1.ok()) << c1.status().ToString();
  ASSERT_TRUE(bind("alice#c2").ok());
  auto third = bind("alice#c3");
  ASSERT_FALSE(third.ok());
  EXPECT_TRUE(IsClusterLimitReached(third.status())) << third.status().ToString();
  EXPECT_EQ(third.status().code(), 403);
  const std::string message = third.status().message();
  EXPECT_NE(message.find("2 clusters"), std::string::npos) << message;
  EXPECT_NE(message.find("c1 (namespace " + c1->cluster_namespace + ")"), std::string::npos)
      << message;
  EXPECT_NE(message.find("c2 (namespace "), std::string::npos) << message;
  // Binding a cluster that has its namespace again is no new cluster.
  auto again = bind("alice#c1");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->cluster_namespace, c1->cluster_namespace);
  // Nothing was made for the refused cluster.
  auto list = Resource(resources::kNamespaces).List();
  ASSERT_TRUE(list.ok());
  for (const Json& ns : (*list)["items"]) {
    EXPECT_NE(machinery::Annotation(ns, apis::klutch::kIdentityAnnotation), "alice#c3");
  }
  // Other users, and the same subject at another issuer, have limits of their own.
  EXPECT_TRUE(bind("bob#c1").ok());
  EXPECT_TRUE(bind("alice#c9", "https://other-idp").ok());
  EXPECT_TRUE(IsClusterLimitReached(bind("alice#c4").status()));
  // Once a cluster is gone there is room again.
  ASSERT_TRUE(Resource(resources::kNamespaces).Delete(c1->cluster_namespace).ok());
  auto after = bind("alice#c4");
  EXPECT_TRUE(after.ok()) << after.status().ToString();
  // 0: no limit.
  limited.max_clusters_per_user = 0;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(bind("carol#x" + std::to_string(i)).ok());
}

TEST_F(ConsumerLimitsTest, ConcurrentNewClustersOfOneUserNeverExceedTheLimit) {
  ProvisionOptions limited = Provision();
  limited.max_clusters_per_user = 2;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0}, refused{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      auto r = ProvisionConsumer(cluster_->admin(), limited, "erin#t" + std::to_string(i),
                                 "https://idp");
      if (r.ok()) {
        ++ok;
      } else if (IsClusterLimitReached(r.status())) {
        ++refused;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok + refused, 6);
  EXPECT_LE(ok.load(), 2);
  auto list = Resource(resources::kNamespaces).List();
  ASSERT_TRUE(list.ok());
  int live = 0;
  for (const Json& ns : (*list)["items"]) {
    if (machinery::Annotation(ns, apis::klutch::kIdentityAnnotation).starts_with("erin#") &&
        !machinery::IsBeingDeleted(ns)) {
      ++live;
    }
  }
  EXPECT_EQ(live, ok.load());
}

TEST_F(ConsumerLimitsTest, SpacesNoKonnectorConnectedToAreCollectedAfterTheGracePeriod) {
  const std::string never = Consumer("alice#never");
  const std::string connected = Consumer("bob#connected");
  const std::string rebound = Consumer("carol#rebound");
  Heartbeat(connected);
  // Its RBAC exists before it is collected.
  ASSERT_TRUE(AdvanceUntil([&] {
    return Exists(resources::kClusterRoles, "", apis::klutch::BinderRoleName(never)) &&
           Exists(resources::kRoleBindings, never, "klutch-binder");
  }));

  ASSERT_TRUE(AdvanceAndSettle(std::chrono::minutes(40)));
  // carol binds her cluster again: her grace period starts anew.
  ASSERT_TRUE(
      ProvisionConsumer(cluster_->admin(), Provision(), "carol#rebound", "https://idp").ok());
  ASSERT_TRUE(AdvanceAndSettle(std::chrono::minutes(19)));
  EXPECT_TRUE(Live(never)) << "collected before the grace period ended";

  ASSERT_TRUE(AdvanceUntil([&] { return !Live(never); }, std::chrono::seconds(30)));
  EXPECT_FALSE(Exists(resources::kClusterRoles, "", apis::klutch::BinderRoleName(never)));
  EXPECT_TRUE(Live(rebound)) << "collected only an hour after its last bind";
  EXPECT_TRUE(Live(connected));

  ASSERT_TRUE(AdvanceUntil([&] { return !Live(rebound); }, std::chrono::seconds(30)));
  // A space whose konnector connected once stays, whatever its health.
  ASSERT_TRUE(AdvanceAndSettle(std::chrono::hours(5)));
  EXPECT_TRUE(Live(connected));
  EXPECT_TRUE(Exists(apis::klutch::kClusterBindings, connected, "cluster"));
  EXPECT_TRUE(Exists(resources::kSecrets, connected, "kubeconfig"));
  // Namespaces not made by /bind are never touched.
  EXPECT_TRUE(Live("crossplane-system"));
}

TEST_F(ConsumerLimitsTest, ConsumerNamespacesKeepTheirObjectCountQuota) {
  OfferWidgets();
  const std::string ns = Consumer();
  Json hard;
  ASSERT_TRUE(AdvanceUntil([&] {
    hard = Hard(ns);
    return hard.is_object() && hard.contains("count/secrets");
  }));
  EXPECT_EQ(hard["count/secrets"], "20");
  EXPECT_EQ(hard["count/configmaps"], "10");
  EXPECT_EQ(hard["count/apiservicenamespaces.klutch.anynines.com"], "5");
  EXPECT_FALSE(hard.contains("count/claims"));
  Json quota = Get(kResourceQuotas, ns, "klutch-consumer");
  EXPECT_EQ(machinery::GetString(quota, {"metadata", "labels", std::string(kConsumerQuotaLabel)}),
            "true");

  // A bound API adds its kind, here and in the provider namespaces.
  Create(apis::klutch::kApiServiceExportRequests,
         Request(ns, "widgets.example.com", "example.com", "widgets"));
  ASSERT_TRUE(AdvanceUntil([&] { return Hard(ns).contains("count/widgets.example.com"); }));
  EXPECT_EQ(Hard(ns)["count/widgets.example.com"], "7");
  Create(apis::klutch::kApiServiceNamespaces, {{"apiVersion", "klutch.anynines.com/v1alpha1"},
                                               {"kind", "APIServiceNamespace"},
                                               {"metadata", {{"name", "dev"}, {"namespace", ns}}},
                                               {"spec", Json::object()}});
  const std::string provider = ns + "-dev";
  ASSERT_TRUE(AdvanceUntil([&] {
    Json h = Hard(provider);
    return h.is_object() && h.contains("count/widgets.example.com");
  }));
  EXPECT_EQ(Hard(provider), Hard(ns));

  // The API server holds the consumer to it: the 8th widget is refused.
  for (int i = 0; i < 7; ++i) {
    Create(kWidgets, {{"apiVersion", "example.com/v1"},
                      {"kind", "Widget"},
                      {"metadata", {{"name", "w" + std::to_string(i)}, {"namespace", provider}}}});
  }
  auto eighth = Resource(kWidgets, provider)
                    .Create({{"apiVersion", "example.com/v1"},
                             {"kind", "Widget"},
                             {"metadata", {{"name", "w7"}, {"namespace", provider}}}});
  ASSERT_FALSE(eighth.ok());
  EXPECT_EQ(eighth.status().code(), 403) << eighth.status().ToString();

  // Deleted or altered: put back.
  ASSERT_TRUE(Resource(kResourceQuotas, provider).Delete("klutch-consumer").ok());
  ASSERT_TRUE(AdvanceUntil([&] { return Hard(provider) == Hard(ns); }));
  ASSERT_TRUE(Resource(kResourceQuotas, ns)
                  .Patch("klutch-consumer", client::PatchType::kMerge,
                         machinery::Dump({{"spec", {{"hard", {{"count/secrets", "100000"}}}}}}))
                  .ok());
  ASSERT_TRUE(AdvanceUntil([&] { return Hard(ns)["count/secrets"] == "20"; }));
  // Other namespaces get none.
  EXPECT_FALSE(Exists(kResourceQuotas, "crossplane-system", "klutch-consumer"));
}

// The backend with exactly the rights deploy/backend/rbac.yaml grants it: the limits need no
// more (users' namespaces counted, quotas written and put back, unconnected spaces deleted).
class BackendRbacTest : public BindControllersTest {
 protected:
  void SetUp() override {
    StartCluster();
    ASSERT_TRUE(InstallProviderCrds(cluster_->admin(), false, std::chrono::seconds(30)).ok());
    const std::string text =
        klutch::testing::ReadFileOrEmpty(fs::path(KLUTCH_SOURCE_DIR) / "deploy/backend/rbac.yaml");
    bool applied = false;
    for (const std::string& doc : klutch::testing::SplitYamlDocuments(text)) {
      auto object = machinery::ParseYaml(doc);
      ASSERT_TRUE(object.ok()) << doc;
      if ((*object)["kind"] == "ClusterRole" && machinery::Name(*object) == "klutch-backend") {
        Create(resources::kClusterRoles, *object);
        applied = true;
      }
    }
    ASSERT_TRUE(applied) << "no ClusterRole klutch-backend in deploy/backend/rbac.yaml";
    Create(resources::kClusterRoleBindings,
           {{"apiVersion", "rbac.authorization.k8s.io/v1"},
            {"kind", "ClusterRoleBinding"},
            {"metadata", {{"name", "klutch-backend"}}},
            {"subjects", Json::array({{{"kind", "User"},
                                       {"apiGroup", "rbac.authorization.k8s.io"},
                                       {"name", "klutch-backend-test"}}})},
            {"roleRef",
             {{"apiGroup", "rbac.authorization.k8s.io"},
              {"kind", "ClusterRole"},
              {"name", "klutch-backend"}}}});
    backend_ = cluster_->ClientFor("klutch-backend-test");
    manager_ = std::make_unique<reconcile::Manager>(
        *backend_, reconcile::ManagerOptions{.name = "klutch-backend", .clock = &clock_});
    options_ = {.provision = Provision(),
                .unconnected_cluster_grace = std::chrono::hours(1),
                .consumer_quota = {{"claims", 5}, {"secrets", 20}},
                .clock = &clock_};
    controllers_ = std::make_unique<BackendControllers>(*manager_, options_);
    ASSERT_TRUE(controllers_->Setup().ok());
    ASSERT_TRUE(manager_->Start().ok());
  }
  void TearDown() override {
    BindControllersTest::TearDown();
    controllers_.reset();
    manager_.reset();
  }

  std::unique_ptr<client::RestClient> backend_;
};

TEST_F(BackendRbacTest, DeployRbacAllowsTheConsumerLimits) {
  ProvisionOptions limited = Provision();
  limited.max_clusters_per_user = 1;
  auto access = ProvisionConsumer(*backend_, limited, "alice#c1", "https://idp");
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  auto refused = ProvisionConsumer(*backend_, limited, "alice#c2", "https://idp");
  EXPECT_TRUE(IsClusterLimitReached(refused.status())) << refused.status().ToString();
  const std::string ns = access->cluster_namespace;
  ASSERT_TRUE(AdvanceUntil([&] { return Exists(kResourceQuotas, ns, "klutch-consumer"); }));
  ASSERT_TRUE(Resource(kResourceQuotas, ns).Delete("klutch-consumer").ok());
  ASSERT_TRUE(AdvanceUntil([&] { return Exists(kResourceQuotas, ns, "klutch-consumer"); }));
  ASSERT_TRUE(AdvanceAndSettle(std::chrono::minutes(59)));
  ASSERT_TRUE(AdvanceUntil(
      [&] {
        Json o = Get(resources::kNamespaces, "", ns);
        return (!o.is_object() || machinery::IsBeingDeleted(o)) &&
               !Exists(resources::kClusterRoles, "", apis::klutch::BinderRoleName(ns));
      },
      std::chrono::seconds(30)));
}

TEST(ConsumerQuota, ParsesTheFlagAndMakesTheHardCounts) {
  auto parsed = ParseConsumerQuota(kDefaultConsumerQuota);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->at("claims"), 50);
  EXPECT_EQ(parsed->at("secrets"), 200);
  auto spaced = ParseConsumerQuota(" count/secrets=3 , widgets.example.com=0,");
  ASSERT_TRUE(spaced.ok()) << spaced.status().ToString();
  EXPECT_EQ(*spaced, (std::map<std::string, int64_t>{{"secrets", 3}, {"widgets.example.com", 0}}));
  ASSERT_TRUE(ParseConsumerQuota("").ok());
  EXPECT_TRUE(ParseConsumerQuota("")->empty());
  for (std::string bad : {"secrets", "secrets=", "secrets=-1", "=4", "Secrets=1", "secrets=1x"}) {
    auto r = ParseConsumerQuota(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(core::IsInvalid(r.status()));
    EXPECT_NE(r.status().message().find("<resource>=<count>"), std::string::npos);
  }

  auto widgets = std::make_shared<const Json>(
      Json{{"spec", {{"group", "example.com"}, {"names", {{"plural", "widgets"}}}}}});
  auto gadgets = std::make_shared<const Json>(
      Json{{"spec", {{"group", "example.com"}, {"names", {{"plural", "gadgets"}}}}}});
  Json hard =
      QuotaHard({{"claims", 4}, {"gadgets.example.com", 1}, {"secrets", 9}}, {widgets, gadgets});
  EXPECT_EQ(hard, (Json{{"count/gadgets.example.com", "1"},
                        {"count/secrets", "9"},
                        {"count/widgets.example.com", "4"}}));
  EXPECT_EQ(QuotaHard({}, {widgets}), Json::object());
}

}  // namespace
}  // namespace klutch::bind
