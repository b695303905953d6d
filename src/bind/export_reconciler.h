// ExportReconciler (klutch-backend-serviceexport, bind-protocol.md §2.6.3): an
// APIServiceExport kept in step with its CRD. A changed CRD is snapshotted into the export's
// spec (its hash in an annotation), then ProviderInSync=True; a CRD that cannot be snapshotted
// is ProviderInSync=False with a Warning Event while the export keeps its last good copy; an
// export whose CRD is gone is deleted (the konnector stops syncing it). Reads the informers'
// caches; thread-safe.
#pragma once

#include <string>

#include "bind/backend_context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::bind {

class ExportReconciler final : public reconcile::Reconciler {
 public:
  // `ctx` must outlive the reconciler.
  explicit ExportReconciler(BackendContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share

  // The provider withdrew the API: the export goes.
  core::Result<reconcile::Result> DeleteWithdrawn(Pass& pass);
  // The CRD's snapshot written into the export when its hash changed; the update event
  // brings the status pass.
  reconcile::Step EnsureSnapshot(Pass& pass, const client::Json& snapshot);
  core::Result<reconcile::Result> MarkInSync(Pass& pass);
  // ProviderInSync=False with `error` (the CRD cannot be snapshotted) and a Warning Event when
  // the condition changed; not retried (the CRD's next change brings the next pass).
  core::Result<reconcile::Result> Failed(Pass& pass, const core::Status& error);

  BackendContext& ctx_;
};

}  // namespace klutch::bind
