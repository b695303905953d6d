// AdoptReconciler (klutch-konnector-<group resource>-adopt, bind-protocol.md §4.12): objects
// created on the provider appear on the consumer, on provider keys. A pass creates the
// consumer copy of an unbound provider object (a CleanCopy, named back by the isolation
// strategy, checked against the API server first), marks an existing consumer object bound,
// and marks the provider object bound (where upstream writes the consumer by mistake, §6.5).
// A copy the App Cluster refuses is counted and logged. Reads the caches; thread-safe.
#pragma once

#include "konnector/syncer_context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::konnector::internal {

class AdoptReconciler final : public reconcile::Reconciler {
 public:
  // `sync` must outlive the reconciler.
  explicit AdoptReconciler(SyncerContext& sync) : sync_(sync) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share

  reconcile::Step CreateConsumerCopy(Pass& pass);
  core::Status MarkConsumerBound(Pass& pass);
  core::Status MarkProviderBound(Pass& pass);

  SyncerContext& sync_;
};

}  // namespace klutch::konnector::internal
