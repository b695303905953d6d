#include "auth/jwt.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "auth/internal.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::auth {
namespace {

using std::string_view_literals::operator""sv;  // the DER constants below contain NULs

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, Deleter<EVP_PKEY_CTX, EVP_PKEY_CTX_free>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, Deleter<EVP_MD_CTX, EVP_MD_CTX_free>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using ParamBldPtr = std::unique_ptr<OSSL_PARAM_BLD, Deleter<OSSL_PARAM_BLD, OSSL_PARAM_BLD_free>>;
using ParamPtr = std::unique_ptr<OSSL_PARAM, Deleter<OSSL_PARAM, OSSL_PARAM_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using EcdsaSigPtr = std::unique_ptr<ECDSA_SIG, Deleter<ECDSA_SIG, ECDSA_SIG_free>>;
struct OpensslFree {
  void operator()(void* p) const { OPENSSL_free(p); }
};
template <typename T>
using OpensslPtr = std::unique_ptr<T, OpensslFree>;

// OpenSSL records failures in a thread-local queue; a failed parse or verification here must
// not leave entries behind for the next OpenSSL user on the thread (a TLS handshake would report
// them as its own).
struct ErrorQueueGuard {
  ErrorQueueGuard() = default;
  ErrorQueueGuard(const ErrorQueueGuard&) = delete;
  ErrorQueueGuard& operator=(const ErrorQueueGuard&) = delete;
  ~ErrorQueueGuard() { ERR_clear_error(); }
};

core::Status Unauthorized(std::string message) {
  return core::Status(core::Reason::kUnauthorized, std::move(message));
}
core::Status InternalError(std::string message) {
  return core::Status(core::Reason::kInternalError, std::move(message));
}

enum class KeyType { kRsa, kEc };

struct Curve {
  std::string_view jwk_name;
  const char* group_name;  // OpenSSL's name
  size_t coordinate_bytes;
  std::string_view default_alg;
  std::string_view oid_der;  // DER of the named curve's OBJECT IDENTIFIER (RFC 5480 §2.1.1.1)
};
// RFC 7518 §6.2.1.1 and §3.4.
constexpr std::array<Curve, 3> kCurves = {{
    {"P-256", "prime256v1", 32, "ES256", "\x06\x08\x2a\x86\x48\xce\x3d\x03\x01\x07"sv},
    {"P-384", "secp384r1", 48, "ES384", "\x06\x05\x2b\x81\x04\x00\x22"sv},
    {"P-521", "secp521r1", 66, "ES512", "\x06\x05\x2b\x81\x04\x00\x23"sv},
}};
// id-ecPublicKey (RFC 5480 §2.1.1) and rsaEncryption with its NULL parameters (RFC 3279 §2.3.1).
constexpr std::string_view kEcPublicKeyOid = "\x06\x07\x2a\x86\x48\xce\x3d\x02\x01"sv;
constexpr std::string_view kRsaEncryptionAlgorithm =
    "\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01\x05\x00"sv;

const Curve* CurveByJwkName(std::string_view name) {
  for (const auto& c : kCurves) {
    if (c.jwk_name == name) return &c;
  }
  return nullptr;
}

const Curve* CurveByGroupName(std::string_view name) {
  for (const auto& c : kCurves) {
    if (name == c.group_name) return &c;
  }
  // OpenSSL reports some curves by their NIST names.
  if (name == "P-256") return &kCurves[0];
  if (name == "P-384") return &kCurves[1];
  if (name == "P-521") return &kCurves[2];
  return nullptr;
}

enum class Hash { kSha256, kSha384, kSha512 };

// Digests are fetched once: fetching by name on every verification costs a method-store lookup
// under a lock. The objects live for the process.
const EVP_MD* Digest(Hash hash) {
  static const std::array<EVP_MD*, 3> kDigests = {
      EVP_MD_fetch(nullptr, "SHA256", nullptr),
      EVP_MD_fetch(nullptr, "SHA384", nullptr),
      EVP_MD_fetch(nullptr, "SHA512", nullptr),
  };
  return kDigests[static_cast<size_t>(hash)];
}

// The signature algorithms of RFC 7518 §3.1 this module accepts.
struct Algorithm {
  std::string_view name;
  KeyType key_type;
  Hash hash;
  bool pss;
  const Curve* curve;  // EC only
};
constexpr std::array<Algorithm, 9> kAlgorithms = {{
    {"RS256", KeyType::kRsa, Hash::kSha256, false, nullptr},
    {"RS384", KeyType::kRsa, Hash::kSha384, false, nullptr},
    {"RS512", KeyType::kRsa, Hash::kSha512, false, nullptr},
    {"PS256", KeyType::kRsa, Hash::kSha256, true, nullptr},
    {"PS384", KeyType::kRsa, Hash::kSha384, true, nullptr},
    {"PS512", KeyType::kRsa, Hash::kSha512, true, nullptr},
    {"ES256", KeyType::kEc, Hash::kSha256, false, &kCurves[0]},
    {"ES384", KeyType::kEc, Hash::kSha384, false, &kCurves[1]},
    {"ES512", KeyType::kEc, Hash::kSha512, false, &kCurves[2]},
}};

const Algorithm* FindAlgorithm(std::string_view name) {
  for (const auto& a : kAlgorithms) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string BnBytes(const BIGNUM* bn) {
  std::string out(static_cast<size_t>(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
  return out;
}

std::string_view StripLeadingZeros(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size() && bytes[i] == '\0') ++i;
  return bytes.substr(i);
}

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

using internal::Sha256;

// The string member `name` of a JSON object: nullopt when absent, an error when not a string.
core::Result<std::optional<std::string>> OptionalString(const machinery::Json& object,
                                                        const char* name) {
  auto it = object.find(name);
  if (it == object.end()) return std::optional<std::string>();
  const auto* value = it->get_ptr<const std::string*>();
  if (value == nullptr) {
    return core::Invalid(std::string("JWK member \"") + name + "\" is not a string");
  }
  return std::optional<std::string>(*value);
}

}  // namespace

// The OpenSSL key and everything derived from it once, so verification only signs and hashes.
struct PublicKey::Impl {
  KeyPtr pkey;
  KeyType type = KeyType::kRsa;
  const Curve* curve = nullptr;  // EC
  size_t modulus_bytes = 0;      // RSA: the exact signature length
  std::string n, e;              // RSA, big-endian without leading zeros
  std::string x, y;              // EC, full coordinate size
  std::string der_spki;
  std::string kid;
  std::string alg;  // restriction from the JWK; "" for none
};

// Lets this file build PublicKeys and read their insides; the header keeps both private.
struct PublicKeyAccess {
  static PublicKey Make(std::shared_ptr<const PublicKey::Impl> impl) {
    return PublicKey(std::move(impl));
  }
  static const PublicKey::Impl& Get(const PublicKey& key) { return *key.impl_; }
};

struct SigningKey::Impl {
  KeyPtr pkey;
};

struct SigningKeyAccess {
  static SigningKey Make(KeyPtr pkey, PublicKey public_key) {
    auto impl = std::make_shared<SigningKey::Impl>();
    impl->pkey = std::move(pkey);
    return SigningKey(std::move(impl), std::move(public_key));
  }
};

namespace {

using Impl = PublicKey::Impl;

// Whether `key` can verify signatures of `alg` (type, curve and JWK "alg" restriction).
core::Status CheckUsable(const Impl& key, const Algorithm& alg) {
  if (key.type != alg.key_type) {
    return Unauthorized("algorithm " + std::string(alg.name) + " needs a different key type");
  }
  if (alg.curve != nullptr && key.curve != alg.curve) {
    return Unauthorized("algorithm " + std::string(alg.name) + " needs curve " +
                        std::string(alg.curve->jwk_name));
  }
  if (!key.alg.empty() && key.alg != alg.name) {
    return Unauthorized("key is restricted to algorithm " + key.alg);
  }
  return core::Status::Ok();
}

// DER: a tag, a definite length and the contents (X.690 §8.1).
std::string Tlv(char tag, std::string_view contents) {
  std::string out(1, tag);
  size_t len = contents.size();
  if (len < 0x80) {
    out += static_cast<char>(len);
  } else {
    std::string bytes;
    for (; len > 0; len >>= 8) bytes.insert(bytes.begin(), static_cast<char>(len & 0xff));
    out += static_cast<char>(0x80 | bytes.size());
    out += bytes;
  }
  out.append(contents);
  return out;
}

// A non-negative INTEGER from its big-endian magnitude without leading zeros.
std::string DerInteger(std::string_view magnitude) {
  std::string contents;
  if (magnitude.empty() || (static_cast<unsigned char>(magnitude[0]) & 0x80) != 0) contents = '\0';
  contents.append(magnitude);
  return Tlv('\x02', contents);
}

// The SubjectPublicKeyInfo (RFC 5280 §4.1) of the key, encoded here rather than by i2d_PUBKEY:
// OpenSSL 3 looks up an encoder for every call, which made it nine tenths of a key's load time.
// The tests compare the result with OpenSSL's encoding.
void SetDerSpki(Impl& impl) {
  std::string algorithm;
  std::string key;
  if (impl.type == KeyType::kRsa) {
    algorithm = Tlv('\x30', kRsaEncryptionAlgorithm);
    key = Tlv('\x30', DerInteger(impl.n) + DerInteger(impl.e));  // RSAPublicKey (RFC 8017 A.1.1)
  } else {
    algorithm = Tlv('\x30', std::string(kEcPublicKeyOid) + std::string(impl.curve->oid_der));
    key = '\x04' + impl.x + impl.y;  // uncompressed ECPoint (SEC 1 §2.3.3)
  }
  impl.der_spki = Tlv('\x30', algorithm + Tlv('\x03', '\0' + key));  // BIT STRING, no unused bits
}

KeyPtr KeyFromParams(const char* type, OSSL_PARAM_BLD* bld) {
  ParamPtr params(OSSL_PARAM_BLD_to_param(bld));
  if (!params) return nullptr;
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1) return nullptr;
  EVP_PKEY* raw = nullptr;
  if (EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) return nullptr;
  return KeyPtr(raw);
}

// An RSA public key from big-endian modulus and exponent. Every RSA key, whatever its source,
// is rebuilt here, so all keys are provider-native (no per-use conversion of legacy keys) and
// pass the same checks.
core::Result<std::unique_ptr<Impl>> BuildRsa(std::string_view n_bytes, std::string_view e_bytes) {
  n_bytes = StripLeadingZeros(n_bytes);
  e_bytes = StripLeadingZeros(e_bytes);
  if (n_bytes.empty()) return core::Invalid("RSA modulus is missing");
  BnPtr n(BN_bin2bn(Bytes(n_bytes), static_cast<int>(n_bytes.size()), nullptr));
  BnPtr e(BN_bin2bn(Bytes(e_bytes), static_cast<int>(e_bytes.size()), nullptr));
  if (!n || !e) return InternalError("out of memory");
  int bits = BN_num_bits(n.get());
  if (bits < kMinRsaBits) {
    return core::Invalid("RSA key has " + std::to_string(bits) + " bits, fewer than " +
                         std::to_string(kMinRsaBits));
  }
  if (bits > kMaxRsaBits) {
    return core::Invalid("RSA key has " + std::to_string(bits) + " bits, more than " +
                         std::to_string(kMaxRsaBits));
  }
  if (!BN_is_odd(n.get())) return core::Invalid("RSA modulus is even");
  // As Go's crypto/rsa: an odd exponent of at least 3 that fits 31 bits.
  if (!BN_is_odd(e.get()) || BN_num_bits(e.get()) < 2 || BN_num_bits(e.get()) > 31) {
    return core::Invalid("RSA public exponent is not supported");
  }
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, e.get()) != 1) {
    return InternalError("out of memory");
  }
  auto impl = std::make_unique<Impl>();
  impl->pkey = KeyFromParams("RSA", bld.get());
  if (!impl->pkey) return core::Invalid("RSA key is not valid");
  impl->type = KeyType::kRsa;
  impl->modulus_bytes = static_cast<size_t>((bits + 7) / 8);
  impl->n = std::string(n_bytes);
  impl->e = std::string(e_bytes);
  SetDerSpki(*impl);
  return impl;
}

