// OidcClient: the bind backend as an OpenID Connect relying party, the IdentityProvider
// (identity_provider.h) of a real issuer.
//
// OidcClient discovers <issuer>/.well-known/openid-configuration over HTTPS (trusting
// `ca_file` when given), sends browsers to the authorization endpoint with PKCE (S256) and a
// nonce, exchanges codes at the token endpoint (client_secret_basic, then the client
// credentials in the form when the issuer refuses that), runs the device authorization grant
// (RFC 8628) when the issuer advertises a device_authorization_endpoint, and verifies every ID
// token with src/auth's OidcAuthenticator (signature against the issuer's JWKS, iss, aud ==
// client id, exp) plus the nonce. Discovery happens on first use and is retried on the next
// request while it fails. Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "bind/web/identity_provider.h"
#include "core/clock.h"
#include "core/status.h"
#include "core/sync.h"
#include "machinery/json.h"

namespace klutch::auth {
class OidcAuthenticator;
}

namespace klutch::bind {

struct OidcClientOptions {
  std::string issuer_url;  // https
  std::string client_id;
  std::string client_secret;
  std::string redirect_url;  // our /callback as the issuer knows it
  std::string ca_file;       // PEM CA for the issuer's TLS ("" = system roots)
  std::string scopes = "openid profile email";
  std::chrono::seconds timeout{10};
  const core::Clock* clock = nullptr;  // ID token expiry checks (nullptr: real time)
};

class OidcClient final : public IdentityProvider {
 public:
  // Checks the options (kInvalid naming the flag: --oidc-issuer-url, --oidc-issuer-client-id,
  // --oidc-issuer-client-secret, --oidc-callback-url, --oidc-ca-file); contacts nobody yet.
  static core::Result<std::unique_ptr<OidcClient>> New(OidcClientOptions options);
  ~OidcClient() override;

  // Fetches the discovery document and the keys now (the backend calls it at start and logs a
  // failure; requests retry).
  core::Status Discover();

  const std::string& issuer() const override { return options_.issuer_url; }
  core::Result<std::string> AuthorizationUrl(const AuthorizationRequest& request) override;
  core::Result<IdTokenClaims> ExchangeCode(const std::string& code,
                                           const std::string& code_verifier,
                                           const std::string& nonce) override;
  bool SupportsDeviceGrant() override;
  core::Result<DeviceAuthorization> StartDeviceAuthorization() override;
  core::Result<DevicePoll> PollDeviceToken(const std::string& device_code) override;

  // Verifies `id_token` as ExchangeCode does (signature against the issuer's JWKS, iss, aud ==
  // client id, exp, and the nonce unless `nonce` is empty): its claims, or kUnauthorized
  // saying why not.
  core::Result<IdTokenClaims> VerifyIdToken(const std::string& id_token, const std::string& nonce);

 private:
  struct Endpoints {
    std::string authorization, token, device_authorization;
  };
  explicit OidcClient(OidcClientOptions options);
  core::Result<Endpoints> GetEndpoints();
  // POSTs `form` to `url` with the client's credentials (basic, then in the form).
  core::Result<std::pair<int, machinery::Json>> PostWithClientAuth(const std::string& url,
                                                                   const std::string& form);
  // VerifyIdToken of the response's id_token.
  core::Result<IdTokenClaims> Verify(const machinery::Json& token_response,
                                     const std::string& nonce);

  OidcClientOptions options_;
  std::string ca_pem_;
  std::unique_ptr<auth::OidcAuthenticator> verifier_;
  core::Mutex mu_;
  std::optional<Endpoints> endpoints_ GUARDED_BY(mu_);
};

// POSTs an application/x-www-form-urlencoded body to an https URL (CA PEM, "" = system roots):
// the status and the body parsed as JSON (an empty object when it is not JSON).
core::Result<std::pair<int, machinery::Json>> PostForm(const std::string& url,
                                                       const std::string& ca_pem,
                                                       const std::string& form,
                                                       const std::string& authorization,
                                                       std::chrono::seconds timeout);

}  // namespace klutch::bind
