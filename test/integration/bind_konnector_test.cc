// The real bind backend (src/bind: provisioning and controllers) and the real konnector
// (src/konnector) together, each on its own in-process cluster with simulated time: a
// consumer provisioned the way /bind does it binds an API, its claims reach the Control Plane
// through the backend's namespace mapping, the backend sees the konnector's heartbeats, and
// when the backend renews the konnector's short-lived token the konnector picks it up and
// keeps syncing.
#include <gtest/gtest.h>

#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "bind/backend_controllers.h"
#include "bind/provision.h"
#include "client/dynamic.h"
#include "core/strings.h"
#include "konnector/konnector.h"
#include "reconcile/conditions.h"
#include "reconcile/manager.h"
#include "test/support/test_cluster.h"
#include "test/support/wait.h"

namespace klutch {
namespace {

using client::ResourceClient;
using machinery::Json;
namespace resources = client::resources;

const client::GroupVersionResource kWidgets{"example.com", "v1", "widgets"};
const client::GroupVersionResource kBindings{"klutch.anynines.com", "v1alpha1",
                                             "apiservicebindings"};

Json WidgetCrd() {
  Json schema = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "widgets.example.com"}}},
          {"spec",
           {{"group", "example.com"},
            {"scope", "Namespaced"},
            {"names", {{"plural", "widgets"}, {"kind", "Widget"}, {"listKind", "WidgetList"}}},
            {"versions", Json::array({{{"name", "v1"},
                                       {"served", true},
                                       {"storage", true},
                                       {"subresources", {{"status", Json::object()}}},
                                       {"schema", {{"openAPIV3Schema", schema}}}}})}}}};
}

Json Widget(const std::string& name) {
  return {{"apiVersion", "example.com/v1"},
          {"kind", "Widget"},
          {"metadata", {{"name", name}, {"namespace", "dev"}}},
          {"spec", {{"size", 1}}}};
}

class BindKonnectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cp = testing::TestCluster::Start({.clock = &clock_});
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    cp_ = std::move(*cp);
    auto app = testing::TestCluster::Start({.clock = &clock_});
    ASSERT_TRUE(app.ok()) << app.status().ToString();
    app_ = std::move(*app);

    // The Control Plane: CRDs, the backend, an offered API.
    ASSERT_TRUE(bind::InstallProviderCrds(cp_->admin(), false, std::chrono::seconds(30)).ok());
    cp_manager_ = std::make_unique<reconcile::Manager>(
        cp_->admin(), reconcile::ManagerOptions{.name = "klutch-backend", .clock = &clock_});
    provision_ = {.pretty_name = "test", .token_ttl = std::chrono::hours(1), .clock = &clock_};
    backend_ = std::make_unique<bind::BackendControllers>(
        *cp_manager_, bind::BackendControllersOptions{.provision = provision_, .clock = &clock_});
    ASSERT_TRUE(backend_->Setup().ok());
    ASSERT_TRUE(cp_manager_->Start().ok());
    Cp(resources::kNamespaces)
        .Create({{"apiVersion", "v1"},
                 {"kind", "Namespace"},
                 {"metadata", {{"name", "crossplane-system"}}}})
        .status()
        .ok();
    ASSERT_TRUE(Cp(resources::kCustomResourceDefinitions).Create(WidgetCrd()).ok());
    Json claim = {{"group", ""},
                  {"resource", "secrets"},
                  {"version", "v1"},
                  {"selector", {{"owner", "Provider"}}}};
    ASSERT_TRUE(
        Cp(apis::klutch::kApiServiceExportTemplates, "crossplane-system")
            .Create({{"apiVersion", "example-backend.klutch.anynines.com/v1alpha1"},
                     {"kind", "APIServiceExportTemplate"},
                     {"metadata", {{"name", "widgets"}, {"namespace", "crossplane-system"}}},
                     {"spec",
                      {{"APIServiceSelector", {{"group", "example.com"}, {"resource", "widgets"}}},
                       {"permissionClaims", Json::array({claim})}}}})
            .ok());
    ASSERT_TRUE(Until([&] {
      auto crd = Cp(resources::kCustomResourceDefinitions).Get("widgets.example.com");
      return crd.ok() && reconcile::IsConditionTrue(*crd, "Established");
    }));

    // What `/bind` and `kubectl bind` do: provision, request the export, store the kubeconfig
    // and the binding in the App Cluster.
    auto access = bind::ProvisionConsumer(cp_->admin(), provision_, "alice#c1", "https://idp");
    ASSERT_TRUE(access.ok()) << access.status().ToString();
    ns_ = access->cluster_namespace;
    ASSERT_TRUE(Cp(apis::klutch::kApiServiceExportRequests, ns_)
                    .Create({{"apiVersion", "klutch.anynines.com/v1alpha1"},
                             {"kind", "APIServiceExportRequest"},
                             {"metadata", {{"name", "widgets.example.com"}, {"namespace", ns_}}},
                             {"spec",
                              {{"resources",
                                Json::array({{{"group", "example.com"},
                                              {"resource", "widgets"},
                                              {"permissionClaims", Json::array({claim})}}})}}}})
                    .ok());
    ASSERT_TRUE(konnector::InstallBindingCrd(app_->admin(), std::chrono::seconds(30)).ok());
    for (const char* n : {"klutch-bind", "dev"}) {
      ASSERT_TRUE(
          App(resources::kNamespaces)
              .Create({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", n}}}})
              .ok());
    }
    ASSERT_TRUE(
        App(resources::kSecrets, "klutch-bind")
            .Create({{"apiVersion", "v1"},
                     {"kind", "Secret"},
                     {"metadata", {{"name", "kubeconfig-provider"}, {"namespace", "klutch-bind"}}},
                     {"data", {{"kubeconfig", core::Base64Encode(access->kubeconfig)}}}})
            .ok());
    claim["state"] = "Accepted";
    ASSERT_TRUE(
        App(kBindings, "klutch-bind")
            .Create({{"apiVersion", "klutch.anynines.com/v1alpha1"},
                     {"kind", "APIServiceBinding"},
                     {"metadata", {{"name", "widgets.example.com"}, {"namespace", "klutch-bind"}}},
                     {"spec",
                      {{"kubeconfigSecretRef",
                        {{"name", "kubeconfig-provider"},
                         {"namespace", "klutch-bind"},
                         {"key", "kubeconfig"}}},
                       {"permissionClaims", Json::array({claim})}}}})
            .ok());

    // The konnector in the App Cluster, reaching the Control Plane with the kubeconfig's token.
    app_manager_ = std::make_unique<reconcile::Manager>(
        app_->admin(), reconcile::ManagerOptions{.name = "klutch-konnector", .clock = &clock_});
    konnector_ = std::make_unique<konnector::Konnector>(
        *app_manager_, app_->admin(),
        konnector::KonnectorOptions{.heartbeat_interval = std::chrono::seconds(30),
                                    .new_client = [this](const client::RestConfig& c)
                                        -> core::Result<std::unique_ptr<client::RestClient>> {
                                      return cp_->ClientWithToken(c.bearer_token);
                                    },
                                    .clock = &clock_});
    ASSERT_TRUE(konnector_->Setup().ok());
    ASSERT_TRUE(konnector_->StartAppInformers(std::chrono::seconds(30)).ok());
    ASSERT_TRUE(app_manager_->Start().ok());
  }

  void TearDown() override {
    if (app_manager_) app_manager_->Stop();
    if (konnector_) konnector_->Stop();
    if (cp_manager_) cp_manager_->Stop();
    if (backend_) backend_->Stop();
  }

  ResourceClient Cp(const client::GroupVersionResource& gvr, const std::string& ns = "") {
    return ResourceClient(cp_->admin(), gvr, ns);
  }
  ResourceClient App(const client::GroupVersionResource& gvr, const std::string& ns = "") {
    return ResourceClient(app_->admin(), gvr, ns);
  }
  bool Until(const std::function<bool()>& done,
             std::chrono::milliseconds step = std::chrono::milliseconds(50)) {
    return testing::Eventually([&] {
      if (done()) return true;
      clock_.Advance(step);
      return false;
    });
  }
  std::string ProviderAnnotation(std::string_view key) {
    auto secret = Cp(resources::kSecrets, ns_).Get("kubeconfig");
    return secret.ok() ? machinery::Annotation(*secret, key) : "";
  }

  core::FakeClock clock_;
  std::unique_ptr<testing::TestCluster> cp_, app_;
  std::unique_ptr<reconcile::Manager> cp_manager_, app_manager_;
  bind::ProvisionOptions provision_;
  std::unique_ptr<bind::BackendControllers> backend_;
  std::unique_ptr<konnector::Konnector> konnector_;
  std::string ns_;
};