// An EC public key from affine coordinates of the curve's full size. The point must be on the
// curve and not the identity (SP 800-56A's full public key validation): keys come from key sets
// fetched over the network, and off-curve points are what invalid-curve attacks are made of.
core::Result<std::unique_ptr<Impl>> BuildEc(const Curve& curve, std::string_view x,
                                            std::string_view y) {
  if (x.size() != curve.coordinate_bytes || y.size() != curve.coordinate_bytes) {
    return core::Invalid("EC coordinates must be " + std::to_string(curve.coordinate_bytes) +
                         " bytes for " + std::string(curve.jwk_name));
  }
  std::string point;
  point.reserve(1 + x.size() + y.size());
  point += '\x04';  // uncompressed (SEC 1 §2.3.3)
  point.append(x);
  point.append(y);
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld ||
      OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, curve.group_name, 0) !=
          1 ||
      OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                       point.size()) != 1) {
    return InternalError("out of memory");
  }
  auto impl = std::make_unique<Impl>();
  impl->pkey = KeyFromParams("EC", bld.get());
  if (!impl->pkey) return core::Invalid("EC point is not on curve " + std::string(curve.jwk_name));
  PkeyCtxPtr check(EVP_PKEY_CTX_new_from_pkey(nullptr, impl->pkey.get(), nullptr));
  if (!check || EVP_PKEY_public_check(check.get()) != 1) {
    return core::Invalid("EC point is not a valid public key on " + std::string(curve.jwk_name));
  }
  impl->type = KeyType::kEc;
  impl->curve = &curve;
  impl->x = std::string(x);
  impl->y = std::string(y);
  SetDerSpki(*impl);
  return impl;
}

