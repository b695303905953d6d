// The composition engine of `klutch manager`: Crossplane's XRD, Composition, claim and
// composite controllers, as ordinary Kubernetes clients.
//
//  * XRDs: for each CompositeResourceDefinition the XR CRD and claim CRD (xrd.h), conditions
//    Established and Offered, then a composite and a claim controller for the new types;
//    deletion waits (finalizer) while claims or composites exist.
//  * Compositions: an immutable CompositionRevision per distinct spec (revision numbers
//    growing), which XRs follow per compositionUpdatePolicy.
//  * Claims: bound to an XR with a derived name, the claim's spec propagated down, the XR's
//    status and Ready condition up, connection Secrets copied, deletion per
//    compositeDeletePolicy.
//  * Composites: function-patch-and-transform (function.h) over the selected revision, the
//    composed resources server-side applied (only when they differ from what is wanted) and
//    watched, readiness and connection details aggregated, ToComposite patches written to the
//    XR's status.
// Each composed resource's changes reach its XR through a watch on its kind (an informer per
// kind, started when a composition first uses it). A per-XR circuit breaker holds back an XR
// whose composed resources were rewritten too often (two controllers fighting over a field):
// its key stays queued, so no event is lost, and the XR shows why.
//
// Wiring: the process builds a reconcile::Manager and a Composer on it; Setup() registers the
// informers and controllers, the manager runs them while this replica leads. The logic is in
// one reconciler per kind: xrd_reconciler.h, composition_revision_reconciler.h, and per
// XRD an XrdRuntime (xrd_runtime.h) running claim_reconciler.h and composite_reconciler.h.
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "client/rest_client.h"
#include "core/clock.h"
#include "core/status.h"
#include "reconcile/manager.h"

namespace klutch::compose {

struct ComposerOptions {
  // Where XRs' connection Secrets are written (Crossplane: its own namespace).
  std::string connection_secret_namespace = "crossplane-system";
  int workers = 4;  // per claim and composite controller
  // Circuit breaker: more than `breaker_writes` changing writes to one composed resource
  // within `breaker_window` hold its XR for `breaker_cooldown`.
  int breaker_writes = 30;
  std::chrono::milliseconds breaker_window{10000};
  std::chrono::milliseconds breaker_cooldown{30000};
  std::string component = "klutch-manager";  // Events' source
  std::string instance;
  const core::Clock* clock = nullptr;  // nullptr: real time
};

class Composer {
 public:
  // `manager` must outlive the composer.
  Composer(reconcile::Manager& manager, ComposerOptions options);
  ~Composer();  // Stop()
  Composer(const Composer&) = delete;
  Composer& operator=(const Composer&) = delete;

  // Registers informers and controllers; once, before manager.Start().
  core::Status Setup();
  // Stops the per-XRD controllers and composed-resource informers (after the manager
  // stopped its controllers). Idempotent.
  void Stop();

  // How many XRDs have running controllers (tests, metrics).
  size_t active_xrds() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Installs or upgrades the CRDs the manager serves (Crossplane's XRD, Composition,
// CompositionRevision and Function; provider-kubernetes' Object and ProviderConfig) and the
// Function `function-patch-and-transform` standing for the built-in implementation.
core::Status InstallManagerApis(client::RestClient& rest, std::chrono::milliseconds timeout,
                                const core::Clock& clock = core::RealClock::Get());

}  // namespace klutch::compose
