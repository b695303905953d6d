// `klutch konnector`: the sync agent of an App Cluster (bind-protocol.md §4.1), with upstream
// Klutch's flags and environment plus ours (heartbeat interval, metrics and probe addresses,
// client rate limits).
#include "cli/konnector.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>

#include "cli/controller_process.h"
#include "cli/fail.h"
#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "core/duration.h"
#include "core/random.h"
#include "konnector/konnector.h"
#include "konnector/objects.h"
#include "reconcile/manager.h"
#include "serving/endpoints.h"
#include "serving/shutdown.h"

namespace klutch::cli {
namespace {

constexpr const char* kKonnectorVersion = "v0.1.0";

std::chrono::milliseconds ToMillis(const core::GoDuration& d) {
  return std::chrono::milliseconds(d.seconds * 1000 + d.nanos / 1000000);
}

}  // namespace

void AddKonnectorFlags(CLI::App* cmd, KonnectorFlags& f) {
  cmd->add_option("--kubeconfig", f.kubeconfig,
                  "kubeconfig of the cluster holding the APIServiceBindings (the App Cluster; the "
                  "Control Plane in control-plane mode); default: in-cluster config, else "
                  "$KUBECONFIG or ~/.kube/config");
  cmd->add_flag("--control-plane-mode", f.control_plane_mode,
                "Run beside the Control Plane and reach the App Cluster through a kubeconfig "
                "Secret");
  cmd->add_option("--app-cluster-kubeconfig-secret-name", f.app_secret_name,
                  "Control-plane mode: Secret holding the App Cluster's kubeconfig");
  cmd->add_option("--app-cluster-kubeconfig-secret-namespace", f.app_secret_namespace,
                  "Control-plane mode: namespace of that Secret");
  cmd->add_option("--app-cluster-kubeconfig-secret-key", f.app_secret_key,
                  "Control-plane mode: key of the kubeconfig in that Secret")
      ->capture_default_str();
  cmd->add_option("--binding-root-namespace", f.binding_root_namespace,
                  "Control-plane mode: namespace of the APIServiceBindings, also the provider "
                  "namespace");
  cmd->add_option("--lease-name", f.lease_name, "Name of the leader-election Lease")
      ->capture_default_str();
  cmd->add_option("--lease-namespace", f.lease_namespace,
                  "Namespace of the Lease (default: $POD_NAMESPACE, else kube-system)");
  cmd->add_option("--heartbeat-interval", f.heartbeat_interval,
                  "How often the ClusterBinding heartbeat is renewed (Go duration)")
      ->capture_default_str();
  cmd->add_option("--health-probe-bind-address", f.health_address,
                  "host:port serving /healthz, /livez and /readyz (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--metrics-bind-address", f.metrics_address,
                  "host:port serving /metrics; \"0\" serves them on the probe address only")
      ->capture_default_str();
  cmd->add_option("--kube-api-qps", f.qps, "Requests per second to each API server (0: unlimited)")
      ->capture_default_str();
  cmd->add_option("--concurrent-syncs", f.concurrent_syncs,
                  "Workers of each sync controller (objects synced at once per bound API)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--kube-api-burst", f.burst, "Burst of requests to each API server")
      ->capture_default_str();
}

int RunKonnector(const KonnectorFlags& f) {
  serving::BlockShutdownSignals();
  if (f.control_plane_mode && (f.app_secret_name.empty() || f.app_secret_namespace.empty() ||
                               f.binding_root_namespace.empty())) {
    return Fail("klutch konnector",
                "--control-plane-mode needs --app-cluster-kubeconfig-secret-name, "
                "--app-cluster-kubeconfig-secret-namespace and --binding-root-namespace");
  }
  auto heartbeat = core::ParseGoDuration(f.heartbeat_interval);
  if (!heartbeat.ok() || ToMillis(*heartbeat).count() < 1000) {
    return Fail("klutch konnector",
                "--heartbeat-interval: must be a Go duration of at least 1s, such as 30s");
  }
  auto probes = ParseProbeAddresses(f.health_address, f.metrics_address);
  if (!probes.ok()) return Fail("klutch konnector", probes.status().message());
  const auto& health = probes->health;
  const auto& metrics = probes->metrics;

  auto config = ControllerClusterConfig(f.kubeconfig);
  if (!config.ok()) return Fail("klutch konnector", config.status().message());
  config->qps = f.qps;
  config->burst = f.burst;
  config->user_agent = "klutch-konnector/" + std::string(kKonnectorVersion);
  auto binding = client::RestClient::New(*config);
  if (!binding.ok()) return Fail("klutch konnector", binding.status().message());

  std::unique_ptr<client::RestClient> app_owned;
  client::RestClient* app = binding->get();
  if (f.control_plane_mode) {
    // The App Cluster's kubeconfig, read from the Control Plane.
    auto secret =
        client::ResourceClient(**binding, client::resources::kSecrets, f.app_secret_namespace)
            .Get(f.app_secret_name);
    if (!secret.ok()) {
      return Fail("klutch konnector", "reading the App Cluster kubeconfig Secret " +
                                          f.app_secret_namespace + "/" + f.app_secret_name + ": " +
                                          secret.status().message());
    }
    auto check = konnector::CheckKubeconfigSecret(
        &*secret, f.app_secret_namespace + "/" + f.app_secret_name, f.app_secret_key, false);
    if (!check.valid) return Fail("klutch konnector", check.message);
    check.config.qps = f.qps;
    check.config.burst = f.burst;
    check.config.user_agent = config->user_agent;
    auto app_client = client::RestClient::New(check.config);
    if (!app_client.ok()) return Fail("klutch konnector", app_client.status().message());
    app_owned = std::move(*app_client);
    app = app_owned.get();
  } else {
    auto installed = konnector::InstallBindingCrd(*app, std::chrono::minutes(2));
    if (!installed.ok()) {
      return Fail("klutch konnector",
                  "installing the apiservicebindings CRD: " + installed.message());
    }
  }

  const char* pod_name = ::getenv("POD_NAME");
  const char* pod_namespace = ::getenv("POD_NAMESPACE");
  std::string identity = pod_name && *pod_name ? pod_name : "konnector-" + core::RandomSuffix(8);
  std::string lease_namespace = !f.lease_namespace.empty()        ? f.lease_namespace
                                : pod_namespace && *pod_namespace ? pod_namespace
                                                                  : "kube-system";
  std::atomic<bool> lost{false};
  reconcile::Manager manager(
      **binding,
      {.name = "klutch-konnector",
       .health_port = health.second,
       .health_address = health.first,
       .leader_election = reconcile::LeaderElectionOptions{.lease_namespace = lease_namespace,
                                                           .lease_name = f.lease_name,
                                                           .identity = identity},
       .on_lost_leadership = [&lost] {
         std::cerr << "klutch konnector: lost the lease; stopping\n";
         lost = true;
         ::kill(::getpid(), SIGTERM);
       }});
  konnector::Konnector k(
      manager, *app,
      {.control_plane_mode = f.control_plane_mode,
       .binding_namespace = f.control_plane_mode ? f.binding_root_namespace : "",
       .heartbeat_interval = ToMillis(*heartbeat),
       .version = kKonnectorVersion,
       .workers = f.concurrent_syncs,
       .new_client =
           [&f, &manager](const client::RestConfig& provider) {
             client::RestConfig c = provider;
             c.qps = f.qps;
             c.burst = f.burst;
             c.user_agent = "klutch-konnector/" + std::string(kKonnectorVersion);
             auto rest = client::RestClient::New(c);
             // Provider requests count in rest_client_requests_total like the others.
             if (rest.ok()) {
               (*rest)->SetRequestObserver([&manager](std::string_view verb, int code, double s) {
                 manager.metrics().OnRequest(verb, code, s);
               });
             }
             return rest;
           },
       .instance = identity});
  if (app_owned) {
    app_owned->SetRequestObserver([&manager](std::string_view verb, int code, double s) {
      manager.metrics().OnRequest(verb, code, s);
    });
  }
  if (auto s = k.Setup(); !s.ok()) return Fail("klutch konnector", s.message());
  if (auto s = k.StartAppInformers(std::chrono::minutes(2)); !s.ok())
    return Fail("klutch konnector", s.message());
  std::unique_ptr<serving::Endpoints> metrics_endpoint;
  if (auto s = StartControllerProcess(manager,
                                      {.component = "konnector",
                                       .health_host = health.first,
                                       .metrics = metrics,
                                       .lease = lease_namespace + "/" + f.lease_name,
                                       .identity = identity},
                                      metrics_endpoint);
      !s.ok()) {
    return Fail("klutch konnector", s.message());
  }
  serving::WaitForShutdownSignal();
  manager.Stop();
  k.Stop();
  return lost ? 1 : 0;
}

}  // namespace klutch::cli
