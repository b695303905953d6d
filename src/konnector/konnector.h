// Konnector: the consumer side of the binding protocol (bind-protocol.md §4). It watches
// APIServiceBindings and their kubeconfig Secrets in the binding cluster, opens one
// connection per distinct provider kubeconfig, and through each connection keeps the bound
// CRDs in the App Cluster, the heartbeat on the provider's ClusterBinding, and every bound
// object in sync both ways (spec up, status down, provider-created objects adopted, claimed
// Secrets and ConfigMaps copied by their owner).
//
// Wiring: the process builds a reconcile::Manager on the binding cluster (leader election,
// health, metrics) and a Konnector on it; Setup() registers the binding and Secret informers
// and the two top-level controllers, StartAppInformers() starts the App Cluster's CRD and
// Namespace caches, and the manager starts the controllers while this replica leads. Every
// sync is driven by watches; timers only pace the heartbeat and backoff. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "client/kubeconfig.h"
#include "client/rest_client.h"
#include "core/clock.h"
#include "core/status.h"
#include "reconcile/manager.h"

namespace klutch::konnector {

using ClientFactory =
    std::function<core::Result<std::unique_ptr<client::RestClient>>(const client::RestConfig&)>;

struct KonnectorOptions {
  // Control-plane mode (§1.6, §4.1): bindings live on the Control Plane in
  // `binding_namespace`, which is also every connection's provider namespace, and the
  // provider is the binding cluster itself.
  bool control_plane_mode = false;
  // Where APIServiceBindings and their Secrets are watched ("" = all namespaces).
  std::string binding_namespace;
  // How often the ClusterBinding's heartbeat is renewed (upstream: 5 min, fixed).
  std::chrono::milliseconds heartbeat_interval{30000};
  std::string version = "v0.0.0";  // written to ClusterBinding.status.konnectorVersion
  int workers = 2;                 // per controller
  // Builds the client of a provider connection (default: client::RestClient::New with the
  // config's own rate limits). Tests route it to an in-process cluster.
  ClientFactory new_client;
  // Name and identity of this replica in Events.
  std::string component = "klutch-konnector";
  std::string instance;
  const core::Clock* clock = nullptr;  // nullptr: real time
};

class Konnector {
 public:
  // `manager` runs on the binding cluster (App Cluster in OIDC mode, Control Plane in
  // control-plane mode); `app` reaches the App Cluster. Both must outlive the konnector.
  Konnector(reconcile::Manager& manager, client::RestClient& app, KonnectorOptions options);
  ~Konnector();  // Stop()
  Konnector(const Konnector&) = delete;
  Konnector& operator=(const Konnector&) = delete;

  // Registers informers and controllers with the manager; call once before manager.Start().
  core::Status Setup();
  // Starts the App Cluster's CRD and Namespace informers and waits for them (kTimeout).
  core::Status StartAppInformers(std::chrono::milliseconds timeout);
  // Stops every connection and the App Cluster informers (after the manager stopped the
  // controllers). Idempotent.
  void Stop();

  // How many provider connections are open (for tests and metrics).
  size_t connections() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Installs or upgrades the apiservicebindings CRD in the App Cluster and waits until it is
// Established (§1.0.1): retried on connection errors, 409 and 429 until `timeout`.
core::Status InstallBindingCrd(client::RestClient& app, std::chrono::milliseconds timeout,
                               const core::Clock& clock = core::RealClock::Get());

}  // namespace klutch::konnector
