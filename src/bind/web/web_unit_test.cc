// The bind backend's HTTP side without an identity provider: sealed values, the pages, and the
// routes driven by a browser against the in-process TestCluster with a fake issuer that checks
// PKCE and nonces as a real one does. The wire documents are tested in src/apis/klutch/.
#include <gtest/gtest.h>

#include <map>

#include "apis/klutch/clusterbinding.h"
#include "apis/manifests.h"
#include "bind/catalog.h"
#include "bind/web/sealer.h"
#include "bind/web/web_backend.h"
#include "bind/web/web_html.h"
#include "bind/web/web_protocol.h"
#include "core/clock.h"
#include "core/random.h"
#include "core/sync.h"
#include "test/support/bind_web.h"

namespace klutch::bind {
namespace {

using machinery::Json;
using testing::Browser;
using testing::QueryParam;

const std::string kSigningKey(32, 's');
const std::string kEncryptionKey(32, 'e');

Sealer MakeSealer(std::string signing = kSigningKey, std::string encryption = kEncryptionKey) {
  auto s = Sealer::New(signing, encryption);
  KLUTCH_CHECK(s.ok());
  return *s;
}

core::SystemTime T(int64_t unix_seconds) {
  return core::SystemTime(std::chrono::seconds(unix_seconds));
}

// ---- Sealer ----

TEST(Sealer, RoundTripsDataForItsPurpose) {
  Sealer s = MakeSealer();
  Json data = {{"sub", "alice"}, {"n", 3}};
  std::string sealed = s.Seal("session", data, T(2000));
  EXPECT_TRUE(sealed.starts_with("k1."));
  EXPECT_EQ(sealed.find("alice"), std::string::npos) << "sealed values are encrypted";
  auto opened = s.Unseal("session", sealed, T(1999));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(*opened, data);
}

TEST(Sealer, SealsDifferentlyEachTime) {
  Sealer s = MakeSealer();
  EXPECT_NE(s.Seal("x", 1, T(10)), s.Seal("x", 1, T(10)));
}

TEST(Sealer, RefusesExpiredValuesWithExpired) {
  Sealer s = MakeSealer();
  std::string sealed = s.Seal("session", "v", T(2000));
  auto opened = s.Unseal("session", sealed, T(2000));
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().reason(), core::Reason::kExpired);
}

TEST(Sealer, RefusesAnotherPurpose) {
  Sealer s = MakeSealer();
  std::string state = s.Seal("state", "v", T(2000));
  auto opened = s.Unseal("session", state, T(1));
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().reason(), core::Reason::kUnauthorized);
}

TEST(Sealer, RefusesEveryFlippedCharacter) {
  Sealer s = MakeSealer();
  std::string sealed = s.Seal("session", Json{{"sub", "alice"}}, T(2000));
  for (size_t i = 3; i < sealed.size(); ++i) {
    std::string tampered = sealed;
    tampered[i] = tampered[i] == 'A' ? 'B' : 'A';
    auto opened = s.Unseal("session", tampered, T(1));
    EXPECT_FALSE(opened.ok()) << "position " << i;
  }
}

TEST(Sealer, RefusesOtherKeys) {
  std::string sealed = MakeSealer().Seal("session", "v", T(2000));
  EXPECT_FALSE(
      MakeSealer(std::string(32, 'x'), kEncryptionKey).Unseal("session", sealed, T(1)).ok());
  EXPECT_FALSE(MakeSealer(kSigningKey, std::string(32, 'x')).Unseal("session", sealed, T(1)).ok());
  // Another replica with the same keys opens it (stateless backend).
  EXPECT_TRUE(MakeSealer().Unseal("session", sealed, T(1)).ok());
}

TEST(Sealer, RefusesMalformedInput) {
  Sealer s = MakeSealer();
  for (const std::string& bad : std::vector<std::string>{
           "", "k1.", "k1.!!!!", "k2.AAAA", "AAAA", "k1.AAAAAAAAAAAAAAAAAAAAAAAA",
           "k1." + std::string(kMaxSealedBytes, 'A')}) {
    auto opened = s.Unseal("session", bad, T(1));
    ASSERT_FALSE(opened.ok()) << bad;
    EXPECT_EQ(opened.status().reason(), core::Reason::kUnauthorized) << bad;
  }
}

TEST(Sealer, ChecksKeyLengthsNamingTheFlag) {
  auto short_signing = Sealer::New(std::string(16, 'a'), kEncryptionKey);
  ASSERT_FALSE(short_signing.ok());
  EXPECT_NE(short_signing.status().message().find("--cookie-signing-key"), std::string::npos);
  auto bad_encryption = Sealer::New(kSigningKey, std::string(20, 'a'));
  ASSERT_FALSE(bad_encryption.ok());
  EXPECT_NE(bad_encryption.status().message().find("--cookie-encryption-key"), std::string::npos);
  EXPECT_TRUE(Sealer::New(std::string(64, 'a'), std::string(16, 'b')).ok());
  EXPECT_TRUE(Sealer::New(kSigningKey, std::string(24, 'b')).ok());
}

TEST(Sealer, ReadsBase64Flags) {
  EXPECT_TRUE(
      Sealer::FromBase64(core::Base64Encode(kSigningKey), core::Base64Encode(kEncryptionKey)).ok());
  EXPECT_TRUE(
      Sealer::FromBase64(core::Base64UrlEncode(kSigningKey), core::Base64UrlEncode(kEncryptionKey))
          .ok());
  auto missing = Sealer::FromBase64("", core::Base64Encode(kEncryptionKey));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--cookie-signing-key is required"), std::string::npos);
  auto garbage = Sealer::FromBase64(core::Base64Encode(kSigningKey), "not base64!");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("--cookie-encryption-key"), std::string::npos);
}

TEST(Sealer, MacsAreTiedToDataAndKeys) {
  Sealer s = MakeSealer();
  std::string mac = s.Mac("csrf", "session-1");
  EXPECT_TRUE(s.VerifyMac("csrf", "session-1", mac));
  EXPECT_FALSE(s.VerifyMac("csrf", "session-2", mac));
  EXPECT_FALSE(s.VerifyMac("other", "session-1", mac));
  EXPECT_FALSE(s.VerifyMac("csrf", "session-1", ""));
  EXPECT_FALSE(MakeSealer(std::string(32, 'z')).VerifyMac("csrf", "session-1", mac));
}

TEST(Pkce, S256MatchesRfc7636Example) {
  // RFC 7636 Appendix B.
  EXPECT_EQ(PkceChallengeS256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
  std::string a = RandomToken(), b = RandomToken();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 43u);  // 32 bytes, unpadded base64url: within RFC 7636's 43-128
}

// ---- wire formats ----

TEST(IdTokenClaims, DisplayNameIsPreferredUsernameElseEmailElseNameElseSubject) {
  IdTokenClaims c{.subject = "Mne2w2",
                  .email = "alice@example.test",
                  .name = "Alice W",
                  .preferred_username = " alice "};
  EXPECT_EQ(DisplayNameOf(c), "alice");
  c.preferred_username = "";
  EXPECT_EQ(DisplayNameOf(c), "alice@example.test");
  c.email = "bad\x1b[2Jname";  // a terminal escape is never printed
  EXPECT_EQ(DisplayNameOf(c), "Alice W");
  c.name = std::string(257, 'x');
  EXPECT_EQ(DisplayNameOf(c), "Mne2w2");
}

TEST(Ids, AcceptLettersAndDigitsOnly) {
  EXPECT_TRUE(IsValidId("aB3xZ9"));
  for (const std::string& bad :
       std::vector<std::string>{"", "a b", "a;b", "a=b", "../x", "ä", std::string(65, 'a')}) {
    EXPECT_FALSE(IsValidId(bad)) << bad;
  }
}

