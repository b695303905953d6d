// The bind backend's HTTP side against a real OpenID Connect provider (glewlwyd, run by
// test/support/oidc_provider.h) and the in-process TestCluster: the browser flow with PKCE and
// nonce, the device grant, ID token verification failures and the state checks, each failure
// leaving the Control Plane untouched.
#include <gtest/gtest.h>

#include <thread>

#include "auth/jwt.h"
#include "bind/web/oidc_client.h"
#include "bind/web/web_backend.h"
#include "core/random.h"
#include "test/support/bind_web.h"
#include "test/support/oidc_provider.h"
#include "test/support/process.h"

namespace klutch::bind {
namespace {

using machinery::Json;
using testing::Browser;
using testing::QueryParam;

const std::string kSigningKey(64, 'S');
const std::string kEncryptionKey(32, 'E');

// Swaps the token an exchange yields for another one (a token of another client, or signed
// with another key) and verifies that one as the backend would: what an attacker who controls
// the token response achieves.
class SwappingIdp final : public IdentityProvider {
 public:
  SwappingIdp(OidcClient& real, std::function<std::string()> token)
      : real_(real), token_(std::move(token)) {}
  const std::string& issuer() const override { return real_.issuer(); }
  core::Result<std::string> AuthorizationUrl(const AuthorizationRequest& r) override {
    return real_.AuthorizationUrl(r);
  }
  core::Result<IdTokenClaims> ExchangeCode(const std::string&, const std::string&,
                                           const std::string& nonce) override {
    return real_.VerifyIdToken(token_(), nonce);
  }
  bool SupportsDeviceGrant() override { return false; }
  core::Result<DeviceAuthorization> StartDeviceAuthorization() override {
    return core::BadRequest("no");
  }
  core::Result<DevicePoll> PollDeviceToken(const std::string&) override {
    return core::BadRequest("no");
  }

 private:
  OidcClient& real_;
  std::function<std::string()> token_;
};

class BindWeb : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new klutch::testing::TempDir("klutch-bind-web-oidc");
    std::string error;
    provider_ = klutch::testing::OidcProvider::Start(dir_->path(), &error).release();
    ASSERT_NE(provider_, nullptr) << error;
    auto cluster = klutch::testing::TestCluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = cluster->release();
    ASSERT_TRUE(testing::SetUpControlPlane(cluster_->admin()).ok());
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete provider_;
    delete dir_;
  }

  void SetUp() override {
    ASSERT_NE(provider_, nullptr);
    idp_ = NewClient(provider_->client_id(), provider_->client_secret());
    ASSERT_TRUE(idp_->Discover().ok());
    backend_ = NewBackend(*idp_, router_);
    before_ = testing::ClusterNamespaces(cluster_->admin()).size();
  }

