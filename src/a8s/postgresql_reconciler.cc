#include "a8s/postgresql_reconciler.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "a8s/a8s_names.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::a8s {

using reconcile::Result;
using reconcile::Step;

struct PostgresqlReconciler::Pass {
  Json object;    // as read from the cache
  Json modified;  // its status as this pass leaves it
  PostgresqlSpec spec;
  InstanceRecord record;
  std::string key() const { return machinery::Namespace(object) + "/" + machinery::Name(object); }
};

core::Result<Result> PostgresqlReconciler::Reconcile(const reconcile::Request& request) {
  auto cached = ctx_.postgresqls.indexer().Get(request.Key());
  if (cached == nullptr) return Result::Done();
  Pass p{.object = *cached, .modified = *cached};
  if (machinery::IsBeingDeleted(p.object)) return Delete(p);
  KLUTCH_RUN_STEP(EnsureFinalizer(p));
  KLUTCH_RUN_STEP(ReadSpec(p));
  KLUTCH_RUN_STEP(WaitAfterFailedProvision(p));
  KLUTCH_RUN_STEP(EnsureRecord(p));
  KLUTCH_RUN_STEP(EnsureServers(p));
  KLUTCH_RUN_STEP(EnsurePrimary(p));
  return ReportStatus(p);
}

void PostgresqlReconciler::NotRunningYet(Pass& p) {
  if (machinery::Find(p.object, {"status", "clusterStatus"}) != nullptr) return;
  p.modified["status"]["clusterStatus"] = std::string(kNotRunning);
  p.modified["status"]["readyReplicas"] = 0;
}

// The annotation on the Postgresql, or on the Klutch claim it was composed for (the a8s
// compositions give it the claim's namespace and name).
bool PostgresqlReconciler::ForcedDeletion(const Pass& p) const {
  if (machinery::Annotation(p.object, kDeleteInUseAnnotation) == "true") return true;
  client::ResourceClient claims(ctx_.rest, kPostgresqlInstanceClaims,
                                machinery::Namespace(p.object));
  auto claim = claims.Get(machinery::Name(p.object));
  return claim.ok() && machinery::Annotation(*claim, kDeleteInUseAnnotation) == "true";
}

std::vector<std::string> PostgresqlReconciler::BindingsOf(const Pass& p) const {
  std::vector<std::string> out;
  const std::string ns = machinery::Namespace(p.object);
  for (const auto& b : ctx_.bindings.indexer().List()) {
    std::string target_ns = machinery::GetString(*b, {"spec", "instance", "namespace"});
    if (target_ns.empty()) target_ns = machinery::Namespace(*b);
    // Bindings of other namespaces are refused (service_binding_reconciler.h): not users.
    if (target_ns == ns && machinery::Namespace(*b) == ns &&
        machinery::GetString(*b, {"spec", "instance", "name"}) == machinery::Name(p.object) &&
        machinery::GetString(*b, {"spec", "instance", "kind"}) == "Postgresql") {
      out.push_back(machinery::Name(*b));
    }
  }
  return out;
}

