// `klutch manager`: the composition engine (src/compose) and the providers (src/providers)
// on one reconcile::Manager, under leader election, with health and metrics endpoints.
#include "cli/manager.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>

#include "cli/controller_process.h"
#include "cli/fail.h"
#include "client/kubeconfig.h"
#include "compose/composer.h"
#include "core/duration.h"
#include "core/random.h"
#include "providers/anynines_provider.h"
#include "providers/object_provider.h"
#include "reconcile/manager.h"
#include "serving/endpoints.h"
#include "serving/shutdown.h"

namespace klutch::cli {
namespace {

constexpr const char* kManagerVersion = "v0.1.0";

}  // namespace

void AddManagerFlags(CLI::App* cmd, ManagerFlags& f) {
  cmd->add_option("--kubeconfig", f.kubeconfig,
                  "kubeconfig of the Control Plane; default: in-cluster config, else $KUBECONFIG "
                  "or ~/.kube/config");
  cmd->add_option("--namespace", f.namespace_,
                  "Namespace for composite resources' connection Secrets")
      ->capture_default_str();
  cmd->add_option("--lease-name", f.lease_name, "Name of the leader-election Lease")
      ->capture_default_str();
  cmd->add_option("--lease-namespace", f.lease_namespace,
                  "Namespace of the Lease (default: $POD_NAMESPACE, else --namespace)");
  cmd->add_option("--health-probe-bind-address", f.health_address,
                  "host:port serving /healthz, /livez and /readyz (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--metrics-bind-address", f.metrics_address,
                  "host:port serving /metrics; \"0\" serves them on the probe address only")
      ->capture_default_str();
  cmd->add_option("--kube-api-qps", f.qps, "Requests per second to the API server (0: unlimited)")
      ->capture_default_str();
  cmd->add_option("--kube-api-burst", f.burst, "Burst of requests to the API server")
      ->capture_default_str();
  cmd->add_option("--concurrent-syncs", f.concurrent_syncs,
                  "Workers of each claim, composite and provider controller")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--poll-interval", f.poll_interval,
                  "How often providers re-check resources they cannot watch (Go duration)")
      ->capture_default_str();
  cmd->add_flag("!--disable-composition", f.enable_composition,
                "Do not run the composition engine (providers only)");
  cmd->add_flag("!--disable-provider-kubernetes", f.enable_provider_kubernetes,
                "Do not run the kubernetes.crossplane.io Object provider");
  cmd->add_flag("!--disable-provider-anynines", f.enable_provider_anynines,
                "Do not run the dataservices.anynines.com provider (OSB brokers and backup "
                "managers)");
}

