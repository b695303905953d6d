// What the controllers of `klutch operator` share: the informers of the a8s kinds, the instance
// records, the PostgreSQL engine with its supervisor, and the helpers every pass needs (a
// status write, the one way an object is told what went wrong). Built once by Operator
// (operator.h) and outliving the controllers. Internal to src/a8s; thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "a8s/instance_store.h"
#include "a8s/postgresql_spec.h"
#include "client/informer.h"
#include "client/rest_client.h"
#include "core/clock.h"
#include "engines/data_service.h"
#include "engines/supervisor.h"
#include "reconcile/controller.h"
#include "reconcile/events.h"

namespace klutch::a8s {

struct OperatorContext {
  client::RestClient& rest;
  client::Informer& postgresqls;
  client::Informer& bindings;
  client::Informer& backups;
  client::Informer& restores;
  InstanceStore& store;
  const engines::EngineContext& engine_context;
  engines::DataService& engine;
  engines::Supervisor& supervisor;
  reconcile::EventRecorder& events;
  const core::Clock& clock;
  // The PostgreSQL major version this machine's servers run (postgres --version).
  int machine_version = 0;
  // Enforces resources.limits per server (nullptr: the machine does not let us).
  const engines::ResourceLimiter* limiter = nullptr;
  // How often a running instance's servers and disk use are looked at.
  std::chrono::milliseconds status_interval{10000};
  // Backups are written to <store.dir()>/backups/<instance number>/<backup uid>.enc.
};

// metadata.generation (0 when absent).
int64_t Generation(const Json& object);

// The engine's limits of an instance as recorded (its applied spec); defaults when unreadable.
engines::PlanLimits AppliedLimits(const InstanceRecord& record);

// Writes `modified`'s status over `original`'s through the status subresource of `gvr`.
core::Status WriteStatus(OperatorContext& ctx, const client::GroupVersionResource& gvr,
                         const Json& original, const Json& modified);

// Adds (or, with `present` false, removes) the operator's finalizer; true when it wrote.
core::Result<bool> SetFinalizer(OperatorContext& ctx, const client::GroupVersionResource& gvr,
                                const Json& object, bool present);

// What every reconciler does when it cannot go on because of something the user can fix:
// sets condition `Ready` False with `reason` and `message` (and status.error), records a
// Warning Event with the same words, and ends the pass without a retry (the object's next
// change brings it back), unless `retry_after` is given.
core::Result<reconcile::Result> Failed(OperatorContext& ctx,
                                       const client::GroupVersionResource& gvr, const Json& object,
                                       Json modified, std::string_view reason,
                                       std::string_view message,
                                       std::chrono::milliseconds retry_after = {});

// The conditions of a Backup or Restore as the a8s backup manager keeps them (InProgress and
// Ready, `ready` "True" or "False", with `reason` and `message`) and lastObservationTime.
void SetProgress(OperatorContext& ctx, Json& modified, int64_t generation, bool in_progress,
                 std::string_view ready, std::string_view reason, std::string_view message);

// After a failed attempt of a Backup or Restore (condition Ready False with `failed_reason`):
// how long to wait before the next one (`retries` attempts so far: 5 s each, at most a minute),
// from status.lastObservationTime; zero when it may run now or did not fail.
std::chrono::milliseconds RetryBackoff(OperatorContext& ctx, const Json& object,
                                       std::string_view failed_reason, int64_t retries);

// The Postgresql a Backup or Restore names (spec.serviceInstance: apiGroup
// postgresql.anynines.com, kind Postgresql in any case, name; the object's namespace) with the
// operator's record of it. kInvalid / kNotFound / kUnavailable with a message in the user's
// terms when it is no such kind, does not exist, or has no running servers yet.
struct ResolvedInstance {
  Json object;
  InstanceRecord record;
};
core::Result<ResolvedInstance> ResolveServiceInstance(OperatorContext& ctx, const Json& object);

// A field of an a8s object named together with the Klutch claim's field that Klutch's a8s
// Compositions fill it from, so that a message reads right in both places (the claim in the
// App Cluster shows the operator's words): "spec.backupName, or spec.backupRef of the claim".
std::string FieldOfClaim(std::string_view field, std::string_view claim_field);

}  // namespace klutch::a8s
