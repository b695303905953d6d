// `klutch broker` (see broker.h and src/broker/README.md).
#include "cli/broker.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "broker/broker.h"
#include "cli/controller_process.h"
#include "cli/engine_user.h"
#include "cli/fail.h"
#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "client/rest_client.h"
#include "core/duration.h"
#include "core/file.h"
#include "core/process.h"
#include "core/strings.h"
#include "http/server.h"
#include "serving/endpoints.h"
#include "serving/shutdown.h"

namespace klutch::cli {
namespace {

// The Secret name a ProviderConfig of Klutch's compositions refers to for `base`.
std::string SecretName(const std::string& base) {
  if (base.ends_with("-backup-manager")) return base + "-credentials";
  return base + "-service-broker-credentials";
}

core::Status PublishCredentials(const BrokerFlags& f, const broker::Broker& b) {
  KLUTCH_ASSIGN_OR_RETURN(auto config, ControllerClusterConfig(f.secrets_kubeconfig));
  KLUTCH_ASSIGN_OR_RETURN(auto rest, client::RestClient::New(config));
  client::ResourceClient namespaces(*rest, client::resources::kNamespaces);
  if (!namespaces.Get(f.secrets_namespace).ok()) {
    (void)namespaces.Create(machinery::Json{{"apiVersion", "v1"},
                                            {"kind", "Namespace"},
                                            {"metadata", {{"name", f.secrets_namespace}}}});
  }
  client::ResourceClient secrets(*rest, client::resources::kSecrets, f.secrets_namespace);
  for (const auto& base : b.Bases()) {
    auto creds = b.Credentials(base);
    machinery::Json secret = {{"apiVersion", "v1"},
                              {"kind", "Secret"},
                              {"metadata",
                               {{"name", SecretName(base)},
                                {"namespace", f.secrets_namespace},
                                {"labels", {{"app.kubernetes.io/managed-by", "klutch-broker"}}}}},
                              {"type", "Opaque"},
                              {"data",
                               {{"username", core::Base64Encode(creds.username)},
                                {"password", core::Base64Encode(creds.password)}}}};
    auto existing = secrets.Get(SecretName(base));
    if (existing.ok()) {
      secret["metadata"]["resourceVersion"] = machinery::ResourceVersion(*existing);
      KLUTCH_RETURN_IF_ERROR(secrets.Update(secret).status());
    } else {
      KLUTCH_RETURN_IF_ERROR(secrets.Create(secret).status());
    }
  }
  return core::Status::Ok();
}

}  // namespace

void AddBrokerFlags(CLI::App* cmd, BrokerFlags& f) {
  cmd->add_option("--listen", f.listen,
                  "Address to serve the broker APIs on (host:port, port 0 = any)")
      ->capture_default_str();
  cmd->add_option("--state-dir", f.state_dir,
                  "Directory for the broker's state, CA, credentials, instances and backups")
      ->capture_default_str();
  cmd->add_option("--run-as", f.run_as,
                  "Account the instances run as (default: postgres when run as root, else the "
                  "current user)");
  cmd->add_option("--workers", f.workers, "Operations (provision, backup, ...) run at once")
      ->capture_default_str();
  cmd->add_option("--quota-interval", f.quota_interval,
                  "How often disk use is checked against the plans' quotas (Go duration)")
      ->capture_default_str();
  cmd->add_option("--max-disk-per-instance-mib", f.max_disk_per_instance_mib,
                  "Cap every plan's disk quota at this many MiB (0: the plans' own quotas)")
      ->capture_default_str();
  cmd->add_flag("--leave-instances-running", f.leave_instances_running,
                "On exit, leave the instances running for the next broker to adopt");
  cmd->add_option("--postgres-bin-dir", f.postgres_bin_dir, "Where postgres, initdb, pg_dump are")
      ->capture_default_str();
  cmd->add_option("--redis-server", f.redis_server, "The redis-server binary")
      ->capture_default_str();
  cmd->add_option("--mariadbd", f.mariadbd, "The mariadbd binary")->capture_default_str();
  cmd->add_option("--mariadb-bin-dir", f.mariadb_bin_dir,
                  "Where mariadb-install-db, mariadb and mariadb-dump are")
      ->capture_default_str();
  cmd->add_option("--prometheus-bin-dir", f.prometheus_bin_dir,
                  "Where prometheus, promtool and prometheus-alertmanager are")
      ->capture_default_str();
  cmd->add_option("--credentials-secrets-kubeconfig", f.secrets_kubeconfig,
                  "Publish the basic-auth credentials as Secrets <type>-service-broker-credentials "
                  "and <type>-backup-manager-credentials on this cluster");
  cmd->add_option("--credentials-secrets-namespace", f.secrets_namespace,
                  "Namespace of those Secrets")
      ->capture_default_str();
}

int RunBroker(const BrokerFlags& f) {
  serving::BlockShutdownSignals();
  // Everything the broker writes (state, keys, dumps on their way to encryption) is private.
  ::umask(077);
  auto listen = serving::ParseBindAddress(f.listen);
  if (!listen.ok()) return Fail("klutch broker", "--listen " + listen.status().message());
  auto quota = core::ParseGoDuration(f.quota_interval);
  if (!quota.ok() || quota->seconds < 1) {
    return Fail("klutch broker",
                "--quota-interval: must be a Go duration of at least 1s, such as 30s");
  }
  broker::BrokerOptions options;
  options.state_dir = std::filesystem::absolute(f.state_dir);
  options.workers = f.workers;
  options.quota_interval = std::chrono::seconds(quota->seconds);
  options.stop_instances_on_shutdown = !f.leave_instances_running;
  options.max_disk_per_instance = f.max_disk_per_instance_mib * 1024 * 1024;
  options.engine.postgres_bin = f.postgres_bin_dir;
  options.engine.redis_server = f.redis_server;
  options.engine.mariadbd = f.mariadbd;
  options.engine.mariadb_bin = f.mariadb_bin_dir;
  const std::filesystem::path prometheus_bin = f.prometheus_bin_dir;
  options.engine.prometheus = prometheus_bin / "prometheus";
  options.engine.promtool = prometheus_bin / "promtool";
  options.engine.alertmanager = prometheus_bin / "prometheus-alertmanager";
  if (auto s = PrepareEngineUser(f.run_as, options.state_dir, options.engine); !s.ok()) {
    return Fail("klutch broker", s.message());
  }
  auto b = broker::Broker::Open(options);
  if (!b.ok()) return Fail("klutch broker", b.status().message());
  auto server = http::Server::Start(
      http::ServerOptions{.address = listen->first, .port = listen->second, .threads = 16},
      [&b](http::Request& r) { return (*b)->Serve(r); });
  if (!server.ok()) return Fail("klutch broker", server.status().message());
  if (!f.secrets_kubeconfig.empty()) {
    if (auto s = PublishCredentials(f, **b); !s.ok()) {
      return Fail("klutch broker", "--credentials-secrets-kubeconfig: " + s.message());
    }
  }
  std::string host = listen->first.empty() ? "127.0.0.1" : listen->first;
  std::cout << "klutch broker: serving on http://" << host << ":" << (*server)->port()
            << " (base paths: " << core::Join((*b)->Bases(), ", ") << "; state in "
            << options.state_dir.string() << ")" << std::endl;
  serving::WaitForShutdownSignal();
  (*server)->Drain(std::chrono::seconds(10));
  (*server)->Stop();
  (*b)->Shutdown();
  return 0;
}

}  // namespace klutch::cli
