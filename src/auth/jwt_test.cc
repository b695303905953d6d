#include "auth/jwt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <atomic>
#include <optional>
#include <thread>

#include "core/strings.h"

namespace klutch::auth::jwt_test {
namespace {

using machinery::Json;
using ::testing::HasSubstr;

// --- OpenSSL helpers for building inputs the module itself cannot produce -------------------

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, Deleter<EVP_MD_CTX, EVP_MD_CTX_free>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using EcdsaSigPtr = std::unique_ptr<ECDSA_SIG, Deleter<ECDSA_SIG, ECDSA_SIG_free>>;

const unsigned char* U(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

KeyPtr ReadPrivateKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return KeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

std::string PublicPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PUBKEY(bio.get(), key);
  return BioText(bio.get());
}

std::string OpensslSpki(EVP_PKEY* key) {
  int len = i2d_PUBKEY(key, nullptr);
  EXPECT_GT(len, 0);
  std::string der(static_cast<size_t>(len), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  i2d_PUBKEY(key, &p);
  return der;
}

std::string PemBlock(std::string_view type, std::string_view der) {
  std::string b64 = core::Base64Encode(der);
  std::string out = "-----BEGIN " + std::string(type) + "-----\n";
  for (size_t i = 0; i < b64.size(); i += 64) out += b64.substr(i, 64) + "\n";
  return out + "-----END " + std::string(type) + "-----\n";
}

// A signature by OpenSSL in its native form (DER for ECDSA); `pss_salt` >= -1 selects RSA-PSS.
std::string OpensslSign(EVP_PKEY* key, const char* digest, std::string_view data,
                        int pss_salt = -100) {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  EVP_PKEY_CTX* pctx = nullptr;
  EXPECT_EQ(EVP_DigestSignInit(ctx.get(), &pctx, EVP_get_digestbyname(digest), nullptr, key), 1);
  if (pss_salt >= -1) {
    EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING);
    EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, pss_salt);
  }
  size_t len = 0;
  EXPECT_EQ(EVP_DigestSign(ctx.get(), nullptr, &len, U(data), data.size()), 1);
  std::string sig(len, '\0');
  EXPECT_EQ(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, U(data),
                           data.size()),
            1);
  sig.resize(len);
  return sig;
}

// DER ECDSA-Sig-Value -> the JWS form r||s with each half `half` bytes.
std::string DerToRaw(const std::string& der, size_t half) {
  const unsigned char* p = U(der);
  EcdsaSigPtr sig(d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())));
  EXPECT_TRUE(sig);
  const BIGNUM* r = nullptr;
  const BIGNUM* s = nullptr;
  ECDSA_SIG_get0(sig.get(), &r, &s);
  std::string raw(2 * half, '\0');
  BN_bn2binpad(r, reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(half));
  BN_bn2binpad(s, reinterpret_cast<unsigned char*>(raw.data() + half), static_cast<int>(half));
  return raw;
}

// The JWK of an EC key, built here from OpenSSL's coordinates (not via the module).
Json EcJwk(EVP_PKEY* key, const std::string& crv, size_t half, const std::string& kid) {
  BIGNUM* x = nullptr;
  BIGNUM* y = nullptr;
  EXPECT_EQ(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &x), 1);
  EXPECT_EQ(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &y), 1);
  BnPtr xp(x), yp(y);
  std::string xs(half, '\0'), ys(half, '\0');
  BN_bn2binpad(x, reinterpret_cast<unsigned char*>(xs.data()), static_cast<int>(half));
  BN_bn2binpad(y, reinterpret_cast<unsigned char*>(ys.data()), static_cast<int>(half));
  return {{"kty", "EC"},
          {"crv", crv},
          {"x", core::Base64UrlEncode(xs)},
          {"y", core::Base64UrlEncode(ys)},
          {"kid", kid}};
}

Json RsaJwk(EVP_PKEY* key, const std::string& kid) {
  BIGNUM* n = nullptr;
  BIGNUM* e = nullptr;
  EXPECT_EQ(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &n), 1);
  EXPECT_EQ(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &e), 1);
  BnPtr np(n), ep(e);
  std::string ns(static_cast<size_t>(BN_num_bytes(n)), '\0');
  std::string es(static_cast<size_t>(BN_num_bytes(e)), '\0');
  BN_bn2bin(n, reinterpret_cast<unsigned char*>(ns.data()));
  BN_bn2bin(e, reinterpret_cast<unsigned char*>(es.data()));
  return {{"kty", "RSA"},
          {"n", core::Base64UrlEncode(ns)},
          {"e", core::Base64UrlEncode(es)},
          {"kid", kid}};
}

// A compact JWS from a header, claims and a raw signature.
std::string Compact(const Json& header, const Json& claims, std::string_view signature) {
  return core::Base64UrlEncode(header.dump()) + "." + core::Base64UrlEncode(claims.dump()) + "." +
         core::Base64UrlEncode(signature);
}
std::string SigningInput(const std::string& token) { return token.substr(0, token.rfind('.')); }

// A token signed by `key` with `alg` in JWS form.
std::string SignedToken(EVP_PKEY* key, const std::string& alg, const Json& claims,
                        const std::string& kid) {
  Json header = {{"alg", alg}, {"kid", kid}};
  std::string input =
      core::Base64UrlEncode(header.dump()) + "." + core::Base64UrlEncode(claims.dump());
  std::string digest = "SHA" + alg.substr(2);
  std::string sig;
  if (alg[0] == 'E') {
    size_t half = alg == "ES256" ? 32 : alg == "ES384" ? 48 : 66;
    sig = DerToRaw(OpensslSign(key, digest.c_str(), input), half);
  } else if (alg[0] == 'P') {
    sig = OpensslSign(key, digest.c_str(), input, RSA_PSS_SALTLEN_DIGEST);
  } else {
    sig = OpensslSign(key, digest.c_str(), input);
  }
  return input + "." + core::Base64UrlEncode(sig);
}

const SigningKey& TestKey() {
  static const SigningKey* key = [] {
    auto k = SigningKey::Generate();
    EXPECT_TRUE(k.ok()) << k.status().ToString();
    return new SigningKey(std::move(*k));
  }();
  return *key;
}

const SigningKey& OtherKey() {
  static const SigningKey* key = [] {
    auto k = SigningKey::Generate();
    EXPECT_TRUE(k.ok()) << k.status().ToString();
    return new SigningKey(std::move(*k));
  }();
  return *key;
}

Json Claims() {
  return {{"iss", "https://issuer.example"},
          {"sub", "system:serviceaccount:default:builder"},
          {"aud", Json::array({"klutch"})},
          {"iat", 1700000000},
          {"nbf", 1700000000},
          {"exp", 1700003600}};
}

