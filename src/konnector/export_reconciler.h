// ExportReconciler (klutch-konnector-serviceexport, bind-protocol.md §4.8), on the connection's
// APIServiceExport keys: the export's ExportSyncer started, restarted (new generation or
// claims) or stopped, as its binding and Established CRD allow, and the export's status
// (Connected, ConsumerInSync, the CRD's conditions and names, Syncing=False when a syncer could
// not start). Reads the caches; thread-safe.
#pragma once

#include <string>

#include "konnector/context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::konnector::internal {

class Connection;

class ExportReconciler final : public reconcile::Reconciler {
 public:
  // `connection` must outlive the reconciler.
  explicit ExportReconciler(Connection& connection);
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share

  // The export's syncer started, restarted or stopped; a start that failed is left in
  // pass.start_error. Ends the pass once the connection stopped.
  reconcile::Step EnsureSyncer(Pass& pass);
  // Connected, ConsumerInSync, the CRD's conditions and names, Syncing: on the export.
  core::Result<reconcile::Result> UpdateExportStatus(const Pass& pass);
  void CopyCrdStatus(const Json& crd, Json& modified);

  Connection& connection_;
  Context& ctx_;
};

}  // namespace klutch::konnector::internal
