// provider-kubernetes' `Object` (kubernetes.crossplane.io/v1alpha1), which Klutch's a8s
// compositions compose: each Object wraps a manifest (spec.forProvider.manifest) that this
// controller creates, updates and deletes on the cluster its ProviderConfig names
// (credentials.source InjectedIdentity: the manager's own cluster; Secret: a kubeconfig in a
// Secret), and whose live state it reports in status.atProvider.manifest.
//
// Management policies (v1alpha1's `managementPolicy` Default / ObserveCreateUpdate /
// ObserveDelete / Observe, and `managementPolicies` with Observe, Create, Update, Delete,
// LateInitialize or "*") limit what it may do; `deletionPolicy: Orphan` leaves the manifest
// behind. Readiness follows `readiness.policy`: SuccessfulCreate (default: Ready once the
// object exists), DeriveFromObject (the object's Ready condition), AllTrue (every condition
// True); under any policy an object whose own Ready condition is False is not ready, with its
// message (unlike provider-kubernetes, so that an a8s Postgresql's error reaches the claim).
// Changes of wrapped objects on the local cluster are watched (an informer per kind, started on
// first use); remote ones are polled every `poll_interval`. Writes happen only when the live object
// does not already carry the manifest. ObjectProvider wires (informers, controller, watches); a
// pass is ObjectReconciler's (object_reconciler.h). Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "reconcile/manager.h"

namespace klutch::providers {

struct ObjectProviderOptions {
  int workers = 4;
  std::chrono::milliseconds poll_interval{60000};
  std::string component = "klutch-manager";
  std::string instance;
  const core::Clock* clock = nullptr;
};

class ObjectProvider {
 public:
  ObjectProvider(reconcile::Manager& manager, ObjectProviderOptions options);
  ~ObjectProvider();
  ObjectProvider(const ObjectProvider&) = delete;
  ObjectProvider& operator=(const ObjectProvider&) = delete;

  // Registers the Object and ProviderConfig informers and the controller; before
  // manager.Start().
  core::Status Setup();
  void Stop();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::providers
