// Kubeconfig files for clients of the servers this project runs: the admin kubeconfig of an
// API server, the kubeconfigs the sandbox and the bind backend hand out. One cluster, one
// user, one context, in the format kubectl reads (clientcmd v1). Thread-safe (pure).
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"

namespace klutch::serving {

struct KubeconfigSpec {
  std::string name = "klutch";  // cluster, user and context names
  std::string server;           // https://host:port
  std::string ca_pem;           // certificate-authority-data
  std::string tls_server_name;  // tls-server-name (SNI and the name to verify); "" = none
  // Credentials: a client certificate and key, or a bearer token.
  std::string client_certificate_pem, client_key_pem;
  std::string token;
  std::string token_file;  // tokenFile: a file the client re-reads as it is renewed
  std::string ns;          // the context's namespace; "" = none
};

// The kubeconfig as YAML text.
std::string KubeconfigYaml(const KubeconfigSpec& spec);

// Writes it atomically, readable by the owner only (it holds credentials).
core::Status WriteKubeconfig(const std::filesystem::path& path, const KubeconfigSpec& spec);

}  // namespace klutch::serving
