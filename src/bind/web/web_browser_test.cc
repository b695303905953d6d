// The bind backend's pages in a real browser (issue #23): Debian's Chromium (test/support/
// browser.h) against the backend served on a loopback port, a real OpenID Connect provider
// (glewlwyd with its web login) and the in-process TestCluster holding Klutch's own
// PostgreSQL and KeyValue APIs (deploy/package) and the a9s Compositions. A user opens the
// front page, binds a cluster through the catalog as kubectl bind would have them, then, in a
// fresh browser, opens /consumer, logs in from there and comes back to it. Screenshots of every
// page go to TestArtifactsDir().
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "apis/crossplane_crds.h"
#include "apis/klutch/register.h"
#include "apis/manifests.h"
#include "bind/web/oidc_client.h"
#include "bind/web/web_backend.h"
#include "compose/xrd.h"
#include "http/server.h"
#include "test/support/bind_web.h"
#include "test/support/browser.h"
#include "test/support/oidc_provider.h"
#include "test/support/process.h"

namespace klutch::bind {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

// The claim CRD Crossplane makes of package XRD `file` (deploy/package/definitions/), as the
// manager makes it.
core::Result<Json> ClaimCrdOfPackageXrd(const std::string& file) {
  for (const auto& m : apis::PackageManifests()) {
    if (m.name != "definitions/" + file) continue;
    KLUTCH_ASSIGN_OR_RETURN(Json xrd, machinery::ParseYaml(m.text));
    KLUTCH_ASSIGN_OR_RETURN(compose::GeneratedCrds crds, compose::CrdsForXrd(xrd));
    if (!crds.claim) return core::Internal(file + " offers no claim");
    Json crd = std::move(*crds.claim);
    crd["metadata"].erase("ownerReferences");  // no XRD here to own it
    return crd;
  }
  return core::NotFound("no " + file + " in Klutch's package");
}

// Klutch's APIs on the Control Plane as `klutch up` offers them: provider CRDs, the
// PostgreSQL and KeyValue claim CRDs with their templates, the Composition CRD and the a9s
// Compositions (so the catalog shows the plans of the Compositions that exist).
core::Status SetUpKlutchApis(client::RestClient& admin) {
  for (auto file : apis::ProviderCrdFiles(false)) {
    KLUTCH_ASSIGN_OR_RETURN(Json crd, machinery::ParseYaml(apis::KlutchCrdYaml(file)));
    KLUTCH_RETURN_IF_ERROR(reconcile::InstallCrd(admin, crd, std::chrono::seconds(30)));
  }
  KLUTCH_ASSIGN_OR_RETURN(
      Json compositions, machinery::ParseYaml(apis::CrossplaneCrdYaml(apis::kCompositionsCrdFile)));
  KLUTCH_RETURN_IF_ERROR(reconcile::InstallCrd(admin, compositions, std::chrono::seconds(30)));
  (void)client::ResourceClient(admin, client::resources::kNamespaces)
      .Create({{"apiVersion", "v1"},
               {"kind", "Namespace"},
               {"metadata", {{"name", "crossplane-system"}}}});
  for (const char* file : {"postgresql.yaml", "keyvalue.yaml"}) {
    KLUTCH_ASSIGN_OR_RETURN(Json crd, ClaimCrdOfPackageXrd(file));
    KLUTCH_RETURN_IF_ERROR(reconcile::InstallCrd(admin, crd, std::chrono::seconds(30)));
    const std::string plural = crd["spec"]["names"]["plural"];
    Json tmpl = {
        {"apiVersion", "example-backend.klutch.anynines.com/v1alpha1"},
        {"kind", "APIServiceExportTemplate"},
        {"metadata", {{"name", plural}, {"namespace", "crossplane-system"}}},
        {"spec", {{"APIServiceSelector", {{"group", "anynines.com"}, {"resource", plural}}}}}};
    KLUTCH_RETURN_IF_ERROR(
        client::ResourceClient(admin, apis::klutch::kApiServiceExportTemplates, "crossplane-system")
            .Create(tmpl)
            .status());
  }
  const machinery::GroupVersionResource kCompositions{"apiextensions.crossplane.io", "v1",
                                                      "compositions"};
  for (const auto& m : apis::PackageManifests()) {
    if (m.name != "compositions/a9s-postgresql.yaml" && m.name != "compositions/a9s-keyvalue.yaml")
      continue;
    KLUTCH_ASSIGN_OR_RETURN(Json composition, machinery::ParseYaml(m.text));
    KLUTCH_RETURN_IF_ERROR(
        client::ResourceClient(admin, kCompositions).Create(composition).status());
  }
  return core::Status::Ok();
}

class BindWebBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    klutch::testing::OidcProvider::Options options;
    options.serve_webapp = true;
    provider_ = klutch::testing::OidcProvider::Start(tmp_.path() / "oidc", &error, options);
    ASSERT_NE(provider_, nullptr) << error;
    auto cluster = klutch::testing::TestCluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = std::move(*cluster);
    auto set_up = SetUpKlutchApis(cluster_->admin());
    ASSERT_TRUE(set_up.ok()) << set_up.ToString();

