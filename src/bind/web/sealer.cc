#include "bind/web/sealer.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <cmath>
#include <memory>

#include "core/random.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::bind {
namespace {

using machinery::Json;

constexpr std::string_view kPrefix = "k1.";
constexpr size_t kIvBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr size_t kMacBytes = 32;

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

// What the HMAC and GCM's associated data cover besides the bytes: version and purpose.
std::string SealContext(std::string_view purpose) {
  std::string c = "klutch-bind/k1";
  c.push_back('\0');
  c.append(purpose);
  c.push_back('\0');
  return c;
}

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

core::Status Refused(std::string why) {
  return core::Status(core::Reason::kUnauthorized, std::move(why));
}

std::optional<std::string> DecodeFlag(std::string_view text) {
  text = core::Trim(text);
  if (auto std_b64 = core::Base64Decode(text)) return std_b64;
  std::string unpadded(text);
  while (!unpadded.empty() && unpadded.back() == '=') unpadded.pop_back();
  return core::Base64UrlDecode(unpadded);
}

}  // namespace

core::Result<Sealer> Sealer::New(std::string_view signing_key, std::string_view encryption_key) {
  if (signing_key.size() != 32 && signing_key.size() != 64) {
    return core::Invalid("--cookie-signing-key: must be 32 or 64 bytes (base64-encoded), not " +
                         std::to_string(signing_key.size()));
  }
  if (encryption_key.size() != 16 && encryption_key.size() != 24 && encryption_key.size() != 32) {
    return core::Invalid(
        "--cookie-encryption-key: must be 16, 24 or 32 bytes (base64-encoded), not " +
        std::to_string(encryption_key.size()));
  }
  Sealer s;
  s.aes_key_ = Hmac(encryption_key, "klutch-bind aes-256-gcm key");
  s.seal_mac_ = Hmac(signing_key, "klutch-bind sealed-value hmac key");
  s.token_mac_ = Hmac(signing_key, "klutch-bind token hmac key");
  return s;
}

core::Result<Sealer> Sealer::FromBase64(std::string_view signing_key_b64,
                                        std::string_view encryption_key_b64) {
  if (core::Trim(signing_key_b64).empty()) {
    return core::Invalid("--cookie-signing-key is required (base64 of 32 or 64 random bytes)");
  }
  if (core::Trim(encryption_key_b64).empty()) {
    return core::Invalid("--cookie-encryption-key is required (base64 of 32 random bytes)");
  }
  auto signing = DecodeFlag(signing_key_b64);
  if (!signing) return core::Invalid("--cookie-signing-key: not base64");
  auto encryption = DecodeFlag(encryption_key_b64);
  if (!encryption) return core::Invalid("--cookie-encryption-key: not base64");
  return New(*signing, *encryption);
}

std::string Sealer::Seal(std::string_view purpose, const Json& data,
                         core::SystemTime expires) const {
  const int64_t exp =
      std::chrono::duration_cast<std::chrono::seconds>(expires.time_since_epoch()).count();
  const std::string plain = machinery::Dump(Json{{"exp", exp}, {"d", data}});
  const std::string aad = SealContext(purpose);
  std::string iv = core::RandomBytes(kIvBytes);
  std::string out = iv;
  out.resize(kIvBytes + plain.size() + kTagBytes);
  auto* cipher = reinterpret_cast<unsigned char*>(out.data()) + kIvBytes;
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  int total = 0;
  bool ok = ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kIvBytes, nullptr) &&
            EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr,
                               reinterpret_cast<const unsigned char*>(aes_key_.data()),
                               reinterpret_cast<const unsigned char*>(iv.data())) &&
            EVP_EncryptUpdate(ctx.get(), nullptr, &len,
                              reinterpret_cast<const unsigned char*>(aad.data()),
                              static_cast<int>(aad.size())) &&
            EVP_EncryptUpdate(ctx.get(), cipher, &len,
                              reinterpret_cast<const unsigned char*>(plain.data()),
                              static_cast<int>(plain.size()));
  total = len;
  ok = ok && EVP_EncryptFinal_ex(ctx.get(), cipher + total, &len);
  total += len;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, cipher + total);
  // Failing here means OpenSSL ran out of memory: not an input error.
  KLUTCH_CHECK(ok);
  out.resize(kIvBytes + static_cast<size_t>(total) + kTagBytes);
  out += Hmac(seal_mac_, aad + out);
  return std::string(kPrefix) + core::Base64UrlEncode(out);
}

