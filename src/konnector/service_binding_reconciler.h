// ServiceBindingReconciler (klutch-konnector-servicebinding, bind-protocol.md §4.2), on
// APIServiceBinding keys: SecretValid on the binding, from its kubeconfig Secret
// (CheckBindingSecret), with a Warning Event when it turns False. Reads the binding and Secret
// caches; thread-safe.
#pragma once

#include "konnector/context.h"
#include "reconcile/controller.h"

namespace klutch::konnector::internal {

class ServiceBindingReconciler final : public reconcile::Reconciler {
 public:
  // `ctx` must outlive the reconciler.
  explicit ServiceBindingReconciler(Context& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  Context& ctx_;
};

}  // namespace klutch::konnector::internal