// Deleting: wait while bindings use it (their applications would lose their database without
// a word), then stop its servers and remove its files, record and backups.
core::Result<Result> PostgresqlReconciler::Delete(Pass& p) {
  if (!machinery::HasFinalizer(p.object, kFinalizer)) return Result::Done();
  if (auto users = BindingsOf(p); !users.empty() && !ForcedDeletion(p)) {
    std::vector<std::string> quoted;
    for (const auto& u : users) quoted.push_back(fmt::format("\"{}\"", u));
    return Failed(
        ctx_, kPostgresqls, p.object, p.modified, "InUse",
        fmt::format("Postgresql {} is still used by ServiceBinding {}: it is deleted once {} gone "
                    "(delete {} first), or annotate it or its claim with {}=true to delete it and "
                    "its data anyway",
                    p.key(), core::Join(quoted, ", "),
                    users.size() == 1 ? "that binding is" : "those bindings are",
                    users.size() == 1 ? "it" : "them", kDeleteInUseAnnotation),
        std::chrono::seconds(10));
  }
  if (auto record = ctx_.store.Get(machinery::Uid(p.object))) {
    auto lock = ctx_.store.LockFor(record->id);
    core::MutexLock hold(*lock);
    if (record->provisioned && !ctx_.store.Started(record->id)) {
      // Servers a previous operator left running are adopted first, so that they stop too.
      (void)ctx_.engine.Start(*record, AppliedLimits(*record), ctx_.supervisor);
    }
    for (int node = 0; node < static_cast<int>(record->ports.size()); ++node) {
      ctx_.supervisor.Stop(record->id, node);
    }
    if (ctx_.limiter != nullptr) engines::RemoveNodeLimits(*ctx_.limiter, *record);
    KLUTCH_RETURN_IF_ERROR(ctx_.store.Remove(*record));
    core::MutexLock failed_lock(mu_);
    failed_.erase(record->id);
    gone_since_.erase(record->id);
    std::erase_if(not_streaming_since_,
                  [&](const auto& entry) { return entry.first.first == record->id; });
    KLUTCH_LOG(kInfo, "operator", "Postgresql {}: servers stopped, data and backups removed",
               p.key());
  }
  KLUTCH_RETURN_IF_ERROR(SetFinalizer(ctx_, kPostgresqls, p.object, false).status());
  return Result::Done();
}

Step PostgresqlReconciler::EnsureFinalizer(Pass& p) {
  KLUTCH_ASSIGN_OR_RETURN(bool wrote, SetFinalizer(ctx_, kPostgresqls, p.object, true));
  // The write brings the object back with the finalizer; the next pass goes on.
  if (wrote) return Result::Done();
  return reconcile::Continue();
}

// The spec as the engine will run it; a spec that cannot run is the user's to fix.
Step PostgresqlReconciler::ReadSpec(Pass& p) {
  const Json* spec = machinery::Find(p.object, {"spec"});
  auto parsed = ParsePostgresqlSpec(spec ? *spec : Json::object());
  if (!parsed.ok()) {
    NotRunningYet(p);
    KeepRunning(p);
    return Failed(ctx_, kPostgresqls, p.object, p.modified, "InvalidSpec",
                  fmt::format("Postgresql {} cannot run: {}", p.key(), parsed.status().message()));
  }
  if (auto st = ctx_.engine.ValidateParameters(parsed->parameters); !st.ok()) {
    NotRunningYet(p);
    KeepRunning(p);
    return Failed(ctx_, kPostgresqls, p.object, p.modified, "InvalidParameter",
                  fmt::format("Postgresql {} cannot run: {}", p.key(), InSpecTerms(st.message())));
  }
  p.spec = std::move(*parsed);
  return reconcile::Continue();
}

// A spec the operator refuses does not stop what runs: the servers of the spec last applied are
// started (after an operator restart) and keep one primary.
void PostgresqlReconciler::KeepRunning(Pass& p) {
  auto record = ctx_.store.Get(machinery::Uid(p.object));
  if (!record || !record->provisioned) return;
  p.record = std::move(*record);
  if (!EnsureStarted(p).ok()) return;
  Step primary = EnsurePrimary(p);
  if (primary.ends()) (void)std::move(primary).outcome();
}

// The record as saved now (other reconcilers of the instance save it too); the caller holds the
// instance's lock.
core::Status PostgresqlReconciler::Refresh(Pass& p) {
  auto record = ctx_.store.Get(p.record.id);
  if (!record) return core::Internal("the record of " + p.key() + " is gone");
  p.record = std::move(*record);
  return core::Status::Ok();
}

std::chrono::nanoseconds PostgresqlReconciler::PrimaryGoneFor(const std::string& uid) {
  core::MutexLock lock(mu_);
  auto [it, added] = gone_since_.emplace(uid, ctx_.clock.MonotonicNow());
  return ctx_.clock.MonotonicNow() - it->second;
}

