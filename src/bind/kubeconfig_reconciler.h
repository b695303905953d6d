// KubeconfigReconciler (klutch-backend-kubeconfig, ADR 0013): the kubeconfig Secret a
// ClusterBinding names always holds a TokenRequest token with at least half its lifetime
// left: renewed at half-life (a timed requeue), the ServiceAccount `klutch-binder` re-created
// when missing. A failed renewal is a Warning Event on the ClusterBinding and retried. In
// control-plane mode the Secret holds the App Cluster's kubeconfig and is left alone. Reads the
// informers' caches; thread-safe.
#pragma once

#include <string>

#include "bind/backend_context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::bind {

class KubeconfigReconciler final : public reconcile::Reconciler {
 public:
  // `ctx` must outlive the reconciler.
  explicit KubeconfigReconciler(BackendContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share

  // A token not yet at half-life ends the pass until then.
  reconcile::Step WaitForHalfLife(Pass& pass);
  // A new token written into the Secret; looked at again at its half-life.
  core::Result<reconcile::Result> RenewToken(Pass& pass);
  // KubeconfigRefreshFailed: a Warning Event on the ClusterBinding; `error` (retried).
  core::Result<reconcile::Result> Failed(Pass& pass, const core::Status& error);

  BackendContext& ctx_;
};

}  // namespace klutch::bind
