// ServiceBindingReconciler (klutch-operator-servicebinding): a ServiceBinding
// (servicebindings.anynines.com/v1beta3) becomes a login role of its own on the Postgresql it
// names, a member of the instance's owner role, so what it creates belongs to the instance. The
// credentials go into the Secret <binding>-service-binding beside it (username, password,
// database, instance_service, and port: the servers here do not listen on 5432), controlled by
// the binding; status.implemented and status.secret say so. Deleting the binding drops the role
// and ends its sessions. Thread-safe.
#pragma once

#include "a8s/operator_context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::a8s {

class ServiceBindingReconciler final : public reconcile::Reconciler {
 public:
  explicit ServiceBindingReconciler(OperatorContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one pass share

  core::Result<reconcile::Result> Delete(Pass& p);
  // Whether the Postgresql of `record` is gone or being deleted (as the informer sees it).
  bool InstanceBeingDeleted(const InstanceRecord& record) const;
  reconcile::Step EnsureFinalizer(Pass& p);
  reconcile::Step ResolveInstance(Pass& p);
  reconcile::Step EnsureLogin(Pass& p);
  reconcile::Step EnsureSecret(Pass& p);
  core::Result<reconcile::Result> ReportStatus(Pass& p);

  OperatorContext& ctx_;
};

}  // namespace klutch::a8s