  std::unique_ptr<OidcClient> NewClient(const std::string& id, const std::string& secret) {
    auto c = OidcClient::New({.issuer_url = provider_->issuer(),
                              .client_id = id,
                              .client_secret = secret,
                              .redirect_url = provider_->redirect_uri(),
                              .ca_file = provider_->ca_file(),
                              .scopes = "openid"});
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::unique_ptr<WebBackend> NewBackend(IdentityProvider& idp, http::Router& router) {
    auto sealer = Sealer::New(kSigningKey, kEncryptionKey);
    EXPECT_TRUE(sealer.ok());
    auto b = std::make_unique<WebBackend>(cluster_->admin(), idp, *sealer, WebOptions{});
    b->AddRoutes(router);
    return b;
  }

  // /authorize, then the user's login at glewlwyd: the /callback target glewlwyd sends the
  // browser to.
  std::string LoginAtIssuer(Browser& browser, const std::string& sid, const std::string& cid,
                            const std::string& user = "alice",
                            const std::string& password = "alice-pw") {
    http::Response r = browser.Get("/authorize?p=41000&s=" + sid + "&c=" + cid);
    EXPECT_EQ(r.status, 302) << r.body;
    std::string url(r.headers.Get("Location"));
    EXPECT_TRUE(url.starts_with(provider_->issuer() + "/auth?")) << url;
    EXPECT_EQ(QueryParam(url, "code_challenge_method"), "S256");
    EXPECT_FALSE(QueryParam(url, "nonce").empty());
    auto location = provider_->AuthorizeAs(user, password, url);
    EXPECT_TRUE(location.ok()) << location.status().ToString();
    if (!location.ok()) return "";
    EXPECT_TRUE(location->starts_with(provider_->redirect_uri() + "?")) << *location;
    return "/callback" + location->substr(provider_->redirect_uri().size());
  }

  size_t NamespacesCreated() {
    return testing::ClusterNamespaces(cluster_->admin()).size() - before_;
  }

  static klutch::testing::TempDir* dir_;
  static klutch::testing::OidcProvider* provider_;
  static klutch::testing::TestCluster* cluster_;
  std::unique_ptr<OidcClient> idp_;
  http::Router router_;
  std::unique_ptr<WebBackend> backend_;
  size_t before_ = 0;
};

klutch::testing::TempDir* BindWeb::dir_ = nullptr;
klutch::testing::OidcProvider* BindWeb::provider_ = nullptr;
klutch::testing::TestCluster* BindWeb::cluster_ = nullptr;

TEST_F(BindWeb, CodeFlowWithPkceAndNonceBindsAndTheKubeconfigWorks) {
  Browser browser(router_);
  std::string callback = LoginAtIssuer(browser, "Sess01", "clusA1");
  http::Response cb = browser.Get(callback);
  ASSERT_EQ(cb.status, 302) << cb.body;
  EXPECT_EQ(cb.headers.Get("Location"), "/resources?s=Sess01");
  http::Response page = browser.Get("/resources?s=Sess01");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_NE(page.body.find("alice@example.test"), std::string::npos);
  EXPECT_NE(page.body.find("PostgresqlInstance"), std::string::npos);

  http::Response bound = browser.Post("/bind", {{"s", "Sess01"},
                                                {"group", "anynines.com"},
                                                {"resource", "postgresqlinstances"},
                                                {"csrf", testing::FormValue(page.body, "csrf")}});
  ASSERT_EQ(bound.status, 303) << bound.body;
  std::string location(bound.headers.Get("Location"));
  ASSERT_TRUE(location.starts_with("http://localhost:41000/callback?response=")) << location;
  Json response = testing::DecodeResponse(location);
  EXPECT_EQ(response["authentication"]["oauth2CodeGrant"]["sid"], "Sess01");
  // The name kubectl bind greets the user with, from glewlwyd's ID token (issue #23).
  EXPECT_EQ(response["authentication"]["oauth2CodeGrant"]["displayName"], "alice@example.test");
  const std::string id = response["authentication"]["oauth2CodeGrant"]["id"];
  EXPECT_TRUE(id.starts_with(provider_->issuer() + "/")) << id;
  ASSERT_EQ(NamespacesCreated(), 1u);

  // The kubeconfig's token is a working credential of the consumer's service account.
  auto kubeconfig =
      machinery::ParseYaml(*core::Base64Decode(response["kubeconfig"].get<std::string>()));
  ASSERT_TRUE(kubeconfig.ok());
  const std::string ns = (*kubeconfig)["contexts"][0]["context"]["namespace"];
  const std::string token = (*kubeconfig)["users"][0]["user"]["token"];
  auto consumer = cluster_->ClientWithToken(token);
  auto probe = client::ResourceClient(*consumer, client::resources::kNamespaces).Get("kube-system");
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().reason(), core::Reason::kForbidden) << probe.status().ToString();
  EXPECT_NE(probe.status().message().find("system:serviceaccount:" + ns + ":klutch-binder"),
            std::string::npos)
      << probe.status().message();

