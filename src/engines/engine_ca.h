// An owner's CA for its engines (the broker's <state>/tls, the operator's likewise): ca.crt and
// ca.key, made once and valid ten years, which signs the server certificates of TLS instances
// (EnsureServerCertificate in data_service.h). Thread-compatible.
#pragma once

#include <filesystem>

#include "core/status.h"
#include "engines/data_service.h"

namespace klutch::engines {

// Loads the CA kept in `dir` into context.ca_pem / context.ca_key_pem, generating it first
// when missing. kInternal naming the file when it cannot be written.
core::Status LoadOrCreateEngineCa(const std::filesystem::path& dir, const std::string& name,
                                  EngineContext& context);

}  // namespace klutch::engines