TEST(ClusterNameParameter, TrimsAndRefusesWhatCannotBeAName) {
  EXPECT_EQ(ClusterNameParameter(std::nullopt).value(), "");
  EXPECT_EQ(ClusterNameParameter(" kind-app-1 ").value(), "kind-app-1");
  EXPECT_EQ(ClusterNameParameter("arn:aws:eks:eu-1:42:cluster/app").value(),
            "arn:aws:eks:eu-1:42:cluster/app");
  EXPECT_EQ(ClusterNameParameter(std::string(253, 'x')).value().size(), 253u);
  for (const std::string& bad :
       {std::string(254, 'x'), std::string("a\nb"), std::string("a\x7f")}) {
    auto r = ClusterNameParameter(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), core::Reason::kBadRequest);
    EXPECT_NE(r.status().message().find("parameter n (the cluster's name)"), std::string::npos);
  }
}

TEST(CliRedirectUrl, PortOrLoopbackUrlOnly) {
  EXPECT_EQ(*CliRedirectUrl(std::nullopt, "8080"), "http://localhost:8080/callback");
  EXPECT_EQ(*CliRedirectUrl("http://127.0.0.1:9/cb?x=1", std::nullopt),
            "http://127.0.0.1:9/cb?x=1");
  EXPECT_TRUE(CliRedirectUrl("http://localhost:1/callback", std::nullopt).ok());
  EXPECT_TRUE(CliRedirectUrl("https://[::1]:1/callback", std::nullopt).ok());
  for (std::string bad : {"https://evil.example/callback", "http://localhost.evil.example/",
                          "http://user@localhost/", "javascript:alert(1)", "http://127.0.0.1.evil/",
                          "http://localhost:99999/", "http://localhost/\r\nx", "//localhost/"}) {
    auto r = CliRedirectUrl(bad, std::nullopt);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().reason(), core::Reason::kBadRequest);
    }
  }
  EXPECT_FALSE(CliRedirectUrl(std::nullopt, "0").ok());
  EXPECT_FALSE(CliRedirectUrl(std::nullopt, "x").ok());
  auto none = CliRedirectUrl(std::nullopt, std::nullopt);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("u or p"), std::string::npos);
}

TEST(AddQueryParameter, KeepsExistingQueryAndFragment) {
  EXPECT_EQ(AddQueryParameter("http://localhost:1/callback", "response", "a=b"),
            "http://localhost:1/callback?response=a%3Db");
  EXPECT_EQ(AddQueryParameter("http://h/cb?x=1#frag", "k", "v"), "http://h/cb?x=1&k=v#frag");
  EXPECT_EQ(AddQueryParameter("http://h/cb?", "k", "v"), "http://h/cb?k=v");
}

TEST(Cookies, ParseAndFind) {
  auto c = ParseCookies(" a=1; b = \"two\" ;bad; =x; c=");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], (std::pair<std::string, std::string>{"a", "1"}));
  EXPECT_EQ(c[1], (std::pair<std::string, std::string>{"b", "two"}));
  EXPECT_EQ(c[2], (std::pair<std::string, std::string>{"c", ""}));
  EXPECT_EQ(FindCookie({"x=1", "a=2; b=3"}, "b"), "3");
  EXPECT_EQ(FindCookie({"x=1"}, "b"), std::nullopt);
}

TEST(Cookies, SetCookieHasSecurityAttributes) {
  std::string v = SetCookieValue("klutch-bind-abc", "val", 0, {.max_age_seconds = 3600});
  EXPECT_EQ(v,
            "klutch-bind-abc=val; Path=/; Max-Age=3600; Expires=Thu, 01 Jan 1970 01:00:00 GMT; "
            "HttpOnly; SameSite=Lax; Secure");
  std::string cleared = SetCookieValue("n", "val", 100, {.clear = true});
  EXPECT_NE(cleared.find("n=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT"),
            std::string::npos);
}

TEST(Forms, ParseAndRefuseHugeBodies) {
  auto f = ParseForm("s=abc&group=anynines.com&resource=postgres+instances&x=%zz");
  EXPECT_EQ(FirstValue(f, "resource"), "postgres instances");
  EXPECT_EQ(FirstValue(f, "x"), "%zz");
  EXPECT_EQ(FirstValue(f, "missing"), std::nullopt);
  EXPECT_TRUE(ParseForm(std::string(70000, 'a')).empty());
}

// ---- pages ----

