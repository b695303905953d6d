// libFuzzer target: arbitrary bytes as a token and as a key set. Parsing must never crash or
// leak, and no input may verify against keys generated at start-up (that would be a forgery).
// A published key (RFC 7515 A.3) is tried too, so the fuzzer also reaches the success path.
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "auth/jwt.h"

namespace {

using klutch::auth::PublicKey;

// Keys whose private halves die with this function: nothing can have signed with them.
const std::vector<PublicKey>& FreshKeys() {
  static const auto* keys = [] {
    auto* out = new std::vector<PublicKey>();
    auto rsa = klutch::auth::SigningKey::Generate(2048);
    if (rsa.ok()) out->push_back(rsa->public_key());
    EVP_PKEY* ec = EVP_EC_gen("P-256");
    BIO* bio = BIO_new(BIO_s_mem());
    if (ec != nullptr && bio != nullptr && PEM_write_bio_PUBKEY(bio, ec) == 1) {
      char* data = nullptr;
      long n = BIO_get_mem_data(bio, &data);
      auto key = PublicKey::FromPem(std::string(data, static_cast<size_t>(n)));
      if (key.ok()) out->push_back(*key);
    }
    BIO_free(bio);
    EVP_PKEY_free(ec);
    if (out->size() != 2) __builtin_trap();
    return out;
  }();
  return *keys;
}

const std::vector<PublicKey>& PublishedKeys() {
  static const auto* keys = new std::vector<PublicKey>{
      *PublicKey::FromJwk({{"kty", "EC"},
                           {"crv", "P-256"},
                           {"x", "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"},
                           {"y", "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}})};
  return *keys;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto jwks = klutch::auth::Jwks::Parse(input);
  if (jwks.ok()) {
    for (const auto& key : jwks->keys()) {
      // What a key set yields must survive its own round trip.
      auto again = PublicKey::FromJwk(key.ToJwk());
      if (!again.ok() || !again->SameKey(key)) __builtin_trap();
    }
  }
  (void)PublicKey::FromPem(input);
  auto jwt = klutch::auth::ParseJwt(input);
  if (!jwt.ok()) return 0;
  if (klutch::auth::VerifyJwt(*jwt, FreshKeys()).ok()) __builtin_trap();
  (void)klutch::auth::VerifyJwt(*jwt, PublishedKeys());
  klutch::auth::ClaimChecks checks;
  checks.audiences = {"a"};
  checks.issuers = {"i"};
  (void)klutch::auth::CheckClaims(*jwt, checks);
  (void)klutch::auth::ExpiryOf(*jwt);
  return 0;
}
