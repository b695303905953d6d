// CompositeReconciler (klutch-manager-<xr kind>): reconciles one XRD's composite resources
// (XRs). A pass selects the composition revision, observes the composed resources, runs
// function-patch-and-transform (function.h), server-side applies what differs (through the
// circuit breaker), deletes composed resources no longer wanted, records the selection and
// resource references in the XR's spec, and writes its status: ToComposite patches, the
// connection Secret, Synced, and Ready naming each unready resource with its own reason
// (composed_status.h). A user's error becomes Synced=False with a Warning Event. An XR being
// deleted says what its deletion waits for. Reads the informers' caches; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "client/informer.h"
#include "compose/compose_context.h"
#include "compose/function.h"
#include "compose/write_tracker.h"
#include "compose/xrd_types.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::compose {

class CompositeReconciler final : public reconcile::Reconciler {
 public:
  // Everything must outlive the reconciler; `xr_writes` is shared with the claim reconciler.
  CompositeReconciler(ComposeContext& context, std::string xrd, const XrdTypes& types,
                      client::Informer& xrs, WriteTracker& xr_writes)
      : context_(context), xrd_(std::move(xrd)), types_(types), xrs_(xrs), xr_writes_(xr_writes) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share
  struct Target;

  reconcile::Step SelectRevision(Pass& pass);
  reconcile::Step ObserveComposed(Pass& pass);
  reconcile::Step ResolveTarget(Pass& pass, const client::Json& resource, Target& target);
  reconcile::Step ObserveExisting(Pass& pass, const client::Json& resource, const Target& target);
  reconcile::Step RunFunctions(Pass& pass);
  reconcile::Step ApplyComposed(Pass& pass);
  reconcile::Step ApplyOne(Pass& pass, DesiredResource& desired, const Target& target);
  core::Status DeleteUnwanted(Pass& pass);
  core::Status EnsureCompositeSpec(Pass& pass);
  reconcile::Step PublishConnection(Pass& pass, client::Json& modified);
  core::Result<reconcile::Result> UpdateStatus(Pass& pass);
  // While an XR is being deleted: Ready=False, reason Deleting, with the messages of the
  // composed resources that are still there (e.g. an instance waiting for its bindings), so
  // that its claim can say what the deletion waits for.
  core::Result<reconcile::Result> ReportDeletion(const client::Json& xr, const std::string& key);
  // Synced=False (condition reason `condition_reason`), a Warning Event with `reason`.
  core::Result<reconcile::Result> Failed(const client::Json& xr, std::string_view reason,
                                         const std::string& message, bool retry,
                                         std::string_view condition_reason = "ReconcileError");
  bool Synced() const;

  ComposeContext& context_;
  const std::string xrd_;
  const XrdTypes types_;
  client::Informer& xrs_;
  WriteTracker& xr_writes_;
};

}  // namespace klutch::compose
