// The konnector on two in-process clusters, a Control Plane set up as the bind backend does
// (test/support/bind_provider.h) and an App Cluster, with simulated time: bindings connect,
// CRDs appear, claims sync both ways, claimed Secrets follow their owner, deletions
// propagate, bad bindings say what is wrong without disturbing good ones.
#include "konnector/konnector.h"

#include <gtest/gtest.h>

#include <thread>

#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "client/transport.h"
#include "core/file.h"
#include "core/strings.h"
#include "core/sync.h"
#include "reconcile/conditions.h"
#include "reconcile/manager.h"
#include "serving/kubeconfig.h"
#include "test/support/bind_provider.h"
#include "test/support/test_cluster.h"
#include "test/support/wait.h"

namespace klutch::konnector::konnector_test {
namespace {

using client::Json;
using client::ResourceClient;
using testing::Eventually;
namespace bind = testing::bind;

const client::GroupVersionResource kInstances{"anynines.com", "v1", "postgresqlinstances"};
constexpr const char* kBindingName = "postgresqlinstances.anynines.com";

Json InstanceCrd(const std::string& plural = "postgresqlinstances",
                 const std::string& kind = "PostgresqlInstance") {
  Json schema = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", plural + ".anynines.com"}}},
          {"spec",
           {{"group", "anynines.com"},
            {"scope", "Namespaced"},
            {"names", {{"plural", plural}, {"kind", kind}, {"listKind", kind + "List"}}},
            {"versions", Json::array({{{"name", "v1"},
                                       {"served", true},
                                       {"storage", true},
                                       {"subresources", {{"status", Json::object()}}},
                                       {"schema", {{"openAPIV3Schema", schema}}}}})}}}};
}

Json Instance(const std::string& ns, const std::string& name, const std::string& version) {
  return {{"apiVersion", "anynines.com/v1"},
          {"kind", "PostgresqlInstance"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"version", version}}}};
}

// Holds the lists of one resource path on the konnector's provider connections: a test makes
// "the provider cache has not listed yet" last as long as it needs.
class ListGate {
 public:
  // Lists (not watches) whose target starts with `path` wait until Release().
  void Hold(const std::string& path) {
    core::MutexLock lock(mu_);
    held_path_ = path;
  }
  void Release() {
    core::MutexLock lock(mu_);
    held_path_.clear();
    cv_.SignalAll();
  }
  // How many lists were held so far.
  int held() const {
    core::MutexLock lock(mu_);
    return held_;
  }
  void Pass(const client::TransportRequest& r) {
    core::MutexLock lock(mu_);
    if (!Holds(r)) return;
    ++held_;
    while (Holds(r)) cv_.Wait(mu_);
  }

 private:
  bool Holds(const client::TransportRequest& r) const REQUIRES(mu_) {
    return !held_path_.empty() && r.method == "GET" && r.target.starts_with(held_path_) &&
           r.target.find("watch=") == std::string::npos;
  }

  mutable core::Mutex mu_;
  core::CondVar cv_;
  std::string held_path_ GUARDED_BY(mu_);
  int held_ GUARDED_BY(mu_) = 0;
};

class GatedTransport final : public client::Transport {
 public:
  GatedTransport(std::shared_ptr<client::Transport> inner, ListGate& gate)
      : inner_(std::move(inner)), gate_(gate) {}

  core::Result<http::ClientResponse> Do(const client::TransportRequest& request) override {
    gate_.Pass(request);
    return inner_->Do(request);
  }
  core::Result<http::ClientResponse> Stream(const client::TransportRequest& request,
                                            const std::function<bool(std::string_view)>& on_data,
                                            client::StreamCanceller* canceller) override {
    return inner_->Stream(request, on_data, canceller);
  }

 private:
  std::shared_ptr<client::Transport> inner_;
  ListGate& gate_;
};

class KonnectorTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(false); }

  void Start(bool control_plane_mode) {
    auto cp = testing::TestCluster::Start({.clock = &clock_});
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    cp_ = std::move(*cp);
    auto app = testing::TestCluster::Start({.clock = &clock_});
    ASSERT_TRUE(app.ok()) << app.status().ToString();
    app_ = std::move(*app);

    ASSERT_TRUE(bind::InstallBindCrds(cp_->admin(), control_plane_mode).ok());
    auto provider = bind::SetupProvider(cp_->admin());
    ASSERT_TRUE(provider.ok()) << provider.status().ToString();
    provider_ = *provider;
    ASSERT_TRUE(ResourceClient(cp_->admin(), client::resources::kCustomResourceDefinitions)
                    .Create(InstanceCrd())
                    .ok());
    ASSERT_TRUE(bind::WaitForCrdEstablished(cp_->admin(), kBindingName).ok());
    Json claims = Json::array({bind::PermissionClaim("secrets", "Provider"),
                               bind::PermissionClaim("secrets", "Consumer")});
    ASSERT_TRUE(
        bind::CreateExport(cp_->admin(), ns(), bind::ExportFromCrd(InstanceCrd(), claims)).ok());
    mapper_ = std::make_unique<bind::NamespaceMapper>(cp_->admin(), ns());
    mapper_->Start();

    for (const char* n : {"dev"}) {
      CreateApp(client::resources::kNamespaces,
                {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", n}}}});
    }
    if (control_plane_mode) {
      // Bindings live on the Control Plane in the root namespace, which is also the provider
      // namespace; their Secret holds the App Cluster's kubeconfig.
      ResourceClient(cp_->admin(), client::resources::kSecrets, ns())
          .Create(KubeconfigSecret("app-cluster", AppKubeconfig(), ns()))
          .status()
          .ok();
      ASSERT_TRUE(ResourceClient(cp_->admin(), apis::klutch::kApiServiceBindings, ns())
                      .Create(Binding(kBindingName, "app-cluster", claims, ns()))
                      .ok());
      manager_ = std::make_unique<reconcile::Manager>(
          cp_->admin(), reconcile::ManagerOptions{.name = "klutch-konnector", .clock = &clock_});
      konnector_ = std::make_unique<Konnector>(
          *manager_, app_->admin(),
          KonnectorOptions{.control_plane_mode = true,
                           .binding_namespace = ns(),
                           .heartbeat_interval = std::chrono::seconds(30),
                           .clock = &clock_});
    } else {
      ASSERT_TRUE(InstallBindingCrd(app_->admin(), std::chrono::seconds(30)).ok());
      CreateApp(
          client::resources::kNamespaces,
          {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "klutch-bind"}}}});
      CreateApp(client::resources::kSecrets,
                KubeconfigSecret("kubeconfig-provider", provider_.kubeconfig));
      CreateApp(apis::klutch::kApiServiceBindings,
                Binding(kBindingName, "kubeconfig-provider", claims));
      manager_ = std::make_unique<reconcile::Manager>(
          app_->admin(), reconcile::ManagerOptions{.name = "klutch-konnector", .clock = &clock_});
      konnector_ = std::make_unique<Konnector>(
          *manager_, app_->admin(),
          KonnectorOptions{.heartbeat_interval = std::chrono::seconds(30),
                           .new_client = [this](const client::RestConfig& c)
                               -> core::Result<std::unique_ptr<client::RestClient>> {
                             ++clients_made_;
                             auto direct = cp_->ClientWithToken(c.bearer_token);
                             return client::RestClient::New(
                                 direct->config(), {.transport = std::make_shared<GatedTransport>(
                                                        direct->transport(), gate_)});
                           },
                           .clock = &clock_});
    }
    ASSERT_TRUE(konnector_->Setup().ok());
    ASSERT_TRUE(konnector_->StartAppInformers(std::chrono::seconds(30)).ok());
    ASSERT_TRUE(manager_->Start().ok());
    // The bound CRD is served in the App Cluster before a test creates claims.
    ASSERT_TRUE(Until([&] {
      auto crd = App(client::resources::kCustomResourceDefinitions).Get(kBindingName);
      return crd.ok() && reconcile::IsConditionTrue(*crd, "Established") &&
             App(kInstances, "dev").List().ok();
    }));
  }

  void TearDown() override {
    gate_.Release();
    if (manager_) manager_->Stop();
    if (konnector_) konnector_->Stop();
    if (mapper_) mapper_->Stop();
  }

  const std::string& ns() const { return provider_.cluster_namespace; }
  std::string Mapped(const std::string& consumer_ns) { return ns() + "-" + consumer_ns; }

  std::string AppKubeconfig() {
    auto text = core::ReadFile(app_->kubeconfig());
    return text.ok() ? *text : "";
  }
  static Json KubeconfigSecret(const std::string& name, const std::string& kubeconfig,
                               const std::string& ns = "klutch-bind") {
    return {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"data", {{"kubeconfig", core::Base64Encode(kubeconfig)}}}};
  }
  static Json Binding(const std::string& name, const std::string& secret, Json claims,
                      const std::string& ns = "klutch-bind") {
    for (auto& c : claims) c["state"] = "Accepted";
    return {{"apiVersion", "klutch.anynines.com/v1alpha1"},
            {"kind", "APIServiceBinding"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec",
             {{"kubeconfigSecretRef", {{"name", secret}, {"namespace", ns}, {"key", "kubeconfig"}}},
              {"permissionClaims", claims}}}};
  }

  void CreateApp(const client::GroupVersionResource& gvr, const Json& object) {
    auto r = ResourceClient(app_->admin(), gvr, machinery::Namespace(object)).Create(object);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  ResourceClient App(const client::GroupVersionResource& gvr, const std::string& ns = "") {
    return ResourceClient(app_->admin(), gvr, ns);
  }
  ResourceClient Cp(const client::GroupVersionResource& gvr, const std::string& ns = "") {
    return ResourceClient(cp_->admin(), gvr, ns);
  }
  // Polls while moving simulated time, so requeues and backoff fire.
  bool Until(const std::function<bool()>& done) {
    return Eventually([&] {
      if (done()) return true;
      clock_.Advance(std::chrono::milliseconds(50));
      return false;
    });
  }
  std::string Get(ResourceClient rc, const std::string& name,
                  std::initializer_list<std::string_view> path) {
    auto r = rc.Get(name);
    return r.ok() ? machinery::GetString(*r, path) : "<missing>";
  }
  // An Event with `reason` exists in the App Cluster's namespace `ns`.
  bool HasEvent(const std::string& ns, const std::string& reason) {
    auto events = App(client::resources::kEvents, ns).List();
    if (!events.ok()) return false;
    for (const auto& e : (*events)["items"]) {
      if (e["reason"] == reason) return true;
    }
    return false;
  }
  bool BindingCondition(const std::string& name, const std::string& type, const std::string& status,
                        const std::string& reason = "") {
    auto b = App(apis::klutch::kApiServiceBindings, "klutch-bind").Get(name);
    if (!b.ok()) return false;
    auto c = reconcile::FindSeverityCondition(*b, type);
    return c && c->status == status && (reason.empty() || c->reason == reason);
  }

  core::FakeClock clock_;
  ListGate gate_;  // on the provider connections (OIDC mode)
  std::unique_ptr<testing::TestCluster> cp_, app_;
  bind::ProviderBinding provider_;
  std::unique_ptr<bind::NamespaceMapper> mapper_;
  std::unique_ptr<reconcile::Manager> manager_;
  std::unique_ptr<Konnector> konnector_;
  std::atomic<int> clients_made_{0};
};

