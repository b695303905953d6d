// BackupReconciler: provider-anynines' Backup (data-services.md §6.6) against the a9s Backup
// Manager: taken once (CreateOnce), followed from queued to done, deleted (controllers.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "providers/anynines/managed_reconciler.h"
#include "reconcile/step.h"

namespace klutch::providers::anynines {

class BackupReconciler final : public ManagedReconciler {
 public:
  explicit BackupReconciler(Context& ctx) : ManagedReconciler(ctx, ctx.backups, "Backup") {}

 private:
  struct Job;  // what one pass knows of the backup beyond the MR

  core::Result<reconcile::Result> Run(Pass& p) override;
  reconcile::Step ResolveInstance(Pass& p, Job& job);
  core::Result<reconcile::Result> TakeBackup(Pass& p, Job& job);
  reconcile::Step ObserveBackup(Pass& p, Job& job);
  core::Result<reconcile::Result> DeleteBackup(Pass& p, const Job& job);
  core::Result<reconcile::Result> ReportState(Pass& p, const Job& job);
};

}  // namespace klutch::providers::anynines
