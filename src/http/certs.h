// Certificates for TLS: a self-signed CA and certificates it issues (serving and client).
//
// Keys are ECDSA P-256. Everything is PEM text in memory; callers decide where it lives.
// Thread-safe (no shared state).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"

namespace klutch::http {

struct Pem {
  std::string certificate;
  std::string private_key;
};

struct CertificateRequest {
  std::string common_name;
  std::vector<std::string> organizations;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  bool server = false;  // extendedKeyUsage serverAuth
  bool client = false;  // extendedKeyUsage clientAuth
  std::chrono::hours validity{24 * 365};
};

// A new self-signed CA certificate and key.
core::Result<Pem> GenerateCertificateAuthority(const std::string& common_name,
                                               std::chrono::hours validity);
// A certificate for `request`, signed by `ca`. kBadRequest when the CA PEM does not parse.
core::Result<Pem> IssueCertificate(const Pem& ca, const CertificateRequest& request);

}  // namespace klutch::http