TEST_F(KonnectorTest, BindingConnectsAndClaimsSyncBothWays) {
  // The CRD appears, owned by the binding; the binding and the export report.
  EXPECT_TRUE(Until(
      [&] { return App(client::resources::kCustomResourceDefinitions).Get(kBindingName).ok(); }));
  EXPECT_TRUE(Until([&] { return BindingCondition(kBindingName, "SecretValid", "True"); }));
  EXPECT_TRUE(Until([&] { return BindingCondition(kBindingName, "Connected", "True"); }));
  EXPECT_TRUE(Until([&] { return BindingCondition(kBindingName, "Heartbeating", "True"); }));
  EXPECT_TRUE(Until([&] {
    auto e = Cp(bind::kApiServiceExports, ns()).Get(kBindingName);
    return e.ok() && reconcile::IsConditionTrue(*e, "Connected") &&
           reconcile::IsConditionTrue(*e, "Established");
  }));
  EXPECT_EQ(Get(App(apis::klutch::kApiServiceBindings, "klutch-bind"), kBindingName,
                {"status", "providerPrettyName"}),
            "klutch-test-provider");

  // Create flows up, with the bound annotation; the consumer object gets the finalizer.
  CreateApp(kInstances, Instance("dev", "db", "14"));
  EXPECT_TRUE(Until([&] {
    return Get(Cp(kInstances, Mapped("dev")), "db", {"spec", "version"}) == "14";
  }));
  EXPECT_EQ(Get(Cp(kInstances, Mapped("dev")), "db",
                {"metadata", "annotations", apis::klutch::kBoundAnnotation}),
            "true");
  auto db = App(kInstances, "dev").Get("db");
  ASSERT_TRUE(db.ok());
  EXPECT_TRUE(machinery::HasFinalizer(*db, apis::klutch::kSyncerFinalizer));

  // Spec edits flow up, removed fields included; an edit of the consumer's fields on the
  // Control Plane copy is reverted, while fields the provider adds (as Crossplane adds
  // resourceRef to a claim) stay and cause no write loop.
  ASSERT_TRUE(
      App(kInstances, "dev")
          .Patch("db", client::PatchType::kMerge, R"({"spec":{"version":"15","tier":"small"}})")
          .ok());
  EXPECT_TRUE(Until([&] {
    return Get(Cp(kInstances, Mapped("dev")), "db", {"spec", "tier"}) == "small";
  }));
  ASSERT_TRUE(App(kInstances, "dev")
                  .Patch("db", client::PatchType::kMerge, R"({"spec":{"tier":null}})")
                  .ok());
  EXPECT_TRUE(Until([&] {
    auto u = Cp(kInstances, Mapped("dev")).Get("db");
    return u.ok() && machinery::GetString(*u, {"spec", "version"}) == "15" &&
           !(*u)["spec"].contains("tier");
  }));
  ASSERT_TRUE(Cp(kInstances, Mapped("dev"))
                  .Patch("db", client::PatchType::kMerge,
                         R"({"spec":{"version":"9","resourceRef":{"name":"db-x1"}}})")
                  .ok());
  EXPECT_TRUE(Until([&] {
    auto u = Cp(kInstances, Mapped("dev")).Get("db");
    return u.ok() && machinery::GetString(*u, {"spec", "version"}) == "15" &&
           machinery::GetString(*u, {"spec", "resourceRef", "name"}) == "db-x1";
  }));
  std::string settled = Get(Cp(kInstances, Mapped("dev")), "db", {"metadata", "resourceVersion"});
  for (int i = 0; i < 10; ++i) clock_.Advance(std::chrono::seconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Get(Cp(kInstances, Mapped("dev")), "db", {"metadata", "resourceVersion"}), settled)
      << "the konnector keeps writing the provider copy";

  // Status written on the Control Plane flows down, next to our Synced condition.
  ASSERT_TRUE(
      Cp(kInstances, Mapped("dev"))
          .Patch("db", client::PatchType::kMerge, R"({"status":{"phase":"Ready"}})", {}, "status")
          .ok());
  EXPECT_TRUE(Until([&] {
    return Get(App(kInstances, "dev"), "db", {"status", "phase"}) == "Ready";
  }));
  EXPECT_TRUE(Until([&] {
    auto d = App(kInstances, "dev").Get("db");
    return d.ok() &&
           reconcile::ConditionStatus(*d, apis::klutch::kControlPlaneSyncedCondition) == "True";
  }));

  // Deleting the Control Plane copy re-creates it.
  ASSERT_TRUE(Cp(kInstances, Mapped("dev")).Delete("db").ok());
  EXPECT_TRUE(Until([&] {
    auto u = Cp(kInstances, Mapped("dev")).Get("db");
    return u.ok() && !machinery::IsBeingDeleted(*u);
  }));

  // Deleting the claim deletes the copy and releases the consumer object.
  ASSERT_TRUE(App(kInstances, "dev").Delete("db").ok());
  EXPECT_TRUE(Until([&] {
    return core::IsNotFound(App(kInstances, "dev").Get("db").status()) &&
           core::IsNotFound(Cp(kInstances, Mapped("dev")).Get("db").status());
  }));
}

