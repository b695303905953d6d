// RestoreReconciler: provider-anynines' Restore (data-services.md §6.7) against the a9s Backup
// Manager: a backup restored once (CreateOnce) and followed to its end (controllers.h).
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

class RestoreReconciler final : public ManagedReconciler {
 public:
  explicit RestoreReconciler(Context& ctx) : ManagedReconciler(ctx, ctx.restores, "Restore") {}

 private:
  struct Job;  // what one pass knows of the restore beyond the MR

  core::Result<reconcile::Result> Run(Pass& p) override;
  reconcile::Step ResolveBackup(Pass& p, Job& job);
  core::Result<reconcile::Result> StartRestore(Pass& p, Job& job);
  reconcile::Step ObserveRestore(Pass& p, Job& job);
  core::Result<reconcile::Result> DeleteRestore(Pass& p, const Job& job);
  core::Result<reconcile::Result> ReportState(Pass& p, const Job& job);
};

}  // namespace klutch::providers::anynines
