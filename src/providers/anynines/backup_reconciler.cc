#include "providers/anynines/backup_reconciler.h"

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

// --- Backup (§6.6) ----------------------------------------------------------------------------

// What one pass knows of the backup beyond the MR.
struct BackupReconciler::Job {
  std::string claim_ns, instance_name, instance_id;
  int64_t id = 0;  // the backup manager's backup ID
  BackupInfo info;
  std::string previous;  // status.atProvider.status before this pass
};

core::Result<Result> BackupReconciler::Run(Pass& p) {
  Job job{.claim_ns = GetString(p.mr, {"metadata", "labels", kLabelClaimNamespace}),
          .instance_name = GetString(p.mr, {"spec", "forProvider", "instanceName"}),
          .instance_id = GetString(p.mr, {"status", "atProvider", "instanceId"})};
  KLUTCH_RUN_STEP(ResolveInstance(p, job));
  std::optional<int64_t> id = IntAnnotation(p.mr, kAnnotationBackupId);
  if (!id) id = IntAt(p.mr, {"status", "atProvider", "id"});
  if (!id) return TakeBackup(p, job);
  job.id = *id;
  KLUTCH_RUN_STEP(ObserveBackup(p, job));
  if (p.deleting) return DeleteBackup(p, job);
  return ReportState(p, job);
}

// The instance's ID, from its MR once it is Ready (kept in status.atProvider.instanceId).
reconcile::Step BackupReconciler::ResolveInstance(Pass& p, Job& job) {
  if (!job.instance_id.empty()) return reconcile::Continue();
  if (p.deleting) return Finalize(p);
  auto instance = FindOne(*ctx_.instances, kByClaim, job.claim_ns + "/" + job.instance_name,
                          "instance", job.instance_name, job.claim_ns, "spec.instanceRef");
  if (!instance.ok()) return Fail(p, instance.status(), "CannotObserveExternalResource");
  if (auto same = SameServiceType(p.mr, **instance, "instance", job.instance_name); !same.ok()) {
    return Fail(p, same, "CannotObserveExternalResource");
  }
  job.instance_id = GetString(**instance, {"status", "atProvider", "instanceId"});
  if (job.instance_id.empty() || !reconcile::IsConditionTrue(**instance, "Ready")) {
    return Fail(p, UserError("instance is not ready"), "CannotObserveExternalResource");
  }
  AtProvider(p.mr)["instanceId"] = job.instance_id;
  return CommitStatus(p);
}

// Takes the backup once across lost answers (CreateOnce), never adopting another MR's.
core::Result<Result> BackupReconciler::TakeBackup(Pass& p, Job& job) {
  if (p.deleting) return Finalize(p);
  if (!p.policies.create) {
    SetReady(p.mr, "Creating", "management policies do not allow taking the backup", ctx_.clock);
    return Steady(p);
  }
  BackupClient& manager = *p.conn.backup;
  const std::string& instance_id = job.instance_id;
  const std::string uid = machinery::Uid(p.mr);
  bool adopted = false;
  auto created = CreateOnce(
      p, kAnnotationBackupPending, kAnnotationBackupId,
      [&] { return manager.ListBackups(instance_id); },
      [&] { return manager.CreateBackup(instance_id); },
      [&](int64_t candidate) {
        for (const auto& other : ctx_.backups->indexer().List()) {
          if (machinery::Uid(*other) == uid ||
              GetString(*other, {"status", "atProvider", "instanceId"}) != instance_id) {
            continue;
          }
          if (IntAnnotation(*other, kAnnotationBackupId) == candidate ||
              IntAt(*other, {"status", "atProvider", "id"}) == candidate) {
            return true;
          }
        }
        return false;
      },
      adopted);
  if (!created.ok()) return Fail(p, created.status(), "CannotCreateExternalResource");
  AtProvider(p.mr)["id"] = *created;
  Event(p, reconcile::kEventTypeNormal, "CreatedExternalResource",
        fmt::format("the backup manager {} backup {} of instance {}",
                    adopted ? "had started (answer lost, adopted)" : "started", *created,
                    instance_id));
  SetReady(p.mr, "Creating", "the backup manager is taking the backup", ctx_.clock);
  KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
  return Fast(p);
}

