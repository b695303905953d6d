// Operator: `klutch operator`, the a8s APIs served on this machine's PostgreSQL engine
// (src/engines): Postgresql, ServiceBinding, Backup and Restore, each its own reconciler
// (postgresql_reconciler.h, service_binding_reconciler.h, backup_reconciler.h,
// restore_reconciler.h) over one OperatorContext. Setup loads the instance records from the
// state directory; once leading, the first pass of each Postgresql starts (or adopts, through
// their PID files) its servers. A node going down or coming back queues its Postgresql at once.
// anynines' a8s operators serve the same CRDs (deploy/operator/crds) and replace this one on a real
// Control Plane. Thread-safe.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "engines/data_service.h"
#include "reconcile/manager.h"

namespace klutch::a8s {

struct OperatorOptions {
  std::filesystem::path state_dir;
  // host, postgres_bin and user are the caller's; instances_dir and the CA are filled in.
  engines::EngineContext engine;
  int workers = 4;
  std::chrono::milliseconds status_interval{10000};
  // On Stop, stop every instance's servers (false: leave them for the next operator to adopt).
  bool stop_instances = true;
  // Where control groups are managed (CPU and memory limits per server), when allowed there.
  std::filesystem::path cgroup_root = "/sys/fs/cgroup";
  std::string instance;  // the Event source's host (the pod name)
  const core::Clock* clock = nullptr;
};

// Creates or updates the a8s CRDs (embedded from deploy/operator/crds) and waits until they are
// Established.
core::Status InstallOperatorApis(client::RestClient& rest, std::chrono::milliseconds timeout);

// The PostgreSQL major version of the servers in `postgres_bin` (postgres --version).
core::Result<int> PostgresMajorVersion(const std::filesystem::path& postgres_bin);

class Operator {
 public:
  Operator(reconcile::Manager& manager, OperatorOptions options);
  ~Operator();
  Operator(const Operator&) = delete;
  Operator& operator=(const Operator&) = delete;

  // Loads the records and the CA, registers the informers and controllers;
  // before manager.Start().
  core::Status Setup();
  // Stops the Event sender and (with options.stop_instances) every server.
  void Stop();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::a8s
