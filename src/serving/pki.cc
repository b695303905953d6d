#include "serving/pki.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "core/file.h"
#include "core/ip.h"
#include "core/strings.h"

namespace klutch::serving {

namespace fs = std::filesystem;

namespace {

constexpr auto kOwnerOnly = fs::perms::owner_read | fs::perms::owner_write;
constexpr auto kReadable = kOwnerOnly | fs::perms::group_read | fs::perms::others_read;

// Go's net.ParseIP: no zones (a certificate's IP SAN has none).
bool IsIpAddress(const std::string& name) {
  return core::ParseIp(name, {.allow_zone = false}).has_value();
}

core::Result<http::Pem> LoadOrIssue(const fs::path& dir, const std::string& stem,
                                    const std::function<core::Result<http::Pem>()>& issue) {
  const fs::path key = dir / (stem + ".key");
  const fs::path cert = dir / (stem + ".crt");
  if (!fs::exists(key) || !fs::exists(cert)) {
    KLUTCH_ASSIGN_OR_RETURN(http::Pem pem, issue());
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(key, pem.private_key, kOwnerOnly));
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(cert, pem.certificate, kReadable));
    return pem;
  }
  http::Pem pem;
  KLUTCH_ASSIGN_OR_RETURN(pem.private_key, core::ReadFile(key));
  KLUTCH_ASSIGN_OR_RETURN(pem.certificate, core::ReadFile(cert));
  return pem;
}

}  // namespace

core::Result<Pki> EnsurePki(const fs::path& dir, const PkiSpec& spec) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return core::Internal(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  Pki pki;
  pki.ca_file = (dir / "ca.crt").string();
  KLUTCH_ASSIGN_OR_RETURN(pki.ca, LoadOrIssue(dir, "ca", [&] {
                            return http::GenerateCertificateAuthority(
                                spec.ca_common_name, std::chrono::hours(24 * 365 * 10));
                          }));

  http::CertificateRequest req;
  req.common_name = spec.serving_common_name;
  req.dns_names = {"localhost"};
  req.ip_addresses = {"127.0.0.1", "::1"};
  for (const auto& name : spec.serving_names) {
    if (name.empty() || name == "0.0.0.0" || name == "::") continue;
    auto& list = IsIpAddress(name) ? req.ip_addresses : req.dns_names;
    if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
  }
  req.server = true;
  req.validity = std::chrono::hours(24 * 365);
  // The names the serving certificate was issued for; a different set reissues it.
  const std::string sans = core::Join(req.dns_names, ",") + ";" + core::Join(req.ip_addresses, ",");
  const fs::path sans_file = dir / (spec.serving_file + ".sans");
  auto issued_for = core::ReadFile(sans_file);
  if (!issued_for.ok() || *issued_for != sans) {
    std::error_code ignored;
    fs::remove(dir / (spec.serving_file + ".key"), ignored);
  }
  KLUTCH_ASSIGN_OR_RETURN(http::Pem serving, LoadOrIssue(dir, spec.serving_file, [&] {
                            return http::IssueCertificate(pki.ca, req);
                          }));
  (void)serving;
  if (!issued_for.ok() || *issued_for != sans) {
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(sans_file, sans, kReadable));
  }
  pki.serving_cert_file = (dir / (spec.serving_file + ".crt")).string();
  pki.serving_key_file = (dir / (spec.serving_file + ".key")).string();

  for (const auto& client : spec.clients) {
    http::CertificateRequest creq;
    creq.common_name = client.common_name;
    creq.organizations = client.organizations;
    creq.client = true;
    KLUTCH_ASSIGN_OR_RETURN(http::Pem pem, LoadOrIssue(dir, client.file, [&] {
                              return http::IssueCertificate(pki.ca, creq);
                            }));
    pki.clients.push_back(std::move(pem));
  }
  return pki;
}

}  // namespace klutch::serving
