// BackupReconciler (klutch-operator-backup): a Backup (backups.anynines.com/v1beta3) is one dump of
// its Postgresql's database (pg_dump through the engine), encrypted at rest with the instance's
// key (AES-256-GCM, engines/crypto.h) under the operator's state. Taken once: InProgress while it
// runs, then status.backupID and Ready; a failed attempt is tried again up to spec.maxRetries. An
// operator that died mid-backup takes it again from the start. Deleting the Backup deletes the
// file. Thread-safe.
#pragma once

#include <filesystem>

#include "a8s/operator_context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::a8s {

class BackupReconciler final : public reconcile::Reconciler {
 public:
  explicit BackupReconciler(OperatorContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

  // Where a Backup's file lives for the instance numbered `number` (the backup's UID names it).
  static std::filesystem::path File(const OperatorContext& ctx, int64_t number,
                                    const std::string& backup_uid);

 private:
  struct Pass;  // what the steps of one pass share

  core::Result<reconcile::Result> Delete(Pass& p);
  reconcile::Step EnsureFinalizer(Pass& p);
  reconcile::Step WaitAfterFailure(Pass& p);
  reconcile::Step ResolveInstance(Pass& p);
  reconcile::Step MarkInProgress(Pass& p);
  core::Result<reconcile::Result> TakeBackup(Pass& p);

  OperatorContext& ctx_;
};

}  // namespace klutch::a8s