TEST(Html, CatalogEscapesAndHasFormsPerApi) {
  OfferedApi api;
  api.group = "anynines.com";
  api.resource = "postgresqlinstances";
  api.kind = "PostgresqlInstance";
  api.scope = "Namespaced";
  api.description = "<script>alert(1)</script>";
  api.plans = {"small", "<b>big</b>"};
  api.versions = {"v1"};
  api.permission_claims =
      Json::array({{{"group", ""}, {"resource", "secrets"}, {"required", true}}});
  std::string html = CatalogPage(
      {.sid = "abc", .csrf = "tok", .user = "eve\"<x>", .cluster_id = "c1", .apis = {api}});
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("<b>big"), std::string::npos);
  EXPECT_EQ(html.find("eve\"<x>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("name=\"viewport\""), std::string::npos);
  EXPECT_NE(html.find("<form method=\"post\" action=\"/bind\">"), std::string::npos);
  EXPECT_NE(html.find("class=\"bind postgresqlinstances\""), std::string::npos);
  EXPECT_EQ(testing::FormValue(html, "csrf"), "tok");
  EXPECT_EQ(testing::FormValue(html, "group"), "anynines.com");
  EXPECT_NE(html.find("<code>secrets</code> (required)"), std::string::npos);
  EXPECT_NE(html.find("<code>small</code>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos) << "no JavaScript";
}

// The claim CRD of one of Klutch's package XRDs (deploy/package/definitions/<file>), as
// Crossplane makes it: claim names, the XRD's versions and schemas.
Json ClaimCrdOfPackageXrd(const std::string& file) {
  for (const auto& m : apis::PackageManifests()) {
    if (m.name != "definitions/" + file) continue;
    auto xrd = machinery::ParseYaml(m.text);
    KLUTCH_CHECK(xrd.ok());
    const std::string group = (*xrd)["spec"]["group"];
    const Json& names = (*xrd)["spec"]["claimNames"];
    const std::string plural = names["plural"];
    return {{"metadata", {{"name", plural + "." + group}}},
            {"spec",
             {{"group", group},
              {"names", {{"plural", plural}, {"kind", names["kind"]}}},
              {"scope", "Namespaced"},
              {"versions", (*xrd)["spec"]["versions"]}}}};
  }
  ADD_FAILURE() << "no " << file << " in the package";
  return Json::object();
}

Json TemplateFor(const std::string& group, const std::string& resource) {
  return {{"metadata", {{"name", resource}, {"namespace", "ns"}}},
          {"spec", {{"APIServiceSelector", {{"group", group}, {"resource", resource}}}}}};
}

TEST(Catalog, PostgresqlPlansComeFromTheXrdsValidationRulePerComposition) {
  auto apis = OfferedApisFrom({TemplateFor("anynines.com", "postgresqlinstances")},
                              {ClaimCrdOfPackageXrd("postgresql.yaml")}, "Namespaced");
  ASSERT_EQ(apis.size(), 1u);
  OfferedApi& pg = apis[0];
  ASSERT_EQ(pg.plans_by_composition.size(), 2u);
  EXPECT_EQ(pg.plans_by_composition[0].composition, "a9s-postgresql");
  EXPECT_EQ(pg.plans_by_composition[0].plans.size(), 20u);
  EXPECT_EQ(pg.plans_by_composition[0].plans.front(), "postgresql-single-nano");
  EXPECT_EQ(pg.plans_by_composition[1].composition, "a8s-postgresql");
  EXPECT_EQ(pg.plans_by_composition[1].plans.size(), 8u);
  EXPECT_NE(std::find(pg.plans.begin(), pg.plans.end(), "postgresql-replica-medium"),
            pg.plans.end());
  // Only the Compositions the Control Plane has: a8s-postgresql's own plans go.
  KeepPlansOfCompositions(pg, {"a9s-postgresql", "a9s-keyvalue"});
  ASSERT_EQ(pg.plans_by_composition.size(), 1u);
  EXPECT_EQ(pg.plans.size(), 20u);
  EXPECT_EQ(std::find(pg.plans.begin(), pg.plans.end(), "postgresql-replica-medium"),
            pg.plans.end());
  std::string html = CatalogPage({.sid = "abc", .csrf = "t", .user = "u", .apis = {pg}});
  EXPECT_NE(html.find("<code>postgresql-single-nano</code>"), std::string::npos) << html;
  EXPECT_NE(html.find("with Composition <code>a9s-postgresql</code>"), std::string::npos) << html;
}

TEST(Catalog, KeyValuePlansStayTheSchemasEnum) {
  auto apis = OfferedApisFrom({TemplateFor("anynines.com", "keyvalueinstances")},
                              {ClaimCrdOfPackageXrd("keyvalue.yaml")}, "Namespaced");
  ASSERT_EQ(apis.size(), 1u);
  EXPECT_TRUE(apis[0].plans_by_composition.empty());
  EXPECT_EQ(apis[0].plans.size(), 7u);
  EXPECT_EQ(apis[0].plans.front(), "keyvalue-replica-small-ssl");
}

TEST(Catalog, RulePlansNeedAnEqualityWithAPlainLiteral) {
  Json crd = {
      {"metadata", {{"name", "things.example.com"}}},
      {"spec",
       {{"group", "example.com"},
        {"names", {{"plural", "things"}, {"kind", "Thing"}}},
        {"scope", "Namespaced"},
        {"versions",
         Json::array({{{"name", "v1"},
                       {"served", true},
                       {"storage", true},
                       {"schema",
                        {{"openAPIV3Schema",
                          {{"type", "object"},
                           {"properties",
                            {{"spec",
                              {{"type", "object"},
                               {"x-kubernetes-validations",
                                Json::array({{{"rule",
                                               "self.plan == 'a' || self.plan==\"b\" || "
                                               "self.plan != 'c' || self.planned == 'd' || "
                                               "myself.plan == 'e' || self.plan.contains('f') "
                                               "|| self.plan == 'a'"}}})}}}}}}}}}}})}}}};
  auto apis = OfferedApisFrom({TemplateFor("example.com", "things")}, {crd}, "Namespaced");
  ASSERT_EQ(apis.size(), 1u);
  EXPECT_EQ(apis[0].plans, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(apis[0].plans_by_composition.empty()) << "no Composition named";
}

TEST(Html, ConsumerPageEscapesClusterText) {
  ConsumerView view{.user = "alice"};
  ClusterView c{.cluster_namespace = "cluster-x",
                .cluster_id = "<id>",
                .last_heartbeat = "2026-01-01T00:00:00Z",
                .heartbeat_age = "5s ago",
                .ready = "True"};
  c.exports.push_back(ExportView{.name = "postgresqlinstances.anynines.com",
                                 .ready = "False",
                                 .message = "<img src=x>",
                                 .claims = {ClaimView{.kind = "PostgresqlInstance",
                                                      .ns = "cluster-x-default",
                                                      .name = "db\"1",
                                                      .ready = "False",
                                                      .reason = "Creating",
                                                      .message = "waiting for <broker>"}}});
  view.clusters.push_back(c);
  std::string html = ConsumerPage(view);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<broker>"), std::string::npos);
  EXPECT_NE(html.find("waiting for &lt;broker&gt;"), std::string::npos);
  EXPECT_NE(html.find("db&quot;1"), std::string::npos);
  EXPECT_NE(html.find("2026-01-01T00:00:00Z (5s ago)"), std::string::npos);
  EXPECT_NE(html.find("&lt;id&gt;"), std::string::npos);
}

TEST(Html, ErrorPageSaysWhatToDo) {
  std::string html = ErrorPage("Login refused", "bad <state>", "run kubectl bind again");
  EXPECT_NE(html.find("bad &lt;state&gt;"), std::string::npos);
  EXPECT_NE(html.find("What to do:</strong> run kubectl bind again"), std::string::npos);
}

// ---- the routes, with a fake issuer ----

// Plays an OIDC issuer: remembers each authorization request, and on Approve() issues a
// code that ExchangeCode redeems once, only with the right PKCE verifier, yielding the nonce
// of its request. Device codes are approved explicitly.
class FakeIdp final : public IdentityProvider {
 public:
  const std::string& issuer() const override { return issuer_; }

  core::Result<std::string> AuthorizationUrl(const AuthorizationRequest& r) override {
    return "https://idp.test/auth?state=" + core::PercentEncode(r.state) +
           "&nonce=" + core::PercentEncode(r.nonce) +
           "&code_challenge=" + core::PercentEncode(r.code_challenge);
  }

  // The code the issuer would send back for the authorization URL `url`, for `subject`.
  std::string Approve(const std::string& url, const std::string& subject) {
    core::MutexLock lock(mu_);
    std::string code = "code-" + std::to_string(codes_.size());
    codes_[code] = {subject, QueryParam(url, "nonce"), QueryParam(url, "code_challenge")};
    return code;
  }

  core::Result<IdTokenClaims> ExchangeCode(const std::string& code, const std::string& verifier,
                                           const std::string& nonce) override {
    core::MutexLock lock(mu_);
    auto it = codes_.find(code);
    if (it == codes_.end()) {
      return core::Status(core::Reason::kUnauthorized,
                          "the identity provider refused the login code (invalid_grant)");
    }
    Pending p = it->second;
    codes_.erase(it);
    if (PkceChallengeS256(verifier) != p.challenge) {
      return core::Status(core::Reason::kUnauthorized, "PKCE verifier mismatch");
    }
    if (p.nonce != nonce) {
      return core::Status(core::Reason::kUnauthorized, "nonce mismatch");
    }
    return Claims(p.subject);
  }

  bool SupportsDeviceGrant() override { return true; }
  core::Result<DeviceAuthorization> StartDeviceAuthorization() override {
    core::MutexLock lock(mu_);
    std::string code = "device-" + std::to_string(devices_.size());
    devices_[code] = "";
    return DeviceAuthorization{.device_code = code,
                               .user_code = "USER-" + code,
                               .verification_uri = "https://idp.test/device",
                               .verification_uri_complete = "https://idp.test/device?code=" + code,
                               .expires_in = 600,
                               .interval = 1};
  }
  // The ID tokens of `subject` carry preferred_username `name` from now on.
  void SetPreferredUsername(const std::string& subject, const std::string& name) {
    core::MutexLock lock(mu_);
    preferred_usernames_[subject] = name;
  }
  void ApproveDevice(const std::string& user_code, const std::string& subject) {
    core::MutexLock lock(mu_);
    devices_[user_code.substr(5)] = subject;
  }
  core::Result<DevicePoll> PollDeviceToken(const std::string& device_code) override {
    core::MutexLock lock(mu_);
    auto it = devices_.find(device_code);
    if (it == devices_.end()) return DevicePoll{.error = "invalid_grant"};
    if (it->second.empty()) return DevicePoll{.error = "authorization_pending"};
    std::string subject = it->second;
    devices_.erase(it);
    return DevicePoll{.claims = Claims(subject)};
  }

 private:
  struct Pending {
    std::string subject, nonce, challenge;
  };
  IdTokenClaims Claims(const std::string& subject) REQUIRES(mu_) {
    auto preferred = preferred_usernames_.find(subject);
    return IdTokenClaims{
        .issuer = issuer_,
        .subject = subject,
        .email = subject + "@example.test",
        .preferred_username = preferred == preferred_usernames_.end() ? "" : preferred->second,
        .expires = core::RealClock::Get().Now() + std::chrono::hours(2)};
  }

  const std::string issuer_ = "https://idp.test";
  core::Mutex mu_;
  std::map<std::string, Pending> codes_ GUARDED_BY(mu_);
  std::map<std::string, std::string> devices_ GUARDED_BY(mu_);
  std::map<std::string, std::string> preferred_usernames_ GUARDED_BY(mu_);
};

class WebRoutes : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = klutch::testing::TestCluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = std::move(*cluster);
    ASSERT_TRUE(testing::SetUpControlPlane(cluster_->admin()).ok());
    backend_ = std::make_unique<WebBackend>(
        cluster_->admin(), idp_, MakeSealer(),
        WebOptions{.provision = {.namespace_prefix = "cluster"}, .clock = &clock_});
    backend_->AddRoutes(router_);
  }

  // /authorize up to the issuer's redirect back: the /callback URL with code and state.
  std::string StartLogin(Browser& browser, const std::string& sid = "aB3xZ9",
                         const std::string& subject = "alice", const std::string& cid = "clus01",
                         const std::string& extra_query = "") {
    http::Response r = browser.Get("/authorize?p=40123&s=" + sid + "&c=" + cid + extra_query);
    EXPECT_EQ(r.status, 302) << r.body;
    std::string idp_url(r.headers.Get("Location"));
    EXPECT_TRUE(idp_url.starts_with("https://idp.test/auth?")) << idp_url;
    std::string code = idp_.Approve(idp_url, subject);
    return "/callback?code=" + code + "&state=" + core::PercentEncode(QueryParam(idp_url, "state"));
  }

  // A logged-in browser on the catalog page; returns the catalog's HTML.
  std::string LogIn(Browser& browser, const std::string& sid = "aB3xZ9",
                    const std::string& subject = "alice", const std::string& cid = "clus01",
                    const std::string& extra_query = "") {
    http::Response cb = browser.Get(StartLogin(browser, sid, subject, cid, extra_query));
    EXPECT_EQ(cb.status, 302) << cb.body;
    EXPECT_EQ(cb.headers.Get("Location"), "/resources?s=" + sid);
    http::Response page = browser.Get("/resources?s=" + sid);
    EXPECT_EQ(page.status, 200) << page.body;
    return page.body;
  }

  std::vector<std::pair<std::string, std::string>> BindForm(const std::string& html) {
    return {{"s", testing::FormValue(html, "s")},
            {"group", testing::FormValue(html, "group")},
            {"resource", testing::FormValue(html, "resource")},
            {"csrf", testing::FormValue(html, "csrf")}};
  }

  std::string SeedExportAndClaim(const std::string& ns) {
    return testing::SeedConnectedClusterWithClaim(cluster_->admin(), ns, {{"plan", "small"}});
  }

  core::FakeClock clock_{core::RealClock::Get().Now()};
  FakeIdp idp_;
  std::unique_ptr<klutch::testing::TestCluster> cluster_;
  std::unique_ptr<WebBackend> backend_;
  http::Router router_;
};