// A supported public key from whatever OpenSSL decoded, rebuilt through BuildRsa/BuildEc.
core::Result<std::unique_ptr<Impl>> FromOpensslKey(const EVP_PKEY* key) {
  if (EVP_PKEY_is_a(key, "RSA")) {
    BIGNUM* n_raw = nullptr;
    BIGNUM* e_raw = nullptr;
    EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &n_raw);
    EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &e_raw);
    BnPtr n(n_raw), e(e_raw);
    if (!n || !e) return core::Invalid("RSA key has no public components");
    return BuildRsa(BnBytes(n.get()), BnBytes(e.get()));
  }
  if (EVP_PKEY_is_a(key, "EC")) {
    char group[64] = {};
    size_t group_len = 0;
    if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
                                       &group_len) != 1) {
      return core::Invalid("EC key has no named curve");
    }
    const Curve* curve = CurveByGroupName(std::string_view(group, group_len));
    if (curve == nullptr) {
      return core::Invalid("EC curve " + std::string(group) + " is not supported");
    }
    BIGNUM* x_raw = nullptr;
    BIGNUM* y_raw = nullptr;
    EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &x_raw);
    EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &y_raw);
    BnPtr x(x_raw), y(y_raw);
    if (!x || !y) return core::Invalid("EC key has no public point");
    std::string xs(curve->coordinate_bytes, '\0');
    std::string ys(curve->coordinate_bytes, '\0');
    int size = static_cast<int>(curve->coordinate_bytes);
    if (BN_bn2binpad(x.get(), reinterpret_cast<unsigned char*>(xs.data()), size) != size ||
        BN_bn2binpad(y.get(), reinterpret_cast<unsigned char*>(ys.data()), size) != size) {
      return core::Invalid("EC point does not fit its curve");
    }
    return BuildEc(*curve, xs, ys);
  }
  const char* type = EVP_PKEY_get0_type_name(key);
  return core::Invalid(std::string("key type ") + (type ? type : "unknown") + " is not supported");
}

