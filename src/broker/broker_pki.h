// The broker's PKI: its CA (<state>/tls/ca.crt and ca.key, made once, valid ten years),
// which signs the server certificates of the instances of -ssl plans
// (EnsureServerCertificate in data_service.h). Thread-compatible.
#pragma once

#include "broker/state_dir.h"
#include "core/status.h"
#include "engines/data_service.h"

namespace klutch::broker {

// Loads the CA into engine.ca_pem / engine.ca_key_pem, generating it first when missing.
// kInternal naming the file when it cannot be written.
core::Status LoadOrCreateBrokerCa(const StateDir& state, engines::EngineContext& engine);

}  // namespace klutch::broker