void PostgresqlReconciler::ForgetPrimaryGone(const std::string& uid) {
  core::MutexLock lock(mu_);
  gone_since_.erase(uid);
}

// A spec whose servers would not start is not tried again on every status write: only once it
// changed, or a minute later.
Step PostgresqlReconciler::WaitAfterFailedProvision(Pass& p) {
  core::MutexLock lock(mu_);
  auto it = failed_.find(machinery::Uid(p.object));
  if (it == failed_.end()) return reconcile::Continue();
  auto since = ctx_.clock.MonotonicNow() - it->second.at;
  if (it->second.generation == Generation(p.object) && since < std::chrono::minutes(1)) {
    return Result::RequeueAfter(
        std::chrono::ceil<std::chrono::milliseconds>(std::chrono::minutes(1) - since));
  }
  failed_.erase(it);
  return reconcile::Continue();
}

Step PostgresqlReconciler::EnsureRecord(Pass& p) {
  const std::string uid = machinery::Uid(p.object);
  if (auto record = ctx_.store.Get(uid)) {
    p.record = std::move(*record);
    return reconcile::Continue();
  }
  // A new record would mean new, empty servers beside the data of the old ones.
  if (auto unreadable = ctx_.store.Unreadable(uid)) {
    return Failed(ctx_, kPostgresqls, p.object, p.modified, "RecordUnreadable",
                  fmt::format("Postgresql {}: the operator's record of its servers does not load "
                              "({}); nothing is started or created until it does: repair the "
                              "file and restart the operator",
                              p.key(), *unreadable),
                  std::chrono::minutes(5));
  }
  KLUTCH_ASSIGN_OR_RETURN(
      p.record, ctx_.store.Create(uid, machinery::Namespace(p.object), machinery::Name(p.object),
                                  p.spec.replicas, ctx_.engine_context.host));
  return reconcile::Continue();
}

// Builds the servers the first time (initdb, standbys from pg_basebackup), or applies a changed
// spec to running ones.
Step PostgresqlReconciler::EnsureServers(Pass& p) {
  if (p.record.provisioned) {
    KLUTCH_RETURN_IF_ERROR(EnsureStarted(p));
    if (p.record.applied_spec == p.object["spec"]) return reconcile::Continue();
    // A change the servers refused (rolled back) is not tried again until the spec changes.
    if (p.record.applied_generation == Generation(p.object)) return reconcile::Continue();
    return ApplyChange(p);
  }
  // First say so: the servers take a few seconds, and until they run nothing is Ready.
  if (auto ready = reconcile::FindCondition(p.object, "Ready");
      !ready || ready->status != "False" || ready->reason != "Provisioning") {
    p.modified["status"]["clusterStatus"] = std::string(kNotRunning);
    p.modified["status"]["readyReplicas"] = 0;
    reconcile::SetCondition(
        p.modified,
        {.type = "Ready",
         .status = "False",
         .observed_generation = Generation(p.object),
         .reason = "Provisioning",
         .message = fmt::format("starting {} PostgreSQL server(s)", p.spec.replicas)},
        ctx_.clock);
    KLUTCH_RETURN_IF_ERROR(WriteStatus(ctx_, kPostgresqls, p.object, p.modified));
    return Result::Done();  // the status write brings it back
  }
  auto lock = ctx_.store.LockFor(p.record.id);
  core::MutexLock hold(*lock);
  KLUTCH_RETURN_IF_ERROR(Refresh(p));
  p.record.parameters = p.spec.parameters;
  if (auto st = ctx_.engine.Provision(p.record, p.spec.limits, ctx_.supervisor); !st.ok()) {
    KLUTCH_LOG(kWarn, "operator", "Postgresql {}: provisioning failed: {}", p.key(), st.message());
    // Nothing half-made stays: the servers stop, their files and the record go.
    for (int node = 0; node < static_cast<int>(p.record.ports.size()); ++node) {
      ctx_.supervisor.Stop(p.record.id, node);
    }
    KLUTCH_RETURN_IF_ERROR(ctx_.store.Remove(p.record));
    {
      core::MutexLock failed_lock(mu_);
      failed_[p.record.id] = {Generation(p.object), ctx_.clock.MonotonicNow()};
    }
    return Failed(ctx_, kPostgresqls, p.object, p.modified, "ProvisionFailed",
                  fmt::format("Postgresql {}: PostgreSQL did not start with this spec: {}; "
                              "nothing was kept; it is tried again when the spec changes or in "
                              "a minute",
                              p.key(), InSpecTerms(st.message())),
                  std::chrono::seconds(60));
  }
  p.record.applied_spec = p.object["spec"];
  p.record.applied_generation = Generation(p.object);
  p.record.provisioned = true;
  KLUTCH_RETURN_IF_ERROR(ctx_.store.Save(p.record));
  ctx_.store.SetStarted(p.record.id);
  ctx_.events.Event(
      p.object, reconcile::kEventTypeNormal, "Provisioned",
      fmt::format("{} PostgreSQL {} server(s) running", p.spec.replicas, ctx_.machine_version));
  return reconcile::Continue();
}