    auto idp = OidcClient::New({.issuer_url = provider_->issuer(),
                                .client_id = provider_->client_id(),
                                .client_secret = provider_->client_secret(),
                                .redirect_url = provider_->redirect_uri(),
                                .ca_file = provider_->ca_file(),
                                .scopes = "openid"});
    ASSERT_TRUE(idp.ok()) << idp.status().ToString();
    idp_ = std::move(*idp);
    ASSERT_TRUE(idp_->Discover().ok());
    auto sealer = Sealer::New(std::string(32, 's'), std::string(32, 'e'));
    ASSERT_TRUE(sealer.ok());
    // Plain HTTP on loopback: cookies without Secure (a browser drops Secure cookies of
    // http:// pages other than localhost ones).
    backend_ = std::make_unique<WebBackend>(cluster_->admin(), *idp_, *sealer,
                                            WebOptions{.pretty_name = "Klutch sandbox",
                                                       .provision = {.namespace_prefix = "cluster"},
                                                       .secure_cookies = false});
    backend_->AddRoutes(router_);
    auto server = http::Server::Start({.threads = 4, .io_threads = 1}, router_.AsHandler());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    base_ = "http://127.0.0.1:" + std::to_string(server_->port());
    // glewlwyd sends the browser to the client's registered redirect URI, where no server
    // listens: the browser stops there, and the test carries code and state to our /callback
    // (what the redirect would do if the URI were ours).
    browser_.intercept_prefixes = {provider_->redirect_uri(), "http://127.0.0.1:40999/"};
    browser_.timeout = std::chrono::seconds(90);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  // Our /callback for the redirect URI glewlwyd sent the browser to.
  std::string CallbackUrl(const std::string& redirected) {
    EXPECT_TRUE(redirected.starts_with(provider_->redirect_uri() + "?")) << redirected;
    return base_ + "/callback" + redirected.substr(provider_->redirect_uri().size());
  }

  klutch::testing::TempDir tmp_{"klutch-bind-web-browser"};
  fs::path artifacts_ = klutch::testing::TestArtifactsDir();
  std::unique_ptr<klutch::testing::OidcProvider> provider_;
  std::unique_ptr<klutch::testing::TestCluster> cluster_;
  std::unique_ptr<OidcClient> idp_;
  http::Router router_;
  std::unique_ptr<WebBackend> backend_;
  std::unique_ptr<http::Server> server_;
  std::string base_;
  klutch::testing::BrowserOptions browser_;
};

