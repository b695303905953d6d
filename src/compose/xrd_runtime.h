// XrdRuntime: the controllers of one XRD's types, started by the XRD reconciler once their
// CRDs serve: an XR informer and the composite controller (CompositeReconciler), then a claim
// informer and the claim controller (ClaimReconciler). Wiring only; the logic is in the
// reconcilers. Thread-safe; Stop() before destruction of what the context refers to.
#pragma once

#include <memory>
#include <string>

#include "client/informer.h"
#include "compose/claim_reconciler.h"
#include "compose/compose_context.h"
#include "compose/composite_reconciler.h"
#include "compose/write_tracker.h"
#include "compose/xrd_types.h"
#include "reconcile/controller.h"

namespace klutch::compose {

class XrdRuntime {
 public:
  XrdRuntime(ComposeContext& context, std::string xrd, XrdTypes types)
      : context_(context), xrd_(std::move(xrd)), types_(std::move(types)) {}
  ~XrdRuntime() { Stop(); }
  XrdRuntime(const XrdRuntime&) = delete;
  XrdRuntime& operator=(const XrdRuntime&) = delete;

  const XrdTypes& types() const { return types_; }
  // Starts the XR informer and composite controller.
  void StartComposite();
  // Starts the claim informer and claim controller (after StartComposite).
  void StartClaim();
  bool composite_started() const { return xr_controller_ != nullptr; }
  bool claim_started() const { return claim_controller_ != nullptr; }
  void Stop();

  void EnqueueComposite(const std::string& name) {
    if (xr_controller_) xr_controller_->queue().Add(name);
  }
  // XRs using composition `composition`.
  void EnqueueUsers(const std::string& composition);
  // Claims without a composite yet: their last reconcile may have failed to select a
  // composition, which a Composition appearing or changing can cure.
  void EnqueueUnboundClaims();

 private:
  ComposeContext& context_;
  const std::string xrd_;
  const XrdTypes types_;
  std::unique_ptr<client::Informer> xrs_;
  std::unique_ptr<client::Informer> claims_;
  std::unique_ptr<CompositeReconciler> xr_reconciler_;
  std::unique_ptr<ClaimReconciler> claim_reconciler_;
  std::unique_ptr<reconcile::Controller> xr_controller_;
  std::unique_ptr<reconcile::Controller> claim_controller_;
  WriteTracker xr_writes_;
  WriteTracker claim_writes_;
};

}  // namespace klutch::compose
