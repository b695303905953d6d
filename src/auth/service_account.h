// ServiceAccountTokens: issues and authenticates service-account tokens, RS256 JWTs signed by
// the API server's key, as kube-apiserver does.
//
// Bound tokens (TokenRequest) carry iss, sub, aud, exp, nbf, iat, jti and a "kubernetes.io"
// claim naming the namespace, the ServiceAccount (name, uid) and optionally a bound Secret.
// Legacy tokens (for kubernetes.io/service-account-token Secrets) use the
// "kubernetes/serviceaccount" issuer, never expire, and stay valid only while their Secret
// exists and still holds exactly that token. Every token is also checked against the objects
// it names: a deleted (or re-created, new uid) ServiceAccount or bound Secret ends it.
// Thread-safe; the lookup must be too.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/authenticator.h"
#include "auth/jwt.h"
#include "core/clock.h"

namespace klutch::auth {

inline constexpr char kLegacyServiceAccountIssuer[] = "kubernetes/serviceaccount";
inline constexpr char kServiceAccountTokenSecretType[] = "kubernetes.io/service-account-token";

// The objects tokens refer to, read from the server's storage.
class ServiceAccountLookup {
 public:
  virtual ~ServiceAccountLookup() = default;
  // The uid of a live ServiceAccount; nullopt when it does not exist or is being deleted.
  virtual std::optional<std::string> ServiceAccountUid(std::string_view ns,
                                                       std::string_view name) = 0;
  struct Secret {
    std::string uid;
    std::string type;
    std::string service_account_name;  // annotation kubernetes.io/service-account.name
    std::string token;                 // data.token, decoded
  };
  // A live Secret; nullopt when it does not exist or is being deleted.
  virtual std::optional<Secret> GetSecret(std::string_view ns, std::string_view name) = 0;
};

struct ServiceAccountTokenOptions {
  std::string issuer = "https://kubernetes.default.svc.cluster.local";
  // Audiences this server accepts; empty: {issuer}.
  std::vector<std::string> api_audiences;
  std::chrono::seconds default_expiration = std::chrono::hours(1);
  std::chrono::seconds min_expiration = std::chrono::minutes(10);
  std::chrono::seconds max_expiration = std::chrono::hours(24);
  const core::Clock* clock = &core::RealClock::Get();
};

// The object a token is bound to (TokenRequest spec.boundObjectRef).
struct BoundObject {
  std::string kind;  // only "Secret" is served here
  std::string api_version;
  std::string name;
  std::string uid;
};

struct IssuedToken {
  std::string token;
  core::SystemTime expires;
};

class ServiceAccountTokens final : public TokenAuthenticator {
 public:
  // `verify_keys` are extra public keys whose tokens are accepted too (old signing keys).
  ServiceAccountTokens(SigningKey signing_key, std::vector<PublicKey> verify_keys,
                       ServiceAccountTokenOptions options, ServiceAccountLookup& lookup);

  // A bound token for ServiceAccount ns/name (uid `uid`). `expiration` is clamped to the
  // maximum; below the minimum is the caller's validation error. Empty audiences mean the API
  // server's own.
  core::Result<IssuedToken> Issue(std::string_view ns, std::string_view name, std::string_view uid,
                                  std::vector<std::string> audiences,
                                  std::chrono::seconds expiration,
                                  const std::optional<BoundObject>& bound) const;
  // A legacy, non-expiring token for a kubernetes.io/service-account-token Secret.
  core::Result<std::string> IssueLegacy(std::string_view ns, std::string_view name,
                                        std::string_view uid, std::string_view secret_name) const;

  core::Result<std::optional<TokenResult>> Authenticate(std::string_view token) override;
  std::string_view name() const override { return "serviceaccount"; }
  // Like Authenticate, for a token meant for one of `audiences` instead of this server's own
  // (TokenReview with spec.audiences). A bound token must name one of them in aud; a legacy
  // token has the API audiences implicitly, so one of those must be among `audiences`. The
  // result's audiences are that intersection.
  core::Result<std::optional<TokenResult>> AuthenticateFor(
      std::string_view token, const std::vector<std::string>& audiences);

  const ServiceAccountTokenOptions& options() const { return options_; }
  const std::vector<std::string>& api_audiences() const { return audiences_; }
  // The public keys, as the JWKS served at /openid/v1/jwks.
  machinery::Json PublicJwks() const;

 private:
  core::Result<TokenResult> CheckBound(const Jwt& jwt, const std::vector<std::string>& audiences);
  core::Result<TokenResult> CheckLegacy(const Jwt& jwt, std::string_view token,
                                        const std::vector<std::string>& audiences);

  SigningKey signing_key_;
  std::vector<PublicKey> keys_;  // signing key first
  ServiceAccountTokenOptions options_;
  std::vector<std::string> audiences_;
  ServiceAccountLookup& lookup_;
};

// The user a service account authenticates as: system:serviceaccount:NS:NAME with groups
// system:serviceaccounts and system:serviceaccounts:NS.
UserInfo ServiceAccountUser(std::string_view ns, std::string_view name, std::string_view uid);
// Splits "system:serviceaccount:NS:NAME"; nullopt for other names.
std::optional<std::pair<std::string, std::string>> ParseServiceAccountUser(std::string_view user);

}  // namespace klutch::auth
