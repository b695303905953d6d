// `klutch backend`: the bind backend on the Control Plane (bind-protocol.md §2): the OIDC
// login, catalog, consumer and /bind pages and the device grant over HTTPS (src/bind web*),
// and the backend's controllers (src/bind backend_controllers.h) under leader election, with
// upstream Klutch's flags plus a few of ours (--oidc-ca-file, --oidc-scopes, lease flags).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace klutch::cli {

struct BackendFlags {
  std::string kubeconfig;
  std::string namespace_prefix = "cluster";
  std::string pretty_name = "anynines";
  std::string consumer_scope = "Namespaced";
  std::string cluster_scoped_isolation = "Prefixed";
  std::string external_address;
  std::string external_ca_file;
  std::string external_server_name;
  std::string oidc_client_id;
  std::string oidc_client_secret;
  std::string oidc_issuer_url;
  std::string oidc_callback_url;
  std::string oidc_authorize_url;
  std::string oidc_ca_file;
  std::string oidc_scopes = "openid profile email";
  std::string cookie_signing_key;
  std::string cookie_encryption_key;
  std::string listen_address = "127.0.0.1:8080";
  std::string tls_cert_file;
  std::string tls_key_file;
  bool control_plane_mode = false;
  std::string konnector_image = "klutch:latest";
  std::string token_ttl = "24h";
  std::string lease_name = "klutch-backend";
  std::string lease_namespace;
  double qps = 200;
  int burst = 400;
  // Limits per consumer (issue 22): see docs/bind-backend.md.
  int max_clusters_per_user = 10;
  std::string unconnected_cluster_grace = "1h";
  std::string consumer_quota;  // set to bind::kDefaultConsumerQuota by AddBackendFlags
  double device_authorize_qps = 0.2;
  int device_authorize_burst = 20;
};

void AddBackendFlags(CLI::App* cmd, BackendFlags& flags);
// Runs until SIGTERM/SIGINT; the process exit code (2 for invalid flags).
int RunBackend(const BackendFlags& flags);

}  // namespace klutch::cli