TEST_F(WebRoutes, ExportAdvertisesBothFlowsOnTheRequestHost) {
  Browser browser(router_);
  http::Response r = browser.Get("/export");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.Get("Content-Type"), "application/json");
  auto j = machinery::ParseJson(r.body);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["apiVersion"], "v1alpha1");
  EXPECT_EQ((*j)["providerPrettyName"], "anynines");
  EXPECT_EQ((*j)["authenticationMethods"][0]["oauth2CodeGrant"]["authenticatedURL"],
            "https://backend.test/authorize");
  EXPECT_EQ((*j)["authenticationMethods"][1]["oauth2DeviceGrant"]["tokenURL"],
            "https://backend.test/device/token");
}

TEST_F(WebRoutes, FullBrowserFlowBindsAndRedirectsToTheCli) {
  Browser browser(router_);
  http::Response r = browser.Get("/authorize?p=40123&s=aB3xZ9&c=clus01");
  ASSERT_EQ(r.status, 302);
  // The pre-login cookie binds the state to this browser.
  ASSERT_TRUE(browser.jar.count("klutch-bind-login-aB3xZ9"));
  EXPECT_EQ(r.headers.Get("Cache-Control"), "no-cache, no-store, must-revalidate, max-age=0");
  std::string idp_url(r.headers.Get("Location"));
  EXPECT_EQ(QueryParam(idp_url, "code_challenge").size(), 43u);

  http::Response cb = browser.Get("/callback?code=" + idp_.Approve(idp_url, "alice") +
                                  "&state=" + core::PercentEncode(QueryParam(idp_url, "state")));
  ASSERT_EQ(cb.status, 302) << cb.body;
  EXPECT_FALSE(browser.jar.count("klutch-bind-login-aB3xZ9")) << "pre-login cookie cleared";
  ASSERT_TRUE(browser.jar.count("klutch-bind-aB3xZ9"));
  bool attributes = false;
  for (const auto& c : browser.set_cookies) {
    if (c.starts_with("klutch-bind-aB3xZ9=")) {
      attributes = c.find("; Secure") != std::string::npos &&
                   c.find("; HttpOnly") != std::string::npos &&
                   c.find("SameSite=Lax") != std::string::npos &&
                   c.find("Path=/") != std::string::npos && c.find("Expires=") != std::string::npos;
    }
  }
  EXPECT_TRUE(attributes);

  http::Response page = browser.Get("/resources?s=aB3xZ9");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("A PostgreSQL &lt;database&gt; &amp; its &quot;plan&quot;"),
            std::string::npos);
  EXPECT_NE(page.body.find("<code>medium</code>"), std::string::npos);
  EXPECT_NE(page.body.find("alice@example.test"), std::string::npos);
  EXPECT_NE(page.body.find("kubectl bind at <code>localhost:40123</code>"), std::string::npos);
  EXPECT_TRUE(testing::ClusterNamespaces(cluster_->admin()).empty());

  http::Response bound = browser.Post("/bind", BindForm(page.body));
  ASSERT_EQ(bound.status, 303) << bound.body;
  std::string location(bound.headers.Get("Location"));
  ASSERT_TRUE(location.starts_with("http://localhost:40123/callback?response=")) << location;
  Json response = testing::DecodeResponse(location);
  EXPECT_EQ(response["kind"], "BindingResponse");
  EXPECT_EQ(response["authentication"]["oauth2CodeGrant"]["sid"], "aB3xZ9");
  EXPECT_EQ(response["authentication"]["oauth2CodeGrant"]["id"], "https://idp.test/alice");
  EXPECT_EQ(response["requests"][0]["metadata"]["name"], "postgresqlinstances.anynines.com");
  EXPECT_EQ(response["requests"][0]["spec"]["resources"][0]["permissionClaims"][0]["resource"],
            "secrets");
  auto kubeconfig = core::Base64Decode(response["kubeconfig"].get<std::string>());
  ASSERT_TRUE(kubeconfig.has_value());
  auto ns = testing::ClusterNamespaces(cluster_->admin());
  ASSERT_EQ(ns.size(), 1u);
  auto parsed = machinery::ParseYaml(*kubeconfig);
  ASSERT_TRUE(parsed.ok()) << *kubeconfig;
  EXPECT_EQ((*parsed)["contexts"][0]["context"]["namespace"], ns[0]) << *kubeconfig;

  // The same user and cluster again: the same namespace.
  Browser again(router_);
  std::string html = LogIn(again, "Other1", "alice");
  ASSERT_EQ(again.Post("/bind", BindForm(html)).status, 303);
  EXPECT_EQ(testing::ClusterNamespaces(cluster_->admin()), ns);

  // The consumer page lists the cluster.
  http::Response consumer = browser.Get("/consumer");
  ASSERT_EQ(consumer.status, 200);
  EXPECT_NE(consumer.body.find(ns[0]), std::string::npos);
  EXPECT_NE(consumer.body.find("clus01"), std::string::npos);
}

TEST_F(WebRoutes, ConsumerPageShowsClustersExportsClaimsAndHeartbeat) {
  Browser browser(router_);
  std::string html = LogIn(browser);
  ASSERT_EQ(browser.Post("/bind", BindForm(html)).status, 303);
  auto namespaces = testing::ClusterNamespaces(cluster_->admin());
  ASSERT_EQ(namespaces.size(), 1u);
  const std::string ns = namespaces[0];
  const std::string now = SeedExportAndClaim(ns);
  http::Response page = browser.Get("/consumer?s=aB3xZ9");
  ASSERT_EQ(page.status, 200);
  for (const std::string& want :
       {ns, std::string("clus01"), now, std::string("v9.8.7"),
        std::string("postgresqlinstances.anynines.com"), std::string("db1"),
        std::string("waiting for &lt;broker&gt;"), std::string("Creating"),
        "<code>default</code> in <code>" + ns + "-default</code>"}) {
    EXPECT_NE(page.body.find(want), std::string::npos) << want << "\n" << page.body;
  }
  // A reason naming the Control Plane namespace reads in the developer's names (issue #23).
  EXPECT_NE(page.body.find("waiting for &lt;broker&gt; in namespace &quot;default&quot;"),
            std::string::npos)
      << page.body;
  EXPECT_NE(page.body.find("<code>postgresqlinstances.anynines.com</code> <span class=\"pill "
                           "True\">Ready</span>"),
            std::string::npos)
      << page.body;
  EXPECT_EQ(page.body.find("no conformance report"), std::string::npos) << page.body;
  // Another user sees none of it.
  Browser bob(router_);
  LogIn(bob, "BobSes", "bob");
  http::Response other = bob.Get("/consumer");
  ASSERT_EQ(other.status, 200);
  EXPECT_EQ(other.body.find(ns), std::string::npos);
  EXPECT_NE(other.body.find("not bound any cluster"), std::string::npos);
}