void ExpectUnauthorized(const core::Status& s) {
  EXPECT_EQ(s.reason(), core::Reason::kUnauthorized) << s.ToString();
}

// RFC 7515 Appendix A.2 (RS256) and A.3 (ES256).
constexpr char kA2N[] =
    "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-"
    "4qPCJrcS2mJPMEzP1Pt0Bm4d4Ql"
    "L-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-"
    "bSf63kpaSHSXndS5z5rexMdbBYUs"
    "LA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-"
    "DWNmoud"
    "F8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ";
constexpr char kA2Token[] =
    "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNv"
    "bS9pc19yb290Ijp0cnVlfQ.cC4hiUPoj9Eetdgtv3hF80EGrhuB__"
    "dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh"
    "-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_"
    "nZLgrnbyTyWzO75vRK5h6xBArLI"
    "ARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-"
    "eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvW"
    "h6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw";
// Computed independently: `openssl asn1parse -genconf` built the SubjectPublicKeyInfo of the
// key from n and e, then base64url(SHA-256(DER)).
constexpr char kA2KeyId[] = "b9E8JDWjYefFiM0X9V9a098Bd6ZsFyemogCEX016uIw";
constexpr char kA3X[] = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU";
constexpr char kA3Y[] = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0";
constexpr char kA3Token[] =
    "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNv"
    "bS9pc19yb290Ijp0cnVlfQ.DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-"
    "F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTU"
    "JqPP3-Kg6NU1Q";
constexpr char kA3KeyId[] = "K9G7DESol8MKeqCZHN442AYv5EHeUNoPRoJTRPYC6Cc";

// --- ParseJwt ---------------------------------------------------------------------------------

TEST(ParseJwt, DecodesTheRfc7515Example) {
  auto jwt = ParseJwt(kA2Token);
  ASSERT_TRUE(jwt.ok()) << jwt.status().ToString();
  EXPECT_EQ(jwt->alg, "RS256");
  EXPECT_EQ(jwt->kid, "");
  EXPECT_EQ(jwt->header, Json({{"alg", "RS256"}}));
  EXPECT_EQ(jwt->claims["iss"], "joe");
  EXPECT_EQ(jwt->claims["exp"], 1300819380);
  EXPECT_EQ(jwt->claims["http://example.com/is_root"], true);
  EXPECT_EQ(jwt->signing_input, SigningInput(kA2Token));
  EXPECT_EQ(jwt->signature.size(), 256u);
}

TEST(ParseJwt, RefusesMalformedTokens) {
  const std::string h = core::Base64UrlEncode(R"({"alg":"RS256","kid":"k"})");
  const std::string p = core::Base64UrlEncode(R"({"sub":"a"})");
  const std::string s = core::Base64UrlEncode("sig");
  ASSERT_TRUE(ParseJwt(h + "." + p + "." + s).ok());  // the control the cases below break

  // 16 bytes: the unpadded encoding has 22 characters, so padding would add "==".
  const std::string h16 = core::Base64UrlEncode(R"({"alg":"RS256" })");
  ASSERT_EQ(h16.size(), 22u);
  ASSERT_TRUE(ParseJwt(h16 + "." + p + "." + s).ok());

  struct Case {
    std::string name, token, message;
  };
  std::vector<Case> cases = {
      {"empty", "", "not a compact JWS"},
      {"no dots", h, "not a compact JWS"},
      {"two parts", h + "." + p, "not a compact JWS"},
      {"four parts", h + "." + p + "." + s + "." + s, "not a compact JWS"},
      {"empty signature", h + "." + p + ".", "no signature"},
      {"empty header", "." + p + "." + s, "header is not JSON"},
      {"invalid base64url", h + "." + p + ".!!!!", "signature is not base64url"},
      {"standard base64 alphabet", h + "." + p + ".ab+/", "signature is not base64url"},
      {"padding", h16 + "==." + p + "." + s, "header is not base64url"},
      {"impossible length", h + "." + p + ".abcde", "signature is not base64url"},
      {"whitespace", h + " ." + p + "." + s, "header is not base64url"},
      {"header not JSON", core::Base64UrlEncode("alg=RS256") + "." + p + "." + s,
       "header is not JSON"},
      {"header JSON array", core::Base64UrlEncode(R"(["alg","RS256"])") + "." + p + "." + s,
       "header is not a JSON object"},
      {"payload JSON array", h + "." + core::Base64UrlEncode("[1]") + "." + s,
       "payload is not a JSON object"},
      {"payload not JSON", h + "." + core::Base64UrlEncode("hello") + "." + s,
       "payload is not JSON"},
      {"no alg", core::Base64UrlEncode(R"({"kid":"k"})") + "." + p + "." + s, "no alg"},
      {"alg not a string", core::Base64UrlEncode(R"({"alg":256})") + "." + p + "." + s, "no alg"},
      {"kid not a string", core::Base64UrlEncode(R"({"alg":"RS256","kid":1})") + "." + p + "." + s,
       "kid is not a string"},
      {"crit header",
       core::Base64UrlEncode(R"({"alg":"RS256","crit":["exp"],"exp":1})") + "." + p + "." + s,
       "critical"},
      {"too long", h + "." + core::Base64UrlEncode(std::string(kMaxTokenBytes, ' ')) + "." + s,
       "too long"},
  };
  for (const auto& c : cases) {
    auto jwt = ParseJwt(c.token);
    ASSERT_FALSE(jwt.ok()) << c.name;
    EXPECT_EQ(jwt.status().reason(), core::Reason::kUnauthorized) << c.name;
    EXPECT_THAT(jwt.status().message(), HasSubstr(c.message)) << c.name;
  }
}

TEST(ParseJwt, AcceptsTokensUpToTheLimit) {
  const std::string h = core::Base64UrlEncode(R"({"alg":"RS256"})");
  const std::string s = core::Base64UrlEncode("sig");
  // A payload of m bytes encodes to ceil(4m/3) characters; fill the room exactly.
  size_t room = kMaxTokenBytes - h.size() - s.size() - 2;
  size_t m = room * 3 / 4;
  std::string token =
      h + "." + core::Base64UrlEncode("{" + std::string(m - 2, ' ') + "}") + "." + s;
  ASSERT_LE(token.size(), kMaxTokenBytes);
  ASSERT_GE(token.size(), kMaxTokenBytes - 3);
  EXPECT_TRUE(ParseJwt(token).ok());
  std::string longer =
      h + "." + core::Base64UrlEncode("{" + std::string(m + 1, ' ') + "}") + "." + s;
  ASSERT_GT(longer.size(), kMaxTokenBytes);
  EXPECT_THAT(ParseJwt(longer).status().message(), HasSubstr("too long"));
}

// --- Signing and verification -----------------------------------------------------------------

