// ServiceBindingReconciler: provider-anynines' ServiceBinding (data-services.md §6.3, §6.4):
// binds once its instance is Ready, publishes the credentials as the connection Secret, and
// rotates them per the ProviderConfig's annotations (controllers.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "providers/anynines/managed_reconciler.h"
#include "reconcile/step.h"

namespace klutch::providers::anynines {

class ServiceBindingReconciler final : public ManagedReconciler {
 public:
  explicit ServiceBindingReconciler(Context& ctx)
      : ManagedReconciler(ctx, ctx.bindings, "ServiceBinding") {}

 private:
  struct Superseded {
    std::string id;
    core::SystemTime at;
  };
  struct Target {
    std::string ns, name;  // the connection Secret; empty when there is none
  };
  struct Binding;  // what one pass knows of the binding beyond the MR

  core::Result<reconcile::Result> Run(Pass& p) override;
  reconcile::Step ResolveInstance(Pass& p, Binding& b);
  core::Result<std::optional<Json>> BindAs(Pass& p, const Binding& b,
                                           const std::string& binding_id);
  core::Result<reconcile::Result> BindingInProgress(Pass& p, const std::string& binding_id);
  core::Result<reconcile::Result> CreateBinding(Pass& p, Binding& b);
  reconcile::Step RotateIfDue(Pass& p, Binding& b);
  reconcile::Step FetchCurrent(Pass& p, Binding& b);
  core::Status UnbindSuperseded(Pass& p, Binding& b);
  core::Result<reconcile::Result> PublishCurrent(Pass& p, const Binding& b);
  core::Result<reconcile::Result> Delete(Pass& p, const std::vector<Superseded>& superseded);
  // Publishes credentials from a bind answer (or a fetched binding) as the Secret and the
  // status; `binding_id`/`generation` become the current binding.
  core::Result<reconcile::Result> Publish(Pass& p, const Json& credentials,
                                          const std::string& binding_id, int64_t generation,
                                          std::vector<Superseded> superseded, bool rotated);
  // Writes the Secret when it does not hold `data` yet.
  core::Status WriteSecret(const Pass& p, const Target& target, const SecretData& data);
  Target SecretTarget(const Json& mr) const;
  void SetConnectionDetails(Pass& p, const SecretData& data);
};

}  // namespace klutch::providers::anynines
