// Runtime: the informers and controllers of provider-anynines' managed resources, created
// once their CRDs exist (ApisReconciler starts and stops it): ServiceInstance, ServiceBinding,
// Backup, Restore and ProviderConfig informers with their indexes, one controller per kind
// over the reconcilers of controllers.h and provider_config_reconciler.h, and the watches
// between the kinds. Wiring only; the logic is the reconcilers'. Start() and Stop() from one
// thread; Stop() is idempotent.
#pragma once

#include <memory>
#include <vector>

#include "client/informer.h"
#include "core/clock.h"
#include "core/status.h"
#include "providers/anynines/connections.h"
#include "providers/anynines/context.h"
#include "providers/anynines/controllers.h"
#include "providers/anynines/provider_config_reconciler.h"
#include "providers/anynines_provider.h"
#include "reconcile/events.h"
#include "reconcile/manager.h"

namespace klutch::providers::anynines {

class Runtime {
 public:
  // Every reference must outlive the runtime.
  Runtime(reconcile::Manager& manager, const AnyninesProviderOptions& options,
          const core::Clock& clock, reconcile::EventRecorder& events);
  ~Runtime() { Stop(); }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Informers, indexes, reconcilers and controllers, their watches, then the informers'
  // sync (Timeout after 60 s) and the controllers' start.
  core::Status Start();
  void Stop();

 private:
  void CreateInformers();
  void AddIndexes();
  void CreateControllers();
  void WatchOwnKinds();
  void WatchRelatedKinds();
  void WatchProviderConfigs();
  core::Status StartAll();

  reconcile::Manager& manager_;
  const AnyninesProviderOptions& options_;
  Connections connections_;
  Context ctx_;
  std::vector<std::unique_ptr<client::Informer>> informers_;
  std::unique_ptr<ServiceInstanceReconciler> instance_reconciler_;
  std::unique_ptr<ServiceBindingReconciler> binding_reconciler_;
  std::unique_ptr<BackupReconciler> backup_reconciler_;
  std::unique_ptr<RestoreReconciler> restore_reconciler_;
  std::unique_ptr<ProviderConfigReconciler> config_reconciler_;
  std::vector<std::unique_ptr<reconcile::Controller>> controllers_;
  reconcile::Controller* instances_ = nullptr;
  reconcile::Controller* bindings_ = nullptr;
  reconcile::Controller* backups_ = nullptr;
  reconcile::Controller* restores_ = nullptr;
  reconcile::Controller* configs_ = nullptr;
};

}  // namespace klutch::providers::anynines
