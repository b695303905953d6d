// `klutch broker`: the Open Service Broker and backup manager that run PostgreSQL and Redis
// instances on this machine (src/broker), its flags and its run loop.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace klutch::cli {

struct BrokerFlags {
  std::string listen = "127.0.0.1:8085";
  std::string state_dir = ".data/broker";
  std::string run_as;  // default: `postgres` when run as root
  int workers = 2;
  std::string quota_interval = "30s";
  bool leave_instances_running = false;
  int64_t max_disk_per_instance_mib = 0;
  std::string postgres_bin_dir = "/usr/lib/postgresql/15/bin";
  std::string redis_server = "/usr/bin/redis-server";
  std::string mariadbd = "/usr/sbin/mariadbd";
  std::string mariadb_bin_dir = "/usr/bin";
  std::string prometheus_bin_dir = "/usr/bin";
  // Publishes the basic-auth credentials of every base path as Secrets
  // `<type>-service-broker-credentials` / `<type>-backup-manager-credentials` (keys username,
  // password) in this namespace of the cluster the kubeconfig names.
  std::string secrets_kubeconfig;
  std::string secrets_namespace = "crossplane-system";
};

void AddBrokerFlags(CLI::App* cmd, BrokerFlags& flags);
// Runs until SIGTERM/SIGINT; the process exit code.
int RunBroker(const BrokerFlags& flags);

}  // namespace klutch::cli
