// §4.2: a binding's kubeconfig Secret, SecretValid.
#include "konnector/service_binding_reconciler.h"

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::konnector::internal {

core::Result<reconcile::Result> ServiceBindingReconciler::Reconcile(
    const reconcile::Request& request) {
  client::ObjectPtr binding = ctx_.bindings.indexer().Get(request.Key());
  if (!binding) return reconcile::Result::Done();
  KubeconfigCheck check = CheckBindingSecret(ctx_, *binding);
  Json modified = *binding;
  bool changed;
  if (check.valid) {
    changed = reconcile::MarkTrue(modified, "SecretValid", ctx_.clock);
  } else {
    changed = reconcile::MarkFalse(modified, "SecretValid", check.reason, reconcile::kSeverityError,
                                   check.message, ctx_.clock);
  }
  reconcile::SetSummary(modified, ctx_.clock);
  auto r =
      reconcile::Committer(client::ResourceClient(ctx_.binding, apis::klutch::kApiServiceBindings),
                           std::string(apis::klutch::kKonnectorFieldManager))
          .CommitStatus(*binding, modified);
  if (!r.ok()) return r.status();
  if (changed && !check.valid) {
    ctx_.binding_events.Event(*binding, "Warning", check.reason, check.message);
  }
  return reconcile::Result::Done();
}

}  // namespace klutch::konnector::internal