TEST_F(BindKonnectorTest, BindsSyncsHeartbeatsAndSurvivesTokenRenewal) {
  ASSERT_TRUE(Until([&] {
    auto crd = App(resources::kCustomResourceDefinitions).Get("widgets.example.com");
    return crd.ok() && reconcile::IsConditionTrue(*crd, "Established");
  }));
  ASSERT_TRUE(App(kWidgets, "dev").Create(Widget("db")).ok());
  const std::string provider_ns = ns_ + "-dev";
  ASSERT_TRUE(Until([&] { return Cp(kWidgets, provider_ns).Get("db").ok(); }));
  ASSERT_TRUE(Until([&] {
    auto cb = Cp(apis::klutch::kClusterBindings, ns_).Get("cluster");
    return cb.ok() && reconcile::IsConditionTrue(*cb, "Healthy") &&
           reconcile::IsConditionTrue(*cb, "Ready");
  }));

  // Past half the token's lifetime the backend renews it; the konnector mirrors the new
  // kubeconfig into the App Cluster and keeps working with it.
  const std::string issued = ProviderAnnotation(apis::klutch::kTokenIssuedAnnotation);
  ASSERT_TRUE(
      Until([&] { return ProviderAnnotation(apis::klutch::kTokenIssuedAnnotation) != issued; },
            std::chrono::seconds(5)));
  ASSERT_TRUE(Until([&] {
    auto provider = Cp(resources::kSecrets, ns_).Get("kubeconfig");
    auto mirrored = App(resources::kSecrets, "klutch-bind").Get("kubeconfig-provider");
    return provider.ok() && mirrored.ok() && (*provider)["data"] == (*mirrored)["data"];
  }));
  ASSERT_TRUE(App(kWidgets, "dev").Create(Widget("cache")).ok());
  EXPECT_TRUE(Until([&] { return Cp(kWidgets, provider_ns).Get("cache").ok(); }));
  EXPECT_TRUE(Until([&] {
    auto cb = Cp(apis::klutch::kClusterBindings, ns_).Get("cluster");
    return cb.ok() && reconcile::IsConditionTrue(*cb, "Healthy");
  }));
}

}  // namespace
}  // namespace klutch