// Issue #23: the URL `make up` prints answered a bare "not found".
TEST_F(WebRoutes, FrontPageSaysWhatThisIsAndHowToBind) {
  Browser browser(router_);
  http::Response r = browser.Get("/");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.Get("Content-Type"), "text/html; charset=utf-8");
  for (const std::string want : {"bind backend of a Klutch Control Plane",
                                 "<code>kubectl bind https://backend.test/export</code>",
                                 "--headless", "href=\"/login?next=%2Fconsumer\">Log in</a>",
                                 "href=\"/resources\"", "href=\"/consumer\""}) {
    EXPECT_NE(r.body.find(want), std::string::npos) << want << "\n" << r.body;
  }
  // Logged in: who, and no login link.
  LogIn(browser);
  http::Response in = browser.Get("/");
  ASSERT_EQ(in.status, 200);
  EXPECT_NE(in.body.find("Logged in as alice@example.test"), std::string::npos) << in.body;
  EXPECT_EQ(in.body.find("/login?"), std::string::npos) << in.body;
  // Other unknown paths stay 404.
  EXPECT_EQ(browser.Get("/nothing-here").status, 404);
}

// Issue #23: /consumer offered no way to log in.
TEST_F(WebRoutes, ConsumerPageOffersALoginThatComesBackToIt) {
  Browser browser(router_);
  http::Response r = browser.Get("/consumer");
  ASSERT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("<a class=\"action\" href=\"/login?next=%2Fconsumer\">Log in</a>"),
            std::string::npos)
      << r.body;
  http::Response login = browser.Get("/login?next=%2Fconsumer");
  ASSERT_EQ(login.status, 302) << login.body;
  std::string idp_url(login.headers.Get("Location"));
  ASSERT_TRUE(idp_url.starts_with("https://idp.test/auth?")) << idp_url;
  EXPECT_EQ(QueryParam(idp_url, "code_challenge").size(), 43u);
  http::Response cb = browser.Get("/callback?code=" + idp_.Approve(idp_url, "alice") +
                                  "&state=" + core::PercentEncode(QueryParam(idp_url, "state")));
  ASSERT_EQ(cb.status, 302) << cb.body;
  EXPECT_EQ(cb.headers.Get("Location"), "/consumer");
  http::Response page = browser.Get("/consumer");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_NE(page.body.find("Logged in as alice@example.test"), std::string::npos);
  EXPECT_NE(page.body.find("kubectl bind https://backend.test/export"), std::string::npos)
      << page.body;

  // The same login reads the catalog, without bind buttons (no kubectl bind is waiting).
  http::Response catalog = browser.Get("/resources");
  ASSERT_EQ(catalog.status, 200) << catalog.body;
  EXPECT_NE(catalog.body.find("postgresqlinstances.anynines.com"), std::string::npos);
  EXPECT_NE(catalog.body.find("<code>medium</code>"), std::string::npos);
  EXPECT_EQ(catalog.body.find("<form"), std::string::npos) << catalog.body;
  EXPECT_NE(catalog.body.find("kubectl bind https://backend.test/export"), std::string::npos);
  // ... and cannot bind anything.
  std::string sid;
  for (const auto& [name, value] : browser.jar) {
    if (name.starts_with("klutch-bind-") && !name.starts_with("klutch-bind-login-")) {
      sid = name.substr(12);
    }
  }
  ASSERT_FALSE(sid.empty());
  http::Response bound = browser.Post(
      "/bind",
      {{"s", sid}, {"group", "anynines.com"}, {"resource", "postgresqlinstances"}, {"csrf", ""}});
  EXPECT_EQ(bound.status, 403) << bound.body;
  EXPECT_TRUE(testing::ClusterNamespaces(cluster_->admin()).empty());

  // Only pages of this backend are login targets.
  for (const std::string bad : {"https%3A%2F%2Fevil.test%2F", "%2F%2Fevil.test", "%2Fbind"}) {
    http::Response refused = Browser(router_).Get("/login?next=" + bad);
    EXPECT_EQ(refused.status, 400) << bad;
    EXPECT_NE(refused.body.find("Parameter next must be"), std::string::npos) << refused.body;
  }
  // Without a login, the catalog offers it too.
  http::Response anonymous = Browser(router_).Get("/resources");
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_NE(anonymous.body.find("href=\"/login?next=%2Fresources\""), std::string::npos);
}

// Issue #23: clusters and namespaces were labelled with internal IDs.
TEST_F(WebRoutes, ConsumerPageNamesClustersAndNamespacesAsTheUserKnowsThem) {
  Browser browser(router_);
  std::string html = LogIn(browser, "aB3xZ9", "alice", "clus01", "&n=kind-app%3Cdev%3E");
  ASSERT_EQ(browser.Post("/bind", BindForm(html)).status, 303);
  auto namespaces = testing::ClusterNamespaces(cluster_->admin());
  ASSERT_EQ(namespaces.size(), 1u);
  const std::string ns = namespaces[0];
  auto got = client::ResourceClient(cluster_->admin(), client::resources::kNamespaces).Get(ns);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(machinery::Annotation(*got, apis::klutch::kClusterNameAnnotation), "kind-app<dev>");
  SeedExportAndClaim(ns);

  http::Response page = browser.Get("/consumer");
  ASSERT_EQ(page.status, 200);
  // The cluster is titled with its name (escaped); its ID is detail.
  EXPECT_NE(page.body.find("<h2>kind-app&lt;dev&gt; <span"), std::string::npos) << page.body;
  EXPECT_NE(page.body.find("<dt>Cluster ID</dt><dd><code>clus01</code>"), std::string::npos);
  EXPECT_NE(page.body.find("<dt>Namespaces</dt><dd><code>default</code></dd>"), std::string::npos)
      << page.body;
  // Claims in the App Cluster's namespace, the Control Plane's as secondary detail.
  EXPECT_NE(page.body.find("<tr><td><code>default</code><span class=\"sub muted\">Control "
                           "Plane: <code>" +
                           ns + "-default</code></span></td><td><code>db1</code>"),
            std::string::npos)
      << page.body;
  EXPECT_EQ(page.body.find("<tr><td><code>" + ns), std::string::npos) << page.body;

  // A later bind with another name renames; the device grant carries the name too.
  http::Response started =
      browser.Post("/device/authorize", {{"s", "Dev001"}, {"c", "clus01"}, {"n", "prod"}});
  ASSERT_EQ(started.status, 200) << started.body;
  auto start = machinery::ParseJson(started.body);
  ASSERT_TRUE(start.ok());
  const std::string user_code = (*start)["user_code"];
  const std::string handle = (*start)["device_handle"];
  idp_.ApproveDevice(user_code, "alice");
  http::Response token = browser.Post(
      "/device/token",
      {{"device_handle", handle}, {"group", "anynines.com"}, {"resource", "postgresqlinstances"}});
  ASSERT_EQ(token.status, 200) << token.body;
  got = client::ResourceClient(cluster_->admin(), client::resources::kNamespaces).Get(ns);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(machinery::Annotation(*got, apis::klutch::kClusterNameAnnotation), "prod");

  // A name that cannot be one is refused, naming the parameter.
  http::Response bad =
      Browser(router_).Get("/authorize?p=40123&s=aB3xZ9&c=clus01&n=" + std::string(254, 'x'));
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("parameter n (the cluster&#39;s name)"), std::string::npos) << bad.body;
}

