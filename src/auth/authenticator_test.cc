#include "auth/authenticator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "auth/oidc.h"
#include "auth/service_account.h"
#include "core/strings.h"

namespace klutch::auth::authenticator_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

TEST(BearerToken, ReadsTheHeaderAsKubeApiserverDoes) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer abc"), "abc");
  EXPECT_EQ(BearerToken("BEARER abc trailing words"), "abc");
  EXPECT_FALSE(BearerToken("Bearer  abc"));  // two spaces: the token part is empty
  EXPECT_FALSE(BearerToken("Basic YWxpY2U6cHc="));
  EXPECT_FALSE(BearerToken("Bearer"));
  EXPECT_FALSE(BearerToken("Bearer "));
  EXPECT_FALSE(BearerToken("abc"));
  EXPECT_FALSE(BearerToken(""));
}

TEST(TokenFile, ParsesUsersUidsAndQuotedGroups) {
  auto f = TokenFileAuthenticator::Parse(
      "# comment\n"
      "t1,alice,u-1,\"devs,ops\"\n"
      "\n"
      "t2,bob,u-2\r\n");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto alice = (*f)->Authenticate("t1");
  ASSERT_TRUE(alice.ok());
  ASSERT_TRUE(alice->has_value());
  EXPECT_EQ((*alice)->user.name, "alice");
  EXPECT_EQ((*alice)->user.uid, "u-1");
  EXPECT_THAT((*alice)->user.groups, ElementsAre("devs", "ops"));
  auto bob = (*f)->Authenticate("t2");
  ASSERT_TRUE(bob.ok() && bob->has_value());
  EXPECT_TRUE((*bob)->user.groups.empty());
  auto none = (*f)->Authenticate("t3");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(TokenFile, RejectsMalformedLinesNamingThem) {
  auto few = TokenFileAuthenticator::Parse("t1,alice,u1\nt2,bob\n");
  ASSERT_FALSE(few.ok());
  EXPECT_THAT(few.status().message(), HasSubstr("line 2"));
  auto dup = TokenFileAuthenticator::Parse("t1,alice,u1\nt1,bob,u2\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(), HasSubstr("duplicate token"));
  auto quote = TokenFileAuthenticator::Parse("t1,alice,u1,\"devs\n");
  EXPECT_FALSE(quote.ok());
  auto empty_user = TokenFileAuthenticator::Parse("t1,,u1\n");
  EXPECT_FALSE(empty_user.ok());
}

// A token authenticator that counts calls, for cache tests.
class CountingAuthenticator final : public TokenAuthenticator {
 public:
  explicit CountingAuthenticator(bool service_account) : service_account_(service_account) {}
  core::Result<std::optional<TokenResult>> Authenticate(std::string_view token) override {
    ++calls;
    if (token == "bad") return core::Status(core::Reason::kUnauthorized, "bad token");
    if (token != "good") return std::optional<TokenResult>();
    TokenResult r;
    r.user.name = "carol";
    r.service_account = service_account_;
    if (expires) r.expires = *expires;
    return std::optional<TokenResult>(r);
  }
  std::string_view name() const override { return "counting"; }
  int calls = 0;
  std::optional<core::SystemTime> expires;

 private:
  bool service_account_;
};

TEST(Authenticator, CertificateSubjectBecomesUserAndGroups) {
  Authenticator a;
  std::string cn = "alice";
  std::vector<std::string> orgs = {"devs"};
  auto r = a.Authenticate({.certificate_cn = &cn, .certificate_organizations = &orgs});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->user.name, "alice");
  EXPECT_THAT(r->user.groups, ElementsAre("devs", kAuthenticatedGroup));
  EXPECT_EQ(r->method, "x509");
}

TEST(Authenticator, RefusesMissingCredentialsUnlessAnonymousIsOn) {
  Authenticator off;
  auto r = off.Authenticate({});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kUnauthorized);
  Authenticator on({.anonymous = true});
  auto anon = on.Authenticate({});
  ASSERT_TRUE(anon.ok());
  EXPECT_EQ(anon->user.name, kAnonymousUser);
  EXPECT_THAT(anon->user.groups, ElementsAre(kUnauthenticatedGroup));
}