  // The consumer page shows the cluster.
  http::Response mine = browser.Get("/consumer?s=Sess01");
  ASSERT_EQ(mine.status, 200);
  EXPECT_NE(mine.body.find(ns), std::string::npos);
  EXPECT_NE(mine.body.find("clusA1"), std::string::npos);
}

TEST_F(BindWeb, ReplayedOrStolenCallbackIsRefusedAndCreatesNothing) {
  Browser victim(router_);
  std::string callback = LoginAtIssuer(victim, "Sess02", "clusB1");
  Browser attacker(router_);
  http::Response stolen = attacker.Get(callback);
  EXPECT_EQ(stolen.status, 400);
  EXPECT_NE(stolen.body.find("not started in this browser"), std::string::npos);
  ASSERT_EQ(victim.Get(callback).status, 302);
  http::Response replay = victim.Get(callback);
  EXPECT_EQ(replay.status, 400);
  EXPECT_EQ(NamespacesCreated(), 0u);
}

TEST_F(BindWeb, ForgedStateAndTamperedCookieAreRefused) {
  Browser browser(router_);
  std::string callback = LoginAtIssuer(browser, "Sess03", "clusC1");
  std::string code = QueryParam("x" + callback, "code");
  http::Response forged = browser.Get("/callback?code=" + core::PercentEncode(code) +
                                      "&state=eyJzaWQiOiJTZXNzMDMifQ%3D%3D");
  EXPECT_EQ(forged.status, 400);
  EXPECT_NE(forged.body.find("not issued by this backend"), std::string::npos);
  // The real state still works once (the code was not used up by the forged attempt).
  ASSERT_EQ(browser.Get(callback).status, 302);
  std::string& cookie = browser.jar["klutch-bind-Sess03"];
  cookie.back() = cookie.back() == 'A' ? 'B' : 'A';
  http::Response page = browser.Get("/resources?s=Sess03");
  EXPECT_EQ(page.status, 401);
  http::Response bind = browser.Post(
      "/bind", {{"s", "Sess03"}, {"group", "anynines.com"}, {"resource", "postgresqlinstances"}});
  EXPECT_EQ(bind.status, 401);
  EXPECT_EQ(NamespacesCreated(), 0u);
}