// Issue #23: every BindingResponse names the user as they know themselves (the ID token's
// preferred_username, else email), carried through the browser session and the sealed device
// session, so kubectl bind's login line does not print the subject.
TEST_F(WebRoutes, BindingResponsesCarryTheUsersDisplayName) {
  idp_.SetPreferredUsername("Mne2w2", "alice");
  Browser browser(router_);
  std::string html = LogIn(browser, "aB3xZ9", "Mne2w2");
  http::Response bound = browser.Post("/bind", BindForm(html));
  ASSERT_EQ(bound.status, 303) << bound.body;
  Json response = testing::DecodeResponse(std::string(bound.headers.Get("Location")));
  EXPECT_EQ(response["authentication"]["oauth2CodeGrant"]["displayName"], "alice") << response;
  EXPECT_EQ(response["authentication"]["oauth2CodeGrant"]["id"], "https://idp.test/Mne2w2");

  // The device grant naming its API at once: the token answer is the BindingResponse.
  Browser cli(router_);
  auto started =
      machinery::ParseJson(cli.Post("/device/authorize", {{"s", "Dev001"}, {"c", "clus02"}}).body);
  ASSERT_TRUE(started.ok());
  idp_.ApproveDevice((*started)["user_code"], "Mne2w2");
  http::Response token = cli.Post("/device/token", {{"device_handle", (*started)["device_handle"]},
                                                    {"group", "anynines.com"},
                                                    {"resource", "postgresqlinstances"}});
  ASSERT_EQ(token.status, 200) << token.body;
  EXPECT_EQ((*machinery::ParseJson(token.body))["authentication"]["oauth2CodeGrant"]["displayName"],
            "alice")
      << token.body;

  // Without an API: the sealed DeviceSession carries the name to /device/bind. A user whose
  // token has no preferred_username is named by email.
  started =
      machinery::ParseJson(cli.Post("/device/authorize", {{"s", "Dev002"}, {"c", "clus03"}}).body);
  ASSERT_TRUE(started.ok());
  idp_.ApproveDevice((*started)["user_code"], "bob");
  auto session = machinery::ParseJson(
      cli.Post("/device/token", {{"device_handle", (*started)["device_handle"]}}).body);
  ASSERT_TRUE(session.ok());
  ASSERT_EQ((*session)["kind"], "DeviceSession") << *session;
  http::Response device_bound = cli.Post("/device/bind", {{"session", (*session)["session"]},
                                                          {"group", "anynines.com"},
                                                          {"resource", "postgresqlinstances"}});
  ASSERT_EQ(device_bound.status, 200) << device_bound.body;
  EXPECT_EQ((*machinery::ParseJson(
                device_bound.body))["authentication"]["oauth2CodeGrant"]["displayName"],
            "bob@example.test")
      << device_bound.body;
}

TEST_F(WebRoutes, AnotherReplicaWithTheSameKeysServesTheSession) {
  Browser browser(router_);
  std::string html = LogIn(browser);
  WebBackend replica(cluster_->admin(), idp_, MakeSealer(), WebOptions{.clock = &clock_});
  http::Router other;
  replica.AddRoutes(other);
  Browser moved(other);
  moved.jar = browser.jar;
  http::Response r = moved.Post("/bind", BindForm(html));
  EXPECT_EQ(r.status, 303) << r.body;
}

TEST_F(WebRoutes, AuthorizeNeedsItsParameters) {
  Browser browser(router_);
  for (std::string target :
       {"/authorize?s=abc&c=def", "/authorize?p=1&c=def", "/authorize?p=1&s=abc",
        "/authorize?p=1&s=a;b&c=d", "/authorize?u=https://evil.example/cb&s=abc&c=def"}) {
    http::Response r = browser.Get(target);
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_NE(r.body.find("What to do:"), std::string::npos);
    EXPECT_EQ(r.headers.Get("Content-Type"), "text/html; charset=utf-8");
  }
}

TEST_F(WebRoutes, CallbackExplainsIssuerErrors) {
  Browser browser(router_);
  http::Response denied =
      browser.Get("/callback?error=access_denied&error_description=User+said+%3Cno%3E&state=x");
  EXPECT_EQ(denied.status, 403);
  EXPECT_NE(denied.body.find("access_denied (User said &lt;no&gt;)"), std::string::npos);
  http::Response other = browser.Get("/callback?error=invalid_scope");
  EXPECT_EQ(other.status, 400);
  EXPECT_NE(other.body.find("invalid_scope"), std::string::npos);
  EXPECT_EQ(browser.Get("/callback?state=x").status, 400);
}

TEST_F(WebRoutes, ForgedStateIsRefused) {
  Browser browser(router_);
  std::string callback = StartLogin(browser);
  // A state sealed with other keys (an attacker's backend), and plain garbage.
  std::string forged =
      MakeSealer(std::string(32, 'x'))
          .Seal("state",
                Json{{"r", "http://localhost:1/callback"}, {"s", "aB3xZ9"}, {"c", "clus01"}},
                clock_.Now() + std::chrono::minutes(5));
  for (std::string state : {forged, std::string("eyJyZWRpcmVjdFVSTCI6Imh0dHA6Ly9ldmlsIn0=")}) {
    http::Response r = browser.Get("/callback?code=code-0&state=" + core::PercentEncode(state));
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("not issued by this backend"), std::string::npos) << r.body;
  }
  EXPECT_FALSE(browser.jar.count("klutch-bind-aB3xZ9"));
}

TEST_F(WebRoutes, StateFromAnotherBrowserOrReplayedIsRefused) {
  Browser victim(router_);
  std::string callback = StartLogin(victim);
  // The attacker's browser has no pre-login cookie for this state.
  Browser attacker(router_);
  http::Response stolen = attacker.Get(callback);
  EXPECT_EQ(stolen.status, 400);
  EXPECT_NE(stolen.body.find("not started in this browser"), std::string::npos);
  EXPECT_FALSE(attacker.jar.count("klutch-bind-aB3xZ9"));
  // The victim completes once; replaying the same callback then fails.
  EXPECT_EQ(victim.Get(callback).status, 302);
  http::Response replay = victim.Get(callback);
  EXPECT_EQ(replay.status, 400);
  // A second login in the same browser does not accept the first login's state either.
  Browser b(router_);
  std::string first = StartLogin(b);
  std::string second = StartLogin(b);
  EXPECT_EQ(b.Get(first).status, 400);
  EXPECT_EQ(b.Get(second).status, 302);
}

TEST_F(WebRoutes, ExpiredLoginStateIsRefused) {
  Browser browser(router_);
  std::string callback = StartLogin(browser);
  clock_.Advance(std::chrono::minutes(11));
  http::Response r = browser.Get(callback);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("longer than 10 minutes"), std::string::npos);
}

TEST_F(WebRoutes, TamperedSessionCookieIsRefusedAndCreatesNothing) {
  Browser browser(router_);
  std::string html = LogIn(browser);
  std::string& cookie = browser.jar["klutch-bind-aB3xZ9"];
  cookie[cookie.size() / 2] = cookie[cookie.size() / 2] == 'A' ? 'B' : 'A';
  http::Response page = browser.Get("/resources?s=aB3xZ9");
  EXPECT_EQ(page.status, 401);
  EXPECT_NE(page.body.find("invalid"), std::string::npos);
  http::Response bind = browser.Post("/bind", BindForm(html));
  EXPECT_EQ(bind.status, 401);
  EXPECT_TRUE(testing::ClusterNamespaces(cluster_->admin()).empty());
}

TEST_F(WebRoutes, ExpiredSessionIsRefusedOnTheServer) {
  Browser browser(router_);
  std::string html = LogIn(browser);
  clock_.Advance(std::chrono::minutes(61));
  // The browser would have dropped the cookie; a client that keeps it gets nowhere either.
  http::Response bind = browser.Post("/bind", BindForm(html));
  EXPECT_EQ(bind.status, 401);
  EXPECT_NE(bind.body.find("expired"), std::string::npos);
  EXPECT_TRUE(testing::ClusterNamespaces(cluster_->admin()).empty());
}