TEST(SigningKey, SignParseVerifyRoundTrip) {
  const SigningKey& key = TestKey();
  auto token = key.Sign(Claims());
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  auto jwt = ParseJwt(*token);
  ASSERT_TRUE(jwt.ok()) << jwt.status().ToString();
  EXPECT_EQ(jwt->header, Json({{"alg", "RS256"}, {"kid", key.kid()}}));
  EXPECT_EQ(jwt->claims, Claims());
  EXPECT_EQ(jwt->kid, KeyId(key.public_key()));
  EXPECT_EQ(jwt->signature.size(), 256u);
  EXPECT_TRUE(VerifyJwt(*jwt, {key.public_key()}).ok());
  // The first candidate that validates wins.
  EXPECT_TRUE(VerifyJwt(*jwt, {OtherKey().public_key(), key.public_key()}).ok());
  ExpectUnauthorized(VerifyJwt(*jwt, {OtherKey().public_key()}));
  ExpectUnauthorized(VerifyJwt(*jwt, {}));
}

TEST(SigningKey, RefusesNonObjectClaims) {
  EXPECT_FALSE(TestKey().Sign(Json::array()).ok());
  EXPECT_FALSE(TestKey().Sign("x").ok());
}

TEST(VerifyJwt, RefusesTamperedPayload) {
  auto token = TestKey().Sign(Claims());
  ASSERT_TRUE(token.ok());
  Json claims = Claims();
  claims["sub"] = "system:serviceaccount:kube-system:admin";
  std::string forged =
      core::Base64UrlEncode(R"({"alg":"RS256","kid":")" + TestKey().kid() + R"("})") + "." +
      core::Base64UrlEncode(machinery::Dump(claims)) + token->substr(token->rfind('.'));
  auto jwt = ParseJwt(forged);
  ASSERT_TRUE(jwt.ok()) << jwt.status().ToString();
  EXPECT_EQ(jwt->claims["sub"], "system:serviceaccount:kube-system:admin");
  ExpectUnauthorized(VerifyJwt(*jwt, {TestKey().public_key()}));
}

TEST(VerifyJwt, RefusesTamperedSignature) {
  auto token = TestKey().Sign(Claims());
  ASSERT_TRUE(token.ok());
  auto jwt = ParseJwt(*token);
  ASSERT_TRUE(jwt.ok());
  ASSERT_TRUE(VerifyJwt(*jwt, {TestKey().public_key()}).ok());
  for (size_t i : {size_t{0}, size_t{100}, jwt->signature.size() - 1}) {
    Jwt bad = *jwt;
    bad.signature[i] = static_cast<char>(bad.signature[i] ^ 0x01);
    ExpectUnauthorized(VerifyJwt(bad, {TestKey().public_key()}));
  }
  Jwt truncated = *jwt;
  truncated.signature.pop_back();
  ExpectUnauthorized(VerifyJwt(truncated, {TestKey().public_key()}));
  Jwt extended = *jwt;
  extended.signature.insert(0, 1, '\0');  // same value, one byte longer
  ExpectUnauthorized(VerifyJwt(extended, {TestKey().public_key()}));
}

TEST(VerifyJwt, RefusesRsaSignaturesShorterThanTheModulus) {
  // RFC 8017 §8.2.2: a signature one byte short is invalid even when, read as a number, it
  // equals a valid one (a signature whose first byte is zero). Sign until one starts with zero.
  Json claims = Claims();
  std::optional<Jwt> jwt;
  for (int i = 0; i < 4000 && !jwt; ++i) {
    claims["jti"] = i;
    auto token = TestKey().Sign(claims);
    ASSERT_TRUE(token.ok());
    auto parsed = ParseJwt(*token);
    ASSERT_TRUE(parsed.ok());
    if (parsed->signature[0] == '\0') jwt = std::move(*parsed);
  }
  ASSERT_TRUE(jwt.has_value());
  ASSERT_TRUE(VerifyJwt(*jwt, {TestKey().public_key()}).ok());
  jwt->signature.erase(0, 1);
  ExpectUnauthorized(VerifyJwt(*jwt, {TestKey().public_key()}));
}

TEST(VerifyJwt, RefusesAlgNone) {
  Json header = {{"alg", "none"}};
  // RFC 7519 §6.1's unsecured JWT: the signature part is empty.
  std::string unsecured = Compact(header, Claims(), "");
  ExpectUnauthorized(ParseJwt(unsecured).status());
  // Even with something in the signature part, "none" never verifies.
  auto jwt = ParseJwt(Compact(header, Claims(), "x"));
  ASSERT_TRUE(jwt.ok());
  ExpectUnauthorized(VerifyJwt(*jwt, {TestKey().public_key()}));
  ExpectUnauthorized(TestKey().public_key().Verify("none", jwt->signing_input, ""));
  ExpectUnauthorized(TestKey().public_key().Verify("None", jwt->signing_input, "x"));
}

TEST(VerifyJwt, RefusesHmacSignedWithThePublicKeyText) {
  // The classic key confusion: an attacker signs with HS256 using the public key's PEM text as
  // the HMAC secret, hoping the verifier feeds its "key" to HMAC.
  std::string pem = PemBlock("PUBLIC KEY", TestKey().public_key().DerSpki());
  auto parsed_pem = PublicKey::FromPem(pem);
  ASSERT_TRUE(parsed_pem.ok());
  ASSERT_TRUE(parsed_pem->SameKey(TestKey().public_key()));
  Json header = {{"alg", "HS256"}, {"kid", TestKey().kid()}};
  std::string input =
      core::Base64UrlEncode(header.dump()) + "." + core::Base64UrlEncode(Claims().dump());
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  ASSERT_NE(HMAC(EVP_sha256(), pem.data(), static_cast<int>(pem.size()), U(input), input.size(),
                 mac, &mac_len),
            nullptr);
  std::string token =
      input + "." + core::Base64UrlEncode(std::string(reinterpret_cast<char*>(mac), mac_len));
  auto jwt = ParseJwt(token);
  ASSERT_TRUE(jwt.ok()) << jwt.status().ToString();
  EXPECT_EQ(jwt->alg, "HS256");
  ExpectUnauthorized(VerifyJwt(*jwt, {TestKey().public_key(), *parsed_pem}));
  for (const char* alg : {"HS256", "HS384", "HS512", "RS1", "rs256", "ES256K", "EdDSA", ""}) {
    ExpectUnauthorized(TestKey().public_key().Verify(alg, jwt->signing_input, jwt->signature));
  }
  auto set = Jwks::Parse(Json({{"keys", {TestKey().public_key().ToJwk()}}}).dump());
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->Candidates(TestKey().kid(), "HS256").empty());
  EXPECT_EQ(set->Candidates(TestKey().kid(), "RS256").size(), 1u);
}

