// IdentityProvider: what the bind backend's HTTP handlers need from an OpenID Connect issuer
// (a browser login with PKCE and a nonce, the device authorization grant of RFC 8628), and the
// values it answers with. OidcClient (oidc_client.h) is the implementation against a real
// issuer; tests substitute a fake. Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "machinery/json.h"

namespace klutch::bind {

// The verified claims of an ID token.
struct IdTokenClaims {
  std::string issuer, subject, email, name, preferred_username;
  core::SystemTime expires;
  machinery::Json claims;
};

// The name a person knows the user by, as kubectl bind prints it after a login (the
// BindingResponse's authentication.oauth2CodeGrant.displayName): preferred_username, else
// email, else name (each trimmed, skipped when longer than 256 bytes or holding control
// characters), else the subject.
std::string DisplayNameOf(const IdTokenClaims& claims);

struct AuthorizationRequest {
  std::string state;
  std::string nonce;
  std::string code_challenge;  // S256
};

struct DeviceAuthorization {
  std::string device_code;
  std::string user_code;
  std::string verification_uri;
  std::string verification_uri_complete;  // "" when the issuer gives none
  int64_t expires_in = 0;
  int64_t interval = 5;
};

// The answer to one device token poll: either claims, or an RFC 8628 §3.5 error code
// ("authorization_pending", "slow_down", "access_denied", "expired_token", ...) with the
// issuer's description.
struct DevicePoll {
  std::optional<IdTokenClaims> claims;
  std::string error;
  std::string error_description;
};

class IdentityProvider {
 public:
  virtual ~IdentityProvider() = default;
  virtual const std::string& issuer() const = 0;
  // Where to send the browser. kServiceUnavailable when the issuer cannot be discovered.
  virtual core::Result<std::string> AuthorizationUrl(const AuthorizationRequest& request) = 0;
  // Redeems `code` with the PKCE verifier and verifies the ID token, whose nonce must be
  // `nonce`. kUnauthorized (the issuer refused the code, or the token does not verify),
  // kServiceUnavailable (issuer unreachable).
  virtual core::Result<IdTokenClaims> ExchangeCode(const std::string& code,
                                                   const std::string& code_verifier,
                                                   const std::string& nonce) = 0;
  // Whether the issuer offers the device authorization grant.
  virtual bool SupportsDeviceGrant() = 0;
  virtual core::Result<DeviceAuthorization> StartDeviceAuthorization() = 0;
  // One poll of the token endpoint for `device_code`; transport failures are errors, the
  // issuer's RFC 8628 answers are values.
  virtual core::Result<DevicePoll> PollDeviceToken(const std::string& device_code) = 0;
};

}  // namespace klutch::bind