// Issue #23: a reason the Control Plane gives reaches the developer in their own names, as the
// condition message and as an Event `kubectl describe` shows.
TEST_F(KonnectorTest, AFailureOnTheControlPlaneIsExplainedInTheDevelopersNames) {
  EXPECT_TRUE(Until(
      [&] { return App(client::resources::kCustomResourceDefinitions).Get(kBindingName).ok(); }));
  CreateApp(kInstances, Instance("dev", "db", "14"));
  EXPECT_TRUE(Until([&] { return Cp(kInstances, Mapped("dev")).Get("db").ok(); }));
  const std::string pns = Mapped("dev");
  ASSERT_NE(pns, "dev");
  Json status = {
      {"status",
       {{"conditions", Json::array({{{"type", "Ready"},
                                     {"status", "False"},
                                     {"reason", "Unavailable"},
                                     {"lastTransitionTime", "2026-01-01T00:00:00Z"},
                                     {"message",
                                      "Unready resources: binding: instance \"pg\" was not "
                                      "found in namespace \"" +
                                          pns + "\""}}})}}}};
  ASSERT_TRUE(Cp(kInstances, pns)
                  .Patch("db", client::PatchType::kMerge, machinery::Dump(status), {}, "status")
                  .ok());
  const std::string want =
      "Unready resources: binding: instance \"pg\" was not found in namespace \"dev\"";
  EXPECT_TRUE(Until([&] {
    auto d = App(kInstances, "dev").Get("db");
    auto ready = d.ok() ? reconcile::FindCondition(*d, "Ready") : std::nullopt;
    return ready && ready->message == want;
  }));
  auto event_with = [&](const std::string& message) {
    auto events = App(client::resources::kEvents, "dev").List();
    if (!events.ok()) return false;
    for (const auto& e : (*events)["items"]) {
      if (e["reason"] == "Unavailable" && e["type"] == "Warning" && e["message"] == message &&
          machinery::GetString(e, {"involvedObject", "name"}) == "db") {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(Until([&] { return event_with(want); }));
}

TEST_F(KonnectorTest, ProviderObjectsAreAdoptedAndClaimedSecretsFollowTheirOwner) {
  CreateApp(kInstances, Instance("dev", "seed", "14"));  // maps namespace dev
  ASSERT_TRUE(Until([&] { return Cp(kInstances, Mapped("dev")).Get("seed").ok(); }));

  // An object created on the provider appears on the consumer, both sides marked bound.
  ASSERT_TRUE(
      Cp(kInstances, Mapped("dev")).Create(Instance(Mapped("dev"), "made-upstream", "13")).ok());
  EXPECT_TRUE(Until([&] {
    return Get(App(kInstances, "dev"), "made-upstream",
               {"metadata", "annotations", apis::klutch::kBoundAnnotation}) == "true" &&
           Get(Cp(kInstances, Mapped("dev")), "made-upstream",
               {"metadata", "annotations", apis::klutch::kBoundAnnotation}) == "true";
  }));

  // A provider-owned Secret comes down, and is restored when deleted there.
  Json creds = {{"apiVersion", "v1"},
                {"kind", "Secret"},
                {"metadata", {{"name", "db-creds"}, {"namespace", Mapped("dev")}}},
                {"data", {{"uri", core::Base64Encode("postgres://x")}}}};
  ASSERT_TRUE(Cp(client::resources::kSecrets, Mapped("dev")).Create(creds).ok());
  auto app_secret = [&](const std::string& name) {
    return Get(App(client::resources::kSecrets, "dev"), name, {"data", "uri"});
  };
  EXPECT_TRUE(Until([&] { return app_secret("db-creds") == core::Base64Encode("postgres://x"); }));
  EXPECT_EQ(Get(App(client::resources::kSecrets, "dev"), "db-creds",
                {"metadata", "annotations", apis::klutch::kResourceOwnerAnnotation}),
            "Provider");
  ASSERT_TRUE(App(client::resources::kSecrets, "dev").Delete("db-creds").ok());
  EXPECT_TRUE(Until([&] { return app_secret("db-creds") == core::Base64Encode("postgres://x"); }));
  // Edits of the copy are overwritten by the owner's content.
  ASSERT_TRUE(App(client::resources::kSecrets, "dev")
                  .Patch("db-creds", client::PatchType::kMerge, R"({"data":{"uri":"eA=="}})")
                  .ok());
  EXPECT_TRUE(Until([&] { return app_secret("db-creds") == core::Base64Encode("postgres://x"); }));

  // A consumer-owned Secret goes up; an unannotated consumer Secret stays home... under the
  // Consumer claim it is consumer-owned too, so it goes up as well.
  Json mine = {{"apiVersion", "v1"},
               {"kind", "Secret"},
               {"metadata",
                {{"name", "app-config"},
                 {"namespace", "dev"},
                 {"annotations", {{apis::klutch::kResourceOwnerAnnotation, "Consumer"}}}}},
               {"data", {{"uri", core::Base64Encode("mine")}}}};
  CreateApp(client::resources::kSecrets, mine);
  EXPECT_TRUE(Until([&] {
    return Get(Cp(client::resources::kSecrets, Mapped("dev")), "app-config", {"data", "uri"}) ==
           core::Base64Encode("mine");
  }));
  // The owner deleting it removes the copy.
  ASSERT_TRUE(App(client::resources::kSecrets, "dev").Delete("app-config").ok());
  EXPECT_TRUE(Until([&] {
    return core::IsNotFound(
        Cp(client::resources::kSecrets, Mapped("dev")).Get("app-config").status());
  }));
  ASSERT_TRUE(Cp(client::resources::kSecrets, Mapped("dev")).Delete("db-creds").ok());
  EXPECT_TRUE(Until([&] { return app_secret("db-creds") == "<missing>"; }));
}

TEST_F(KonnectorTest, ClaimedCopiesStayCopiesAndConsumerSecretsOfTheSameNameAreLeftAlone) {
  CreateApp(kInstances, Instance("dev", "seed", "14"));  // maps namespace dev
  ASSERT_TRUE(Until([&] { return Cp(kInstances, Mapped("dev")).Get("seed").ok(); }));
  auto secret = [](const std::string& ns, const std::string& name, const std::string& value) {
    return Json{{"apiVersion", "v1"},
                {"kind", "Secret"},
                {"metadata", {{"name", name}, {"namespace", ns}}},
                {"data", {{"v", core::Base64Encode(value)}}}};
  };
  auto app_value = [&](const std::string& name) {
    return Get(App(client::resources::kSecrets, "dev"), name, {"data", "v"});
  };
  // A copy whose owner annotation a user flips is still the provider's copy.
  ASSERT_TRUE(Cp(client::resources::kSecrets, Mapped("dev"))
                  .Create(secret(Mapped("dev"), "creds", "p"))
                  .ok());
  ASSERT_TRUE(Until([&] { return app_value("creds") == core::Base64Encode("p"); }));
  ASSERT_TRUE(
      App(client::resources::kSecrets, "dev")
          .Patch("creds", client::PatchType::kMerge,
                 Json{{"metadata",
                       {{"annotations", {{apis::klutch::kResourceOwnerAnnotation, "Consumer"}}}}},
                      {"data", {{"v", core::Base64Encode("hijacked")}}}}
                     .dump())
          .ok());
  EXPECT_TRUE(Until([&] {
    return app_value("creds") == core::Base64Encode("p") &&
           Get(App(client::resources::kSecrets, "dev"), "creds",
               {"metadata", "annotations", apis::klutch::kResourceOwnerAnnotation}) == "Provider";
  }));
  EXPECT_EQ(Get(Cp(client::resources::kSecrets, Mapped("dev")), "creds", {"data", "v"}),
            core::Base64Encode("p"))
      << "the copy's edit never reaches the owner";

  // The App Cluster's own Secret of a name the provider also uses is not overwritten. Both
  // exist before their namespace is mapped, so the konnector sees them together.
  CreateApp(client::resources::kNamespaces,
            {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "fresh"}}}});
  ASSERT_TRUE(Cp(client::resources::kNamespaces)
                  .Create({{"apiVersion", "v1"},
                           {"kind", "Namespace"},
                           {"metadata", {{"name", Mapped("fresh")}}}})
                  .ok());
  CreateApp(client::resources::kSecrets, secret("fresh", "mine", "consumer's"));
  ASSERT_TRUE(Cp(client::resources::kSecrets, Mapped("fresh"))
                  .Create(secret(Mapped("fresh"), "mine", "provider's"))
                  .ok());
  CreateApp(kInstances, Instance("fresh", "db", "14"));  // maps namespace fresh
  ASSERT_TRUE(Until([&] { return Cp(kInstances, Mapped("fresh")).Get("db").ok(); }));
  EXPECT_TRUE(Until([&] { return HasEvent("fresh", "ClaimedNameConflict"); }));
  EXPECT_EQ(Get(App(client::resources::kSecrets, "fresh"), "mine", {"data", "v"}),
            core::Base64Encode("consumer's"));
  EXPECT_EQ(Get(Cp(client::resources::kSecrets, Mapped("fresh")), "mine", {"data", "v"}),
            core::Base64Encode("provider's"));
}

