// ObjectReconciler (klutch-manager-object): reconciles provider-kubernetes' `Object`
// (kubernetes.crossplane.io/v1alpha1; what it does for the user: object_provider.h). A pass
// reads the manifest, resolves the ProviderConfig's cluster and the manifest's resource there,
// then deletes the managed object (a deleted Object) or keeps the finalizer, applies the
// manifest where the live object differs and reports status.atProvider.manifest, Synced and
// Ready. It keeps one client (and discovery cache) per distinct kubeconfig a ProviderConfig's
// Secret holds. Wired by ObjectProvider, which also watches the local manifests' kinds.
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "client/discovery.h"
#include "client/dynamic.h"
#include "client/informer.h"
#include "client/rest_client.h"
#include "core/clock.h"
#include "core/sync.h"
#include "reconcile/controller.h"
#include "reconcile/events.h"
#include "reconcile/step.h"

namespace klutch::providers {

inline const client::GroupVersionResource kKubernetesObjects{"kubernetes.crossplane.io", "v1alpha1",
                                                             "objects"};
inline const client::GroupVersionResource kKubernetesProviderConfigs{"kubernetes.crossplane.io",
                                                                     "v1alpha1", "providerconfigs"};

class ObjectReconciler final : public reconcile::Reconciler {
 public:
  // Asks the owner to queue `object` whenever the local object `ns`/`name` of `gvr` changes.
  using WatchManifest =
      std::function<void(const client::GroupVersionResource& gvr, const std::string& ns,
                         const std::string& name, const std::string& object)>;

  // `rest` is the manager's cluster (InjectedIdentity); `objects` and `configs` the Object and
  // ProviderConfig informers; a healthy Object is looked at again after `poll_interval`. All
  // references must outlive the reconciler.
  ObjectReconciler(client::RestClient& rest, client::Informer& objects, client::Informer& configs,
                   const core::Clock& clock, reconcile::EventRecorder& events,
                   std::chrono::milliseconds poll_interval, WatchManifest watch);
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share
  // The client (and its discovery) for a ProviderConfig; empty with `error` set when
  // unusable. Shared, so that a rotated kubeconfig's old client lives on while in use.
  struct Target {
    std::shared_ptr<client::RestClient> client;
    std::shared_ptr<client::RestMapper> mapper;
  };

  Target ClientFor(const std::string& name, bool& local, std::string& error);
  // The client of a kubeconfig read from a ProviderConfig's Secret (`source` names it).
  Target RemoteClientFor(const std::string& name, const std::string& kubeconfig,
                         const std::string& source, std::string& error);
  reconcile::Step ReadManifest(Pass& p);
  reconcile::Step ResolveKind(Pass& p);
  core::Result<reconcile::Result> DeleteManaged(Pass& p, client::ResourceClient& live_client);
  core::Status EnsureFinalizer(Pass& p);
  reconcile::Step ApplyManifest(Pass& p, client::ResourceClient& live_client);
  core::Result<reconcile::Result> UpdateObjectStatus(Pass& p);
  // Synced=False with `message` and a Warning Event `reason` (when the condition changed);
  // looks again after poll_interval.
  core::Result<reconcile::Result> Failed(const client::Json& object, std::string_view reason,
                                         const std::string& message);

  client::RestClient& rest_;
  client::RestMapper mapper_;  // of rest_
  client::Informer& objects_;
  client::Informer& configs_;
  const core::Clock& clock_;
  reconcile::EventRecorder& events_;
  const std::chrono::milliseconds poll_interval_;
  const WatchManifest watch_;
  core::Mutex mu_;
  struct Remote {
    std::string provider_config;
    std::shared_ptr<client::RestClient> client;
    std::shared_ptr<client::RestMapper> mapper;
  };
  std::map<std::string, Remote> remote_ GUARDED_BY(mu_);  // by kubeconfig text
};

}  // namespace klutch::providers