TEST(Authenticator, HeadersWithoutABearerTokenCountAsNoCredentials) {
  Authenticator anonymous({.anonymous = true});
  Authenticator strict;
  for (const char* h : {"Basic YWxpY2U6cHc=", "Bearer", "Bearer  x", "garbage"}) {
    auto a = anonymous.Authenticate({.authorization = h});
    ASSERT_TRUE(a.ok()) << h;
    EXPECT_EQ(a->user.name, kAnonymousUser);
    auto s = strict.Authenticate({.authorization = h});
    ASSERT_FALSE(s.ok()) << h;
    EXPECT_EQ(s.status().reason(), core::Reason::kUnauthorized);
  }
  // An actual bearer token that nobody accepts is refused even when anonymous is allowed.
  auto bad = anonymous.Authenticate({.authorization = "Bearer unknown"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().reason(), core::Reason::kUnauthorized);
}

TEST(Authenticator, RejectedCertificateIsUnauthorizedUnlessATokenAuthenticates) {
  Authenticator a({.anonymous = true});
  a.AddTokenAuthenticator(std::make_unique<CountingAuthenticator>(false));
  auto bare = a.Authenticate({.certificate_rejected = true});
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().reason(), core::Reason::kUnauthorized);
  auto token = a.Authenticate({.certificate_rejected = true, .authorization = "Bearer good"});
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->user.name, "carol");
}