core::Result<std::string> JwkBytes(const machinery::Json& jwk, const char* member) {
  auto it = jwk.find(member);
  if (it == jwk.end()) {
    return core::Invalid(std::string("JWK member \"") + member + "\" is missing");
  }
  const auto* text = it->get_ptr<const std::string*>();
  if (text == nullptr) {
    return core::Invalid(std::string("JWK member \"") + member + "\" is not a string");
  }
  auto decoded = core::Base64UrlDecode(*text);
  if (!decoded || decoded->empty()) {
    return core::Invalid(std::string("JWK member \"") + member + "\" is not base64url");
  }
  return std::move(*decoded);
}

bool IsBase64UrlText(std::string_view s) {
  for (char c : s) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

// One part of a compact JWS: unpadded base64url only (RFC 7515 §2), canonical trailing bits.
core::Result<std::string> DecodePart(std::string_view part, const char* what) {
  if (!IsBase64UrlText(part)) {
    return Unauthorized(std::string("token ") + what + " is not base64url");
  }
  auto decoded = core::Base64UrlDecode(part);
  if (!decoded) return Unauthorized(std::string("token ") + what + " is not base64url");
  return std::move(*decoded);
}

core::Result<machinery::Json> DecodeJsonObject(std::string_view part, const char* what) {
  KLUTCH_ASSIGN_OR_RETURN(std::string text, DecodePart(part, what));
  auto json = machinery::ParseJson(text);
  if (!json.ok()) return Unauthorized(std::string("token ") + what + " is not JSON");
  if (!json->is_object()) {
    return Unauthorized(std::string("token ") + what + " is not a JSON object");
  }
  return std::move(*json);
}

std::string ToDer(const EcdsaSigPtr& sig) {
  int len = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (len <= 0) return "";
  std::string der(static_cast<size_t>(len), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(sig.get(), &p) != len) return "";
  return der;
}

// JWS carries ECDSA signatures as r||s, each the curve's coordinate size (RFC 7518 §3.4);
// OpenSSL wants the DER ECDSA-Sig-Value.
std::string RawEcdsaToDer(std::string_view raw, size_t half) {
  BnPtr r(BN_bin2bn(Bytes(raw.substr(0, half)), static_cast<int>(half), nullptr));
  BnPtr s(BN_bin2bn(Bytes(raw.substr(half)), static_cast<int>(half), nullptr));
  EcdsaSigPtr sig(ECDSA_SIG_new());
  if (!r || !s || !sig || ECDSA_SIG_set0(sig.get(), r.get(), s.get()) != 1) return "";
  r.release();  // owned by sig now
  s.release();
  return ToDer(sig);
}

double Seconds(core::SystemTime t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// A numeric date claim: nullopt when absent, an error when present but not a number.
core::Result<std::optional<double>> NumericDate(const machinery::Json& claims, const char* name) {
  auto it = claims.find(name);
  if (it == claims.end()) return std::optional<double>();
  if (!it->is_number()) return Unauthorized(std::string("invalid ") + name + " claim");
  double v = it->get<double>();  // json-ok: is_number() checked above
  if (!std::isfinite(v)) return Unauthorized(std::string("invalid ") + name + " claim");
  return std::optional<double>(v);
}

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

// --- Jwt -------------------------------------------------------------------------------------

core::Result<Jwt> ParseJwt(std::string_view token) {
  if (token.size() > kMaxTokenBytes) return Unauthorized("token is too long");
  size_t first = token.find('.');
  if (first == std::string_view::npos) return Unauthorized("token is not a compact JWS");
  size_t second = token.find('.', first + 1);
  if (second == std::string_view::npos) return Unauthorized("token is not a compact JWS");
  if (token.find('.', second + 1) != std::string_view::npos) {
    return Unauthorized("token is not a compact JWS");
  }
  std::string_view header_part = token.substr(0, first);
  std::string_view payload_part = token.substr(first + 1, second - first - 1);
  std::string_view signature_part = token.substr(second + 1);
  if (signature_part.empty()) return Unauthorized("token has no signature");

  Jwt jwt;
  KLUTCH_ASSIGN_OR_RETURN(jwt.header, DecodeJsonObject(header_part, "header"));
  jwt.alg = machinery::GetString(jwt.header, {"alg"});  // "" when absent or not a string
  if (jwt.alg.empty()) return Unauthorized("token header has no alg");
  if (const auto* kid = machinery::Find(jwt.header, {"kid"})) {
    const auto* text = kid->get_ptr<const std::string*>();
    if (text == nullptr) return Unauthorized("token header kid is not a string");
    jwt.kid = *text;
  }
  // RFC 7515 §4.1.11: extensions listed in "crit" must be understood; we understand none.
  if (jwt.header.contains("crit")) return Unauthorized("token has critical header extensions");
  KLUTCH_ASSIGN_OR_RETURN(jwt.claims, DecodeJsonObject(payload_part, "payload"));
  KLUTCH_ASSIGN_OR_RETURN(jwt.signature, DecodePart(signature_part, "signature"));
  jwt.signing_input = std::string(token.substr(0, second));
  return jwt;
}

// --- PublicKey -------------------------------------------------------------------------------

core::Result<PublicKey> PublicKey::FromJwk(const machinery::Json& jwk) {
  ErrorQueueGuard guard;
  if (!jwk.is_object()) return core::Invalid("JWK is not an object");
  KLUTCH_ASSIGN_OR_RETURN(auto kty, OptionalString(jwk, "kty"));
  if (!kty) return core::Invalid("JWK has no kty");
  KLUTCH_ASSIGN_OR_RETURN(auto use, OptionalString(jwk, "use"));
  if (use && *use != "sig") return core::Invalid("JWK use \"" + *use + "\" is not \"sig\"");
  if (auto ops = jwk.find("key_ops"); ops != jwk.end()) {
    if (!ops->is_array()) return core::Invalid("JWK key_ops is not an array");
    bool verify = false;
    for (const auto& op : *ops) verify = verify || (op.is_string() && op == "verify");
    if (!verify) return core::Invalid("JWK key_ops does not allow \"verify\"");
  }
  KLUTCH_ASSIGN_OR_RETURN(auto kid, OptionalString(jwk, "kid"));
  KLUTCH_ASSIGN_OR_RETURN(auto alg, OptionalString(jwk, "alg"));

  std::unique_ptr<Impl> impl;
  if (*kty == "RSA") {
    KLUTCH_ASSIGN_OR_RETURN(std::string n, JwkBytes(jwk, "n"));
    KLUTCH_ASSIGN_OR_RETURN(std::string e, JwkBytes(jwk, "e"));
    KLUTCH_ASSIGN_OR_RETURN(impl, BuildRsa(n, e));
  } else if (*kty == "EC") {
    KLUTCH_ASSIGN_OR_RETURN(auto crv, OptionalString(jwk, "crv"));
    if (!crv) return core::Invalid("JWK has no crv");
    const Curve* curve = CurveByJwkName(*crv);
    if (curve == nullptr) return core::Invalid("EC curve \"" + *crv + "\" is not supported");
    KLUTCH_ASSIGN_OR_RETURN(std::string x, JwkBytes(jwk, "x"));
    KLUTCH_ASSIGN_OR_RETURN(std::string y, JwkBytes(jwk, "y"));
    KLUTCH_ASSIGN_OR_RETURN(impl, BuildEc(*curve, x, y));
  } else {
    return core::Invalid("JWK key type \"" + *kty + "\" is not supported");
  }
  if (alg) {
    const Algorithm* a = FindAlgorithm(*alg);
    if (a == nullptr || !CheckUsable(*impl, *a).ok()) {
      return core::Invalid("JWK alg \"" + *alg + "\" is not supported for this key");
    }
    impl->alg = *alg;
  }
  if (kid) impl->kid = *kid;
  return PublicKeyAccess::Make(std::move(impl));
}

core::Result<std::vector<PublicKey>> PublicKeysFromPem(std::string_view pem) {
  ErrorQueueGuard guard;
  if (pem.size() > kMaxJwksBytes) return core::Invalid("PEM text is longer than 1 MiB");
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return InternalError("out of memory");
  std::vector<PublicKey> keys;
  for (int block = 0;; ++block) {
    char* name_raw = nullptr;
    char* header_raw = nullptr;
    unsigned char* data_raw = nullptr;
    long len = 0;
    if (PEM_read_bio(bio.get(), &name_raw, &header_raw, &data_raw, &len) != 1) break;
    OpensslPtr<char> name(name_raw), header(header_raw);
    OpensslPtr<unsigned char> data(data_raw);
    std::string_view type(name.get());
    const unsigned char* p = data.get();
    KeyPtr key;
    if (type == "PUBLIC KEY") {
      key.reset(d2i_PUBKEY(nullptr, &p, len));
    } else if (type == "RSA PUBLIC KEY") {
      key.reset(d2i_PublicKey(EVP_PKEY_RSA, nullptr, &p, len));
    } else if (type == "CERTIFICATE") {
      X509Ptr cert(d2i_X509(nullptr, &p, len));
      if (cert) key.reset(X509_get_pubkey(cert.get()));
    } else {
      continue;
    }
    std::string where = "PEM block " + std::to_string(block) + " (" + std::string(type) + ")";
    if (!key) return core::Invalid(where + " does not parse");
    auto impl = FromOpensslKey(key.get());
    if (!impl.ok()) return core::Invalid(where + ": " + impl.status().message());
    (*impl)->kid = core::Base64UrlEncode(Sha256((*impl)->der_spki));  // KeyId
    keys.push_back(PublicKeyAccess::Make(std::move(*impl)));
  }
  if (keys.empty()) return core::Invalid("no public key in PEM text");
  return keys;
}

core::Result<PublicKey> PublicKey::FromPem(std::string_view pem) {
  KLUTCH_ASSIGN_OR_RETURN(auto keys, PublicKeysFromPem(pem));
  return keys.front();
}

const std::string& PublicKey::kid() const { return impl_->kid; }
const std::string& PublicKey::alg() const { return impl_->alg; }
std::string PublicKey::kty() const { return impl_->type == KeyType::kRsa ? "RSA" : "EC"; }
const std::string& PublicKey::DerSpki() const { return impl_->der_spki; }

core::Status PublicKey::Verify(std::string_view alg, std::string_view data,
                               std::string_view signature) const {
  const Algorithm* a = FindAlgorithm(alg);
  if (a == nullptr) return Unauthorized("algorithm \"" + std::string(alg) + "\" is not accepted");
  const Impl& key = *impl_;
  KLUTCH_RETURN_IF_ERROR(CheckUsable(key, *a));
  ErrorQueueGuard guard;
  std::string der;
  if (key.type == KeyType::kRsa) {
    // RFC 8017 §8.2.2 step 1: the signature is exactly as long as the modulus.
    if (signature.size() != key.modulus_bytes) {
      return Unauthorized("signature has the wrong length");
    }
  } else {
    size_t half = key.curve->coordinate_bytes;
    if (signature.size() != 2 * half) return Unauthorized("signature has the wrong length");
    der = RawEcdsaToDer(signature, half);
    if (der.empty()) return InternalError("cannot encode ECDSA signature");
    signature = der;
  }
  const EVP_MD* md = Digest(a->hash);
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || md == nullptr) return InternalError("out of memory");
  EVP_PKEY_CTX* pctx = nullptr;  // owned by ctx
  if (EVP_DigestVerifyInit(ctx.get(), &pctx, md, nullptr, key.pkey.get()) != 1) {
    return Unauthorized("cannot verify with this key");
  }
  if (a->pss) {
    // RFC 7518 §3.5: MGF1 with the same hash, salt as long as the hash.
    if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
        EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1 ||
        EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, md) != 1) {
      return InternalError("cannot set up RSA-PSS");
    }
  }
  if (EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(), Bytes(data), data.size()) !=
      1) {
    return Unauthorized("signature is invalid");
  }
  return core::Status::Ok();
}