core::Result<Json> Sealer::Unseal(std::string_view purpose, std::string_view sealed,
                                  core::SystemTime now) const {
  if (sealed.size() > kMaxSealedBytes) return Refused("sealed value too long");
  if (!sealed.starts_with(kPrefix)) return Refused("not a sealed value");
  auto raw = core::Base64UrlDecode(sealed.substr(kPrefix.size()));
  if (!raw || raw->size() < kIvBytes + kTagBytes + kMacBytes) {
    return Refused("malformed sealed value");
  }
  const std::string aad = SealContext(purpose);
  std::string_view body(raw->data(), raw->size() - kMacBytes);
  std::string_view mac(raw->data() + body.size(), kMacBytes);
  const std::string want = Hmac(seal_mac_, aad + std::string(body));
  if (CRYPTO_memcmp(want.data(), mac.data(), kMacBytes) != 0) {
    return Refused("sealed value does not verify (tampered, other keys or other purpose)");
  }
  const size_t cipher_len = body.size() - kIvBytes - kTagBytes;
  std::string plain(cipher_len, '\0');
  std::string tag(body.substr(kIvBytes + cipher_len));
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  int total = 0;
  bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kIvBytes, nullptr) &&
            EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr,
                               reinterpret_cast<const unsigned char*>(aes_key_.data()),
                               reinterpret_cast<const unsigned char*>(body.data())) &&
            EVP_DecryptUpdate(ctx.get(), nullptr, &len,
                              reinterpret_cast<const unsigned char*>(aad.data()),
                              static_cast<int>(aad.size())) &&
            EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len,
                              reinterpret_cast<const unsigned char*>(body.data() + kIvBytes),
                              static_cast<int>(cipher_len));
  total = len;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data());
  ok = ok && EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + total,
                                 &len) > 0;
  if (!ok) return Refused("sealed value does not decrypt");
  auto parsed = machinery::ParseJson(plain);
  if (!parsed.ok() || !parsed->is_object()) return Refused("sealed value holds no object");
  const Json* exp = machinery::Find(*parsed, {"exp"});
  if (exp == nullptr || !exp->is_number()) return Refused("sealed value has no expiry");
  const double exp_seconds = exp->get<double>();  // json-ok: is_number() checked above
  const double now_seconds = std::chrono::duration<double>(now.time_since_epoch()).count();
  if (!(now_seconds < exp_seconds)) {
    return core::Status(core::Reason::kExpired, "sealed value has expired");
  }
  auto d = parsed->find("d");
  if (d == parsed->end()) return Refused("sealed value holds no data");
  return std::move(*d);
}

std::string Sealer::Mac(std::string_view purpose, std::string_view data) const {
  return core::Base64UrlEncode(Hmac(token_mac_, SealContext(purpose) + std::string(data)));
}

bool Sealer::VerifyMac(std::string_view purpose, std::string_view data,
                       std::string_view mac) const {
  const std::string want = Mac(purpose, data);
  return want.size() == mac.size() && CRYPTO_memcmp(want.data(), mac.data(), want.size()) == 0;
}

std::string PkceChallengeS256(std::string_view verifier) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(verifier.data(), verifier.size(), digest, &len, EVP_sha256(), nullptr);
  return core::Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(digest), len));
}

std::string RandomToken(size_t bytes) { return core::Base64UrlEncode(core::RandomBytes(bytes)); }

}  // namespace klutch::bind
