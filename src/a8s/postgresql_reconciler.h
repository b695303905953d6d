// PostgresqlReconciler (klutch-operator-postgresql): a Postgresql (postgresql.anynines.com/v1beta3)
// becomes a PostgreSQL cluster of local servers on the engine (engines/data_service.h): one, or a
// primary and two streaming standbys. A pass reads the spec (refusing what cannot run, naming the
// field), keeps a record of the instance (ports, passwords), provisions it or applies a changed
// spec (rolling back what the servers refuse), keeps one primary (when it dies, the standby that
// received the most WAL is promoted, the other follows it, the old one rejoins as a standby), and
// reports status.clusterStatus, readyReplicas,
// runningVersion and the conditions Ready and VersionSubstituted. A Postgresql with
// ServiceBindings is deleted only once they are gone (ADR 0014's rule on the a8s path).
// Thread-safe.
#pragma once

#include <map>
#include <string>

#include "a8s/operator_context.h"
#include "core/sync.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::a8s {

class PostgresqlReconciler final : public reconcile::Reconciler {
 public:
  explicit PostgresqlReconciler(OperatorContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one pass share

  core::Result<reconcile::Result> Delete(Pass& p);
  reconcile::Step EnsureFinalizer(Pass& p);
  reconcile::Step ReadSpec(Pass& p);
  reconcile::Step WaitAfterFailedProvision(Pass& p);
  reconcile::Step EnsureRecord(Pass& p);
  reconcile::Step EnsureServers(Pass& p);
  core::Status EnsureStarted(Pass& p);
  reconcile::Step ApplyChange(Pass& p);
  reconcile::Step EnsurePrimary(Pass& p);
  core::Status Refresh(Pass& p);
  void KeepRunning(Pass& p);
  // How long the primary of `uid` has been seen gone (0 the first time).
  std::chrono::nanoseconds PrimaryGoneFor(const std::string& uid);
  void ForgetPrimaryGone(const std::string& uid);
  // Standbys that cannot follow the primary (a second primary, or one whose history diverged)
  // join the rejoining list; the caller then rebuilds them.
  core::Status FindStrayStandbys(Pass& p);
  core::Status RejoinFormerPrimaries(Pass& p);
  core::Result<reconcile::Result> ReportStatus(Pass& p);
  // A Postgresql whose servers never ran says so in the columns `kubectl get` shows.
  static void NotRunningYet(Pass& p);
  // Whether the user asked to delete it even while in use.
  bool ForcedDeletion(const Pass& p) const;
  // The ServiceBindings that name this Postgresql (their names: same namespace).
  std::vector<std::string> BindingsOf(const Pass& p) const;

  OperatorContext& ctx_;
  // Postgresqls whose servers would not start, by UID: the generation and when; tried again
  // once the spec changes or a minute later, not on every status write.
  struct FailedProvision {
    int64_t generation = 0;
    core::MonoTime at;
  };
  core::Mutex mu_;
  std::map<std::string, FailedProvision> failed_ GUARDED_BY(mu_);
  std::map<std::string, core::MonoTime> gone_since_ GUARDED_BY(mu_);  // primary gone, by UID
  // Standbys seen answering but not streaming (by UID and node): since when, with this much
  // WAL replayed.
  struct NotStreaming {
    core::MonoTime since{};
    int64_t replayed = 0;
  };
  std::map<std::pair<std::string, int>, NotStreaming> not_streaming_since_ GUARDED_BY(mu_);
};

}  // namespace klutch::a8s
