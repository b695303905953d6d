// Sealer: the bind backend's authenticated encryption of the small values it hands to browsers
// and CLIs and later gets back (the OIDC `state`, the pre-login and session cookies, device
// handles), so the backend keeps no state of its own: any replica started with the same
// --cookie-signing-key and --cookie-encryption-key opens what another one sealed.
//
// A sealed value is "k1." followed by unpadded base64url of
//   iv (12 bytes) || AES-256-GCM ciphertext || GCM tag (16) || HMAC-SHA256 (32)
// of the JSON {"exp": <unix seconds>, "d": <data>}. The AES key is derived from the encryption
// key and the HMAC key from the signing key (HMAC-SHA256 with fixed labels), so both keys are
// needed to forge a value and one alone reveals nothing. The purpose ("state", "session", ...)
// is GCM associated data and part of the HMAC input: a value sealed for one purpose never
// opens for another. Expiry is checked on the server against the sealed "exp", whatever a
// cookie's own attributes say.
//
// Error policy: Unseal answers kExpired for a genuine value past its expiry and kUnauthorized
// (short message for logs) for anything else (malformed, too long, tampered, other keys, other
// purpose). Immutable after construction; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/status.h"
#include "machinery/json.h"

namespace klutch::bind {

// Sealed values longer than this are refused before any decoding (cookies stay under 4 KiB).
inline constexpr size_t kMaxSealedBytes = 8192;

class Sealer {
 public:
  // Raw keys: `signing_key` of 32 or 64 bytes, `encryption_key` of 16, 24 or 32 bytes (as
  // upstream's flags). kInvalid naming the flag (--cookie-signing-key,
  // --cookie-encryption-key) and the length otherwise.
  static core::Result<Sealer> New(std::string_view signing_key, std::string_view encryption_key);
  // The same from the flags' base64 text (standard or URL alphabet, padding optional).
  // kInvalid naming the flag when a value is missing, not base64 or of the wrong length.
  static core::Result<Sealer> FromBase64(std::string_view signing_key_b64,
                                         std::string_view encryption_key_b64);

  // `data` (any JSON) sealed for `purpose` until `expires`.
  std::string Seal(std::string_view purpose, const machinery::Json& data,
                   core::SystemTime expires) const;
  // The data of a value sealed for `purpose` that has not expired at `now` (see the error
  // policy above).
  core::Result<machinery::Json> Unseal(std::string_view purpose, std::string_view sealed,
                                       core::SystemTime now) const;

  // A keyed digest of `data` for `purpose` (unpadded base64url of HMAC-SHA256 under a key
  // derived from the signing key): CSRF tokens tied to a session.
  std::string Mac(std::string_view purpose, std::string_view data) const;
  // Whether `mac` is Mac(purpose, data), compared in constant time.
  bool VerifyMac(std::string_view purpose, std::string_view data, std::string_view mac) const;

 private:
  Sealer() = default;
  std::string aes_key_;    // 32 bytes
  std::string seal_mac_;   // 32 bytes, authenticates sealed values
  std::string token_mac_;  // 32 bytes, Mac()
};

// The PKCE S256 code challenge of `verifier` (RFC 7636 §4.2): unpadded base64url of its
// SHA-256.
std::string PkceChallengeS256(std::string_view verifier);
// `bytes` random bytes as unpadded base64url (PKCE verifiers, nonces, CSRF ids).
std::string RandomToken(size_t bytes = 32);

}  // namespace klutch::bind
