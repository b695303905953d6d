// ClaimReconciler (klutch-manager-<claim kind>): reconciles one XRD's claims. A pass binds
// the claim to its XR (a derived name; the composition chosen up front and the resource
// references planned, so the XR is complete from its first write), keeps the XR's spec,
// labels and annotations as the claim wants them, records finalizer, resourceRef and the
// XR's selection on the claim, and copies up the XR's status, its Ready and a failed Synced,
// and its connection Secret. A deleted claim deletes its XR per compositeDeletePolicy
// (Foreground: the claim waits and says what for). A user's error becomes Synced=False with
// a Warning Event. Reads the informers' caches; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "client/informer.h"
#include "compose/compose_context.h"
#include "compose/write_tracker.h"
#include "compose/xrd_types.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::compose {

class ClaimReconciler final : public reconcile::Reconciler {
 public:
  // Everything must outlive the reconciler; `xr_writes` is shared with the composite
  // reconciler.
  ClaimReconciler(ComposeContext& context, std::string xrd, const XrdTypes& types,
                  client::Informer& claims, client::Informer& xrs, WriteTracker& claim_writes,
                  WriteTracker& xr_writes)
      : context_(context),
        xrd_(std::move(xrd)),
        types_(types),
        claims_(claims),
        xrs_(xrs),
        claim_writes_(claim_writes),
        xr_writes_(xr_writes) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share

  core::Result<reconcile::Result> Delete(Pass& pass);
  core::Result<reconcile::Result> ReportForegroundDeletion(Pass& pass);
  reconcile::Step CreateComposite(Pass& pass);
  reconcile::Step UpdateComposite(Pass& pass);
  // The XR's spec as the claim wants it, over `existing_spec` (null for a new XR).
  client::Json CompositeSpecFor(const Pass& pass, const client::Json* existing_spec) const;
  // The claim: finalizer, resourceRef, and the selection the XR made (or will make).
  core::Status BindClaim(Pass& pass, const client::Json& xr_spec);
  core::Result<reconcile::Result> PropagateStatus(Pass& pass);
  reconcile::Step PropagateConnectionSecret(Pass& pass, client::Json& modified);
  // Synced=False, reason ReconcileError, and a Warning Event with `reason`.
  core::Result<reconcile::Result> Failed(const client::Json& claim, std::string_view reason,
                                         const std::string& message);
  bool Synced() const;

  ComposeContext& context_;
  const std::string xrd_;
  const XrdTypes types_;
  client::Informer& claims_;
  client::Informer& xrs_;
  WriteTracker& claim_writes_;
  WriteTracker& xr_writes_;
};

}  // namespace klutch::compose