TEST_F(BindWeb, IdTokensOfAnotherClientOrKeyOrLoginAreRefused) {
  ASSERT_TRUE(provider_->AddClient("intruder", "intruder-secret").ok());
  auto genuine = provider_->IdToken("alice", "alice-pw");
  ASSERT_TRUE(genuine.ok()) << genuine.status().ToString();
  EXPECT_TRUE(idp_->VerifyIdToken(*genuine, "").ok());
  // IdToken() sends a random nonce: the backend's own nonce differs.
  auto other_login = idp_->VerifyIdToken(*genuine, "our-nonce");
  ASSERT_FALSE(other_login.ok());
  EXPECT_NE(other_login.status().message().find("nonce"), std::string::npos);

  auto other_client = provider_->IdToken("alice", "alice-pw", "intruder", "intruder-secret");
  ASSERT_TRUE(other_client.ok()) << other_client.status().ToString();
  auto refused = idp_->VerifyIdToken(*other_client, "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), core::Reason::kUnauthorized);

  // Same claims, signed by a key the issuer never published.
  auto jwt = auth::ParseJwt(*genuine);
  ASSERT_TRUE(jwt.ok());
  auto key = auth::SigningKey::Generate();
  ASSERT_TRUE(key.ok());
  auto forged = key->Sign(jwt->claims);
  ASSERT_TRUE(forged.ok());
  EXPECT_FALSE(idp_->VerifyIdToken(*forged, "").ok());

  // Through the routes: a login whose token response carries the other client's token
  // fails with a clear page and creates nothing.
  SwappingIdp swapping(*idp_, [&] { return *other_client; });
  http::Router router;
  auto backend = NewBackend(swapping, router);
  Browser browser(router);
  http::Response r = browser.Get("/authorize?p=41000&s=Sess04&c=clusD1");
  ASSERT_EQ(r.status, 302);
  std::string url(r.headers.Get("Location"));
  http::Response cb =
      browser.Get("/callback?code=x&state=" + core::PercentEncode(QueryParam(url, "state")));
  EXPECT_EQ(cb.status, 401);
  EXPECT_NE(cb.body.find("does not verify"), std::string::npos) << cb.body;
  EXPECT_FALSE(browser.jar.count("klutch-bind-Sess04"));
  EXPECT_EQ(NamespacesCreated(), 0u);
}

TEST_F(BindWeb, KeyRotationAtTheIssuerIsFollowed) {
  ASSERT_TRUE(provider_->RotateKey().ok());
  auto token = provider_->IdToken("alice", "alice-pw");
  ASSERT_TRUE(token.ok());
  auto claims = idp_->VerifyIdToken(*token, "");
  EXPECT_TRUE(claims.ok()) << claims.status().ToString();
}

TEST_F(BindWeb, DeviceGrantEndToEnd) {
  Browser cli(router_);
  auto exported = machinery::ParseJson(cli.Get("/export").body);
  ASSERT_TRUE(exported.ok());
  ASSERT_EQ((*exported)["authenticationMethods"].size(), 2u) << exported->dump();
  EXPECT_EQ((*exported)["authenticationMethods"][1]["method"], "OAuth2DeviceGrant");

  http::Response started = cli.Post("/device/authorize", {{"s", "Dev001"}, {"c", "clusE1"}});
  ASSERT_EQ(started.status, 200) << started.body;
  auto start = machinery::ParseJson(started.body);
  ASSERT_TRUE(start.ok());
  const std::string user_code = (*start)["user_code"];
  const std::string handle = (*start)["device_handle"];
  EXPECT_TRUE((*start)["verification_uri"].get<std::string>().starts_with(provider_->issuer()));
  const int interval = (*start)["interval"];
  std::vector<std::pair<std::string, std::string>> poll = {
      {"device_handle", handle}, {"group", "anynines.com"}, {"resource", "postgresqlinstances"}};
  http::Response pending = cli.Post("/device/token", poll);
  EXPECT_EQ(pending.status, 400);
  EXPECT_EQ((*machinery::ParseJson(pending.body))["error"], "authorization_pending")
      << pending.body;
  EXPECT_EQ(NamespacesCreated(), 0u);

  ASSERT_TRUE(provider_->ApproveDevice("alice", "alice-pw", user_code).ok());
  http::Response done;
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(interval));  // RFC 8628 §3.5 polling
    done = cli.Post("/device/token", poll);
    if (done.status == 200) break;
    auto error = (*machinery::ParseJson(done.body))["error"];
    ASSERT_TRUE(error == "authorization_pending" || error == "slow_down") << done.body;
  }
  ASSERT_EQ(done.status, 200) << done.body;
  auto response = machinery::ParseJson(done.body);
  ASSERT_TRUE(response.ok());
  EXPECT_EQ((*response)["kind"], "BindingResponse");
  EXPECT_EQ((*response)["authentication"]["oauth2CodeGrant"]["sid"], "Dev001");
  EXPECT_EQ((*response)["authentication"]["oauth2CodeGrant"]["displayName"], "alice@example.test");
  EXPECT_EQ((*response)["requests"][0]["metadata"]["name"], "postgresqlinstances.anynines.com");
  EXPECT_EQ(NamespacesCreated(), 1u);
  // The device code is used up: refused with a description the CLI can print.
  http::Response again = cli.Post("/device/token", poll);
  EXPECT_EQ(again.status, 400);
  auto refused = machinery::ParseJson(again.body);
  ASSERT_TRUE(refused.ok()) << again.body;
  EXPECT_FALSE(machinery::GetString(*refused, {"error"}).empty()) << again.body;
  EXPECT_FALSE(machinery::GetString(*refused, {"error_description"}).empty()) << again.body;
}

}  // namespace
}  // namespace klutch::bind
