#include "engines/engine_ca.h"

#include <chrono>
#include <filesystem>

#include "core/file.h"
#include "http/certs.h"

namespace klutch::engines {

core::Status LoadOrCreateEngineCa(const std::filesystem::path& dir, const std::string& name,
                                  EngineContext& engine) {
  namespace fs = std::filesystem;
  fs::path crt = dir / "ca.crt";
  fs::path key = dir / "ca.key";
  auto c = core::ReadFile(crt);
  auto k = core::ReadFile(key);
  if (c.ok() && k.ok()) {
    engine.ca_pem = *c;
    engine.ca_key_pem = *k;
    return core::Status::Ok();
  }
  KLUTCH_ASSIGN_OR_RETURN(http::Pem ca,
                          http::GenerateCertificateAuthority(name, std::chrono::hours(24 * 3650)));
  KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(key, ca.private_key));
  KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(crt, ca.certificate,
                                               fs::perms::owner_read | fs::perms::owner_write |
                                                   fs::perms::group_read | fs::perms::others_read));
  engine.ca_pem = ca.certificate;
  engine.ca_key_pem = ca.private_key;
  return core::Status::Ok();
}

}  // namespace klutch::engines
