// NamespaceDeletionReconciler (klutch-konnector-namespacedeletion, bind-protocol.md §4.6), on
// consumer namespace names: a consumer namespace that is gone from the App Cluster takes its
// APIServiceNamespace on the provider with it. Reads the caches; thread-safe.
#pragma once

#include <string>

#include "konnector/context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::konnector::internal {

class Connection;

class NamespaceDeletionReconciler final : public reconcile::Reconciler {
 public:
  // `connection` must outlive the reconciler.
  explicit NamespaceDeletionReconciler(Connection& connection);
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  Connection& connection_;
  Context& ctx_;
};

}  // namespace klutch::konnector::internal