machinery::Json PublicKey::ToJwk() const {
  const Impl& key = *impl_;
  machinery::Json jwk = machinery::Json::object();
  if (key.type == KeyType::kRsa) {
    jwk["kty"] = "RSA";
    jwk["n"] = core::Base64UrlEncode(key.n);
    jwk["e"] = core::Base64UrlEncode(key.e);
  } else {
    jwk["kty"] = "EC";
    jwk["crv"] = key.curve->jwk_name;
    jwk["x"] = core::Base64UrlEncode(key.x);
    jwk["y"] = core::Base64UrlEncode(key.y);
  }
  jwk["kid"] = key.kid.empty() ? KeyId(*this) : key.kid;
  jwk["use"] = "sig";
  if (!key.alg.empty()) {
    jwk["alg"] = key.alg;
  } else {
    jwk["alg"] = key.type == KeyType::kRsa ? std::string_view("RS256") : key.curve->default_alg;
  }
  return jwk;
}

std::string KeyId(const PublicKey& key) { return core::Base64UrlEncode(Sha256(key.DerSpki())); }

// --- Jwks ------------------------------------------------------------------------------------

core::Result<Jwks> Jwks::Parse(std::string_view json) {
  if (json.size() > kMaxJwksBytes) return core::Invalid("JWKS is larger than 1 MiB");
  auto doc = machinery::ParseJson(json);
  if (!doc.ok()) return core::Invalid("JWKS is not JSON: " + doc.status().message());
  if (!doc->is_object()) return core::Invalid("JWKS is not a JSON object");
  auto keys = doc->find("keys");
  if (keys == doc->end() || !keys->is_array()) return core::Invalid("JWKS has no \"keys\" array");
  if (keys->size() > kMaxJwksKeys) {
    return core::Invalid("JWKS has more than " + std::to_string(kMaxJwksKeys) + " keys");
  }
  Jwks set;
  for (size_t i = 0; i < keys->size(); ++i) {
    const machinery::Json& entry = (*keys)[i];
    std::string where = "keys[" + std::to_string(i) + "]: ";
    auto key = PublicKey::FromJwk(entry);
    if (!key.ok()) {
      set.skipped_.push_back(where + key.status().message());
      continue;
    }
    set.keys_.push_back(std::move(*key));
  }
  return set;
}

