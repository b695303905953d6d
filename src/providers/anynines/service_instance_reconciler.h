// ServiceInstanceReconciler: provider-anynines' ServiceInstance (data-services.md §6.2)
// against an OSB broker: provision, observe (a9s GET /instances/{id}, else the OSB fetch),
// update, deprovision, async operations followed via last_operation (controllers.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "providers/anynines/managed_reconciler.h"
#include "reconcile/step.h"

namespace klutch::client {
class RestMapper;
}

namespace klutch::providers::anynines {

// Deleting an instance that ServiceBindings still use waits until they are gone (unbind
// before deprovision, as Cloud Foundry and Crossplane's Usage do), saying which bindings hold
// it, unless the MR or the composite resource that controls it carries
// kAnnotationDeleteInUse: "true".
class ServiceInstanceReconciler final : public ManagedReconciler {
 public:
  explicit ServiceInstanceReconciler(Context& ctx);
  ~ServiceInstanceReconciler() override;

 private:
  struct Instance;  // what one pass knows of the instance beyond the MR

  core::Result<reconcile::Result> Run(Pass& p) override;
  reconcile::Step EnsureInstanceId(Pass& p, Instance& in);
  reconcile::Step ResolvePlan(Pass& p, Instance& in);
  reconcile::Step FollowOperation(Pass& p, Instance& in);
  reconcile::Step ObserveExternal(Pass& p, Instance& in);
  core::Result<reconcile::Result> HandleAbsent(Pass& p, Instance& in);
  core::Result<reconcile::Result> Provision(Pass& p, Instance& in);
  void RecordObserved(Pass& p, const Instance& in);
  core::Result<reconcile::Result> Deprovision(Pass& p, Instance& in);
  reconcile::Step SetReadyFromState(Pass& p, const Instance& in);
  reconcile::Step EnsureUpToDate(Pass& p, const Instance& in, bool& busy);
  core::Result<std::string> NewInstanceId(OsbClient& osb);
  // The claim names of the binding MRs that use this instance (same claim namespace).
  std::vector<std::string> BindingsUsing(const Json& mr) const;
  // kAnnotationDeleteInUse on the MR or on its controlling composite resource.
  bool DeletionForced(const Json& mr);
  core::Result<reconcile::Result> WaitForBindings(Pass& p, const std::vector<std::string>& users);

  std::unique_ptr<client::RestMapper> mapper_;  // finds the controlling composite's resource
};

// §6.2 update: the `parameters` to send for going from `observed` to `desired` (objects or
// null): keys only in observed -> null, keys whose values differ -> the desired value (arrays
// compared order-insensitively; an empty array or null counts as missing), equal keys left
// out. An empty object when nothing differs.
Json ParameterDelta(const Json& observed, const Json& desired);

}  // namespace klutch::providers::anynines