TEST(VerifyJwt, VerifiesTheRfc7515Rs256Example) {
  auto key = PublicKey::FromJwk({{"kty", "RSA"}, {"n", kA2N}, {"e", "AQAB"}});
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  auto jwt = ParseJwt(kA2Token);
  ASSERT_TRUE(jwt.ok());
  EXPECT_TRUE(VerifyJwt(*jwt, {*key}).ok());
  // The same signature under another RSA algorithm does not verify.
  ExpectUnauthorized(key->Verify("RS384", jwt->signing_input, jwt->signature));
  ExpectUnauthorized(key->Verify("PS256", jwt->signing_input, jwt->signature));
  // A different message does not verify.
  ExpectUnauthorized(key->Verify("RS256", jwt->signing_input + "x", jwt->signature));
}

TEST(VerifyJwt, VerifiesTheRfc7515Es256Example) {
  auto key = PublicKey::FromJwk({{"kty", "EC"}, {"crv", "P-256"}, {"x", kA3X}, {"y", kA3Y}});
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->kty(), "EC");
  auto jwt = ParseJwt(kA3Token);
  ASSERT_TRUE(jwt.ok());
  EXPECT_EQ(jwt->signature.size(), 64u);
  EXPECT_TRUE(VerifyJwt(*jwt, {*key}).ok());
  ExpectUnauthorized(key->Verify("ES256", jwt->signing_input + "x", jwt->signature));
  // An RSA algorithm name with an EC key, and an RSA key for an EC algorithm.
  ExpectUnauthorized(key->Verify("RS256", jwt->signing_input, jwt->signature));
  ExpectUnauthorized(VerifyJwt(*jwt, {TestKey().public_key()}));
}

TEST(VerifyJwt, Es256WithGeneratedKeyNeedsRawSignatures) {
  KeyPtr ec(EVP_EC_gen("P-256"));
  ASSERT_TRUE(ec);
  Json jwk = EcJwk(ec.get(), "P-256", 32, "ec-1");
  auto key = PublicKey::FromJwk(jwk);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->kid(), "ec-1");

  std::string token = SignedToken(ec.get(), "ES256", Claims(), "ec-1");
  auto jwt = ParseJwt(token);
  ASSERT_TRUE(jwt.ok());
  ASSERT_EQ(jwt->signature.size(), 64u);
  EXPECT_TRUE(VerifyJwt(*jwt, {*key}).ok());

  // The same message signed in OpenSSL's DER form: valid ECDSA, but not a JWS signature.
  std::string der = OpensslSign(ec.get(), "SHA256", jwt->signing_input);
  ExpectUnauthorized(key->Verify("ES256", jwt->signing_input, der));
  // A DER signature that happens to be 64 bytes long is still not r||s.
  for (int i = 0; i < 200; ++i) {
    der = OpensslSign(ec.get(), "SHA256", jwt->signing_input);
    if (der.size() == 64) break;
  }
  if (der.size() == 64) ExpectUnauthorized(key->Verify("ES256", jwt->signing_input, der));

  // Extra bytes after a valid r||s, or a leading zero byte before it.
  ExpectUnauthorized(key->Verify("ES256", jwt->signing_input, jwt->signature + "x"));
  ExpectUnauthorized(key->Verify("ES256", jwt->signing_input, '\0' + jwt->signature));
  // r||s with the halves swapped, or an all-zero signature.
  std::string swapped = jwt->signature.substr(32) + jwt->signature.substr(0, 32);
  ExpectUnauthorized(key->Verify("ES256", jwt->signing_input, swapped));
  ExpectUnauthorized(key->Verify("ES256", jwt->signing_input, std::string(64, '\0')));
  // A P-256 key refuses the other curves' algorithms.
  ExpectUnauthorized(key->Verify("ES384", jwt->signing_input, jwt->signature));
  ExpectUnauthorized(key->Verify("ES512", jwt->signing_input, jwt->signature));
}

TEST(VerifyJwt, EcdsaOnEveryCurve) {
  struct Case {
    const char* group;
    const char* crv;
    const char* alg;
    size_t half;
  };
  for (const Case& c : {Case{"P-256", "P-256", "ES256", 32}, Case{"P-384", "P-384", "ES384", 48},
                        Case{"P-521", "P-521", "ES512", 66}}) {
    KeyPtr ec(EVP_EC_gen(c.group));
    ASSERT_TRUE(ec) << c.crv;
    auto key = PublicKey::FromJwk(EcJwk(ec.get(), c.crv, c.half, "k"));
    ASSERT_TRUE(key.ok()) << c.crv << ": " << key.status().ToString();
    EXPECT_EQ(key->ToJwk()["alg"], c.alg);
    EXPECT_EQ(key->ToJwk()["crv"], c.crv);
    auto jwt = ParseJwt(SignedToken(ec.get(), c.alg, Claims(), "k"));
    ASSERT_TRUE(jwt.ok());
    EXPECT_EQ(jwt->signature.size(), 2 * c.half) << c.crv;
    EXPECT_TRUE(VerifyJwt(*jwt, {*key}).ok()) << c.crv;
    // Through PEM the key is the same.
    auto from_pem = PublicKey::FromPem(PublicPem(ec.get()));
    ASSERT_TRUE(from_pem.ok()) << c.crv;
    EXPECT_TRUE(from_pem->SameKey(*key));
    EXPECT_EQ(key->DerSpki(), OpensslSpki(ec.get())) << c.crv;
    EXPECT_TRUE(VerifyJwt(*jwt, {*from_pem}).ok()) << c.crv;
  }
}

TEST(VerifyJwt, RsaPssAndOtherHashes) {
  KeyPtr rsa = ReadPrivateKey(TestKey().PrivatePem());
  ASSERT_TRUE(rsa);
  const PublicKey& key = TestKey().public_key();
  for (const char* alg : {"PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}) {
    auto jwt = ParseJwt(SignedToken(rsa.get(), alg, Claims(), TestKey().kid()));
    ASSERT_TRUE(jwt.ok()) << alg;
    EXPECT_TRUE(VerifyJwt(*jwt, {key}).ok()) << alg;
    ExpectUnauthorized(VerifyJwt(*jwt, {OtherKey().public_key()}));
  }
  // PS256 and RS256 signatures are not interchangeable.
  auto ps = ParseJwt(SignedToken(rsa.get(), "PS256", Claims(), TestKey().kid()));
  ASSERT_TRUE(ps.ok());
  ExpectUnauthorized(key.Verify("RS256", ps->signing_input, ps->signature));
  // RFC 7518 §3.5 fixes the salt at the hash length; a zero-length salt is refused.
  std::string zero_salt = OpensslSign(rsa.get(), "SHA256", ps->signing_input, 0);
  ExpectUnauthorized(key.Verify("PS256", ps->signing_input, zero_salt));
}

TEST(VerifyJwt, IsSafeFromManyThreads) {
  auto token = TestKey().Sign(Claims());
  ASSERT_TRUE(token.ok());
  auto jwt = ParseJwt(*token);
  ASSERT_TRUE(jwt.ok());
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        if (VerifyJwt(*jwt, {TestKey().public_key()}).ok()) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 100);
}