TEST(Authenticator, TriesTokenAuthenticatorsInOrderAndCachesSuccess) {
  core::FakeClock clock(core::SystemTime(std::chrono::seconds(1'700'000'000)));
  Authenticator a({.cache_ttl = std::chrono::seconds(10), .clock = &clock});
  auto first = std::make_unique<CountingAuthenticator>(false);
  auto* counter = first.get();
  a.AddTokenAuthenticator(std::move(first));
  auto r = a.Authenticate({.authorization = "Bearer good"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->user.name, "carol");
  EXPECT_THAT(r->user.groups, ElementsAre(kAuthenticatedGroup));
  ASSERT_TRUE(a.Authenticate({.authorization = "Bearer good"}).ok());
  EXPECT_EQ(counter->calls, 1);
  clock.Advance(std::chrono::seconds(11));
  ASSERT_TRUE(a.Authenticate({.authorization = "Bearer good"}).ok());
  EXPECT_EQ(counter->calls, 2);
  // Failures are not cached and give no detail beyond the log message.
  EXPECT_FALSE(a.Authenticate({.authorization = "Bearer bad"}).ok());
  EXPECT_FALSE(a.Authenticate({.authorization = "Bearer bad"}).ok());
  EXPECT_EQ(counter->calls, 4);
  EXPECT_FALSE(a.Authenticate({.authorization = "Bearer unknown"}).ok());
}

TEST(Authenticator, CacheNeverOutlivesTheToken) {
  core::FakeClock clock(core::SystemTime(std::chrono::seconds(1'700'000'000)));
  Authenticator a({.cache_ttl = std::chrono::seconds(60), .clock = &clock});
  auto inner = std::make_unique<CountingAuthenticator>(false);
  auto* counter = inner.get();
  counter->expires = clock.Now() + std::chrono::seconds(2);
  a.AddTokenAuthenticator(std::move(inner));
  ASSERT_TRUE(a.Authenticate({.authorization = "Bearer good"}).ok());
  clock.Advance(std::chrono::seconds(3));
  ASSERT_TRUE(a.Authenticate({.authorization = "Bearer good"}).ok());
  EXPECT_EQ(counter->calls, 2);
}

TEST(Authenticator, InvalidationDropsOnlyServiceAccountResults) {
  Authenticator a;
  auto sa = std::make_unique<CountingAuthenticator>(true);
  auto* counter = sa.get();
  a.AddTokenAuthenticator(std::move(sa));
  ASSERT_TRUE(a.Authenticate({.authorization = "Bearer good"}).ok());
  ASSERT_TRUE(a.Authenticate({.authorization = "Bearer good"}).ok());
  EXPECT_EQ(counter->calls, 1);
  a.InvalidateServiceAccountTokens();
  ASSERT_TRUE(a.Authenticate({.authorization = "Bearer good"}).ok());
  EXPECT_EQ(counter->calls, 2);
}

// ServiceAccountLookup over maps, standing in for storage.
class MapLookup final : public ServiceAccountLookup {
 public:
  std::optional<std::string> ServiceAccountUid(std::string_view ns,
                                               std::string_view name) override {
    auto it = accounts.find(std::string(ns) + "/" + std::string(name));
    if (it == accounts.end()) return std::nullopt;
    return it->second;
  }
  std::optional<Secret> GetSecret(std::string_view ns, std::string_view name) override {
    auto it = secrets.find(std::string(ns) + "/" + std::string(name));
    if (it == secrets.end()) return std::nullopt;
    return it->second;
  }
  std::map<std::string, std::string> accounts;
  std::map<std::string, Secret> secrets;
};

class ServiceAccountTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto key = SigningKey::Generate();
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    key_ = *key;
    lookup_.accounts["ns1/robot"] = "uid-1";
    tokens_ = std::make_unique<ServiceAccountTokens>(
        *key, std::vector<PublicKey>{},
        ServiceAccountTokenOptions{.issuer = "https://issuer.test", .clock = &clock_}, lookup_);
  }
  core::FakeClock clock_{core::SystemTime(std::chrono::seconds(1'700'000'000))};
  MapLookup lookup_;
  std::optional<SigningKey> key_;  // the key tokens_ signs with
  std::unique_ptr<ServiceAccountTokens> tokens_;
};

TEST_F(ServiceAccountTokensTest, BoundTokenAuthenticatesAsTheAccount) {
  auto t = tokens_->Issue("ns1", "robot", "uid-1", {}, std::chrono::hours(1), std::nullopt);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->expires, clock_.Now() + std::chrono::hours(1));
  auto r = tokens_->Authenticate(t->token);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->user.name, "system:serviceaccount:ns1:robot");
  EXPECT_EQ((*r)->user.uid, "uid-1");
  EXPECT_THAT((*r)->user.groups,
              UnorderedElementsAre("system:serviceaccounts", "system:serviceaccounts:ns1"));
  EXPECT_THAT((*r)->audiences, ElementsAre("https://issuer.test"));
  EXPECT_TRUE((*r)->service_account);
  EXPECT_EQ((*r)->user.extra.count("authentication.kubernetes.io/credential-id"), 1u);
}

TEST_F(ServiceAccountTokensTest, ExpiredTokenIsRefused) {
  auto t = tokens_->Issue("ns1", "robot", "uid-1", {}, std::chrono::minutes(10), std::nullopt);
  ASSERT_TRUE(t.ok());
  clock_.Advance(std::chrono::minutes(10) + std::chrono::seconds(1));
  auto r = tokens_->Authenticate(t->token);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kUnauthorized);
}

TEST_F(ServiceAccountTokensTest, ExpirationIsClampedToTheMaximum) {
  auto t = tokens_->Issue("ns1", "robot", "uid-1", {}, std::chrono::hours(24 * 30), std::nullopt);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->expires, clock_.Now() + std::chrono::hours(24));
}

// A token signed by an accepted key whose "exp" lies beyond what the clock can hold expires at
// the clock's maximum instead of overflowing into the past.
TEST_F(ServiceAccountTokensTest, FarFutureExpiryIsClampedInsteadOfOverflowing) {
  auto issued = tokens_->Issue("ns1", "robot", "uid-1", {}, std::chrono::hours(1), std::nullopt);
  ASSERT_TRUE(issued.ok());
  auto parsed = ParseJwt(issued->token);
  ASSERT_TRUE(parsed.ok());
  for (const machinery::Json& exp :
       {machinery::Json(1e300), machinery::Json(9'000'000'000'000'000'000u)}) {
    machinery::Json claims = parsed->claims;
    claims["exp"] = exp;
    auto token = key_->Sign(claims);
    ASSERT_TRUE(token.ok());
    auto r = tokens_->Authenticate(*token);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->has_value() && (*r)->expires.has_value()) << exp;
    EXPECT_GT(*(*r)->expires, clock_.Now() + std::chrono::hours(24 * 365 * 100)) << exp;
  }
}

TEST_F(ServiceAccountTokensTest, DeletedOrRecreatedAccountEndsTheToken) {
  auto t = tokens_->Issue("ns1", "robot", "uid-1", {}, std::chrono::hours(1), std::nullopt);
  ASSERT_TRUE(t.ok());
  lookup_.accounts["ns1/robot"] = "uid-2";
  EXPECT_FALSE(tokens_->Authenticate(t->token).ok());
  lookup_.accounts.erase("ns1/robot");
  EXPECT_FALSE(tokens_->Authenticate(t->token).ok());
}

TEST_F(ServiceAccountTokensTest, TokenBoundToASecretEndsWithTheSecret) {
  lookup_.secrets["ns1/s"] = {.uid = "sec-1", .type = "Opaque"};
  auto t = tokens_->Issue("ns1", "robot", "uid-1", {}, std::chrono::hours(1),
                          BoundObject{"Secret", "v1", "s", "sec-1"});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(tokens_->Authenticate(t->token).ok());
  lookup_.secrets["ns1/s"].uid = "sec-2";
  EXPECT_FALSE(tokens_->Authenticate(t->token).ok());
  lookup_.secrets.erase("ns1/s");
  EXPECT_FALSE(tokens_->Authenticate(t->token).ok());
}

TEST_F(ServiceAccountTokensTest, AudiencesMustIncludeTheServers) {
  auto t = tokens_->Issue("ns1", "robot", "uid-1", {"vault"}, std::chrono::hours(1), std::nullopt);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(tokens_->Authenticate(t->token).ok());
}

TEST_F(ServiceAccountTokensTest, LegacyTokenLivesAsLongAsItsSecretHoldsIt) {
  auto t = tokens_->IssueLegacy("ns1", "robot", "uid-1", "robot-token");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(tokens_->Authenticate(*t).ok());  // no secret yet
  lookup_.secrets["ns1/robot-token"] = {.uid = "s1",
                                        .type = kServiceAccountTokenSecretType,
                                        .service_account_name = "robot",
                                        .token = *t};
  auto r = tokens_->Authenticate(*t);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->user.name, "system:serviceaccount:ns1:robot");
  EXPECT_FALSE((*r)->expires.has_value());
  // Legacy tokens carry the API audiences implicitly: never valid for a third party.
  EXPECT_FALSE(tokens_->AuthenticateFor(*t, {"vault"}).ok());
  auto mixed = tokens_->AuthenticateFor(*t, {"vault", "https://issuer.test"});
  ASSERT_TRUE(mixed.ok() && mixed->has_value());
  EXPECT_THAT((*mixed)->audiences, ElementsAre("https://issuer.test"));
  lookup_.secrets["ns1/robot-token"].token = "other";
  EXPECT_FALSE(tokens_->Authenticate(*t).ok());
}

TEST_F(ServiceAccountTokensTest, BoundTokensAnswerForTheAudiencesTheyName) {
  auto t = tokens_->Issue("ns1", "robot", "uid-1", {"vault"}, std::chrono::hours(1), std::nullopt);
  ASSERT_TRUE(t.ok());
  auto r = tokens_->AuthenticateFor(t->token, {"https://issuer.test", "vault"});
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_THAT((*r)->audiences, ElementsAre("vault"));
  EXPECT_FALSE(tokens_->AuthenticateFor(t->token, {"elsewhere"}).ok());
}

TEST_F(ServiceAccountTokensTest, ForeignTokensAreNotClaimed) {
  auto other = SigningKey::Generate();
  ASSERT_TRUE(other.ok());
  auto foreign = other->Sign({{"iss", "https://elsewhere"}, {"sub", "x"}, {"exp", 9999999999}});
  ASSERT_TRUE(foreign.ok());
  auto r = tokens_->Authenticate(*foreign);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  auto garbage = tokens_->Authenticate("not-a-jwt");
  ASSERT_TRUE(garbage.ok());
  EXPECT_FALSE(garbage->has_value());
}

TEST_F(ServiceAccountTokensTest, TokenSignedByAnotherKeyWithOurIssuerIsRefused) {
  auto other = SigningKey::Generate();
  ASSERT_TRUE(other.ok());
  auto good = tokens_->Issue("ns1", "robot", "uid-1", {}, std::chrono::hours(1), std::nullopt);
  ASSERT_TRUE(good.ok());
  auto parsed = ParseJwt(good->token);
  ASSERT_TRUE(parsed.ok());
  auto forged = other->Sign(parsed->claims);
  ASSERT_TRUE(forged.ok());
  auto r = tokens_->Authenticate(*forged);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kUnauthorized);
}

TEST(ServiceAccountUser, ParsesOnlyWellFormedNames) {
  auto p = ParseServiceAccountUser("system:serviceaccount:ns:name");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->first, "ns");
  EXPECT_EQ(p->second, "name");
  EXPECT_FALSE(ParseServiceAccountUser("system:serviceaccount:ns"));
  EXPECT_FALSE(ParseServiceAccountUser("system:serviceaccount::name"));
  EXPECT_FALSE(ParseServiceAccountUser("system:serviceaccount:a:b:c"));
  EXPECT_FALSE(ParseServiceAccountUser("alice"));
}

