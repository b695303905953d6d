// CrdReconciler (klutch-konnector-servicebinding-crd, bind-protocol.md §4.7), on the keys of the
// connection's attached bindings: the consumer CRD of the binding's APIServiceExport, created,
// updated or adopted from an earlier binding of the same name, and the binding's Connected,
// InformersSynced and providerPrettyName. A CRD the App Cluster refuses, a foreign CRD or a
// missing export become Connected=False with a Warning Event. Reads the caches; thread-safe.
#pragma once

#include <string>

#include "konnector/context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::konnector::internal {

class Connection;

class CrdReconciler final : public reconcile::Reconciler {
 public:
  // `connection` must outlive the reconciler.
  explicit CrdReconciler(Connection& connection);
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  // The CRD of `exp` for `binding`, created or updated; Connected set on `modified` (the
  // binding). Returns an error to retry with, OK when nothing is to retry.
  core::Status EnsureCrd(const std::string& name, const Json& exp, const Json& binding,
                         Json& modified);
  // Writes `crd`; Connected=True when it went (true), False when the App Cluster refused it;
  // other errors land in `retry`.
  bool UpdateCrd(const Json& crd, const Json& binding, Json& modified, core::Status& retry);
  // Connected=False on `modified` with a Warning Event on `binding` when it changed.
  void MarkNotConnected(Json& modified, const Json& binding, const std::string& reason,
                        const std::string& message);
  bool AdoptableCrd(const Json& crd, const Json& binding) const;

  Connection& connection_;
  Context& ctx_;
};

}  // namespace klutch::konnector::internal
