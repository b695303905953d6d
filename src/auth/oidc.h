// OidcAuthenticator: accepts OpenID Connect ID tokens of one issuer, as kube-apiserver's
// --oidc-* flags configure it.
//
// The issuer's discovery document (<issuer>/.well-known/openid-configuration) and JWKS are
// fetched over HTTPS and cached; a token whose key id is not in the cached set triggers a
// refetch (at most once per `refetch_interval`), so a provider's key rotation is followed
// without a restart. Checks: signature (RS256/384/512, PS*, ES*; never none or HMAC), iss ==
// issuer URL, aud contains the client id, exp in the future, nbf not ahead, the username claim
// present (and email_verified not false when it is "email"), required claims. Tokens of
// another issuer are not this authenticator's (nullopt). Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "auth/authenticator.h"
#include "auth/jwt.h"
#include "core/sync.h"

namespace klutch::auth {

struct OidcOptions {
  std::string issuer_url;  // https only
  std::string client_id;
  std::string username_claim = "sub";
  // nullopt: kube's default (issuer_url + "#" unless the claim is "email"); "-": no prefix.
  std::optional<std::string> username_prefix;
  std::string groups_claim;  // "" = no groups from the token
  std::string groups_prefix;
  std::string ca_file;  // PEM CA for the issuer's TLS (default: system roots)
  std::vector<std::pair<std::string, std::string>> required_claims;
  std::vector<std::string> signing_algs = {"RS256"};
  std::chrono::seconds refetch_interval{10};
  std::chrono::seconds fetch_timeout{5};
  const core::Clock* clock = &core::RealClock::Get();
};

class OidcAuthenticator final : public TokenAuthenticator {
 public:
  // Checks the options (kBadRequest naming the flag); does not contact the issuer yet.
  static core::Result<std::unique_ptr<OidcAuthenticator>> New(OidcOptions options);
  ~OidcAuthenticator() override;

  core::Result<std::optional<TokenResult>> Authenticate(std::string_view token) override;
  std::string_view name() const override { return "oidc"; }

  // For relying parties (the bind backend's login): the claims of `token` once it is verified
  // as an ID token of this issuer for this client: accepted algorithm, signature against the
  // issuer's JWKS, iss, aud, exp and nbf as Authenticate checks them (required claims too, the
  // username claim not). Nonce, if any, is the caller's to compare. kUnauthorized with a short
  // reason (for logs) when it is not.
  core::Result<machinery::Json> VerifyIdToken(std::string_view token);

  // Fetches discovery and JWKS now (the server calls it at startup, and logs a failure: the
  // provider may come up later).
  core::Status Refresh();

 private:
  explicit OidcAuthenticator(OidcOptions options);
  // The cached keys, refetched when `kid` is not among them (rate-limited).
  core::Result<std::shared_ptr<const Jwks>> KeysFor(std::string_view kid);
  core::Result<std::string> Fetch(const std::string& url);
  // Algorithm, signature, registered claims and required claims of a token of our issuer.
  core::Status VerifyOwn(const Jwt& jwt);

  OidcOptions options_;
  std::string ca_pem_;
  core::Mutex mu_;
  core::CondVar cv_;  // signalled when a fetch ends
  std::shared_ptr<const Jwks> keys_ GUARDED_BY(mu_);
  std::optional<std::chrono::steady_clock::time_point> last_fetch_ GUARDED_BY(mu_);
  bool fetching_ GUARDED_BY(mu_) = false;
};

}  // namespace klutch::auth
