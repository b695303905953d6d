#include "http/certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "core/strings.h"
#include "fmt/format.h"

namespace klutch::http {
namespace {

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

KeyPtr NewKey() { return KeyPtr(EVP_EC_gen("P-256")); }

std::string ToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string ToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

bool AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return true;
}

CertPtr NewCert(const std::string& cn, const std::vector<std::string>& orgs,
                std::chrono::hours validity, EVP_PKEY* key) {
  CertPtr cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7F;
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  // Back-date a little so clocks that lag slightly still accept it.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(validity.count()) * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& o : orgs) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1, 0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return cert;
}

}  // namespace

core::Result<Pem> GenerateCertificateAuthority(const std::string& common_name,
                                               std::chrono::hours validity) {
  KeyPtr key = NewKey();
  if (!key) return core::Internal("generating a CA key failed");
  CertPtr cert = NewCert(common_name, {}, validity, key.get());
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  if (!AddExt(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !AddExt(cert.get(), cert.get(), NID_key_usage,
              "critical,keyCertSign,cRLSign,digitalSignature") ||
      !AddExt(cert.get(), cert.get(), NID_subject_key_identifier, "hash")) {
    return core::Internal("building CA extensions failed");
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0)
    return core::Internal("signing CA failed");
  return Pem{ToPem(cert.get()), ToPem(key.get())};
}

core::Result<Pem> IssueCertificate(const Pem& ca, const CertificateRequest& request) {
  BioPtr cbio(BIO_new_mem_buf(ca.certificate.data(), static_cast<int>(ca.certificate.size())));
  CertPtr ca_cert(PEM_read_bio_X509(cbio.get(), nullptr, nullptr, nullptr));
  BioPtr kbio(BIO_new_mem_buf(ca.private_key.data(), static_cast<int>(ca.private_key.size())));
  KeyPtr ca_key(PEM_read_bio_PrivateKey(kbio.get(), nullptr, nullptr, nullptr));
  if (!ca_cert || !ca_key) return core::BadRequest("the CA certificate or key does not parse");

  KeyPtr key = NewKey();
  if (!key) return core::Internal("generating a key failed");
  CertPtr cert = NewCert(request.common_name, request.organizations, request.validity, key.get());
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get()));
  std::vector<std::string> usages;
  if (request.server) usages.push_back("serverAuth");
  if (request.client) usages.push_back("clientAuth");
  std::vector<std::string> sans;
  for (const auto& d : request.dns_names) sans.push_back("DNS:" + d);
  for (const auto& ip : request.ip_addresses) sans.push_back("IP:" + ip);
  bool ok = AddExt(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE") &&
            AddExt(cert.get(), ca_cert.get(), NID_key_usage,
                   "critical,digitalSignature,keyEncipherment") &&
            AddExt(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always");
  if (ok && !usages.empty()) {
    ok = AddExt(cert.get(), ca_cert.get(), NID_ext_key_usage, core::Join(usages, ","));
  }
  if (ok && !sans.empty()) {
    ok = AddExt(cert.get(), ca_cert.get(), NID_subject_alt_name, core::Join(sans, ","));
  }
  if (!ok) return core::BadRequest("building certificate extensions failed (bad name or address?)");
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) {
    return core::Internal("signing the certificate failed");
  }
  return Pem{ToPem(cert.get()), ToPem(key.get())};
}

}  // namespace klutch::http
