// JSON Web Tokens (RFC 7519) in the JWS compact serialization (RFC 7515), the public keys that
// verify them as JSON Web Keys and key sets (RFC 7517), and the RSA key the API server signs
// service-account tokens with.
//
// Only asymmetric algorithms (RFC 7518 §3): RS256/384/512, PS256/384/512 with RSA keys of at
// least 2048 bits, ES256/384/512 with P-256/384/521 keys. "none", the HMAC algorithms and
// everything else are refused, as are tokens with a "crit" header (no extensions understood).
//
// Error policy: token failures (ParseJwt, Verify, VerifyJwt, CheckClaims) are kUnauthorized with
// a short message for the server log, never for the client. Key material that does not parse or
// is too weak (FromJwk, FromPem, Jwks::Parse, SigningKey::FromPem) is kInvalid naming the
// problem. Generating or signing failures inside OpenSSL are kInternalError.
//
// Keys are immutable once built and share their OpenSSL key object when copied, so copies are
// cheap and every function here is safe to call from any number of threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "machinery/json.h"

namespace klutch::auth {

// Tokens longer than this are refused before any decoding.
inline constexpr size_t kMaxTokenBytes = 16 * 1024;
// Key sets longer than this, or with more keys, are refused by Jwks::Parse.
inline constexpr size_t kMaxJwksBytes = 1024 * 1024;
inline constexpr size_t kMaxJwksKeys = 100;
// RSA moduli outside [kMinRsaBits, kMaxRsaBits] are refused (the upper bound caps the cost an
// attacker-supplied key set can impose on each verification).
inline constexpr int kMinRsaBits = 2048;
inline constexpr int kMaxRsaBits = 8192;

// A parsed compact JWS (three base64url parts), not yet verified: nothing in it may be trusted
// until VerifyJwt and CheckClaims succeed.
struct Jwt {
  machinery::Json header;     // a JSON object
  machinery::Json claims;     // a JSON object
  std::string alg, kid;       // from the header ("" when "kid" is absent)
  std::string signing_input;  // "<header b64>.<payload b64>" as received
  std::string signature;      // decoded bytes
};

// Splits and decodes `token`. Refused (kUnauthorized): more than kMaxTokenBytes, not exactly
// three parts, characters outside the unpadded base64url alphabet (so '=' too), an empty
// signature, a header or payload that is not a JSON object, a header without a string "alg", a
// non-string "kid", or any "crit" header.
core::Result<Jwt> ParseJwt(std::string_view token);

// A public key that verifies JWS signatures: RSA (2048 to 8192 bits) or EC on P-256/384/521.
class PublicKey {
 public:
  // A JWK of kty "RSA" (n, e) or "EC" (crv, x, y with coordinates of the curve's full size and
  // the point on the curve). Private members ("d", ...) are ignored. kInvalid for other key
  // types ("oct", "OKP"), keys marked "use":"enc" or whose "key_ops" lack "verify", missing or
  // malformed members, weak RSA moduli. The JWK's "kid" and "alg" are kept; a key with an
  // "alg" verifies only that algorithm.
  static core::Result<PublicKey> FromJwk(const machinery::Json& jwk);
  // The first key in PEM text: "PUBLIC KEY" (SubjectPublicKeyInfo), "RSA PUBLIC KEY" (PKCS#1)
  // or the key of a "CERTIFICATE" (the certificate itself is not checked). Blocks of other
  // types are skipped. kInvalid as PublicKeysFromPem. Its kid() is KeyId(key).
  static core::Result<PublicKey> FromPem(std::string_view pem);

  // The JWK's "kid" ("" when it had none), or KeyId(*this) for keys read from PEM.
  const std::string& kid() const;
  // "RSA" or "EC".
  std::string kty() const;
  // The algorithm the key is restricted to by its JWK's "alg" ("" when unrestricted).
  const std::string& alg() const;

  // Verifies `signature` over `data` with `alg`. RS* and PS* (salt length = hash length, MGF1
  // with the same hash) need an RSA key and a signature as long as the modulus; ES* need an EC
  // key on the matching curve and the raw r||s form of RFC 7518 §3.4 (64, 96 or 132 bytes; DER
  // is refused). Everything else ("none", HS*, unknown names, a mismatched key type, curve or
  // restricted "alg") and every bad signature is kUnauthorized.
  core::Status Verify(std::string_view alg, std::string_view data,
                      std::string_view signature) const;

  // The public JWK: kty, n/e or crv/x/y, kid (kid() or else KeyId), "use":"sig", and alg (the
  // restricted one, else RS256 for RSA and ES256/ES384/ES512 by curve).
  machinery::Json ToJwk() const;
  // The DER SubjectPublicKeyInfo (EC points uncompressed), as Go's x509.MarshalPKIXPublicKey.
  const std::string& DerSpki() const;