std::vector<PublicKey> Jwks::Candidates(std::string_view kid, std::string_view alg) const {
  std::vector<PublicKey> out;
  const Algorithm* a = FindAlgorithm(alg);
  if (a == nullptr) return out;
  for (const auto& key : keys_) {
    if (!kid.empty() && key.kid() != kid) continue;
    if (!CheckUsable(PublicKeyAccess::Get(key), *a).ok()) continue;
    out.push_back(key);
  }
  return out;
}

core::Status VerifyJwt(const Jwt& jwt, const std::vector<PublicKey>& candidates) {
  if (FindAlgorithm(jwt.alg) == nullptr) {
    return Unauthorized("algorithm \"" + jwt.alg + "\" is not accepted");
  }
  if (candidates.empty()) return Unauthorized("no key to verify the token with");
  for (const auto& key : candidates) {
    if (key.Verify(jwt.alg, jwt.signing_input, jwt.signature).ok()) return core::Status::Ok();
  }
  return Unauthorized("signature is invalid");
}

// --- SigningKey ------------------------------------------------------------------------------

namespace {

core::Result<SigningKey> SigningKeyFrom(KeyPtr pkey) {
  if (!EVP_PKEY_is_a(pkey.get(), "RSA")) return core::Invalid("signing key is not an RSA key");
  auto impl = FromOpensslKey(pkey.get());
  if (!impl.ok()) return core::Invalid("signing key: " + impl.status().message());
  (*impl)->kid = core::Base64UrlEncode(Sha256((*impl)->der_spki));  // KeyId
  return SigningKeyAccess::Make(std::move(pkey), PublicKeyAccess::Make(std::move(*impl)));
}

int NoPassphrase(char*, int, int, void*) { return -1; }

}  // namespace

