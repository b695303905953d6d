#include "a8s/restore_reconciler.h"

#include <fmt/format.h>

#include <system_error>

#include "a8s/a8s_names.h"
#include "a8s/backup_reconciler.h"
#include "engines/crypto.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::a8s {

namespace fs = std::filesystem;
using reconcile::Result;
using reconcile::Step;

struct RestoreReconciler::Pass {
  Json object;
  Json modified;
  ResolvedInstance instance;
  fs::path file;  // the backup's encrypted file
  std::string key() const { return machinery::Namespace(object) + "/" + machinery::Name(object); }
};

namespace {}  // namespace

core::Result<Result> RestoreReconciler::Reconcile(const reconcile::Request& request) {
  auto cached = ctx_.restores.indexer().Get(request.Key());
  if (cached == nullptr || machinery::IsBeingDeleted(*cached)) return Result::Done();
  Pass p{.object = *cached, .modified = *cached};
  // Done once: a finished restore is never run again (a new Restore runs it again).
  if (!machinery::GetString(p.object, {"status", "restoreID"}).empty()) return Result::Done();
  // A restore that cannot succeed (the backup does not decrypt) is over; one that failed
  // otherwise waits its turn before the next attempt.
  if (auto ready = reconcile::FindCondition(p.object, "Ready");
      ready && ready->status == "False" && ready->reason == "RestoreImpossible") {
    return Result::Done();
  }
  if (auto wait = RetryBackoff(ctx_, p.object, "RestoreFailed", 2); wait.count() > 0) {
    return Result::RequeueAfter(wait);
  }
  KLUTCH_RUN_STEP(ResolveInstance(p));
  KLUTCH_RUN_STEP(ResolveBackup(p));
  KLUTCH_RUN_STEP(MarkInProgress(p));
  return Restore(p);
}

Step RestoreReconciler::ResolveInstance(Pass& p) {
  auto instance = ResolveServiceInstance(ctx_, p.object);
  if (!instance.ok()) {
    const bool wait = !core::IsInvalid(instance.status());
    return Failed(ctx_, kRestores, p.object, p.modified,
                  wait ? "InstanceNotReady" : "UnsupportedInstance",
                  fmt::format("Restore {}: {}", p.key(), instance.status().message()),
                  wait ? std::chrono::seconds(5) : std::chrono::milliseconds(0));
  }
  p.instance = std::move(*instance);
  return reconcile::Continue();
}

// The Backup must be of the same Postgresql (the same UID: not a namesake made since) and done.
Step RestoreReconciler::ResolveBackup(Pass& p) {
  const std::string name = machinery::GetString(p.object, {"spec", "backupName"});
  const std::string ns = machinery::Namespace(p.object);
  auto backup = ctx_.backups.indexer().Get(ns + "/" + name);
  if (backup == nullptr) {
    return Failed(ctx_, kRestores, p.object, p.modified, "BackupNotFound",
                  fmt::format("Restore {}: there is no Backup {}/{} ({})", p.key(), ns, name,
                              FieldOfClaim("spec.backupName", "spec.backupRef")),
                  std::chrono::seconds(5));
  }
  const std::string id = machinery::GetString(*backup, {"status", "backupID"});
  if (id.empty()) {
    return Failed(ctx_, kRestores, p.object, p.modified, "BackupNotReady",
                  fmt::format("Restore {}: Backup {}/{} is not complete yet", p.key(), ns, name),
                  std::chrono::seconds(2));
  }
  p.file = BackupReconciler::File(ctx_, p.instance.record.number, id);
  std::error_code ec;
  if (!fs::exists(p.file, ec)) {
    return Failed(ctx_, kRestores, p.object, p.modified, "BackupNotOfInstance",
                  fmt::format("Restore {}: Backup {}/{} holds no data of Postgresql {}/{} (it was "
                              "taken of another instance, or that instance's backups are gone)",
                              p.key(), ns, name, ns, machinery::Name(p.instance.object)));
  }
  return reconcile::Continue();
}

Step RestoreReconciler::MarkInProgress(Pass& p) {
  if (reconcile::IsConditionTrue(p.object, "InProgress")) return reconcile::Continue();
  SetProgress(ctx_, p.modified, Generation(p.object), true, "False", "RestoreInProgress",
              fmt::format("restoring Backup {} into Postgresql {}",
                          machinery::GetString(p.object, {"spec", "backupName"}),
                          machinery::Name(p.instance.object)));
  KLUTCH_RETURN_IF_ERROR(WriteStatus(ctx_, kRestores, p.object, p.modified));
  return Result::Done();
}

core::Result<Result> RestoreReconciler::Restore(Pass& p) {
  const InstanceRecord& record = p.instance.record;
  const std::string uid = machinery::Uid(p.object);
  const fs::path plain = p.file.parent_path() / ("restore-" + uid + ".plain");
  core::Status status;
  {
    auto lock = ctx_.store.LockFor(record.id);
    core::MutexLock hold(*lock);
    std::error_code ec;
    fs::remove(plain, ec);
    status = engines::DecryptFile(p.file, plain, record.encryption_key);
    if (status.ok()) {
      status = ctx_.engine.Restore(record, AppliedLimits(record), plain, ctx_.supervisor);
    }
    fs::remove(plain, ec);
  }
  const std::string pg = fmt::format("{}/{}", machinery::Namespace(p.instance.object),
                                     machinery::Name(p.instance.object));
  p.modified["status"]["podToPoll"] = {
      {"ip", ctx_.engine_context.host}, {"namespacedName", pg + "-0"}, {"uid", record.id}};
  const int64_t generation = Generation(p.object);
  if (!status.ok()) {
    // A backup that does not decrypt (another key, a damaged file) will not later either.
    const bool again = !core::IsInvalid(status);
    const std::string message =
        fmt::format("Restore {}: restoring into Postgresql {} failed, its data is as before: {}{}",
                    p.key(), pg, status.message(), again ? "; trying again" : "");
    const char* reason = again ? "RestoreFailed" : "RestoreImpossible";
    SetProgress(ctx_, p.modified, generation, false, "False", reason, message);
    ctx_.events.Event(p.object, reconcile::kEventTypeWarning, reason, message);
    KLUTCH_RETURN_IF_ERROR(WriteStatus(ctx_, kRestores, p.object, p.modified));
    if (!again) return Result::Done();
    return Result::RequeueAfter(std::chrono::seconds(10));
  }
  p.modified["status"]["restoreID"] = uid;
  SetProgress(ctx_, p.modified, generation, false, "True", "Complete",
              fmt::format("Postgresql {} holds the backup's data", pg));
  ctx_.events.Event(p.object, reconcile::kEventTypeNormal, "Complete",
                    fmt::format("Postgresql {} holds the data of Backup {}", pg,
                                machinery::GetString(p.object, {"spec", "backupName"})));
  KLUTCH_RETURN_IF_ERROR(WriteStatus(ctx_, kRestores, p.object, p.modified));
  return Result::Done();
}

}  // namespace klutch::a8s