TEST_F(WebRoutes, BindWithoutLoginIsRefused) {
  Browser browser(router_);
  for (auto r : {browser.Get("/bind?s=aB3xZ9&group=anynines.com&resource=postgresqlinstances"),
                 browser.Post("/bind", {{"s", "aB3xZ9"},
                                        {"group", "anynines.com"},
                                        {"resource", "postgresqlinstances"},
                                        {"csrf", "x"}}),
                 browser.Get("/resources?s=aB3xZ9")}) {
    EXPECT_EQ(r.status, 401);
    EXPECT_NE(r.body.find("Run kubectl bind"), std::string::npos);
  }
  http::Response consumer = browser.Get("/consumer");
  EXPECT_EQ(consumer.status, 401);
  EXPECT_NE(consumer.body.find("run kubectl bind"), std::string::npos);
  EXPECT_TRUE(testing::ClusterNamespaces(cluster_->admin()).empty());
}

TEST_F(WebRoutes, BindWithoutCsrfTokenIsRefused) {
  Browser browser(router_);
  std::string html = LogIn(browser);
  // A cross-site form or link carries the cookie (top-level GET) but cannot know the token.
  http::Response get =
      browser.Get("/bind?s=aB3xZ9&group=anynines.com&resource=postgresqlinstances");
  EXPECT_EQ(get.status, 403);
  EXPECT_NE(get.body.find("CSRF"), std::string::npos);
  auto form = BindForm(html);
  form[3].second = Sealer::New(kSigningKey, kEncryptionKey)->Mac("csrf", "guess");
  EXPECT_EQ(browser.Post("/bind", form).status, 403);
  // Another session's token does not fit this one.
  Browser other(router_);
  std::string other_html = LogIn(other, "Sess02");
  form = BindForm(html);
  form[3].second = testing::FormValue(other_html, "csrf");
  EXPECT_EQ(browser.Post("/bind", form).status, 403);
  EXPECT_TRUE(testing::ClusterNamespaces(cluster_->admin()).empty());
  // The GET form stays usable with the token (compatibility with links).
  http::Response ok = browser.Get(
      "/bind?s=aB3xZ9&group=anynines.com&resource=postgresqlinstances"
      "&csrf=" +
      testing::FormValue(html, "csrf"));
  EXPECT_EQ(ok.status, 302) << ok.body;
}

TEST_F(WebRoutes, BindOfAnApiNotOfferedCreatesNothing) {
  Browser browser(router_);
  std::string html = LogIn(browser);
  auto form = BindForm(html);
  form[2].second = "secrets";
  form[1].second = "";
  http::Response r = browser.Post("/bind", form);
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("is not offered"), std::string::npos);
  EXPECT_TRUE(testing::ClusterNamespaces(cluster_->admin()).empty());
}

TEST_F(WebRoutes, DeviceGrantEndToEnd) {
  Browser cli(router_);
  http::Response missing = cli.Post("/device/authorize", {{"s", "aB3xZ9"}});
  EXPECT_EQ(missing.status, 400);
  http::Response started = cli.Post("/device/authorize", {{"s", "aB3xZ9"}, {"c", "clus01"}});
  ASSERT_EQ(started.status, 200) << started.body;
  auto start = machinery::ParseJson(started.body);
  ASSERT_TRUE(start.ok());
  EXPECT_EQ((*start)["verification_uri"], "https://idp.test/device");
  EXPECT_EQ((*start)["interval"], 1);
  std::string handle = (*start)["device_handle"];
  std::string user_code = (*start)["user_code"];
  std::vector<std::pair<std::string, std::string>> poll = {
      {"device_handle", handle}, {"group", "anynines.com"}, {"resource", "postgresqlinstances"}};

  http::Response pending = cli.Post("/device/token", poll);
  EXPECT_EQ(pending.status, 400);
  EXPECT_EQ((*machinery::ParseJson(pending.body))["error"], "authorization_pending");
  // An API that is not offered is refused before the device code is redeemed.
  http::Response wrong = cli.Post(
      "/device/token", {{"device_handle", handle}, {"group", "x.io"}, {"resource", "things"}});
  EXPECT_EQ((*machinery::ParseJson(wrong.body))["error"], "invalid_request");
  std::string tampered = handle;
  tampered[10] = tampered[10] == 'A' ? 'B' : 'A';
  http::Response bad = cli.Post("/device/token", {{"device_handle", tampered},
                                                  {"group", "anynines.com"},
                                                  {"resource", "postgresqlinstances"}});
  EXPECT_EQ((*machinery::ParseJson(bad.body))["error"], "invalid_grant");
  EXPECT_TRUE(testing::ClusterNamespaces(cluster_->admin()).empty());

  idp_.ApproveDevice(user_code, "bob");
  http::Response done = cli.Post("/device/token", poll);
  ASSERT_EQ(done.status, 200) << done.body;
  auto response = machinery::ParseJson(done.body);
  ASSERT_TRUE(response.ok());
  EXPECT_EQ((*response)["kind"], "BindingResponse");
  EXPECT_EQ((*response)["authentication"]["oauth2CodeGrant"]["sid"], "aB3xZ9");
  EXPECT_EQ((*response)["authentication"]["oauth2CodeGrant"]["id"], "https://idp.test/bob");
  EXPECT_EQ(testing::ClusterNamespaces(cluster_->admin()).size(), 1u);

  // Without an API: a session and the catalog, then /device/bind.
  auto second =
      machinery::ParseJson(cli.Post("/device/authorize", {{"s", "Sess02"}, {"c", "clus02"}}).body);
  ASSERT_TRUE(second.ok());
  idp_.ApproveDevice((*second)["user_code"], "bob");
  http::Response listed =
      cli.Post("/device/token", {{"device_handle", (*second)["device_handle"]}});
  ASSERT_EQ(listed.status, 200) << listed.body;
  auto session = machinery::ParseJson(listed.body);
  ASSERT_TRUE(session.ok());
  EXPECT_EQ((*session)["kind"], "DeviceSession");
  EXPECT_EQ((*session)["apis"][0]["resource"], "postgresqlinstances");
  EXPECT_EQ((*session)["apis"][0]["plans"], Json::array({"small", "medium"}));
  EXPECT_EQ((*session)["apis"][0]["permissionClaims"][0]["resource"], "secrets");
  std::string sealed = (*session)["session"];
  EXPECT_EQ(testing::ClusterNamespaces(cluster_->admin()).size(), 1u);
  http::Response missing_api = cli.Post("/device/bind", {{"session", sealed}});
  EXPECT_EQ((*machinery::ParseJson(missing_api.body))["error"], "invalid_request");
  std::string forged = sealed;
  forged[12] = forged[12] == 'A' ? 'B' : 'A';
  http::Response refused = cli.Post(
      "/device/bind",
      {{"session", forged}, {"group", "anynines.com"}, {"resource", "postgresqlinstances"}});
  EXPECT_EQ((*machinery::ParseJson(refused.body))["error"], "invalid_grant");
  // A device handle is not a session.
  http::Response handle_as_session = cli.Post(
      "/device/bind",
      {{"session", handle}, {"group", "anynines.com"}, {"resource", "postgresqlinstances"}});
  EXPECT_EQ((*machinery::ParseJson(handle_as_session.body))["error"], "invalid_grant");
  http::Response bound = cli.Post(
      "/device/bind",
      {{"session", sealed}, {"group", "anynines.com"}, {"resource", "postgresqlinstances"}});
  ASSERT_EQ(bound.status, 200) << bound.body;
  EXPECT_EQ((*machinery::ParseJson(bound.body))["authentication"]["oauth2CodeGrant"]["sid"],
            "Sess02");
  EXPECT_EQ(testing::ClusterNamespaces(cluster_->admin()).size(), 2u);

  clock_.Advance(std::chrono::minutes(11));
  http::Response expired = cli.Post("/device/token", poll);
  EXPECT_EQ((*machinery::ParseJson(expired.body))["error"], "expired_token");
  http::Response expired_session = cli.Post(
      "/device/bind",
      {{"session", sealed}, {"group", "anynines.com"}, {"resource", "postgresqlinstances"}});
  EXPECT_EQ((*machinery::ParseJson(expired_session.body))["error"], "expired_token");
}

