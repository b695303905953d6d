// ClaimSyncer: claimed resources (§4.13), the Secrets and ConfigMaps a binding's accepted
// permission claims let the konnector copy between the mapped namespaces. The side that owns an
// object (the `klutch.anynines.com/resource-owner` annotation, else the side it was created on) is
// the truth: the other side's copy is created, overwritten and deleted to match it. A claim with an
// owner handles only objects of that owner, so a consumer's own Secrets never travel to the
// provider under a provider-owned claim, and service-account tokens never travel at all. Internal
// to the konnector. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "client/multi_namespace_informer.h"
#include "konnector/context.h"

namespace klutch::konnector::internal {

class Connection;

class ClaimSyncer {
 public:
  ClaimSyncer(Connection& connection, const Json& claim);
  ~ClaimSyncer();
  ClaimSyncer(const ClaimSyncer&) = delete;
  ClaimSyncer& operator=(const ClaimSyncer&) = delete;

  void Start();
  void Stop();
  void OnServiceNamespace(const std::string& cns, const std::string& pns, bool deleted);

  // "Provider" or "Consumer": the annotation, else the side the object was seen on.
  static std::string EffectiveOwner(const Json& object, bool provider_side);

 private:
  // The claim's names, and never a service-account token.
  bool Matches(const Json& object) const;
  void EnqueueConsumer(const Json& c);
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request);
  core::Result<reconcile::Result> Sync(const client::ObjectPtr& owner_obj,
                                       const client::ObjectPtr& copy, bool provider_owns,
                                       const std::string& pns, const std::string& cns,
                                       const std::string& name);

  Connection& connection_;
  Context& ctx_;
  client::GroupVersionResource gvr_;
  std::string owner_;  // the claim's selector.owner ("" = either)
  std::vector<std::string> names_;
  std::unique_ptr<client::Informer> consumer_;
  std::unique_ptr<client::MultiNamespaceInformer> provider_;
  std::unique_ptr<reconcile::FuncReconciler> reconciler_;
  std::unique_ptr<reconcile::Controller> controller_;
};

}  // namespace klutch::konnector::internal
