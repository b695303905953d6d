// SpecReconciler (klutch-konnector-<group resource>-spec, bind-protocol.md §4.10): spec, consumer
// to provider, on consumer keys. A pass places the consumer object on the provider (the
// isolation strategy; a namespaced object waits for its APIServiceNamespace), puts the syncer
// finalizer and the bound annotation on it, and server-side applies its spec, labels and
// annotations to the provider copy with force, skipped while the copy carries the hash of what
// was applied last and covers the spec. A refused apply becomes ControlPlaneSynced=False with
// a Warning Event. A deleted consumer object deletes the copy first and keeps its finalizer
// until the copy is gone (annotations still travel meanwhile). Reads the caches; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "konnector/syncer_context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::konnector::internal {

class SpecReconciler final : public reconcile::Reconciler {
 public:
  // `sync` must outlive the reconciler.
  explicit SpecReconciler(SyncerContext& sync) : sync_(sync) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share

  core::Result<reconcile::Result> Delete(Pass& pass);
  reconcile::Step DeleteProviderCopy(Pass& pass);
  // Both sides are going: annotations still travel (a deletion may wait for one).
  core::Result<reconcile::Result> PropagateAnnotations(Pass& pass);
  core::Result<reconcile::Result> RemoveFinalizer(Pass& pass);
  core::Status EnsureFinalizerAndBound(Pass& pass);
  core::Result<reconcile::Result> ApplyToProvider(Pass& pass);
  // What the provider copy should carry (without the applied-hash annotation).
  Json DesiredCopy(const Pass& pass) const;
  // ControlPlaneSynced on the consumer object: a failure at once (with a Warning Event), a
  // success only over an earlier failure.
  void MarkSynced(const Json& consumer, bool ok, std::string_view reason,
                  const std::string& message);

  SyncerContext& sync_;
};

}  // namespace klutch::konnector::internal