TEST_F(KonnectorTest, HeartbeatAdvancesAtTheInterval) {
  std::string first;
  ASSERT_TRUE(Until([&] {
    first = Get(Cp(bind::kClusterBindings, ns()), "cluster", {"status", "lastHeartbeatTime"});
    return first != "<missing>" && !first.empty();
  }));
  EXPECT_EQ(Get(Cp(bind::kClusterBindings, ns()), "cluster", {"status", "heartbeatInterval"}),
            "30s");
  EXPECT_EQ(Get(Cp(bind::kClusterBindings, ns()), "cluster", {"status", "konnectorVersion"}),
            "v0.0.0");
  clock_.Advance(std::chrono::seconds(31));
  EXPECT_TRUE(Until([&] {
    std::string now =
        Get(Cp(bind::kClusterBindings, ns()), "cluster", {"status", "lastHeartbeatTime"});
    return now != first && now != "<missing>";
  }));
}

TEST_F(KonnectorTest, BadBindingsSayWhatIsWrongAndLeaveOthersAlone) {
  ASSERT_TRUE(Until([&] { return BindingCondition(kBindingName, "Connected", "True"); }));
  CreateApp(apis::klutch::kApiServiceBindings,
            Binding("widgets.example.com", "no-such-secret", Json::array()));
  EXPECT_TRUE(Until([&] {
    return BindingCondition("widgets.example.com", "SecretValid", "False",
                            "KubeconfigSecretNotFound");
  }));
  CreateApp(client::resources::kSecrets, KubeconfigSecret("garbage", "{{{"));
  CreateApp(apis::klutch::kApiServiceBindings,
            Binding("gadgets.example.com", "garbage", Json::array()));
  EXPECT_TRUE(Until([&] {
    return BindingCondition("gadgets.example.com", "SecretValid", "False",
                            "KubeconfigSecretInvalid");
  }));
  auto b = App(apis::klutch::kApiServiceBindings, "klutch-bind").Get("gadgets.example.com");
  ASSERT_TRUE(b.ok());
  EXPECT_NE(reconcile::FindSeverityCondition(*b, "SecretValid")->message.find("kubectl bind"),
            std::string::npos);
  // The good binding keeps syncing.
  CreateApp(kInstances, Instance("dev", "still-works", "14"));
  EXPECT_TRUE(Until([&] { return Cp(kInstances, Mapped("dev")).Get("still-works").ok(); }));
  EXPECT_EQ(konnector_->connections(), 1u);
}