TEST(OidcOptions, RejectsPlainHttpSymmetricAlgorithmsAndMissingClientId) {
  EXPECT_FALSE(OidcAuthenticator::New({.issuer_url = "http://idp", .client_id = "k"}).ok());
  EXPECT_FALSE(OidcAuthenticator::New({.issuer_url = "https://idp", .client_id = ""}).ok());
  EXPECT_FALSE(OidcAuthenticator::New(
                   {.issuer_url = "https://idp", .client_id = "k", .signing_algs = {"HS256"}})
                   .ok());
  EXPECT_FALSE(OidcAuthenticator::New(
                   {.issuer_url = "https://idp", .client_id = "k", .signing_algs = {"none"}})
                   .ok());
  EXPECT_TRUE(OidcAuthenticator::New({.issuer_url = "https://idp:8443/x", .client_id = "k"}).ok());
}

TEST(OidcAuthenticator, LeavesOtherIssuersTokensAlone) {
  auto a = OidcAuthenticator::New({.issuer_url = "https://idp.test", .client_id = "k"});
  ASSERT_TRUE(a.ok());
  auto key = SigningKey::Generate();
  ASSERT_TRUE(key.ok());
  auto t = key->Sign({{"iss", "https://other.test"}, {"sub", "x"}, {"aud", "k"}});
  ASSERT_TRUE(t.ok());
  auto r = (*a)->Authenticate(*t);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

}  // namespace
}  // namespace klutch::auth::authenticator_test
