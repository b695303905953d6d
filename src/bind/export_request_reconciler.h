// ExportRequestReconciler (klutch-backend-serviceexportrequest, bind-protocol.md §2.6.4): an
// APIServiceExportRequest gets an APIServiceExport per requested resource (a snapshot of its
// CRD with the offering template's permission claims), then ExportsReady, Ready and phase
// Succeeded; what cannot be exported (no CRD, not offered, an invalid CRD) is ExportsReady=False
// with a Warning Event, phase Failed once the request is `request_timeout` old. A finished
// request is deleted `request_retention` after its creation (timed requeues, not resyncs).
// Reads the informers' caches; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "bind/backend_context.h"
#include "bind/catalog.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::bind {

class ExportRequestReconciler final : public reconcile::Reconciler {
 public:
  // `ctx` must outlive the reconciler.
  explicit ExportRequestReconciler(BackendContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share
  struct Failure {
    std::string reason;
    std::string message;
  };

  // A request that ended: deleted once `request_retention` passed, else looked at again then.
  core::Result<reconcile::Result> DeleteFinished(Pass& pass);
  // An export per requested resource; the first resource that cannot be exported is
  // pass.failure. A failed write is a Warning Event and ends the pass (retried).
  reconcile::Step EnsureExports(Pass& pass);
  core::Status EnsureExport(Pass& pass, const client::Json& resource);
  core::Status CreateExport(Pass& pass, const client::Json& crd, const OfferedApi& offered);
  // ExportsReady=True, phase Succeeded; deleted after the retention.
  core::Result<reconcile::Result> MarkSucceeded(Pass& pass);
  // ExportsReady=False with the failure, phase Pending until the timeout, then Failed; a
  // Warning Event when the condition changed.
  core::Result<reconcile::Result> Failed(Pass& pass, const Failure& failure);
  // The summary and the status written; the next look when the phase's deadline comes.
  core::Result<reconcile::Result> CommitStatus(Pass& pass, client::Json& modified);

  BackendContext& ctx_;
};

}  // namespace klutch::bind