TEST_F(KonnectorTest, ABindingMadeAgainAdoptsTheCrdItsPredecessorLeft) {
  ASSERT_TRUE(Until([&] { return BindingCondition(kBindingName, "Connected", "True"); }));
  CreateApp(kInstances, Instance("dev", "kept", "14"));
  ASSERT_TRUE(Until([&] { return Cp(kInstances, Mapped("dev")).Get("kept").ok(); }));
  std::string first_uid =
      Get(App(apis::klutch::kApiServiceBindings, "klutch-bind"), kBindingName, {"metadata", "uid"});

  // Unbind: the binding goes, the CRD and the claims stay (upstream too).
  ASSERT_TRUE(App(apis::klutch::kApiServiceBindings, "klutch-bind").Delete(kBindingName).ok());
  ASSERT_TRUE(Until([&] {
    return core::IsNotFound(
        App(apis::klutch::kApiServiceBindings, "klutch-bind").Get(kBindingName).status());
  }));
  ASSERT_TRUE(App(client::resources::kCustomResourceDefinitions).Get(kBindingName).ok());
  EXPECT_TRUE(App(kInstances, "dev").Get("kept").ok());
  EXPECT_TRUE(Cp(kInstances, Mapped("dev")).Get("kept").ok());

  // Bound again under the same name: the new binding takes the CRD over and syncing resumes.
  CreateApp(apis::klutch::kApiServiceBindings,
            Binding(kBindingName, "kubeconfig-provider", Json::array()));
  EXPECT_TRUE(Until([&] { return BindingCondition(kBindingName, "Connected", "True"); }));
  auto crd = App(client::resources::kCustomResourceDefinitions).Get(kBindingName);
  ASSERT_TRUE(crd.ok());
  std::string second_uid =
      Get(App(apis::klutch::kApiServiceBindings, "klutch-bind"), kBindingName, {"metadata", "uid"});
  EXPECT_NE(second_uid, first_uid);
  EXPECT_EQ(machinery::GetString((*crd)["metadata"]["ownerReferences"][0], {"uid"}), second_uid);
  EXPECT_TRUE(Until([&] { return HasEvent("klutch-bind", "AdoptedCustomResourceDefinition"); }));
  CreateApp(kInstances, Instance("dev", "after", "15"));
  EXPECT_TRUE(Until([&] { return Cp(kInstances, Mapped("dev")).Get("after").ok(); }));
  EXPECT_TRUE(Cp(kInstances, Mapped("dev")).Get("kept").ok());
}

TEST_F(KonnectorTest, DeletingAConsumerNamespaceDeletesItsServiceNamespace) {
  CreateApp(client::resources::kNamespaces,
            {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "gone"}}}});
  CreateApp(kInstances, Instance("gone", "db", "14"));
  ASSERT_TRUE(Until([&] { return Cp(kInstances, Mapped("gone")).Get("db").ok(); }));
  ASSERT_TRUE(App(client::resources::kNamespaces).Delete("gone").ok());
  EXPECT_TRUE(Until([&] {
    return core::IsNotFound(Cp(bind::kApiServiceNamespaces, ns()).Get("gone").status());
  }));
}