int RunManager(const ManagerFlags& f) {
  serving::BlockShutdownSignals();
  auto probes = ParseProbeAddresses(f.health_address, f.metrics_address);
  if (!probes.ok()) return Fail("klutch manager", probes.status().message());
  const auto& health = probes->health;
  const auto& metrics = probes->metrics;
  auto poll = core::ParseGoDuration(f.poll_interval);
  if (!poll.ok() || poll->seconds < 1) {
    return Fail("klutch manager",
                "--poll-interval: must be a Go duration of at least 1s, such as 1m");
  }
  auto config = ControllerClusterConfig(f.kubeconfig);
  if (!config.ok()) return Fail("klutch manager", config.status().message());
  config->qps = f.qps;
  config->burst = f.burst;
  config->user_agent = "klutch-manager/" + std::string(kManagerVersion);
  auto rest = client::RestClient::New(*config);
  if (!rest.ok()) return Fail("klutch manager", rest.status().message());

  if (auto s = compose::InstallManagerApis(**rest, std::chrono::minutes(2)); !s.ok()) {
    return Fail("klutch manager", "installing the Crossplane APIs: " + s.message());
  }

  const char* pod_name = ::getenv("POD_NAME");
  const char* pod_namespace = ::getenv("POD_NAMESPACE");
  std::string identity = pod_name && *pod_name ? pod_name : "manager-" + core::RandomSuffix(8);
  std::string lease_namespace = !f.lease_namespace.empty()        ? f.lease_namespace
                                : pod_namespace && *pod_namespace ? pod_namespace
                                                                  : f.namespace_;
  // The lease namespace must exist before the election can take the lease.
  {
    client::ResourceClient namespaces(**rest, client::resources::kNamespaces);
    if (!namespaces.Get(lease_namespace).ok()) {
      (void)namespaces.Create(machinery::Json{
          {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", lease_namespace}}}});
    }
  }
  std::atomic<bool> lost{false};
  // The composer's per-XRD controllers run outside the manager's: they stop with the lease.
  std::atomic<compose::Composer*> leading_composer{nullptr};
  std::atomic<providers::AnyninesProvider*> leading_anynines{nullptr};
  reconcile::Manager manager(
      **rest,
      {.name = "klutch-manager",
       .health_port = health.second,
       .health_address = health.first,
       .leader_election = reconcile::LeaderElectionOptions{.lease_namespace = lease_namespace,
                                                           .lease_name = f.lease_name,
                                                           .identity = identity},
       .on_lost_leadership = [&lost, &leading_composer, &leading_anynines] {
         std::cerr << "klutch manager: lost the lease; stopping\n";
         lost = true;
         if (compose::Composer* c = leading_composer.load()) c->Stop();
         if (providers::AnyninesProvider* a = leading_anynines.load()) a->Stop();
         ::kill(::getpid(), SIGTERM);
       }});
  (*rest)->SetRequestObserver([&manager](std::string_view verb, int code, double s) {
    manager.metrics().OnRequest(verb, code, s);
  });
  std::unique_ptr<compose::Composer> composer;
  if (f.enable_composition) {
    composer = std::make_unique<compose::Composer>(
        manager, compose::ComposerOptions{.connection_secret_namespace = f.namespace_,
                                          .workers = f.concurrent_syncs,
                                          .instance = identity});
    if (auto s = composer->Setup(); !s.ok()) return Fail("klutch manager", s.message());
    leading_composer = composer.get();
  }
  const std::chrono::milliseconds poll_interval(poll->seconds * 1000 + poll->nanos / 1000000);
  std::unique_ptr<providers::ObjectProvider> objects;
  if (f.enable_provider_kubernetes) {
    objects = std::make_unique<providers::ObjectProvider>(
        manager,
        providers::ObjectProviderOptions{
            .workers = f.concurrent_syncs, .poll_interval = poll_interval, .instance = identity});
    if (auto s = objects->Setup(); !s.ok()) return Fail("klutch manager", s.message());
  }
  std::unique_ptr<providers::AnyninesProvider> anynines;
  if (f.enable_provider_anynines) {
    anynines = std::make_unique<providers::AnyninesProvider>(
        manager,
        providers::AnyninesProviderOptions{
            .workers = f.concurrent_syncs, .poll_interval = poll_interval, .instance = identity});
    if (auto s = anynines->Setup(); !s.ok()) return Fail("klutch manager", s.message());
    leading_anynines = anynines.get();
  }
  // Controllers stop before the lease is released (manager.Stop()), on every way out. The
  // anynines provider's controllers run outside the manager: they stop first.
  auto stop_all = [&] {
    if (composer) composer->Stop();
    if (anynines) anynines->Stop();
    manager.Stop();
    if (objects) objects->Stop();
  };
  std::unique_ptr<serving::Endpoints> metrics_endpoint;
  if (auto s = StartControllerProcess(manager,
                                      {.component = "manager",
                                       .health_host = health.first,
                                       .metrics = metrics,
                                       .lease = lease_namespace + "/" + f.lease_name,
                                       .identity = identity},
                                      metrics_endpoint);
      !s.ok()) {
    stop_all();
    return Fail("klutch manager", s.message());
  }
  serving::WaitForShutdownSignal();
  stop_all();
  return lost ? 1 : 0;
}

}  // namespace klutch::cli
