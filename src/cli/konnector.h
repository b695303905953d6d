// `klutch konnector`: its flags and its run loop.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace klutch::cli {

struct KonnectorFlags {
  std::string kubeconfig;
  bool control_plane_mode = false;
  std::string app_secret_name;
  std::string app_secret_namespace;
  std::string app_secret_key = "kubeconfig";
  std::string binding_root_namespace;
  std::string lease_name = "klutch-bind";
  std::string lease_namespace;
  std::string heartbeat_interval = "30s";
  std::string health_address = ":8080";
  std::string metrics_address = ":8081";
  double qps = 500;
  int burst = 1000;
  int concurrent_syncs = 4;
};

void AddKonnectorFlags(CLI::App* cmd, KonnectorFlags& flags);
// Runs until SIGTERM/SIGINT; the process exit code.
int RunKonnector(const KonnectorFlags& flags);

}  // namespace klutch::cli
