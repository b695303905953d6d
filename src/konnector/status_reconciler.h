// StatusReconciler (klutch-konnector-<group resource>-status, bind-protocol.md §4.11): status,
// provider to consumer, on provider keys. A pass copies the provider copy's status to the
// consumer object (condition messages in the consumer's namespace names, through the isolation
// strategy), keeps the konnector's ControlPlaneSynced (True rides along with a status write),
// and tells each condition that turned False with an Event. A bound provider object whose
// consumer object is gone (checked against the API server, not only the cache) is a leftover
// of a consumer deletion and is deleted. Reads the caches; thread-safe.
#pragma once

#include "konnector/syncer_context.h"
#include "reconcile/controller.h"

namespace klutch::konnector::internal {

class StatusReconciler final : public reconcile::Reconciler {
 public:
  // `sync` must outlive the reconciler.
  explicit StatusReconciler(SyncerContext& sync) : sync_(sync) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share

  core::Result<reconcile::Result> DeleteLeftover(Pass& pass);
  core::Result<reconcile::Result> PropagateStatus(Pass& pass);
  // The consumer object with the provider's status and the konnector's condition.
  Json DesiredConsumer(const Pass& pass) const;

  SyncerContext& sync_;
};

}  // namespace klutch::konnector::internal
