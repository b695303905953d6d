// Step 1 of `kubectl bind <URL>` (bind-protocol.md §3.1): reading the backend's BindingProvider
// from its /export URL and checking that this CLI can talk to it. Thread-compatible.
#pragma once

#include <string>
#include <string_view>

#include "apis/klutch/binding_provider.h"
#include "core/status.h"

namespace klutch::kubectl_bind {

using apis::klutch::BindingProvider;

// Parses and checks a BindingProvider document (apis::klutch::DecodeBindingProvider: kind
// BindingProvider, apiVersion exactly "v1alpha1", an OAuth2CodeGrant or OAuth2DeviceGrant
// method) and its version: one this CLI can talk to (v0.0.0 development builds or >= v0.3.0).
// Errors name the URL it came from.
core::Result<BindingProvider> ParseBindingProvider(std::string_view body, const std::string& url);

// GET `url` (trusting `ca_pem` when not empty, else the system's CAs) and ParseBindingProvider
// of the answer; errors say what to check (the URL, --backend-ca-file).
core::Result<BindingProvider> FetchBindingProvider(const std::string& url,
                                                   const std::string& ca_pem);

}  // namespace klutch::kubectl_bind
