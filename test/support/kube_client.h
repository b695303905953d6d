// Test support: an HTTP client for an API server, built from a kubeconfig written by
// `klutch apiserver` (server URL, CA and client certificate data). For tests and benchmarks
// only; the product's client library is src/client (issue #3).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "core/status.h"
#include "http/client.h"

namespace klutch::testing {

struct ServerCredentials {
  std::string host;
  uint16_t port = 0;
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
};

// Reads the first cluster and user of a kubeconfig with inline (base64) data.
core::Result<ServerCredentials> ReadKubeconfig(const std::filesystem::path& path);

std::unique_ptr<http::Client> NewClient(const ServerCredentials& creds);

// JSON request helper: method, path, optional JSON body -> (status, body).
core::Result<http::ClientResponse> Call(http::Client& client, std::string_view method,
                                        std::string_view path, std::string body = {},
                                        std::string_view content_type = "application/json");

}  // namespace klutch::testing
