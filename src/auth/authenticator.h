// Authenticator: who sent a request. Tries, in order, the verified client certificate (CN =
// user, O = groups), then the bearer token against each token authenticator (static token
// file, service-account JWTs, OIDC ID tokens; the first that accepts it wins and refusals
// are only logged, as kube's union authenticator does), then
// anonymous access when enabled. Successful token results are cached (keyed by the token's
// SHA-256) until the token expires or `cache_ttl` passes, whichever is first; service-account
// results are dropped from the cache whenever a ServiceAccount or Secret changes, so a token
// stops working as soon as its account is deleted.
//
// Failures are kUnauthorized with a log-only message: clients see "Unauthorized" and nothing
// that tells an attacker which check failed. Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "auth/user.h"
#include "core/clock.h"
#include "core/status.h"
#include "core/sync.h"

namespace klutch::auth {

// What a token authenticator found.
struct TokenResult {
  UserInfo user;
  // When the token stops being valid (nullopt: never, e.g. static tokens).
  std::optional<core::SystemTime> expires;
  // The audiences the token was issued for that this server accepted (TokenReview reports them).
  std::vector<std::string> audiences;
  // Service-account tokens: cached results are dropped when accounts or secrets change.
  bool service_account = false;
};

class TokenAuthenticator {
 public:
  virtual ~TokenAuthenticator() = default;
  // nullopt: not this authenticator's kind of token (the next one tries). An error: a token of
  // this kind that is refused (expired, bad signature, unknown account...); the message is for
  // the server log only.
  virtual core::Result<std::optional<TokenResult>> Authenticate(std::string_view token) = 0;
  virtual std::string_view name() const = 0;
};

// The credentials a request carries, as the transport found them.
struct Credentials {
  // The verified client certificate's subject (nullopt: none presented).
  const std::string* certificate_cn = nullptr;
  const std::vector<std::string>* certificate_organizations = nullptr;
  // A certificate was presented that does not verify: the request is refused unless its
  // bearer token authenticates (never anonymous), as kube-apiserver's union does.
  bool certificate_rejected = false;
  // The Authorization header ("" when absent).
  std::string_view authorization;
};

struct AuthResult {
  UserInfo user;
  std::string method;  // "x509", "token", "anonymous" (and the authenticator's name for tokens)
};

struct AuthenticatorOptions {
  bool anonymous = false;  // requests without credentials become system:anonymous
  std::chrono::seconds cache_ttl{10};
  size_t cache_max_entries = 20000;
  const core::Clock* clock = &core::RealClock::Get();
};

class Authenticator {
 public:
  explicit Authenticator(AuthenticatorOptions options = {});
  ~Authenticator();

  // Adds a token authenticator; they are tried in the order added. Call before serving.
  void AddTokenAuthenticator(std::unique_ptr<TokenAuthenticator> authenticator);

  // The user of a request. kUnauthorized when credentials are present but invalid, or absent
  // and anonymous access is off.
  core::Result<AuthResult> Authenticate(const Credentials& credentials);
  // The user of a bare token (TokenReview). kUnauthorized when no authenticator accepts it.
  core::Result<TokenResult> AuthenticateToken(std::string_view token);
  // Whether a successful result for `token` is cached and still valid.
  bool IsCached(std::string_view token);

  // Drops cached service-account token results (an account or secret changed).
  void InvalidateServiceAccountTokens();

  bool anonymous_enabled() const { return options_.anonymous; }

 private:
  struct CacheEntry {
    TokenResult result;
    core::SystemTime valid_until;
  };
  AuthenticatorOptions options_;
  std::vector<std::unique_ptr<TokenAuthenticator>> token_authenticators_;
  core::Mutex mu_;
  std::unordered_map<std::string, CacheEntry> cache_ GUARDED_BY(mu_);  // key: SHA-256 of token
  uint64_t generation_ GUARDED_BY(mu_) = 0;  // bumped by InvalidateServiceAccountTokens
};

// "Bearer <token>" -> the token, as kube-apiserver splits it: scheme in any case, one space,
// the token up to the next space; nullopt for other schemes or an empty token.
std::optional<std::string_view> BearerToken(std::string_view authorization);

// A user's groups as kube-apiserver completes them: system:authenticated is added to every
// authenticated user that does not already have it (and not to system:anonymous).
void AddAuthenticatedGroup(UserInfo& user);

// The static token file of --token-auth-file: CSV lines `token,user,uid[,"group1,group2"]`,
// blank lines and lines starting with '#' ignored. kBadRequest naming the line when malformed.
class TokenFileAuthenticator final : public TokenAuthenticator {
 public:
  static core::Result<std::unique_ptr<TokenFileAuthenticator>> Load(const std::string& path);
  static core::Result<std::unique_ptr<TokenFileAuthenticator>> Parse(std::string_view text);
  core::Result<std::optional<TokenResult>> Authenticate(std::string_view token) override;
  std::string_view name() const override { return "token-file"; }

 private:
  std::unordered_map<std::string, UserInfo> tokens_;
};

}  // namespace klutch::auth