// After the operator (re)started: the servers a previous operator left running are adopted
// through their PID files, the others started, as the spec last applied has them.
core::Status PostgresqlReconciler::EnsureStarted(Pass& p) {
  if (ctx_.store.Started(p.record.id)) return core::Status::Ok();
  auto lock = ctx_.store.LockFor(p.record.id);
  core::MutexLock hold(*lock);
  KLUTCH_RETURN_IF_ERROR(ctx_.engine.Start(p.record, AppliedLimits(p.record), ctx_.supervisor));
  ctx_.store.SetStarted(p.record.id);
  return core::Status::Ok();
}

// A changed spec on running servers: refused when it cannot be done (fewer replicas, another
// version); else the new settings (and standbys) are applied, and what the servers refuse is
// undone, leaving the instance as it ran.
Step PostgresqlReconciler::ApplyChange(Pass& p) {
  auto before = ParsePostgresqlSpec(p.record.applied_spec);
  if (before.ok()) {
    if (auto st = CheckSpecChange(*before, p.spec); !st.ok()) {
      KeepRunning(p);
      return Failed(
          ctx_, kPostgresqls, p.object, p.modified, "ChangeRefused",
          fmt::format("Postgresql {} keeps running as it was: {}", p.key(), st.message()));
    }
  }
  engines::PlanLimits from = before.ok() ? before->limits : AppliedLimits(p.record);
  auto lock = ctx_.store.LockFor(p.record.id);
  core::MutexLock hold(*lock);
  KLUTCH_RETURN_IF_ERROR(Refresh(p));
  InstanceRecord old = p.record;
  KLUTCH_RETURN_IF_ERROR(ctx_.store.AddPorts(p.record, p.spec.replicas, ctx_.engine_context.host));
  p.record.parameters = p.spec.parameters;
  auto st = ctx_.engine.Update(p.record, from, p.spec.limits, ctx_.supervisor);
  if (!st.ok()) {
    // Back to what ran: the old settings on the old nodes; added standbys go, with their
    // files and ports.
    for (size_t node = old.ports.size(); node < p.record.ports.size(); ++node) {
      ctx_.supervisor.Stop(old.id, static_cast<int>(node));
      std::error_code ec;
      std::filesystem::remove_all(ctx_.engine_context.NodeDir(old.number, static_cast<int>(node)),
                                  ec);
    }
    engines::PlanLimits tried = p.spec.limits;
    tried.nodes = static_cast<int>(old.ports.size());
    auto back = ctx_.engine.Update(old, tried, from, ctx_.supervisor);
    old.applied_generation = Generation(p.object);
    KLUTCH_RETURN_IF_ERROR(ctx_.store.Save(old));
    ctx_.store.ReleasePorts(
        std::vector<int>(p.record.ports.begin() + static_cast<std::ptrdiff_t>(old.ports.size()),
                         p.record.ports.end()));
    p.record = old;
    return Failed(ctx_, kPostgresqls, p.object, p.modified, "ChangeFailed",
                  fmt::format("Postgresql {}: PostgreSQL refused the new settings ({}); {}",
                              p.key(), InSpecTerms(st.message()),
                              back.ok() ? "the previous settings are back"
                                        : "going back failed too: " + back.message()));
  }
  p.record.applied_spec = p.object["spec"];
  p.record.applied_generation = Generation(p.object);
  KLUTCH_RETURN_IF_ERROR(ctx_.store.Save(p.record));
  ctx_.events.Event(p.object, reconcile::kEventTypeNormal, "Updated",
                    "the servers run the new spec");
  return reconcile::Continue();
}