// --- Keys -----------------------------------------------------------------------------------

TEST(KeyId, MatchesKubernetesDerivationAndIsFormIndependent) {
  auto jwk = PublicKey::FromJwk({{"kty", "RSA"}, {"n", kA2N}, {"e", "AQAB"}, {"kid", "x"}});
  ASSERT_TRUE(jwk.ok());
  EXPECT_EQ(KeyId(*jwk), kA2KeyId);
  EXPECT_EQ(KeyId(*jwk), KeyId(*jwk));
  EXPECT_EQ(jwk->kid(), "x");  // a JWK keeps its own kid
  EXPECT_EQ(jwk->DerSpki().size(), 294u);

  auto ec = PublicKey::FromJwk({{"kty", "EC"}, {"crv", "P-256"}, {"x", kA3X}, {"y", kA3Y}});
  ASSERT_TRUE(ec.ok());
  EXPECT_EQ(KeyId(*ec), kA3KeyId);
  EXPECT_EQ(ec->kid(), "");
  EXPECT_EQ(ec->ToJwk()["kid"], kA3KeyId);

  // PEM (SPKI and PKCS#1) and JWK forms of one key share the key id.
  const PublicKey& pub = TestKey().public_key();
  auto spki = PublicKey::FromPem(PemBlock("PUBLIC KEY", pub.DerSpki()));
  ASSERT_TRUE(spki.ok()) << spki.status().ToString();
  KeyPtr rsa = ReadPrivateKey(TestKey().PrivatePem());
  int len = i2d_PublicKey(rsa.get(), nullptr);
  ASSERT_GT(len, 0);
  std::string pkcs1(static_cast<size_t>(len), '\0');
  auto* p = reinterpret_cast<unsigned char*>(pkcs1.data());
  i2d_PublicKey(rsa.get(), &p);
  auto rsa_pem = PublicKey::FromPem(PemBlock("RSA PUBLIC KEY", pkcs1));
  ASSERT_TRUE(rsa_pem.ok()) << rsa_pem.status().ToString();
  auto from_jwk = PublicKey::FromJwk(RsaJwk(rsa.get(), "mine"));
  ASSERT_TRUE(from_jwk.ok());
  EXPECT_EQ(KeyId(*spki), TestKey().kid());
  EXPECT_EQ(KeyId(*rsa_pem), TestKey().kid());
  EXPECT_EQ(KeyId(*from_jwk), TestKey().kid());
  EXPECT_EQ(from_jwk->DerSpki(), OpensslSpki(rsa.get()));
  EXPECT_EQ(spki->kid(), TestKey().kid());  // PEM keys take KeyId as kid
  EXPECT_EQ(rsa_pem->kid(), TestKey().kid());
  EXPECT_EQ(from_jwk->kid(), "mine");
  EXPECT_NE(KeyId(OtherKey().public_key()), TestKey().kid());
  EXPECT_EQ(TestKey().kid().size(), 43u);
}

TEST(PublicKey, DerSpkiMatchesOpenssl) {
  // 2052 bits: the modulus's top byte has its high bit clear, so no leading zero is added.
  std::vector<KeyPtr> keys;
  keys.emplace_back(EVP_RSA_gen(2052));
  keys.push_back(ReadPrivateKey(TestKey().PrivatePem()));
  for (const KeyPtr& rsa : keys) {
    ASSERT_TRUE(rsa);
    auto key = PublicKey::FromJwk(RsaJwk(rsa.get(), "k"));
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    EXPECT_EQ(key->DerSpki(), OpensslSpki(rsa.get()));
  }
}

TEST(PublicKey, ToJwkRoundTrips) {
  Json jwk = TestKey().public_key().ToJwk();
  EXPECT_EQ(jwk["kty"], "RSA");
  EXPECT_EQ(jwk["e"], "AQAB");
  EXPECT_EQ(jwk["use"], "sig");
  EXPECT_EQ(jwk["alg"], "RS256");
  EXPECT_EQ(jwk["kid"], TestKey().kid());
  EXPECT_FALSE(jwk.contains("d"));
  auto back = PublicKey::FromJwk(jwk);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->SameKey(TestKey().public_key()));
  EXPECT_EQ(back->ToJwk(), jwk);
  EXPECT_EQ(back->alg(), "RS256");
}

TEST(PublicKey, FromPemReadsCertificates) {
  KeyPtr rsa = ReadPrivateKey(TestKey().PrivatePem());
  ASSERT_TRUE(rsa);
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 7);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_set_pubkey(cert.get(), rsa.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, U("signer"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  ASSERT_GT(X509_sign(cert.get(), rsa.get(), EVP_sha256()), 0);
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert.get());
  std::string cert_pem = BioText(bio.get());

  auto key = PublicKey::FromPem(cert_pem);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_TRUE(key->SameKey(TestKey().public_key()));
  EXPECT_EQ(key->kid(), TestKey().kid());
  EXPECT_EQ(key->kty(), "RSA");

  // Several blocks: unknown types are skipped, keys come back in order.
  std::string bundle = "-----BEGIN FOO-----\nAAAA\n-----END FOO-----\n" + cert_pem +
                       PemBlock("PUBLIC KEY", OtherKey().public_key().DerSpki());
  auto keys = PublicKeysFromPem(bundle);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_TRUE((*keys)[0].SameKey(TestKey().public_key()));
  EXPECT_TRUE((*keys)[1].SameKey(OtherKey().public_key()));
}

