#include "providers/anynines/restore_reconciler.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "client/discovery.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "core/random.h"
#include "core/strings.h"
#include "machinery/merge_patch.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"
#include "reconcile/step.h"

namespace klutch::providers::anynines {

using machinery::Find;
using machinery::GetString;
using reconcile::Request;
using reconcile::Result;
using std::chrono::milliseconds;

// --- Restore (§6.7) ---------------------------------------------------------------------------

// What one pass knows of the restore beyond the MR.
struct RestoreReconciler::Job {
  std::string claim_ns, backup_name, instance_id;
  int64_t backup_id = 0;
  int64_t id = 0;  // the backup manager's restore ID
  RestoreInfo info;
  bool known = false;    // a status the backup manager documents
  std::string previous;  // status.atProvider.state before this pass
};

core::Result<Result> RestoreReconciler::Run(Pass& p) {
  Job job{.claim_ns = GetString(p.mr, {"metadata", "labels", kLabelClaimNamespace}),
          .backup_name = GetString(p.mr, {"spec", "forProvider", "backupName"}),
          .instance_id = GetString(p.mr, {"status", "atProvider", "instanceId"})};
  KLUTCH_RUN_STEP(ResolveBackup(p, job));
  std::optional<int64_t> id = IntAnnotation(p.mr, kAnnotationRestoreId);
  if (!id) id = IntAt(p.mr, {"status", "atProvider", "restoreId"});
  if (!id) return StartRestore(p, job);
  job.id = *id;
  KLUTCH_RUN_STEP(ObserveRestore(p, job));
  if (p.deleting) return DeleteRestore(p, job);
  return ReportState(p, job);
}

// The instance and backup IDs, from the backup MR once it has them (kept in status.atProvider).
reconcile::Step RestoreReconciler::ResolveBackup(Pass& p, Job& job) {
  std::optional<int64_t> backup_id = IntAt(p.mr, {"status", "atProvider", "backupId"});
  if (!job.instance_id.empty() && backup_id) {
    job.backup_id = *backup_id;
    return reconcile::Continue();
  }
  if (p.deleting) return Finalize(p);
  auto backup = FindOne(*ctx_.backups, kByClaim, job.claim_ns + "/" + job.backup_name, "backup",
                        job.backup_name, job.claim_ns, "spec.backupRef");
  if (!backup.ok()) return Fail(p, backup.status(), "CannotObserveExternalResource");
  if (auto same = SameServiceType(p.mr, **backup, "backup", job.backup_name); !same.ok()) {
    return Fail(p, same, "CannotObserveExternalResource");
  }
  job.instance_id = GetString(**backup, {"status", "atProvider", "instanceId"});
  backup_id = IntAt(**backup, {"status", "atProvider", "id"});
  if (job.instance_id.empty() || !backup_id) {
    return Fail(p, UserError("backup is not ready"), "CannotObserveExternalResource");
  }
  job.backup_id = *backup_id;
  AtProvider(p.mr)["instanceId"] = job.instance_id;
  AtProvider(p.mr)["backupId"] = job.backup_id;
  return CommitStatus(p);
}

// Starts the restore once across lost answers (CreateOnce), never adopting another MR's.
core::Result<Result> RestoreReconciler::StartRestore(Pass& p, Job& job) {
  if (p.deleting) return Finalize(p);
  if (!p.policies.create) {
    SetReady(p.mr, "Creating", "management policies do not allow starting the restore", ctx_.clock);
    return Steady(p);
  }
  BackupClient& manager = *p.conn.backup;
  const std::string& instance_id = job.instance_id;
  const int64_t backup_id = job.backup_id;
  const std::string uid = machinery::Uid(p.mr);
  bool adopted = false;
  auto created = CreateOnce(
      p, kAnnotationRestorePending, kAnnotationRestoreId,
      [&]() -> core::Result<Json> {
        // Only restores of this backup are candidates.
        KLUTCH_ASSIGN_OR_RETURN(Json all, manager.ListRestores(instance_id));
        Json mine = Json::array();
        if (all.is_array()) {
          for (const Json& r : all) {
            auto of = IntField(r, "backup_id");
            if (!of || *of == backup_id) mine.push_back(r);
          }
        }
        return mine;
      },
      [&] { return manager.CreateRestore(instance_id, backup_id); },
      [&](int64_t candidate) {
        for (const auto& other : ctx_.restores->indexer().List()) {
          if (machinery::Uid(*other) == uid ||
              GetString(*other, {"status", "atProvider", "instanceId"}) != instance_id) {
            continue;
          }
          if (IntAnnotation(*other, kAnnotationRestoreId) == candidate ||
              IntAt(*other, {"status", "atProvider", "restoreId"}) == candidate) {
            return true;
          }
        }
        return false;
      },
      adopted);
  if (!created.ok()) return Fail(p, created.status(), "CannotCreateExternalResource");
  AtProvider(p.mr)["restoreId"] = *created;
  Event(p, reconcile::kEventTypeNormal, "CreatedExternalResource",
        fmt::format("the backup manager started restore {} of backup {} into instance {}", *created,
                    backup_id, instance_id));
  SetReady(p.mr, "Creating", "the backup manager is restoring the backup", ctx_.clock);
  KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
  return Fast(p);
}

// The backup manager's view, in status.atProvider; a restore it no longer knows is reported.
reconcile::Step RestoreReconciler::ObserveRestore(Pass& p, Job& job) {
  Json& at = AtProvider(p.mr);
  at["restoreId"] = job.id;
  auto info = p.conn.backup->GetRestore(job.instance_id, job.id);
  if (!info.ok()) {
    if (IsGoneOrNotFound(info.status())) {
      if (p.deleting) return Finalize(p);
      SetReady(p.mr, "Unavailable", "Restore has been deleted", ctx_.clock);
      return Steady(p);
    }
    return Fail(p, info.status(), "CannotObserveExternalResource");
  }
  job.info = *std::move(info);
  const std::string& s = job.info.status;
  job.known = s == kBackupQueued || s == kBackupRunning || s == kBackupDone || s == kBackupFailed ||
              s == kBackupDeleted;
  job.previous = GetString(at, {"state"});
  if (job.known) at["state"] = s;
  for (const auto& [key, value] : {std::pair{"triggeredAt", &job.info.triggered_at},
                                   std::pair{"finishedAt", &job.info.finished_at}}) {
    if (value->empty()) {
      at.erase(key);
    } else {
      at[key] = *value;
    }
  }
  return reconcile::Continue();
}

// A restore cannot be stopped: a deleted one stays until it has finished.
core::Result<Result> RestoreReconciler::DeleteRestore(Pass& p, const Job& job) {
  const std::string& s = job.info.status;
  if (s != kBackupQueued && s != kBackupRunning) return Finalize(p);
  std::string message = fmt::format("cannot delete restore that is still {}", s);
  SetReady(p.mr, "Deleting", message, ctx_.clock);
  SetSynced(p.mr, false, message, ctx_.clock);
  KLUTCH_RETURN_IF_ERROR(CommitStatus(p));
  Event(p, reconcile::kEventTypeWarning, "CannotDeleteExternalResource", message);
  failures_.Reset(p.key);
  return Result::RequeueAfter(fast_.Next(p.key));
}

// Ready from the restore's status, an Event when it turned done or failed.
core::Result<Result> RestoreReconciler::ReportState(Pass& p, const Job& job) {
  const std::string& s = job.info.status;
  if (job.known && s != job.previous) {
    if (s == kBackupDone) {
      Event(p, reconcile::kEventTypeNormal, "RestoreDone",
            fmt::format("restore {} completed successfully", job.id));
    } else if (s == kBackupFailed) {
      Event(p, reconcile::kEventTypeWarning, "RestoreFailed",
            fmt::format("the backup manager reports restore {} failed", job.id));
    }
  }
  if (s == kBackupQueued || s == kBackupRunning) {
    SetReady(p.mr, "Creating", fmt::format("the restore is {}", s), ctx_.clock);
    return Fast(p);
  }
  if (s == kBackupDone) {
    SetReady(p.mr, "Available", "Restore completed successfully", ctx_.clock);
  } else if (s == kBackupFailed) {
    SetReady(p.mr, "Unavailable", "Restore has failed", ctx_.clock);
  } else if (s == kBackupDeleted) {
    SetReady(p.mr, "Unavailable", "Restore has been deleted", ctx_.clock);
  } else {
    return Fail(p,
                UserError(fmt::format(
                    "cannot determine state of restore: a9s Backup Manager returned unknown "
                    "status \"{}\"",
                    s)),
                "CannotObserveExternalResource");
  }
  return Steady(p);
}

}  // namespace klutch::providers::anynines