// A cluster keeps exactly one primary. When its process is gone (it is never restarted in
// place: engines' failover), the standby that has received the most WAL is promoted; with
// synchronous commits it has every acknowledged one. The choice is saved before the promotion,
// so a restarted operator finishes it instead of starting a second primary.
Step PostgresqlReconciler::EnsurePrimary(Pass& p) {
  const engines::PlanLimits limits = AppliedLimits(p.record);
  if (limits.nodes < 2) return reconcile::Continue();
  const bool primary_gone = !ctx_.supervisor.Alive(p.record.id, p.record.primary);
  if (!primary_gone) ForgetPrimaryGone(p.record.id);
  if (!primary_gone && !p.record.promotion_pending && p.record.rejoining.empty()) {
    KLUTCH_RETURN_IF_ERROR(FindStrayStandbys(p));
    if (p.record.rejoining.empty()) return reconcile::Continue();
  }
  auto lock = ctx_.store.LockFor(p.record.id);
  core::MutexLock hold(*lock);
  KLUTCH_RETURN_IF_ERROR(Refresh(p));
  if (primary_gone && !p.record.promotion_pending) {
    // Every standby that should answer gets a few seconds to: the one that does not may hold
    // the only copy of an acknowledged commit. After that, the best of those answering.
    const bool every_standby = PrimaryGoneFor(p.record.id) < std::chrono::seconds(10);
    auto chosen = ctx_.engine.ChooseNewPrimary(p.record, limits, every_standby);
    if (!chosen.ok()) {
      return Failed(ctx_, kPostgresqls, p.object, p.modified, "NoPrimary",
                    fmt::format("Postgresql {}: its primary (server {}) is gone and no standby can "
                                "take over yet: {}",
                                p.key(), p.record.primary, chosen.status().message()),
                    std::chrono::seconds(1));
    }
    ForgetPrimaryGone(p.record.id);
    const int old = p.record.primary;
    p.record.rejoining.push_back(old);
    p.record.primary = *chosen;
    p.record.promotion_pending = true;
    KLUTCH_RETURN_IF_ERROR(ctx_.store.Save(p.record));
    ctx_.events.Event(
        p.object, reconcile::kEventTypeWarning, "Failover",
        fmt::format("the primary (server {}) is gone; server {} takes over", old, *chosen));
  }
  if (p.record.promotion_pending) {
    KLUTCH_RETURN_IF_ERROR(ctx_.engine.Promote(p.record, limits, ctx_.supervisor));
    p.record.promotion_pending = false;
    KLUTCH_RETURN_IF_ERROR(ctx_.store.Save(p.record));
    KLUTCH_LOG(kInfo, "operator", "Postgresql {}: server {} is the primary", p.key(),
               p.record.primary);
  }
  KLUTCH_RETURN_IF_ERROR(RejoinFormerPrimaries(p));
  return reconcile::Continue();
}

// A standby that runs as a primary itself is rebuilt at once (clients that ask for a writable
// server could write to either); one that answers but receives no WAL for this long is too (a
// standby whose history went past the promoted one's never streams from it).
constexpr std::chrono::seconds kNotStreamingGrace(30);