TEST(PublicKey, FromPemRefusesUnusableInput) {
  EXPECT_EQ(PublicKey::FromPem("").status().reason(), core::Reason::kInvalid);
  EXPECT_FALSE(PublicKey::FromPem("not pem at all").ok());
  EXPECT_FALSE(PublicKey::FromPem("-----BEGIN FOO-----\nAAAA\n-----END FOO-----\n").ok());
  EXPECT_FALSE(PublicKey::FromPem(PemBlock("PUBLIC KEY", "garbage")).ok());
  // A private key is not a public key.
  EXPECT_FALSE(PublicKey::FromPem(TestKey().PrivatePem()).ok());
  // Weak RSA and unsupported key types.
  KeyPtr small(EVP_RSA_gen(1024));
  ASSERT_TRUE(small);
  auto weak = PublicKey::FromPem(PublicPem(small.get()));
  ASSERT_FALSE(weak.ok());
  EXPECT_THAT(weak.status().message(), HasSubstr("1024 bits"));
  KeyPtr ed(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  ASSERT_TRUE(ed);
  EXPECT_FALSE(PublicKey::FromPem(PublicPem(ed.get())).ok());
  KeyPtr k1(EVP_EC_gen("secp256k1"));
  ASSERT_TRUE(k1);
  EXPECT_FALSE(PublicKey::FromPem(PublicPem(k1.get())).ok());
  // Failures leave nothing in OpenSSL's error queue for the next user on this thread.
  EXPECT_EQ(ERR_peek_error(), 0ul);
}

TEST(PublicKey, FromJwkRefusesBadKeys) {
  KeyPtr ec(EVP_EC_gen("P-256"));
  Json good_ec = EcJwk(ec.get(), "P-256", 32, "e");
  ASSERT_TRUE(PublicKey::FromJwk(good_ec).ok());
  Json good_rsa = {{"kty", "RSA"}, {"n", kA2N}, {"e", "AQAB"}};
  ASSERT_TRUE(PublicKey::FromJwk(good_rsa).ok());
  KeyPtr small(EVP_RSA_gen(1024));

  auto with = [](Json j, const std::string& k, Json v) {
    j[k] = std::move(v);
    return j;
  };
  auto without = [](Json j, const std::string& k) {
    j.erase(k);
    return j;
  };
  // y with its last byte changed: almost certainly no longer on the curve.
  std::string y = *core::Base64UrlDecode(good_ec["y"].get<std::string>());
  y.back() = static_cast<char>(y.back() ^ 1);
  std::string x_short = core::Base64UrlDecode(good_ec["x"].get<std::string>())->substr(1);

  struct Case {
    std::string name;
    Json jwk;
    std::string message;
  };
  std::vector<Case> cases = {
      {"not an object", Json::array(), "not an object"},
      {"no kty", without(good_rsa, "kty"), "no kty"},
      {"oct", {{"kty", "oct"}, {"k", "c2VjcmV0"}}, "not supported"},
      {"OKP", {{"kty", "OKP"}, {"crv", "Ed25519"}, {"x", "AAAA"}}, "not supported"},
      {"use enc", with(good_rsa, "use", "enc"), "use"},
      {"key_ops without verify", with(good_rsa, "key_ops", {"encrypt"}), "key_ops"},
      {"missing n", without(good_rsa, "n"), "\"n\" is missing"},
      {"missing e", without(good_rsa, "e"), "\"e\" is missing"},
      {"n not base64url", with(good_rsa, "n", "***"), "\"n\" is not base64url"},
      {"n a number", with(good_rsa, "n", 12345), "\"n\" is not a string"},
      {"small RSA", RsaJwk(small.get(), "s"), "1024 bits"},
      {"even exponent", with(good_rsa, "e", "AQAA"), "exponent"},
      {"exponent one", with(good_rsa, "e", "AQ"), "exponent"},
      {"point not on curve", with(good_ec, "y", core::Base64UrlEncode(y)), "P-256"},
      {"short coordinate", with(good_ec, "x", core::Base64UrlEncode(x_short)), "32 bytes"},
      {"unknown curve", with(good_ec, "crv", "P-192"), "not supported"},
      {"curve mismatch", with(good_ec, "crv", "P-384"), "48 bytes"},
      {"missing y", without(good_ec, "y"), "\"y\" is missing"},
      {"alg for another key type", with(good_ec, "alg", "RS256"), "alg"},
      {"alg of another curve", with(good_ec, "alg", "ES384"), "alg"},
      {"encryption alg", with(good_rsa, "alg", "RSA-OAEP"), "alg"},
      {"kid not a string", with(good_rsa, "kid", 5), "kid"},
  };
  for (const auto& c : cases) {
    auto key = PublicKey::FromJwk(c.jwk);
    ASSERT_FALSE(key.ok()) << c.name;
    EXPECT_EQ(key.status().reason(), core::Reason::kInvalid) << c.name;
    EXPECT_THAT(key.status().message(), HasSubstr(c.message)) << c.name;
  }
  // Private members are ignored, not used.
  auto with_d = PublicKey::FromJwk(with(good_ec, "d", "AAAA"));
  ASSERT_TRUE(with_d.ok());
  EXPECT_FALSE(with_d->ToJwk().contains("d"));
}

TEST(PublicKey, JwkAlgRestrictsVerification) {
  KeyPtr rsa = ReadPrivateKey(TestKey().PrivatePem());
  Json jwk = RsaJwk(rsa.get(), "r");
  jwk["alg"] = "PS256";
  auto key = PublicKey::FromJwk(jwk);
  ASSERT_TRUE(key.ok());
  auto rs = ParseJwt(SignedToken(rsa.get(), "RS256", Claims(), "r"));
  auto ps = ParseJwt(SignedToken(rsa.get(), "PS256", Claims(), "r"));
  ASSERT_TRUE(rs.ok() && ps.ok());
  EXPECT_TRUE(VerifyJwt(*ps, {*key}).ok());
  ExpectUnauthorized(VerifyJwt(*rs, {*key}));
  EXPECT_EQ(key->ToJwk()["alg"], "PS256");
}

// --- Jwks -----------------------------------------------------------------------------------

TEST(Jwks, SkipsKeysThatCannotVerify) {
  KeyPtr ec(EVP_EC_gen("P-256"));
  Json ec_jwk = EcJwk(ec.get(), "P-256", 32, "ec");
  Json off_curve = ec_jwk;
  std::string y = *core::Base64UrlDecode(ec_jwk["y"].get<std::string>());
  y.back() = static_cast<char>(y.back() ^ 1);
  off_curve["y"] = core::Base64UrlEncode(y);
  off_curve["kid"] = "bad-point";
  KeyPtr small(EVP_RSA_gen(1024));
  Json rsa = TestKey().public_key().ToJwk();
  Json enc = rsa;
  enc["use"] = "enc";
  enc["kid"] = "enc";
  Json keys = Json::array({
      {{"kty", "oct"}, {"k", "c2VjcmV0"}, {"kid", "hmac"}},
      enc,
      RsaJwk(small.get(), "small"),
      off_curve,
      {{"kty", "RSA"}, {"kid", "no-n"}, {"e", "AQAB"}},
      {{"kty", "RSA"}, {"kid", "no-e"}, {"n", kA2N}},
      "not a key",
      rsa,
      ec_jwk,
  });
  auto set = Jwks::Parse(Json({{"keys", keys}}).dump());
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->keys().size(), 2u);
  EXPECT_TRUE(set->keys()[0].SameKey(TestKey().public_key()));
  EXPECT_EQ(set->keys()[1].kid(), "ec");
  ASSERT_EQ(set->skipped().size(), 7u);
  EXPECT_THAT(set->skipped()[0], HasSubstr("keys[0]: "));
  EXPECT_THAT(set->skipped()[0], HasSubstr("\"oct\""));
  EXPECT_THAT(set->skipped()[2], HasSubstr("1024 bits"));
  EXPECT_THAT(set->skipped()[6], HasSubstr("keys[6]: "));
}