core::Result<SigningKey> SigningKey::Generate(int bits) {
  ErrorQueueGuard guard;
  if (bits < kMinRsaBits || bits > kMaxRsaBits) {
    return core::Invalid("RSA key size must be between " + std::to_string(kMinRsaBits) + " and " +
                         std::to_string(kMaxRsaBits) + " bits");
  }
  KeyPtr pkey(EVP_RSA_gen(static_cast<unsigned>(bits)));
  if (!pkey) return InternalError("cannot generate RSA key");
  return SigningKeyFrom(std::move(pkey));
}

core::Result<SigningKey> SigningKey::FromPem(std::string_view pem) {
  ErrorQueueGuard guard;
  if (pem.size() > kMaxJwksBytes) return core::Invalid("PEM text is longer than 1 MiB");
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return InternalError("out of memory");
  // The callback refuses encrypted keys instead of prompting on the terminal.
  KeyPtr pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  if (!pkey) return core::Invalid("no unencrypted private key in PEM text");
  return SigningKeyFrom(std::move(pkey));
}

std::string SigningKey::PrivatePem() const {
  ErrorQueueGuard guard;
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), impl_->pkey.get(), nullptr, nullptr, 0, nullptr,
                                       nullptr) != 1) {
    return "";
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

core::Result<std::string> SigningKey::Sign(const machinery::Json& claims) const {
  if (!claims.is_object()) return core::Invalid("claims must be a JSON object");
  machinery::Json header = {{"alg", "RS256"}, {"kid", kid()}};
  std::string token = core::Base64UrlEncode(machinery::Dump(header));
  token += '.';
  token += core::Base64UrlEncode(machinery::Dump(claims));
  ErrorQueueGuard guard;
  MdCtxPtr ctx(EVP_MD_CTX_new());
  const EVP_MD* md = Digest(Hash::kSha256);
  if (!ctx || md == nullptr) return InternalError("out of memory");
  if (EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, impl_->pkey.get()) != 1) {
    return InternalError("cannot sign with this key");
  }
  size_t len = 0;
  if (EVP_DigestSign(ctx.get(), nullptr, &len, Bytes(token), token.size()) != 1) {
    return InternalError("cannot sign");
  }
  std::string signature(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &len,
                     Bytes(token), token.size()) != 1) {
    return InternalError("cannot sign");
  }
  signature.resize(len);
  token += '.';
  token += core::Base64UrlEncode(signature);
  return token;
}

