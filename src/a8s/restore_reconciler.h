// RestoreReconciler (klutch-operator-restore): a Restore (backups.anynines.com/v1beta3) puts the
// data of the Backup it names (spec.backupName, taken of the same Postgresql) back into the
// Postgresql: decrypted and restored in place in one transaction, so the instance holds exactly
// the backup's data and a failed restore changes nothing (engines/postgres.cc). Done
// once: InProgress while it runs, then status.restoreID and Ready. An operator that died
// mid-restore does it again from the start. Thread-safe.
#pragma once

#include "a8s/operator_context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::a8s {

class RestoreReconciler final : public reconcile::Reconciler {
 public:
  explicit RestoreReconciler(OperatorContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one pass share

  reconcile::Step ResolveInstance(Pass& p);
  reconcile::Step ResolveBackup(Pass& p);
  reconcile::Step MarkInProgress(Pass& p);
  core::Result<reconcile::Result> Restore(Pass& p);

  OperatorContext& ctx_;
};

}  // namespace klutch::a8s