TEST_F(BindWebBrowser, FrontPageCatalogAndConsumerPageWithLogin) {
  using klutch::testing::BrowserFlow;
  using klutch::testing::RunBrowserFlow;

  // 1. The URL `make up` prints: a front page saying what this is and how to bind.
  BrowserFlow front;
  front.Goto(base_ + "/")
      .WaitForSelector("text=Bind a cluster")
      .Screenshot(artifacts_ / "front-page.png")
      .Text("front");
  auto shown = RunBrowserFlow(front, browser_);
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  const std::string& text = shown->values["front"];
  // The backend advertises https (it serves TLS outside tests): so does the page.
  EXPECT_NE(
      text.find("kubectl bind https://127.0.0.1:" + std::to_string(server_->port()) + "/export"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("Log in"), std::string::npos) << text;
  EXPECT_NE(text.find("Catalog of services"), std::string::npos) << text;
  EXPECT_NE(text.find("Your clusters and claims"), std::string::npos) << text;

  // 2. kubectl bind's browser flow for App Cluster "kind-app-1": login, the catalog with
  // PostgreSQL's plans, bind PostgreSQL (the credentials go to the CLI's port, intercepted).
  browser_.storage_state = tmp_.path() / "cli-browser.json";
  BrowserFlow login;
  login
      .Goto(base_ + "/authorize?u=http%3A%2F%2F127.0.0.1%3A40999%2Fcallback&s=Sess01&c=clusA1" +
            "&n=kind-app-1")
      .GlewlwydLogin("alice", "alice-pw")
      .WaitForUrlPrefix(provider_->redirect_uri())
      .Url("redirected");
  auto logged_in = RunBrowserFlow(login, browser_);
  ASSERT_TRUE(logged_in.ok()) << logged_in.status().ToString() << "\n" << provider_->log();
  BrowserFlow catalog;
  catalog.Goto(CallbackUrl(logged_in->values["redirected"]))
      .WaitForUrlPrefix(base_ + "/resources")
      .WaitForSelector("button.postgresqlinstances")
      .Screenshot(artifacts_ / "catalog.png")
      .Text("catalog", "section[id='postgresqlinstances.anynines.com']")
      .Text("keyvalue", "section[id='keyvalueinstances.anynines.com']")
      .Click("button.postgresqlinstances")
      .WaitForUrlPrefix("http://127.0.0.1:40999/callback?response=")
      .Url("cli");
  auto bound = RunBrowserFlow(catalog, browser_);
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  const std::string& pg = bound->values["catalog"];
  EXPECT_EQ(pg.find("Plans\nnone"), std::string::npos) << pg;
  EXPECT_NE(pg.find("postgresql-single-nano"), std::string::npos) << pg;
  EXPECT_NE(pg.find("with Composition a9s-postgresql"), std::string::npos) << pg;
  // a8s-postgresql's plans are not offered: no such Composition on this Control Plane.
  EXPECT_EQ(pg.find("a8s-postgresql"), std::string::npos) << pg;
  EXPECT_EQ(pg.find("postgresql-replica-medium"), std::string::npos) << pg;
  EXPECT_NE(bound->values["keyvalue"].find("keyvalue-single-nano-ssl"), std::string::npos)
      << bound->values["keyvalue"];

  // What the konnector and a claim in App Cluster namespace "default" leave behind.
  auto namespaces = testing::ClusterNamespaces(cluster_->admin());
  ASSERT_EQ(namespaces.size(), 1u);
  const std::string ns = namespaces[0];
  testing::SeedConnectedClusterWithClaim(cluster_->admin(), ns,
                                         {{"service", "a9s-postgresql15"},
                                          {"plan", "postgresql-single-nano"},
                                          {"compositionRef", {{"name", "a9s-postgresql"}}}});

  // 3. A fresh browser opens /consumer: it offers a login and comes back after it, showing
  // the cluster and the claim in the names the user knows.
  browser_.storage_state = tmp_.path() / "fresh-browser.json";
  BrowserFlow consumer_login;
  consumer_login.Goto(base_ + "/consumer")
      .WaitForSelector("a.action")
      .Screenshot(artifacts_ / "consumer-not-logged-in.png")
      .Click("a.action")
      .GlewlwydLogin("alice", "alice-pw")
      .WaitForUrlPrefix(provider_->redirect_uri())
      .Url("redirected");
  auto again = RunBrowserFlow(consumer_login, browser_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  BrowserFlow consumer;
  consumer.Goto(CallbackUrl(again->values["redirected"]))
      .WaitForUrlPrefix(base_ + "/consumer")
      .WaitForSelector("section.cluster")
      .Screenshot(artifacts_ / "consumer.png")
      .Url("page")
      .Text("title", "section.cluster h2")
      .Text("claims", "section.cluster table");
  auto page = RunBrowserFlow(consumer, browser_);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->values["page"], base_ + "/consumer");
  EXPECT_NE(page->values["title"].find("kind-app-1"), std::string::npos) << page->values["title"];
  EXPECT_EQ(page->values["title"].find("clusA1"), std::string::npos) << page->values["title"];
  const std::string& claims = page->values["claims"];
  EXPECT_NE(claims.find("default"), std::string::npos) << claims;
  EXPECT_NE(claims.find("db1"), std::string::npos) << claims;
  for (const char* png :
       {"front-page.png", "catalog.png", "consumer-not-logged-in.png", "consumer.png"}) {
    EXPECT_GT(fs::file_size(artifacts_ / png), 1000u) << png;
  }
}

}  // namespace
}  // namespace klutch::bind