// A cluster-scoped export (bind-protocol.md §4.9): every consumer shares the provider's cluster
// scope, so copies carry the connection's cluster namespace as name prefix and annotation. The
// consumer object here is created while the provider cache's first list is held: the spec
// reconciler skips it then, and the cache's first list must bring it back.
TEST_F(KonnectorTest, ClusterScopedObjectsSyncUnderPrefixedNamesEvenBeforeTheProviderCacheListed) {
  const client::GroupVersionResource shared{"anynines.com", "v1", "sharedinstances"};
  const std::string name = "sharedinstances.anynines.com";
  Json crd = InstanceCrd("sharedinstances", "SharedInstance");
  crd["spec"]["scope"] = "Cluster";
  ASSERT_TRUE(
      ResourceClient(cp_->admin(), client::resources::kCustomResourceDefinitions).Create(crd).ok());
  ASSERT_TRUE(bind::WaitForCrdEstablished(cp_->admin(), name).ok());
  ASSERT_TRUE(bind::CreateExport(cp_->admin(), ns(), bind::ExportFromCrd(crd)).ok());
  // The konnector lists and watches the resource cluster-wide. The backend binds its role
  // cluster-wide only in Cluster consumer scope (bind-protocol.md §2.6.1), which this fixture's
  // provider (namespaced, RoleBindings per mapped namespace) does not run in: granted here.
  const std::string role = "klutch-binder-" + ns();
  ASSERT_TRUE(ResourceClient(cp_->admin(), client::resources::kClusterRoleBindings)
                  .Create({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                           {"kind", "ClusterRoleBinding"},
                           {"metadata", {{"name", role}}},
                           {"subjects", Json::array({{{"kind", "ServiceAccount"},
                                                      {"name", "klutch-binder"},
                                                      {"namespace", ns()}}})},
                           {"roleRef",
                            {{"apiGroup", "rbac.authorization.k8s.io"},
                             {"kind", "ClusterRole"},
                             {"name", role}}}})
                  .ok());

  // The syncer starts; its provider cache's first list waits at the gate.
  gate_.Hold("/apis/anynines.com/v1/sharedinstances");
  CreateApp(apis::klutch::kApiServiceBindings, Binding(name, "kubeconfig-provider", Json::array()));
  ASSERT_TRUE(Until([&] { return App(shared).List().ok() && gate_.held() > 0; }));
  Json db = Instance("", "db", "14");
  db["kind"] = "SharedInstance";
  db["metadata"].erase("namespace");
  CreateApp(shared, db);
  // The spec reconciler has seen it and skipped it (no finalizer: the pass ended early).
  const std::string spec_controller =
      "controller=\"klutch-konnector-sharedinstances.anynines.com-spec\"";
  ASSERT_TRUE(Until(
      [&] { return manager_->metrics().Render().find(spec_controller) != std::string::npos; }));
  auto skipped = App(shared).Get("db");
  ASSERT_TRUE(skipped.ok());
  EXPECT_FALSE(machinery::HasFinalizer(*skipped, apis::klutch::kSyncerFinalizer));
  gate_.Release();

  // The first list brings it back: up it goes, prefixed, annotated and owned by the Namespace.
  const std::string copy = ns() + "-db";
  EXPECT_TRUE(Until([&] { return Get(Cp(shared), copy, {"spec", "version"}) == "14"; }));
  auto u = Cp(shared).Get(copy);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(machinery::GetString(
                *u, {"metadata", "annotations", apis::klutch::kClusterNamespaceAnnotation}),
            ns());
  EXPECT_EQ(machinery::GetString((*u)["metadata"]["ownerReferences"][0], {"kind"}), "Namespace");
  EXPECT_EQ(machinery::GetString((*u)["metadata"]["ownerReferences"][0], {"name"}), ns());
  EXPECT_TRUE(Until([&] {
    auto d = App(shared).Get("db");
    return d.ok() && machinery::HasFinalizer(*d, apis::klutch::kSyncerFinalizer);
  }));

  // Status flows down under the consumer's name.
  ASSERT_TRUE(
      Cp(shared)
          .Patch(copy, client::PatchType::kMerge, R"({"status":{"phase":"Ready"}})", {}, "status")
          .ok());
  EXPECT_TRUE(Until([&] { return Get(App(shared), "db", {"status", "phase"}) == "Ready"; }));

  // Another connection's objects stay on the provider, even one whose name carries our prefix;
  // one of ours the provider made is adopted under its unprefixed name.
  auto provider_object = [&](const std::string& object_name, const std::string& cluster_ns) {
    Json o = db;
    o["metadata"] = {
        {"name", object_name},
        {"annotations", {{std::string(apis::klutch::kClusterNamespaceAnnotation), cluster_ns}}}};
    return o;
  };
  ASSERT_TRUE(Cp(shared).Create(provider_object("other-x", "other")).ok());
  ASSERT_TRUE(Cp(shared).Create(provider_object(ns() + "-intruder", ns() + "-other")).ok());
  ASSERT_TRUE(Cp(shared).Create(provider_object(ns() + "-adopted", ns())).ok());
  EXPECT_TRUE(Until([&] {
    auto a = App(shared).Get("adopted");
    return a.ok() && machinery::Annotation(*a, apis::klutch::kBoundAnnotation) == "true";
  }));
  for (int i = 0; i < 10; ++i) clock_.Advance(std::chrono::seconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(core::IsNotFound(App(shared).Get("intruder").status()));
  EXPECT_TRUE(core::IsNotFound(App(shared).Get("x").status()));
  EXPECT_TRUE(core::IsNotFound(App(shared).Get("other-x").status()));

  // Deleting the consumer object deletes its copy and releases it.
  ASSERT_TRUE(App(shared).Delete("db").ok());
  EXPECT_TRUE(Until([&] {
    return core::IsNotFound(App(shared).Get("db").status()) &&
           core::IsNotFound(Cp(shared).Get(copy).status());
  }));
  EXPECT_TRUE(Cp(shared).Get("other-x").ok());
  EXPECT_TRUE(Cp(shared).Get(ns() + "-intruder").ok());
}

// A token for the provider's klutch-binder ServiceAccount from a new token Secret.
std::string NewToken(client::RestClient& cp, const std::string& ns, const std::string& name) {
  ResourceClient secrets(cp, client::resources::kSecrets, ns);
  Json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"type", "kubernetes.io/service-account-token"},
                 {"metadata",
                  {{"name", name},
                   {"namespace", ns},
                   {"annotations", {{"kubernetes.io/service-account.name", "klutch-binder"}}}}}};
  if (!secrets.Create(secret).ok()) return "";
  std::string token;
  Eventually([&] {
    auto s = secrets.Get(name);
    token =
        s.ok() ? core::Base64Decode(machinery::GetString(*s, {"data", "token"})).value_or("") : "";
    return !token.empty();
  });
  return token;
}

TEST_F(KonnectorTest, RotatedProviderKubeconfigReachesTheAppClusterAndSyncGoesOn) {
  CreateApp(kInstances, Instance("dev", "before", "14"));
  ASSERT_TRUE(Until([&] { return Cp(kInstances, Mapped("dev")).Get("before").ok(); }));
  const int clients_before = clients_made_;

  // The provider rotates: a new token in the kubeconfig Secret, the old token revoked.
  std::string token = NewToken(cp_->admin(), ns(), "klutch-binder-rotated");
  ASSERT_FALSE(token.empty());
  std::string rotated = serving::KubeconfigYaml({.name = "default",
                                                 .server = provider_.server,
                                                 .ca_pem = provider_.ca_pem,
                                                 .token = token,
                                                 .ns = ns()});
  ASSERT_TRUE(Cp(client::resources::kSecrets, ns())
                  .Patch("kubeconfig", client::PatchType::kMerge,
                         Json{{"data", {{"kubeconfig", core::Base64Encode(rotated)}}}}.dump())
                  .ok());
  // Mirrored into the App Cluster; the konnector reconnects with it.
  EXPECT_TRUE(Until([&] {
    return Get(App(client::resources::kSecrets, "klutch-bind"), "kubeconfig-provider",
               {"data", "kubeconfig"}) == core::Base64Encode(rotated);
  }));
  EXPECT_TRUE(Until([&] { return clients_made_ > clients_before; }));
  ASSERT_TRUE(Cp(client::resources::kSecrets, ns()).Delete("klutch-binder").ok());
  CreateApp(kInstances, Instance("dev", "after", "15"));
  EXPECT_TRUE(Until([&] {
    return Get(Cp(kInstances, Mapped("dev")), "after", {"spec", "version"}) == "15";
  }));
  EXPECT_EQ(konnector_->connections(), 1u) << "the old connection is closed";
}

