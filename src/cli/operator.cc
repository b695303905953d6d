// `klutch operator`: the a8s controllers (src/a8s) on one reconcile::Manager, under leader
// election (one operator acts on the instances at a time), with health and metrics endpoints.
#include "cli/operator.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>

#include "a8s/operator.h"
#include "cli/controller_process.h"
#include "cli/engine_user.h"
#include "cli/fail.h"
#include "client/dynamic.h"
#include "core/duration.h"
#include "core/random.h"
#include "reconcile/manager.h"
#include "serving/endpoints.h"
#include "serving/shutdown.h"

namespace klutch::cli {

void AddOperatorFlags(CLI::App* cmd, OperatorFlags& f) {
  cmd->add_option("--kubeconfig", f.kubeconfig,
                  "kubeconfig of the Control Plane; default: in-cluster config, else $KUBECONFIG "
                  "or ~/.kube/config");
  cmd->add_option("--state-dir", f.state_dir,
                  "Where the instances' data, records and encrypted backups are kept")
      ->capture_default_str();
  cmd->add_option("--run-as", f.run_as,
                  "Account the PostgreSQL servers run as (default: postgres when root, else the "
                  "current user)");
  cmd->add_option("--postgres-bin-dir", f.postgres_bin_dir, "Where postgres, initdb, pg_dump are")
      ->capture_default_str();
  cmd->add_option("--namespace", f.namespace_, "Namespace of the leader-election Lease")
      ->capture_default_str();
  cmd->add_option("--lease-name", f.lease_name, "Name of the leader-election Lease")
      ->capture_default_str();
  cmd->add_option("--leader-elect-lease-duration", f.lease_duration,
                  "How long a lease holder that stopped renewing keeps it (Go duration)")
      ->capture_default_str();
  cmd->add_option("--leader-elect-renew-deadline", f.renew_deadline,
                  "How long the holder tries to renew before it gives up (Go duration)")
      ->capture_default_str();
  cmd->add_option("--leader-elect-retry-period", f.retry_period,
                  "How often candidates try to take the lease (Go duration)")
      ->capture_default_str();
  cmd->add_option("--health-probe-bind-address", f.health_address,
                  "host:port serving /healthz, /livez and /readyz (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--metrics-bind-address", f.metrics_address,
                  "host:port serving /metrics; \"0\" serves them on the probe address only")
      ->capture_default_str();
  cmd->add_option("--concurrent-syncs", f.concurrent_syncs,
                  "Workers of the Postgresql and ServiceBinding controllers")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--status-interval", f.status_interval,
                  "How often a running instance's servers and disk use are looked at (Go "
                  "duration)")
      ->capture_default_str();
  cmd->add_flag("--leave-instances-running", f.leave_instances_running,
                "On exit, leave the PostgreSQL servers running for the next operator to adopt");
}

int RunOperator(const OperatorFlags& f) {
  serving::BlockShutdownSignals();
  // Everything the operator writes (records, keys, dumps on their way to encryption) is private.
  ::umask(077);
  auto probes = ParseProbeAddresses(f.health_address, f.metrics_address);
  if (!probes.ok()) return Fail("klutch operator", probes.status().message());
  const auto& health = probes->health;
  const auto& metrics = probes->metrics;
  auto interval = core::ParseGoDuration(f.status_interval);
  if (!interval.ok() || (interval->seconds == 0 && interval->nanos < 100000000)) {
    return Fail("klutch operator", "--status-interval: must be a Go duration of at least 100ms");
  }
  std::chrono::milliseconds lease[3];
  const std::pair<const std::string*, const char*> lease_flags[3] = {
      {&f.lease_duration, "--leader-elect-lease-duration"},
      {&f.renew_deadline, "--leader-elect-renew-deadline"},
      {&f.retry_period, "--leader-elect-retry-period"}};
  for (int i = 0; i < 3; ++i) {
    auto d = core::ParseGoDuration(*lease_flags[i].first);
    if (!d.ok() || (d->seconds == 0 && d->nanos < 100000000)) {
      return Fail("klutch operator",
                  std::string(lease_flags[i].second) + ": must be a Go duration of at least 100ms");
    }
    lease[i] = std::chrono::milliseconds(d->seconds * 1000 + d->nanos / 1000000);
  }
  if (lease[1] >= lease[0] || lease[2] >= lease[1]) {
    return Fail("klutch operator",
                "--leader-elect-retry-period < --leader-elect-renew-deadline < "
                "--leader-elect-lease-duration must hold");
  }
  a8s::OperatorOptions options;
  options.state_dir = std::filesystem::absolute(f.state_dir);
  options.engine.postgres_bin = f.postgres_bin_dir;
  options.workers = f.concurrent_syncs;
  options.status_interval =
      std::chrono::milliseconds(interval->seconds * 1000 + interval->nanos / 1000000);
  options.stop_instances = !f.leave_instances_running;
  if (auto s = PrepareEngineUser(f.run_as, options.state_dir, options.engine); !s.ok()) {
    return Fail("klutch operator", s.message());
  }
  auto config = ControllerClusterConfig(f.kubeconfig);
  if (!config.ok()) return Fail("klutch operator", config.status().message());
  config->user_agent = "klutch-operator/v0.1.0";
  auto rest = client::RestClient::New(*config);
  if (!rest.ok()) return Fail("klutch operator", rest.status().message());
  if (auto s = a8s::InstallOperatorApis(**rest, std::chrono::minutes(2)); !s.ok()) {
    return Fail("klutch operator", "installing the a8s APIs: " + s.message());
  }
  {
    client::ResourceClient namespaces(**rest, client::resources::kNamespaces);
    if (!namespaces.Get(f.namespace_).ok()) {
      (void)namespaces.Create(machinery::Json{
          {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", f.namespace_}}}});
    }
  }
  const char* pod_name = ::getenv("POD_NAME");
  std::string identity = pod_name && *pod_name ? pod_name : "operator-" + core::RandomSuffix(8);
  options.instance = identity;
  std::atomic<bool> lost{false};
  reconcile::Manager manager(
      **rest, {.name = "klutch-operator",
               .health_port = health.second,
               .health_address = health.first,
               .leader_election = reconcile::LeaderElectionOptions{.lease_namespace = f.namespace_,
                                                                   .lease_name = f.lease_name,
                                                                   .identity = identity,
                                                                   .lease_duration = lease[0],
                                                                   .renew_deadline = lease[1],
                                                                   .retry_period = lease[2]},
               .on_lost_leadership = [&lost] {
                 std::cerr << "klutch operator: lost the lease; stopping\n";
                 lost = true;
                 ::kill(::getpid(), SIGTERM);
               }});
  (*rest)->SetRequestObserver([&manager](std::string_view verb, int code, double s) {
    manager.metrics().OnRequest(verb, code, s);
  });
  a8s::Operator op(manager, options);
  if (auto s = op.Setup(); !s.ok()) return Fail("klutch operator", s.message());
  std::unique_ptr<serving::Endpoints> metrics_endpoint;
  if (auto s = StartControllerProcess(manager,
                                      {.component = "operator",
                                       .health_host = health.first,
                                       .metrics = metrics,
                                       .lease = f.namespace_ + "/" + f.lease_name,
                                       .identity = identity},
                                      metrics_endpoint);
      !s.ok()) {
    manager.Stop();
    op.Stop();
    return Fail("klutch operator", s.message());
  }
  serving::WaitForShutdownSignal();
  manager.Stop();
  op.Stop();
  return lost ? 1 : 0;
}

}  // namespace klutch::cli
