// `klutch manager`: the Control Plane's controllers (composition engine and providers), its
// flags and its run loop.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace klutch::cli {

struct ManagerFlags {
  std::string kubeconfig;
  std::string lease_name = "klutch-manager";
  std::string lease_namespace;
  std::string health_address = ":8080";
  std::string metrics_address = ":8081";
  std::string namespace_ = "crossplane-system";  // where XR connection Secrets go
  // 1,000 claims created at once cost ~5,000 writes before they settle; a lower limit makes
  // the limiter, not the API server, the bottleneck (docs/performance.md).
  double qps = 1000;
  int burst = 2000;
  int concurrent_syncs = 4;
  bool enable_composition = true;
  bool enable_provider_kubernetes = true;
  bool enable_provider_anynines = true;
  std::string poll_interval = "1m";
};

void AddManagerFlags(CLI::App* cmd, ManagerFlags& flags);
// Runs until SIGTERM/SIGINT; the process exit code.
int RunManager(const ManagerFlags& flags);

}  // namespace klutch::cli
