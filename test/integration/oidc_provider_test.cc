// The glewlwyd-backed OidcProvider test helper: discovery, ID tokens obtained without a
// browser, signing-key rotation as the JWKS shows it, and a refused password.
#include "test/support/oidc_provider.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "core/strings.h"
#include "machinery/json.h"

namespace klutch::testing {
namespace {

using machinery::Json;

// Header and claims of a compact JWS, decoded (the signature is not checked here: the
// authenticator's tests verify glewlwyd's tokens).
struct DecodedJwt {
  Json header;
  Json claims;
};

DecodedJwt Decode(const std::string& token) {
  auto parts = core::Split(token, '.');
  EXPECT_EQ(parts.size(), 3u) << token;
  if (parts.size() != 3) return {};
  DecodedJwt out;
  for (auto [index, target] : {std::pair<size_t, Json*>{0, &out.header}, {1, &out.claims}}) {
    auto raw = core::Base64UrlDecode(parts[index]);
    EXPECT_TRUE(raw.has_value()) << "part " << index << " of " << token;
    if (!raw) return {};
    auto json = machinery::ParseJson(*raw);
    EXPECT_TRUE(json.ok()) << json.status().ToString();
    if (json.ok()) *target = *json;
  }
  return out;
}

std::set<std::string> JwksKids(OidcProvider& provider) {
  auto r = provider.Request("GET", "/api/oidc/jwks");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  auto jwks = machinery::ParseJson(r->body);
  EXPECT_TRUE(jwks.ok()) << r->body;
  std::set<std::string> kids;
  if (!jwks.ok()) return kids;
  for (const auto& key : (*jwks)["keys"]) {
    EXPECT_EQ(key.value("kty", ""), "RSA");
    EXPECT_FALSE(key.contains("d")) << "private key material published";
    kids.insert(key.value("kid", ""));
  }
  return kids;
}

bool AudienceContains(const Json& aud, const std::string& client_id) {
  if (aud.is_string()) return aud.get<std::string>() == client_id;
  if (aud.is_array()) {
    for (const auto& a : aud) {
      if (a.is_string() && a.get<std::string>() == client_id) return true;
    }
  }
  return false;
}

TEST(OidcProvider, IssuesIdTokensRotatesKeysAndRefusesWrongPasswords) {
  TempDir dir("klutch-oidc");
  std::string error;
  auto provider = OidcProvider::Start(dir.path() / "glewlwyd", &error,
                                      {.user = "alice",
                                       .password = "alice-pw",
                                       .email = "alice@example.test",
                                       .groups = {"dev", "ops"}});
  ASSERT_TRUE(provider) << error;
  EXPECT_EQ(provider->issuer(),
            "https://127.0.0.1:" + std::to_string(provider->port()) + "/api/oidc");
  EXPECT_TRUE(std::filesystem::exists(provider->ca_file()));

  // Discovery over HTTPS, verified against the provider's CA.
  auto discovery = provider->Request("GET", "/api/oidc/.well-known/openid-configuration");
  ASSERT_TRUE(discovery.ok()) << discovery.status().ToString();
  ASSERT_EQ(discovery->status, 200) << discovery->body;
  auto config = machinery::ParseJson(discovery->body);
  ASSERT_TRUE(config.ok()) << discovery->body;
  EXPECT_EQ(config->value("issuer", ""), provider->issuer());
  EXPECT_EQ(config->value("jwks_uri", ""), provider->issuer() + "/jwks");
  EXPECT_EQ(JwksKids(*provider), std::set<std::string>{"sig1"});

  // An ID token for alice.
  auto token = provider->IdToken("alice", "alice-pw");
  ASSERT_TRUE(token.ok()) << token.status().ToString() << "\n" << provider->log();
  DecodedJwt jwt = Decode(*token);
  EXPECT_EQ(jwt.header.value("alg", ""), "RS256");
  EXPECT_EQ(jwt.header.value("kid", ""), "sig1");
  EXPECT_EQ(jwt.claims.value("iss", ""), provider->issuer());
  EXPECT_TRUE(AudienceContains(jwt.claims.value("aud", Json()), provider->client_id()))
      << jwt.claims.dump();
  EXPECT_FALSE(jwt.claims.value("sub", "").empty()) << jwt.claims.dump();
  EXPECT_EQ(jwt.claims.value("email", ""), "alice@example.test");
  EXPECT_EQ(jwt.claims.value("groups", Json()), Json::array({"dev", "ops"}));
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  EXPECT_GT(jwt.claims.value("exp", int64_t{0}), now);

  // A second user, without groups.
  ASSERT_TRUE(provider->AddUser("bob", "bob-pw", "bob@example.test").ok());
  auto bob = provider->IdToken("bob", "bob-pw");
  ASSERT_TRUE(bob.ok()) << bob.status().ToString();
  DecodedJwt bob_jwt = Decode(*bob);
  EXPECT_EQ(bob_jwt.claims.value("email", ""), "bob@example.test");
  EXPECT_FALSE(bob_jwt.claims.contains("groups")) << bob_jwt.claims.dump();
  EXPECT_NE(bob_jwt.claims.value("sub", ""), jwt.claims.value("sub", ""));

  // Rotation: the new key signs, both are published; then the old one is withdrawn.
  auto kid = provider->RotateKey();
  ASSERT_TRUE(kid.ok()) << kid.status().ToString();
  EXPECT_EQ(*kid, "sig2");
  EXPECT_EQ(provider->current_kid(), "sig2");
  auto rotated = provider->IdToken("alice", "alice-pw");
  ASSERT_TRUE(rotated.ok()) << rotated.status().ToString();
  EXPECT_EQ(Decode(*rotated).header.value("kid", ""), "sig2");
  EXPECT_EQ(JwksKids(*provider), (std::set<std::string>{"sig1", "sig2"}));
  ASSERT_TRUE(provider->DropOldKeys().ok());
  EXPECT_EQ(JwksKids(*provider), std::set<std::string>{"sig2"});
  auto after_drop = provider->IdToken("alice", "alice-pw");
  ASSERT_TRUE(after_drop.ok()) << after_drop.status().ToString();
  EXPECT_EQ(Decode(*after_drop).header.value("kid", ""), "sig2");

  // Wrong password and unknown user.
  auto wrong = provider->IdToken("alice", "not-the-password");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().reason(), core::Reason::kUnauthorized) << wrong.status().ToString();
  auto unknown = provider->IdToken("mallory", "x");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().reason(), core::Reason::kUnauthorized);
}

}  // namespace
}  // namespace klutch::testing
