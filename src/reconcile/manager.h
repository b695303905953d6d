// Manager: runs a controller process's informers and controllers together.
//
// It owns one RestClient-bound informer per (resource, namespace, selectors), shared by
// every controller that asks; starts them all, waits for their caches to sync, and then
// starts the controllers, right away or only while this replica leads (leader election on
// a Lease). It serves /healthz, /livez (the process runs), /readyz (caches synced and not
// stopped for a lost lease) and /metrics (its MetricRegistry, which the process may add its
// own families to) through serving::Endpoints.
// Stop() stops controllers (draining reconciles in flight), then the elector (releasing
// the lease), then informers. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/informer.h"
#include "core/clock.h"
#include "core/sync.h"
#include "reconcile/controller.h"
#include "reconcile/leader_election.h"
#include "reconcile/metrics.h"
#include "serving/endpoints.h"
#include "serving/health.h"
#include "serving/metrics.h"

namespace klutch::reconcile {

struct ManagerOptions {
  std::string name;  // the process's name, e.g. "klutch-konnector"
  // Serve /healthz, /livez, /readyz and /metrics on `health_address`:`health_port` (port 0 =
  // any free port); unset = no endpoint.
  std::optional<uint16_t> health_port;
  std::string health_address = "127.0.0.1";
  std::optional<LeaderElectionOptions> leader_election;
  std::chrono::milliseconds cache_sync_timeout{60000};
  // Called (on the elector's thread) when leadership is lost; controllers are already
  // stopped then and cannot start again (Ready() turns false). Processes should exit here,
  // as controller-runtime's do.
  std::function<void()> on_lost_leadership;
  // Time for every informer, controller and the elector (nullptr: core::RealClock::Get());
  // tests pass a core::FakeClock. Must outlive the manager.
  const core::Clock* clock = nullptr;
};

class Manager {
 public:
  Manager(client::RestClient& rest, ManagerOptions options);
  ~Manager();  // Stop()
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // The shared informer for a resource (created on first use; handlers may be added until
  // Start()). Options other than namespace and selectors come from the first caller.
  client::Informer& Informer(const client::GroupVersionResource& gvr,
                             client::InformerOptions options = {});
  // Adds a controller (named per CONVENTIONS.md) reconciling with `reconciler`; wire its
  // sources (For/Owns/Watches) before Start().
  Controller& AddController(std::string name, Reconciler& reconciler, int workers = 1);

  // Starts informers and the health endpoint; waits for every cache to sync (kTimeout
  // naming the resources that did not), then starts the controllers or the election.
  core::Status Start();
  void Stop();

  bool Ready() const;
  bool Leading() const;
  uint16_t health_port() const;  // 0 when not serving
  Metrics& metrics() { return metrics_; }
  // Where the process registers its own metrics (served on /metrics with the manager's).
  serving::MetricRegistry& metric_registry() { return registry_; }
  // Add readiness or liveness checks before Start().
  serving::HealthChecks& health() { return health_; }
  client::RestClient& rest() { return rest_; }

 private:
  void StartControllers();
  void StopControllers();

  client::RestClient& rest_;
  ManagerOptions options_;
  const core::Clock& clock_;
  serving::MetricRegistry registry_;
  serving::HealthChecks health_;
  Metrics metrics_;
  mutable core::Mutex mu_;
  std::map<std::string, std::unique_ptr<client::Informer>> informers_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Controller>> controllers_ GUARDED_BY(mu_);
  bool synced_ GUARDED_BY(mu_) = false;
  bool started_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
  bool lost_leadership_ GUARDED_BY(mu_) = false;  // controllers stopped for good
  std::unique_ptr<LeaderElector> elector_;
  std::unique_ptr<serving::Endpoints> endpoints_;
};

}  // namespace klutch::reconcile
