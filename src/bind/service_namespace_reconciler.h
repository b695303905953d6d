// ServiceNamespaceReconciler (klutch-backend-servicenamespace, bind-protocol.md §2.6.2): an
// APIServiceNamespace of a cluster namespace (one with a ClusterBinding) gets its provider
// Namespace `<clusterNs>-<name>` (annotated with its owner), in Namespaced consumer scope a
// RoleBinding there to ClusterRole `klutch-binder-<clusterNs>`, and status.namespace. A
// name over 63 characters or a Namespace someone else owns is a Warning Event and an error. A
// deleted APIServiceNamespace deletes the provider namespaces made for it. Reads the
// informers' caches; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "bind/backend_context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::bind {

class ServiceNamespaceReconciler final : public reconcile::Reconciler {
 public:
  // `ctx` must outlive the reconciler.
  explicit ServiceNamespaceReconciler(BackendContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share

  // Gone: the provider namespaces made for it (only those carrying its annotation) go.
  core::Result<reconcile::Result> DeleteProviderNamespaces(Pass& pass);
  // The provider namespace, created when missing; one owned by another or being deleted
  // ends the pass.
  reconcile::Step EnsureProviderNamespace(Pass& pass);
  core::Result<reconcile::Result> ReportNamespace(Pass& pass);
  // A Warning Event `reason` on the APIServiceNamespace; kInvalid with `message` (retried).
  core::Result<reconcile::Result> Failed(Pass& pass, std::string_view reason,
                                         const std::string& message);

  BackendContext& ctx_;
};

}  // namespace klutch::bind