  // True when both hold the same public key (kid and alg restrictions are not compared).
  bool SameKey(const PublicKey& other) const { return DerSpki() == other.DerSpki(); }

  struct Impl;  // the OpenSSL key and what is derived from it, defined in jwt.cc

 private:
  friend struct PublicKeyAccess;
  explicit PublicKey(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Every public key in PEM text, in order (a --service-account-key-file may hold several); blocks
// of other types ("PRIVATE KEY", "EC PARAMETERS", ...) are skipped. kInvalid, naming the block,
// when a key block does not parse or holds an unsupported or weak key, when there is no key
// block at all, or for more than kMaxJwksBytes of text.
core::Result<std::vector<PublicKey>> PublicKeysFromPem(std::string_view pem);

// base64url (unpadded) of the SHA-256 of key.DerSpki(): the key id Kubernetes gives service
// account signing keys, so tokens and discovery documents agree with kube-apiserver's.
std::string KeyId(const PublicKey& key);

// A parsed JSON Web Key Set.
class Jwks {
 public:
  // {"keys":[...]}. Keys that cannot be used to verify signatures are skipped, not errors:
  // unsupported kty ("oct", "OKP", unknown), "use":"enc", and keys FromJwk refuses (weak or
  // malformed); skipped() says why for each. kInvalid for malformed JSON, no "keys" array, more
  // than kMaxJwksKeys entries or more than kMaxJwksBytes of input.
  static core::Result<Jwks> Parse(std::string_view json);

  const std::vector<PublicKey>& keys() const { return keys_; }
  // One line per skipped entry: "keys[3]: JWK key type \"oct\" is not supported".
  const std::vector<std::string>& skipped() const { return skipped_; }

  // Keys that may have signed a token with this kid and alg: those whose kid equals `kid` when
  // it is non-empty, else all keys; in both cases only keys able to verify `alg` (key type,
  // curve, and the key's own "alg" restriction). Empty for unsupported algorithms.
  std::vector<PublicKey> Candidates(std::string_view kid, std::string_view alg) const;

 private:
  std::vector<PublicKey> keys_;
  std::vector<std::string> skipped_;
};

// Verifies the signature of `jwt` with the first of `candidates` that validates it. kUnauthorized
// when none does (or there are none).
core::Status VerifyJwt(const Jwt& jwt, const std::vector<PublicKey>& candidates);

// An RSA private key the API server signs service-account tokens with (RS256).
class SigningKey {
 public:
  // A fresh key of `bits` (kMinRsaBits..kMaxRsaBits, else kInvalid).
  static core::Result<SigningKey> Generate(int bits = 2048);
  // The first private key in PEM text: PKCS#8 "PRIVATE KEY" or PKCS#1 "RSA PRIVATE KEY".
  // Encrypted keys, non-RSA keys and weak keys are kInvalid.
  static core::Result<SigningKey> FromPem(std::string_view pem);

  // Unencrypted PKCS#8 PEM.
  std::string PrivatePem() const;
  const PublicKey& public_key() const { return public_key_; }
  // KeyId(public_key()).
  const std::string& kid() const { return public_key_.kid(); }

  // A compact RS256 JWS with header {"alg":"RS256","kid":kid()} and `claims` (which must be an
  // object, else kInvalid) serialized compactly as the payload.
  core::Result<std::string> Sign(const machinery::Json& claims) const;

  struct Impl;

 private:
  friend struct SigningKeyAccess;
  SigningKey(std::shared_ptr<const Impl> impl, PublicKey public_key)
      : impl_(std::move(impl)), public_key_(std::move(public_key)) {}

  std::shared_ptr<const Impl> impl_;
  PublicKey public_key_;
};

struct ClaimChecks {
  std::vector<std::string> issuers;    // "iss" must equal one of these (empty: not checked)
  std::vector<std::string> audiences;  // "aud" (string or array) must contain one (empty: not
                                       // checked)
  core::SystemTime now;
  std::chrono::seconds leeway{0};  // tolerated clock skew for exp and nbf
  bool require_exp = true;
};

// The registered time and identity claims of RFC 7519 §4.1. "exp", "nbf" and "iat" must be
// numbers (fractions allowed) when present; the token is expired when now >= exp + leeway and
// not valid yet when now + leeway < nbf. kUnauthorized with "token has expired", "token is not
// valid yet", "token has no expiry", "invalid issuer", "invalid audience" or "invalid <claim>
// claim" (wrong type).
core::Status CheckClaims(const Jwt& jwt, const ClaimChecks& checks);

// The "exp" claim as a time (nullopt when absent or not a number), for callers that cache
// verification results until the token expires.
std::optional<core::SystemTime> ExpiryOf(const Jwt& jwt);

}  // namespace klutch::auth
