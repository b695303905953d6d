// ApisReconciler (klutch-manager-anynines-apis): provider-anynines' APIs as a whole (one key,
// "dataservices.anynines.com"). A pass looks at the six CRDs of the group in the CRD cache:
// once all are Established (and none is being deleted) it starts the managed resources'
// Runtime; when one goes away it stops it. Owns the runtime. Wired by AnyninesProvider, which
// maps every CRD event of the group to that key. Thread-safe.
#pragma once

#include <memory>

#include "client/informer.h"
#include "core/clock.h"
#include "core/sync.h"
#include "providers/anynines/runtime.h"
#include "providers/anynines_provider.h"
#include "reconcile/controller.h"
#include "reconcile/events.h"
#include "reconcile/manager.h"

namespace klutch::providers::anynines {

class ApisReconciler final : public reconcile::Reconciler {
 public:
  // `crds`: the CustomResourceDefinition informer. Every reference must outlive the reconciler.
  ApisReconciler(reconcile::Manager& manager, const AnyninesProviderOptions& options,
                 const core::Clock& clock, reconcile::EventRecorder& events, client::Informer& crds)
      : manager_(manager), options_(options), clock_(clock), events_(events), crds_(crds) {}
  ~ApisReconciler() override { Stop(); }
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

  // Stops the runtime; later passes start none. Idempotent.
  void Stop();
  // True while the runtime runs.
  bool running() const;

 private:
  // Whether every CRD of the group is Established and none is being deleted.
  bool AllEstablished() const;
  // Starts a runtime and keeps it unless Stop() came first.
  core::Result<reconcile::Result> StartRuntime();

  reconcile::Manager& manager_;
  const AnyninesProviderOptions& options_;
  const core::Clock& clock_;
  reconcile::EventRecorder& events_;
  client::Informer& crds_;
  mutable core::Mutex mu_;
  std::unique_ptr<Runtime> runtime_ GUARDED_BY(mu_);
  bool stopped_ GUARDED_BY(mu_) = false;
};

}  // namespace klutch::providers::anynines