TEST_F(KonnectorTest, TwoProvidersSyncIndependentlyAndOneFailingDoesNotStallTheOther) {
  // A second provider: its own cluster namespace, account, kubeconfig and export.
  auto second = bind::SetupProvider(cp_->admin());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_TRUE(ResourceClient(cp_->admin(), client::resources::kCustomResourceDefinitions)
                  .Create(InstanceCrd("redisinstances", "RedisInstance"))
                  .ok());
  ASSERT_TRUE(bind::WaitForCrdEstablished(cp_->admin(), "redisinstances.anynines.com").ok());
  ASSERT_TRUE(
      bind::CreateExport(cp_->admin(), second->cluster_namespace,
                         bind::ExportFromCrd(InstanceCrd("redisinstances", "RedisInstance")))
          .ok());
  bind::NamespaceMapper mapper(cp_->admin(), second->cluster_namespace);
  mapper.Start();
  CreateApp(client::resources::kSecrets, KubeconfigSecret("kubeconfig-second", second->kubeconfig));
  CreateApp(apis::klutch::kApiServiceBindings,
            Binding("redisinstances.anynines.com", "kubeconfig-second", Json::array()));
  const client::GroupVersionResource redis{"anynines.com", "v1", "redisinstances"};
  ASSERT_TRUE(Until([&] { return App(redis, "dev").List().ok(); }));
  EXPECT_EQ(konnector_->connections(), 2u);

  CreateApp(kInstances, Instance("dev", "pg", "14"));
  Json cache = Instance("dev", "cache", "7");
  cache["apiVersion"] = "anynines.com/v1";
  cache["kind"] = "RedisInstance";
  CreateApp(redis, cache);
  EXPECT_TRUE(Until([&] { return Cp(kInstances, Mapped("dev")).Get("pg").ok(); }));
  EXPECT_TRUE(
      Until([&] { return Cp(redis, second->cluster_namespace + "-dev").Get("cache").ok(); }));

  // The first provider's credentials stop working: the second keeps syncing.
  ASSERT_TRUE(Cp(client::resources::kSecrets, ns()).Delete("klutch-binder").ok());
  cache["metadata"]["name"] = "cache-2";
  CreateApp(redis, cache);
  EXPECT_TRUE(
      Until([&] { return Cp(redis, second->cluster_namespace + "-dev").Get("cache-2").ok(); }));
  mapper.Stop();
}

TEST_F(KonnectorTest, AnExportTheAppClusterRefusesReportsTheServersReason) {
  ASSERT_TRUE(Until([&] { return BindingCondition(kBindingName, "Connected", "True"); }));
  Json bad = bind::ExportFromCrd(InstanceCrd("brokeninstances", "BrokenInstance"));
  bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {{"type", "not-a-type"}};
  ASSERT_TRUE(bind::CreateExport(cp_->admin(), ns(), bad).ok());
  CreateApp(apis::klutch::kApiServiceBindings,
            Binding("brokeninstances.anynines.com", "kubeconfig-provider", Json::array()));
  EXPECT_TRUE(Until([&] {
    return BindingCondition("brokeninstances.anynines.com", "Connected", "False",
                            "CustomResourceDefinitionCreateFailed");
  }));
  auto b =
      App(apis::klutch::kApiServiceBindings, "klutch-bind").Get("brokeninstances.anynines.com");
  ASSERT_TRUE(b.ok());
  EXPECT_NE(reconcile::FindSeverityCondition(*b, "Connected")->message.find("not-a-type"),
            std::string::npos)
      << reconcile::FindSeverityCondition(*b, "Connected")->message;
  // A Warning Event says the same on the binding.
  EXPECT_TRUE(
      Until([&] { return HasEvent("klutch-bind", "CustomResourceDefinitionCreateFailed"); }));
  // The other binding is undisturbed.
  CreateApp(kInstances, Instance("dev", "fine", "14"));
  EXPECT_TRUE(Until([&] { return Cp(kInstances, Mapped("dev")).Get("fine").ok(); }));
}

class ControlPlaneModeTest : public KonnectorTest {
 protected:
  void SetUp() override { Start(true); }
};

TEST_F(ControlPlaneModeTest, SyncsThroughTheAppClusterKubeconfig) {
  auto binding_ok = [&] {
    auto b = Cp(apis::klutch::kApiServiceBindings, ns()).Get(kBindingName);
    return b.ok() && reconcile::IsConditionTrue(*b, "SecretValid") &&
           reconcile::IsConditionTrue(*b, "Connected");
  };
  EXPECT_TRUE(Until(binding_ok));
  CreateApp(kInstances, Instance("dev", "db", "14"));
  EXPECT_TRUE(Until([&] {
    return Get(Cp(kInstances, Mapped("dev")), "db", {"spec", "version"}) == "14";
  }));
  ASSERT_TRUE(App(kInstances, "dev")
                  .Patch("db", client::PatchType::kMerge, R"({"spec":{"version":"15"}})")
                  .ok());
  EXPECT_TRUE(Until([&] {
    return Get(Cp(kInstances, Mapped("dev")), "db", {"spec", "version"}) == "15";
  }));
  ASSERT_TRUE(
      Cp(kInstances, Mapped("dev"))
          .Patch("db", client::PatchType::kMerge, R"({"status":{"phase":"Ready"}})", {}, "status")
          .ok());
  EXPECT_TRUE(Until([&] {
    return Get(App(kInstances, "dev"), "db", {"status", "phase"}) == "Ready";
  }));
  ASSERT_TRUE(App(kInstances, "dev").Delete("db").ok());
  EXPECT_TRUE(Until([&] {
    return core::IsNotFound(App(kInstances, "dev").Get("db").status()) &&
           core::IsNotFound(Cp(kInstances, Mapped("dev")).Get("db").status());
  }));
  EXPECT_FALSE(App(client::resources::kCustomResourceDefinitions)
                   .Get("apiservicebindings.klutch.anynines.com")
                   .ok())
      << "control-plane mode installs no binding CRD in the App Cluster";
}

}  // namespace
}  // namespace klutch::konnector::konnector_test