// --- Claims ----------------------------------------------------------------------------------

core::Status CheckClaims(const Jwt& jwt, const ClaimChecks& checks) {
  const machinery::Json& claims = jwt.claims;
  if (!checks.issuers.empty()) {
    const machinery::Json* iss = machinery::Find(claims, {"iss"});
    const auto* issuer = iss ? iss->get_ptr<const std::string*>() : nullptr;
    if (issuer == nullptr || !Contains(checks.issuers, *issuer)) {
      return Unauthorized("invalid issuer");
    }
  }
  if (!checks.audiences.empty()) {
    const machinery::Json* aud = machinery::Find(claims, {"aud"});
    bool match = false;
    if (const auto* one = aud ? aud->get_ptr<const std::string*>() : nullptr) {
      match = Contains(checks.audiences, *one);
    } else if (aud != nullptr && aud->is_array()) {
      for (const auto& a : *aud) {
        const auto* each = a.get_ptr<const std::string*>();
        if (each == nullptr) return Unauthorized("invalid audience");
        match = match || Contains(checks.audiences, *each);
      }
    }
    if (!match) return Unauthorized("invalid audience");
  }
  double now = Seconds(checks.now);
  double leeway = static_cast<double>(checks.leeway.count());
  KLUTCH_ASSIGN_OR_RETURN(auto exp, NumericDate(claims, "exp"));
  KLUTCH_ASSIGN_OR_RETURN(auto nbf, NumericDate(claims, "nbf"));
  KLUTCH_ASSIGN_OR_RETURN(auto iat, NumericDate(claims, "iat"));
  (void)iat;
  if (exp) {
    // RFC 7519 §4.1.4: not accepted "on or after" the expiration time.
    if (now >= *exp + leeway) return Unauthorized("token has expired");
  } else if (checks.require_exp) {
    return Unauthorized("token has no expiry");
  }
  if (nbf && now + leeway < *nbf) return Unauthorized("token is not valid yet");
  return core::Status::Ok();
}

std::optional<core::SystemTime> ExpiryOf(const Jwt& jwt) {
  auto exp = NumericDate(jwt.claims, "exp");
  if (!exp.ok() || !*exp) return std::nullopt;
  // Clamp to what the clock's nanosecond count can hold (1970 to 2262) so the conversion
  // cannot overflow.
  static const double kMaxSeconds = static_cast<double>(
      std::chrono::duration_cast<std::chrono::seconds>(core::SystemTime::max().time_since_epoch())
          .count() -
      1);
  double seconds = std::clamp(**exp, 0.0, kMaxSeconds);
  return core::SystemTime(std::chrono::duration_cast<core::SystemTime::duration>(
      std::chrono::duration<double>(seconds)));
}

std::string internal::Sha256(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out, &len, Digest(Hash::kSha256), nullptr) != 1) {
    ERR_clear_error();
    return "";
  }
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace klutch::auth