// /device/authorize from `remote` ("host:port", as the server fills it in).
http::Response DeviceAuthorizeFrom(const http::Router& router, const std::string& remote,
                                   const std::string& sid = "aB3xZ9") {
  http::Request request;
  request.method = "POST";
  request.SetTarget("/device/authorize");
  request.headers.Add("Host", "backend.test");
  request.headers.Add("Content-Type", "application/x-www-form-urlencoded");
  request.body = "s=" + sid + "&c=clus01";
  request.remote_address = remote;
  return router.Serve(request);
}

TEST_F(WebRoutes, DeviceAuthorizeIsRateLimitedPerClientAddress) {
  WebBackend limited(cluster_->admin(), idp_, MakeSealer(),
                     WebOptions{.device_authorize_qps = 0.5,  // one every 2 s
                                .device_authorize_burst = 2,
                                .clock = &clock_});
  http::Router router;
  limited.AddRoutes(router);
  EXPECT_EQ(DeviceAuthorizeFrom(router, "192.0.2.7:40001").status, 200);
  EXPECT_EQ(DeviceAuthorizeFrom(router, "192.0.2.7:40002").status, 200);
  http::Response refused = DeviceAuthorizeFrom(router, "192.0.2.7:40003");
  ASSERT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.headers.Get("Retry-After"), "2");
  EXPECT_EQ(refused.headers.Get("Content-Type"), "application/json");
  auto error = machinery::ParseJson(refused.body);
  ASSERT_TRUE(error.ok());
  EXPECT_EQ((*error)["error"], "temporarily_unavailable");
  const std::string description = (*error)["error_description"];
  EXPECT_NE(description.find("192.0.2.7"), std::string::npos) << description;
  EXPECT_NE(description.find("2 s"), std::string::npos) << description;
  // Another address has its own bucket (IPv6 included); the port does not matter.
  EXPECT_EQ(DeviceAuthorizeFrom(router, "2001:db8::1:40001").status, 200);
  EXPECT_EQ(DeviceAuthorizeFrom(router, "2001:db8::1:40002").status, 200);
  EXPECT_EQ(DeviceAuthorizeFrom(router, "2001:db8::1:40003").status, 429);
  EXPECT_EQ(DeviceAuthorizeFrom(router, "198.51.100.1:1").status, 200);
  // Refilled with time.
  clock_.Advance(std::chrono::seconds(2));
  EXPECT_EQ(DeviceAuthorizeFrom(router, "192.0.2.7:40004").status, 200);
  EXPECT_EQ(DeviceAuthorizeFrom(router, "192.0.2.7:40005").status, 429);
  // 0 turns the limit off.
  WebBackend unlimited(cluster_->admin(), idp_, MakeSealer(),
                       WebOptions{.device_authorize_qps = 0, .clock = &clock_});
  http::Router open;
  unlimited.AddRoutes(open);
  for (int i = 0; i < 30; ++i) ASSERT_EQ(DeviceAuthorizeFrom(open, "192.0.2.7:1").status, 200);
}

TEST_F(WebRoutes, RedeemedDeviceCodeIsRefusedWithADescription) {
  Browser cli(router_);
  auto start =
      machinery::ParseJson(cli.Post("/device/authorize", {{"s", "aB3xZ9"}, {"c", "clus01"}}).body);
  ASSERT_TRUE(start.ok());
  std::vector<std::pair<std::string, std::string>> poll = {
      {"device_handle", (*start)["device_handle"]},
      {"group", "anynines.com"},
      {"resource", "postgresqlinstances"}};
  idp_.ApproveDevice((*start)["user_code"], "bob");
  ASSERT_EQ(cli.Post("/device/token", poll).status, 200);
  // The issuer answers a second redemption with invalid_grant and no description.
  http::Response again = cli.Post("/device/token", poll);
  EXPECT_EQ(again.status, 400);
  auto error = machinery::ParseJson(again.body);
  ASSERT_TRUE(error.ok()) << again.body;
  EXPECT_EQ((*error)["error"], "invalid_grant");
  ASSERT_TRUE((*error).contains("error_description")) << again.body;
  const std::string description = (*error)["error_description"];
  EXPECT_NE(description.find("already used"), std::string::npos) << description;
  EXPECT_NE(description.find("kubectl bind --headless again"), std::string::npos) << description;
}

TEST_F(WebRoutes, NewClusterBeyondTheUserLimitIsRefusedSayingWhatToDo) {
  WebBackend limited(
      cluster_->admin(), idp_, MakeSealer(),
      WebOptions{.provision = {.namespace_prefix = "cluster", .max_clusters_per_user = 1},
                 .unconnected_cluster_grace = std::chrono::hours(1),
                 .clock = &clock_});
  http::Router router;
  limited.AddRoutes(router);
  Browser cli(router);
  auto device_bind = [&](const std::string& sid, const std::string& cid) {
    auto start = machinery::ParseJson(cli.Post("/device/authorize", {{"s", sid}, {"c", cid}}).body);
    EXPECT_TRUE(start.ok());
    idp_.ApproveDevice((*start)["user_code"], "alice");
    return cli.Post("/device/token", {{"device_handle", (*start)["device_handle"]},
                                      {"group", "anynines.com"},
                                      {"resource", "postgresqlinstances"}});
  };
  ASSERT_EQ(device_bind("Sess01", "clus02").status, 200);
  auto namespaces = testing::ClusterNamespaces(cluster_->admin());
  ASSERT_EQ(namespaces.size(), 1u);

  // The browser flow: a page saying how many, which, and what to do.
  Browser browser(router);
  std::string html = LogIn(browser, "aB3xZ9", "alice", "clus01");
  http::Response page = browser.Post("/bind", BindForm(html));
  EXPECT_EQ(page.status, 403) << page.body;
  EXPECT_EQ(page.headers.Get("Content-Type"), "text/html; charset=utf-8");
  for (const std::string& want :
       {std::string("Too many clusters"), std::string("You already have 1 cluster bound"),
        "clus02 (namespace " + namespaces[0] + ")", std::string("This cluster (clus01)"),
        std::string("What to do:"), std::string("--max-clusters-per-user"),
        std::string("1h after its last bind")}) {
    EXPECT_NE(page.body.find(want), std::string::npos) << want << "\n" << page.body;
  }
  EXPECT_EQ(testing::ClusterNamespaces(cluster_->admin()), namespaces);

  // The device flow: an OAuth-style error whose description the CLI prints.
  http::Response refused = device_bind("Sess03", "clus03");
  EXPECT_EQ(refused.status, 400);
  auto error = machinery::ParseJson(refused.body);
  ASSERT_TRUE(error.ok()) << refused.body;
  EXPECT_EQ((*error)["error"], "too_many_clusters");
  const std::string description = (*error)["error_description"];
  for (const std::string& want :
       {std::string("You already have 1 cluster bound"), std::string("clus02"),
        std::string("What to do:"), std::string("--max-clusters-per-user")}) {
    EXPECT_NE(description.find(want), std::string::npos) << want << "\n" << description;
  }
  EXPECT_EQ(testing::ClusterNamespaces(cluster_->admin()), namespaces);

  // Binding the cluster that has its space again is no new cluster; another user has room.
  EXPECT_EQ(device_bind("Sess04", "clus02").status, 200);
  auto start =
      machinery::ParseJson(cli.Post("/device/authorize", {{"s", "Sess05"}, {"c", "clus05"}}).body);
  ASSERT_TRUE(start.ok());
  idp_.ApproveDevice((*start)["user_code"], "bob");
  EXPECT_EQ(cli.Post("/device/token", {{"device_handle", (*start)["device_handle"]},
                                       {"group", "anynines.com"},
                                       {"resource", "postgresqlinstances"}})
                .status,
            200);
  EXPECT_EQ(testing::ClusterNamespaces(cluster_->admin()).size(), 2u);
}

}  // namespace
}  // namespace klutch::bind