// The backup manager's view, in status.atProvider; a backup it no longer knows is reported.
reconcile::Step BackupReconciler::ObserveBackup(Pass& p, Job& job) {
  Json& at = AtProvider(p.mr);
  at["id"] = job.id;
  auto info = p.conn.backup->GetBackup(job.instance_id, job.id);
  if (!info.ok()) {
    if (IsGoneOrNotFound(info.status())) {
      if (p.deleting) return Finalize(p);
      SetReady(p.mr, "Unavailable", "Backup has been deleted", ctx_.clock);
      return Steady(p);
    }
    return Fail(p, info.status(), "CannotObserveExternalResource");
  }
  job.info = *std::move(info);
  job.previous = GetString(at, {"status"});
  at["id"] = job.info.id;
  at["size"] = job.info.size;
  at["status"] = job.info.status;
  at["downloadable"] = job.info.downloadable;
  for (const auto& [key, value] : {std::pair{"triggered_at", &job.info.triggered_at},
                                   std::pair{"finished_at", &job.info.finished_at}}) {
    if (value->empty()) {
      at.erase(key);
    } else {
      at[key] = *value;
    }
  }
  return reconcile::Continue();
}

core::Result<Result> BackupReconciler::DeleteBackup(Pass& p, const Job& job) {
  if (job.info.status == kBackupDeleted || !p.policies.del || Orphans(p.mr)) return Finalize(p);
  SetReady(p.mr, "Deleting", "the backup manager is deleting the backup", ctx_.clock);
  if (!RecentlySent(p.key, "delete", "")) {
    auto d = p.conn.backup->DeleteBackup(job.instance_id, job.id);
    if (!d.ok()) {
      if (IsGoneOrNotFound(d)) return Finalize(p);
      return Fail(p, d, "CannotDeleteExternalResource");
    }
    Remember(p.key, "delete", "");
  }
  KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
  return Fast(p);
}

// Ready from the backup's status, an Event when it turned done or failed.
core::Result<Result> BackupReconciler::ReportState(Pass& p, const Job& job) {
  const std::string& s = job.info.status;
  if (s != job.previous) {
    if (s == kBackupDone) {
      Event(p, reconcile::kEventTypeNormal, "BackupDone",
            fmt::format("backup {} is done ({} bytes)", job.info.id, job.info.size));
    } else if (s == kBackupFailed) {
      Event(p, reconcile::kEventTypeWarning, "BackupFailed",
            fmt::format("the backup manager reports backup {} failed", job.info.id));
    }
  }
  if (s == kBackupQueued || s == kBackupRunning) {
    SetReady(p.mr, "Creating", fmt::format("the backup is {}", s), ctx_.clock);
    return Fast(p);
  }
  if (s == kBackupDone) {
    SetReady(p.mr, "Available", "", ctx_.clock);
  } else if (s == kBackupFailed) {
    SetReady(p.mr, "Unavailable", "Backup has failed", ctx_.clock);
  } else if (s == kBackupDeleted) {
    SetReady(p.mr, "Unavailable", "Backup has been deleted", ctx_.clock);
  } else {
    AtProvider(p.mr).erase("status");
    return Fail(p,
                UserError(fmt::format(
                    "cannot determine state of backup: a9s Backup Manager returned unknown status "
                    "\"{}\". Known statuses are \"queued\", \"running\", \"done\", \"failed\" "
                    "and \"deleted\"",
                    s)),
                "CannotObserveExternalResource");
  }
  return Steady(p);
}

}  // namespace klutch::providers::anynines