core::Status PostgresqlReconciler::FindStrayStandbys(Pass& p) {
  const engines::PlanLimits limits = AppliedLimits(p.record);
  std::vector<std::pair<int, std::string>> strays;
  for (int node = 0; node < limits.nodes && node < static_cast<int>(p.record.ports.size());
       ++node) {
    if (node == p.record.primary) continue;
    const auto state = ctx_.engine.InspectStandby(p.record, limits, node);
    core::MutexLock lock(mu_);
    const auto key = std::pair(p.record.id, node);
    if (!state.answers || state.streaming) {
      not_streaming_since_.erase(key);  // one that is down is the supervisor's
      continue;
    }
    if (state.primary) {
      strays.emplace_back(node, fmt::format("server {} runs as a primary beside server {}", node,
                                            p.record.primary));
      continue;
    }
    // Replaying its own WAL (after a restart, before it streams again) is progress too.
    auto& seen = not_streaming_since_[key];
    if (seen.replayed != state.replayed || seen.since == core::MonoTime{}) {
      seen = {ctx_.clock.MonotonicNow(), state.replayed};
      continue;
    }
    if (ctx_.clock.MonotonicNow() - seen.since >= kNotStreamingGrace) {
      strays.emplace_back(
          node, fmt::format("server {} has neither received nor replayed WAL for {} s (its "
                            "history went past the primary's)",
                            node, kNotStreamingGrace.count()));
    }
  }
  if (strays.empty()) return core::Status::Ok();
  auto lock = ctx_.store.LockFor(p.record.id);
  core::MutexLock hold(*lock);
  KLUTCH_RETURN_IF_ERROR(Refresh(p));
  for (const auto& [node, why] : strays) {
    if (node == p.record.primary ||
        std::count(p.record.rejoining.begin(), p.record.rejoining.end(), node) > 0) {
      continue;
    }
    p.record.rejoining.push_back(node);
    ctx_.events.Event(p.object, reconcile::kEventTypeWarning, "StandbyDiverged",
                      fmt::format("{}: it is rebuilt from the primary, its data kept aside", why));
    KLUTCH_LOG(kWarn, "operator", "Postgresql {}: {}; rebuilding it", p.key(), why);
  }
  {
    core::MutexLock lock(mu_);
    for (const auto& [node, why] : strays) not_streaming_since_.erase({p.record.id, node});
  }
  return ctx_.store.Save(p.record);
}

// Former primaries and stray standbys become standbys of the primary, their data from a base
// backup of it; what they held is kept aside first (a former primary may have commits no
// standby received, with synchronousCommit off). The caller holds the instance's lock.
core::Status PostgresqlReconciler::RejoinFormerPrimaries(Pass& p) {
  const engines::PlanLimits limits = AppliedLimits(p.record);
  auto has = [](const std::vector<int>& list, int node) {
    return std::find(list.begin(), list.end(), node) != list.end();
  };
  while (!p.record.rejoining.empty()) {
    const int node = p.record.rejoining.front();
    if (!has(p.record.set_aside, node)) {
      KLUTCH_ASSIGN_OR_RETURN(std::filesystem::path kept,
                              ctx_.engine.SetAside(p.record, node, ctx_.supervisor));
      p.record.set_aside.push_back(node);
      KLUTCH_RETURN_IF_ERROR(ctx_.store.Save(p.record));
      if (!kept.empty()) {
        ctx_.events.Event(p.object, reconcile::kEventTypeNormal, "DataSetAside",
                          fmt::format("the data server {} had is kept in {} until it is rebuilt "
                                      "again or the Postgresql goes",
                                      node, kept.string()));
      }
    }
    KLUTCH_RETURN_IF_ERROR(ctx_.engine.Rejoin(p.record, limits, node, ctx_.supervisor));
    p.record.rejoining.erase(p.record.rejoining.begin());
    std::erase(p.record.set_aside, node);
    KLUTCH_RETURN_IF_ERROR(ctx_.store.Save(p.record));
    ctx_.events.Event(
        p.object, reconcile::kEventTypeNormal, "Rejoined",
        fmt::format("server {} follows the primary (server {}) again", node, p.record.primary));
  }
  return core::Status::Ok();
}