TEST(Jwks, RefusesMalformedSets) {
  EXPECT_EQ(Jwks::Parse("{").status().reason(), core::Reason::kInvalid);
  EXPECT_FALSE(Jwks::Parse("").ok());
  EXPECT_FALSE(Jwks::Parse("[]").ok());
  EXPECT_FALSE(Jwks::Parse("{}").ok());
  EXPECT_FALSE(Jwks::Parse(R"({"keys":{}})").ok());
  EXPECT_FALSE(Jwks::Parse(R"({"keys":"x"})").ok());
  auto empty = Jwks::Parse(R"({"keys":[]})");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->keys().empty());

  Json oct = {{"kty", "oct"}, {"k", "AA"}};
  Json many = {{"keys", Json::array()}};
  for (size_t i = 0; i < kMaxJwksKeys; ++i) many["keys"].push_back(oct);
  EXPECT_TRUE(Jwks::Parse(many.dump()).ok());
  many["keys"].push_back(oct);
  auto too_many = Jwks::Parse(many.dump());
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.status().message(), HasSubstr("more than 100 keys"));

  std::string huge = R"({"keys":[],"pad":")" + std::string(kMaxJwksBytes, 'a') + "\"}";
  EXPECT_FALSE(Jwks::Parse(huge).ok());
}

TEST(Jwks, CandidatesMatchKidAndAlgorithm) {
  KeyPtr ec(EVP_EC_gen("P-256"));
  KeyPtr ec384(EVP_EC_gen("P-384"));
  Json keys = Json::array({TestKey().public_key().ToJwk(), OtherKey().public_key().ToJwk(),
                           EcJwk(ec.get(), "P-256", 32, "ec256"),
                           EcJwk(ec384.get(), "P-384", 48, "ec384")});
  // Strip the "alg" ToJwk adds so both RSA keys are unrestricted.
  keys[0].erase("alg");
  keys[1].erase("alg");
  auto set = Jwks::Parse(Json({{"keys", keys}}).dump());
  ASSERT_TRUE(set.ok());
  ASSERT_EQ(set->keys().size(), 4u);

  auto kids = [](const std::vector<PublicKey>& keys) {
    std::vector<std::string> out;
    for (const auto& k : keys) out.push_back(k.kid());
    return out;
  };
  EXPECT_EQ(kids(set->Candidates(TestKey().kid(), "RS256")),
            std::vector<std::string>{TestKey().kid()});
  EXPECT_EQ(kids(set->Candidates("", "RS256")),
            (std::vector<std::string>{TestKey().kid(), OtherKey().kid()}));
  EXPECT_EQ(kids(set->Candidates("", "PS512")),
            (std::vector<std::string>{TestKey().kid(), OtherKey().kid()}));
  EXPECT_EQ(kids(set->Candidates("", "ES256")), std::vector<std::string>{"ec256"});
  EXPECT_EQ(kids(set->Candidates("", "ES384")), std::vector<std::string>{"ec384"});
  EXPECT_TRUE(set->Candidates("", "ES512").empty());
  EXPECT_TRUE(set->Candidates("ec256", "RS256").empty());  // kid of the wrong key type
  EXPECT_TRUE(set->Candidates("unknown", "RS256").empty());
  EXPECT_TRUE(set->Candidates("", "none").empty());

  // A token naming a kid that is not in the set has nobody to verify it.
  auto token = TestKey().Sign(Claims());
  ASSERT_TRUE(token.ok());
  auto jwt = ParseJwt(*token);
  ASSERT_TRUE(jwt.ok());
  EXPECT_TRUE(VerifyJwt(*jwt, set->Candidates(jwt->kid, jwt->alg)).ok());
  ExpectUnauthorized(VerifyJwt(*jwt, set->Candidates("someone-else", jwt->alg)));
  // A token signed by OtherKey but claiming TestKey's kid is refused.
  KeyPtr other = ReadPrivateKey(OtherKey().PrivatePem());
  auto forged = ParseJwt(SignedToken(other.get(), "RS256", Claims(), TestKey().kid()));
  ASSERT_TRUE(forged.ok());
  ExpectUnauthorized(VerifyJwt(*forged, set->Candidates(forged->kid, forged->alg)));
}

// --- SigningKey -------------------------------------------------------------------------------

TEST(SigningKey, PemRoundTrips) {
  std::string pem = TestKey().PrivatePem();
  EXPECT_THAT(pem, HasSubstr("-----BEGIN PRIVATE KEY-----"));
  auto back = SigningKey::FromPem(pem);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->kid(), TestKey().kid());
  EXPECT_TRUE(back->public_key().SameKey(TestKey().public_key()));
  auto token = back->Sign(Claims());
  ASSERT_TRUE(token.ok());
  auto jwt = ParseJwt(*token);
  ASSERT_TRUE(jwt.ok());
  EXPECT_TRUE(VerifyJwt(*jwt, {TestKey().public_key()}).ok());

  // PKCS#1 "RSA PRIVATE KEY".
  KeyPtr rsa = ReadPrivateKey(pem);
  BioPtr bio(BIO_new(BIO_s_mem()));
  ASSERT_EQ(PEM_write_bio_PrivateKey_traditional(bio.get(), rsa.get(), nullptr, nullptr, 0, nullptr,
                                                 nullptr),
            1);
  std::string pkcs1 = BioText(bio.get());
  ASSERT_THAT(pkcs1, HasSubstr("-----BEGIN RSA PRIVATE KEY-----"));
  auto from_pkcs1 = SigningKey::FromPem(pkcs1);
  ASSERT_TRUE(from_pkcs1.ok()) << from_pkcs1.status().ToString();
  EXPECT_EQ(from_pkcs1->kid(), TestKey().kid());
}

