// `klutch operator`: the a8s APIs (Postgresql, ServiceBinding, Backup, Restore) served on this
// machine's PostgreSQL (src/a8s), its flags and its run loop.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace klutch::cli {

struct OperatorFlags {
  std::string kubeconfig;
  std::string state_dir = "klutch-operator-state";
  std::string run_as;
  std::string postgres_bin_dir = "/usr/lib/postgresql/15/bin";
  std::string namespace_ = "a8s-system";  // the lease's
  std::string lease_name = "klutch-operator";
  // controller-runtime's leader-election timing (Go durations).
  std::string lease_duration = "15s";
  std::string renew_deadline = "10s";
  std::string retry_period = "2s";
  std::string health_address = ":8080";
  std::string metrics_address = "0";
  int concurrent_syncs = 4;
  std::string status_interval = "10s";
  bool leave_instances_running = false;
};

void AddOperatorFlags(CLI::App* cmd, OperatorFlags& flags);
// Runs until SIGTERM/SIGINT; the process exit code.
int RunOperator(const OperatorFlags& flags);

}  // namespace klutch::cli