core::Result<Result> PostgresqlReconciler::ReportStatus(Pass& p) {
  const engines::PlanLimits limits = AppliedLimits(p.record);
  int ready = 0;
  for (int node = 0; node < limits.nodes && node < static_cast<int>(p.record.ports.size());
       ++node) {
    engines::NodeSpec spec = ctx_.engine.Node(p.record, limits, node);
    if (spec.ready && spec.ready()) ++ready;
  }
  std::string quota;
  // An operation in progress holds the lock; its own pass reports afterwards.
  std::string unlimited;
  if (auto lock = ctx_.store.LockFor(p.record.id); lock->TryLock()) {
    quota = ctx_.engine.EnforceQuota(p.record, limits);
    if (ctx_.limiter != nullptr) {
      if (auto st = engines::LimitNodes(*ctx_.limiter, ctx_.engine, p.record, limits); !st.ok()) {
        unlimited = st.message();
      }
    }
    lock->Unlock();
  }
  if (!unlimited.empty()) {
    KLUTCH_LOG(kWarn, "operator", "Postgresql {}: CPU and memory limits: {}", p.key(), unlimited);
  }
  const bool running = ready == limits.nodes;
  Json& status = p.modified["status"];
  status["readyReplicas"] = ready;
  status["clusterStatus"] = std::string(running ? kRunning : kNotRunning);
  status["runningVersion"] = ctx_.machine_version;
  const int64_t generation = Generation(p.object);
  std::string problem = !quota.empty() ? quota
                        : running      ? ""
                                  : fmt::format("{} of {} servers answer", ready, limits.nodes);
  if (problem.empty()) {
    status.erase("error");
  } else {
    status["error"] = problem;
  }
  reconcile::SetCondition(p.modified,
                          {.type = "Ready",
                           .status = problem.empty() ? "True" : "False",
                           .observed_generation = generation,
                           .reason = problem.empty()  ? "Running"
                                     : !quota.empty() ? "DiskQuotaExceeded"
                                                      : "ServersDown",
                           .message = problem},
                          ctx_.clock);
  if (p.spec.requested_version != ctx_.machine_version) {
    const std::string message = fmt::format(
        "asked for PostgreSQL {}; this machine's servers run PostgreSQL {}, the only major version "
        "it has: use version {} to match, or a Control Plane with anynines' a8s operator for {}",
        p.spec.requested_version, ctx_.machine_version, ctx_.machine_version,
        p.spec.requested_version);
    if (!reconcile::IsConditionTrue(p.object, "VersionSubstituted")) {
      ctx_.events.Event(p.object, reconcile::kEventTypeWarning, "VersionSubstituted", message);
    }
    // For the claim too (the a8s-postgresql Composition copies it into status.managed), in
    // words that hold there, where only 13 and 14 may be asked for.
    status["versionSubstituted"] = fmt::format(
        "runs PostgreSQL {} in place of the requested {}: the only major version this Control "
        "Plane's machine has (anynines' a8s operator would run {})",
        ctx_.machine_version, p.spec.requested_version, p.spec.requested_version);
    reconcile::SetCondition(p.modified,
                            {.type = "VersionSubstituted",
                             .status = "True",
                             .observed_generation = generation,
                             .reason = fmt::format("RunsPostgreSQL{}", ctx_.machine_version),
                             .message = message},
                            ctx_.clock);
  } else {
    status.erase("versionSubstituted");
    reconcile::RemoveCondition(p.modified, "VersionSubstituted");
  }
  KLUTCH_RETURN_IF_ERROR(WriteStatus(ctx_, kPostgresqls, p.object, p.modified));
  return Result::RequeueAfter(ctx_.status_interval);
}

}  // namespace klutch::a8s
