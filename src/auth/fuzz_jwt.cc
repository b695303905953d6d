// libFuzzer target: arbitrary bytes as a token and as a key set. Parsing must never crash or
// leak, and whatever parses as a token must be refused by a key that never signed anything
// (a fixed RSA key, an EC key and the keys of the input read as a JWKS).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "auth/jwt.h"

namespace {

const std::vector<klutch::auth::PublicKey>& FixedKeys() {
  static const auto* keys = [] {
    auto* out = new std::vector<klutch::auth::PublicKey>();
    auto rsa = klutch::auth::SigningKey::Generate(2048);
    if (rsa.ok()) out->push_back(rsa->public_key());
    // RFC 7515 A.3's P-256 key.
    auto ec =
        klutch::auth::PublicKey::FromJwk({{"kty", "EC"},
                                          {"crv", "P-256"},
                                          {"x", "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"},
                                          {"y", "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}});
    if (ec.ok()) out->push_back(*ec);
    return out;
  }();
  return *keys;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto jwks = klutch::auth::Jwks::Parse(input);
  if (jwks.ok()) {
    for (const auto& key : jwks->keys()) (void)key.ToJwk();
  }
  auto jwt = klutch::auth::ParseJwt(input);
  if (!jwt.ok()) return 0;
  // A random token verifying against the fixed keys would mean a forgery.
  if (klutch::auth::VerifyJwt(*jwt, FixedKeys()).ok()) __builtin_trap();
  klutch::auth::ClaimChecks checks;
  checks.audiences = {"a"};
  checks.issuers = {"i"};
  (void)klutch::auth::CheckClaims(*jwt, checks);
  (void)klutch::auth::ExpiryOf(*jwt);
  return 0;
}