TEST(SigningKey, RefusesUnusableKeys) {
  EXPECT_EQ(SigningKey::Generate(1024).status().reason(), core::Reason::kInvalid);
  EXPECT_FALSE(SigningKey::Generate(100000).ok());
  EXPECT_FALSE(SigningKey::FromPem("").ok());
  EXPECT_FALSE(SigningKey::FromPem("garbage").ok());
  // Public keys are not signing keys.
  EXPECT_FALSE(SigningKey::FromPem(PemBlock("PUBLIC KEY", TestKey().public_key().DerSpki())).ok());

  auto pem_of = [](EVP_PKEY* key) {
    BioPtr bio(BIO_new(BIO_s_mem()));
    PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
    return BioText(bio.get());
  };
  KeyPtr ec(EVP_EC_gen("P-256"));
  EXPECT_THAT(SigningKey::FromPem(pem_of(ec.get())).status().message(), HasSubstr("RSA"));
  KeyPtr small(EVP_RSA_gen(1024));
  EXPECT_THAT(SigningKey::FromPem(pem_of(small.get())).status().message(), HasSubstr("1024 bits"));

  // An encrypted key is refused rather than prompting for a passphrase.
  KeyPtr rsa = ReadPrivateKey(TestKey().PrivatePem());
  BioPtr bio(BIO_new(BIO_s_mem()));
  char pass[] = "secret";
  ASSERT_EQ(PEM_write_bio_PKCS8PrivateKey(bio.get(), rsa.get(), EVP_aes_128_cbc(), pass, 6, nullptr,
                                          nullptr),
            1);
  std::string encrypted = BioText(bio.get());
  ASSERT_THAT(encrypted, HasSubstr("ENCRYPTED PRIVATE KEY"));
  EXPECT_FALSE(SigningKey::FromPem(encrypted).ok());
  EXPECT_EQ(ERR_peek_error(), 0ul);
}

// --- Claims -----------------------------------------------------------------------------------

Jwt WithClaims(Json claims) {
  Jwt jwt;
  jwt.claims = std::move(claims);
  return jwt;
}

core::SystemTime At(double seconds) {
  return core::SystemTime(std::chrono::duration_cast<core::SystemTime::duration>(
      std::chrono::duration<double>(seconds)));
}

TEST(CheckClaims, ChecksTimes) {
  ClaimChecks checks;
  checks.now = At(1700001000);
  EXPECT_TRUE(CheckClaims(WithClaims(Claims()), checks).ok());

  auto message = [&](Json claims) {
    core::Status s = CheckClaims(WithClaims(std::move(claims)), checks);
    EXPECT_TRUE(s.ok() || s.reason() == core::Reason::kUnauthorized) << s.ToString();
    return s.message();
  };
  // Expired: now past exp, and exactly at exp (RFC 7519 §4.1.4 "on or after").
  EXPECT_EQ(message({{"exp", 1700000999}}), "token has expired");
  EXPECT_EQ(message({{"exp", 1700001000}}), "token has expired");
  EXPECT_EQ(message({{"exp", 1700001000.5}}), "");
  EXPECT_EQ(message({{"exp", 1700000999.5}}), "token has expired");
  // Not valid yet.
  EXPECT_EQ(message({{"exp", 1800000000}, {"nbf", 1700001001}}), "token is not valid yet");
  EXPECT_EQ(message({{"exp", 1800000000}, {"nbf", 1700001000}}), "");
  // Missing exp.
  EXPECT_EQ(message({{"sub", "a"}}), "token has no expiry");
  // Wrong types.
  EXPECT_EQ(message({{"exp", "1800000000"}}), "invalid exp claim");
  EXPECT_EQ(message({{"exp", true}}), "invalid exp claim");
  EXPECT_EQ(message({{"exp", nullptr}}), "invalid exp claim");
  EXPECT_EQ(message({{"exp", 1800000000}, {"nbf", "0"}}), "invalid nbf claim");
  EXPECT_EQ(message({{"exp", 1800000000}, {"iat", "now"}}), "invalid iat claim");
  // iat is not compared with now.
  EXPECT_EQ(message({{"exp", 1800000000}, {"iat", 1900000000}}), "");

  checks.leeway = std::chrono::seconds(30);
  EXPECT_EQ(message({{"exp", 1700000990}}), "");
  EXPECT_EQ(message({{"exp", 1700000970}}), "token has expired");
  EXPECT_EQ(message({{"exp", 1800000000}, {"nbf", 1700001030}}), "");
  EXPECT_EQ(message({{"exp", 1800000000}, {"nbf", 1700001031}}), "token is not valid yet");

  checks.require_exp = false;
  EXPECT_EQ(message({{"sub", "a"}}), "");
  EXPECT_EQ(message({{"exp", "soon"}}), "invalid exp claim");
}

TEST(CheckClaims, ChecksIssuerAndAudience) {
  ClaimChecks checks;
  checks.now = At(1700001000);
  checks.issuers = {"https://other.example", "https://issuer.example"};
  checks.audiences = {"api", "klutch"};
  EXPECT_TRUE(CheckClaims(WithClaims(Claims()), checks).ok());

  auto check = [&](const std::string& key, Json value) {
    Json claims = Claims();
    if (value.is_discarded()) {
      claims.erase(key);
    } else {
      claims[key] = std::move(value);
    }
    return CheckClaims(WithClaims(claims), checks);
  };
  Json missing(Json::value_t::discarded);
  EXPECT_TRUE(check("aud", "klutch").ok());
  EXPECT_TRUE(check("aud", Json::array({"x", "api"})).ok());
  EXPECT_EQ(check("aud", "other").message(), "invalid audience");
  EXPECT_EQ(check("aud", Json::array({"x", "y"})).message(), "invalid audience");
  EXPECT_EQ(check("aud", Json::array()).message(), "invalid audience");
  EXPECT_EQ(check("aud", Json::array({"api", 5})).message(), "invalid audience");
  EXPECT_EQ(check("aud", 5).message(), "invalid audience");
  EXPECT_EQ(check("aud", missing).message(), "invalid audience");
  EXPECT_EQ(check("iss", "https://evil.example").message(), "invalid issuer");
  EXPECT_EQ(check("iss", Json::array({"https://issuer.example"})).message(), "invalid issuer");
  EXPECT_EQ(check("iss", missing).message(), "invalid issuer");
  ExpectUnauthorized(check("iss", "https://evil.example"));

  // Empty lists are not checked.
  checks.issuers.clear();
  checks.audiences.clear();
  EXPECT_TRUE(check("iss", missing).ok());
  EXPECT_TRUE(check("aud", "anything").ok());
}

TEST(ExpiryOf, ReadsExpAsTime) {
  EXPECT_EQ(ExpiryOf(WithClaims(Claims())), At(1700003600));
  EXPECT_EQ(ExpiryOf(WithClaims({{"exp", 1.5}})), At(1.5));
  EXPECT_FALSE(ExpiryOf(WithClaims({{"sub", "a"}})).has_value());
  EXPECT_FALSE(ExpiryOf(WithClaims({{"exp", "1"}})).has_value());
  // Clamped to the clock's range rather than overflowing.
  auto far = ExpiryOf(WithClaims({{"exp", 1e300}}));
  ASSERT_TRUE(far.has_value());
  EXPECT_GT(*far, At(1e9));
  EXPECT_EQ(ExpiryOf(WithClaims({{"exp", -5}})), At(0));
}

}  // namespace
}  // namespace klutch::auth::jwt_test
