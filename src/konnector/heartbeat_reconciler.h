// HeartbeatReconciler (klutch-konnector-clusterbinding, bind-protocol.md §4.5): one key,
// "cluster". A pass mirrors the provider's kubeconfig Secret into each attached binding's Secret
// (OIDC mode), renews the ClusterBinding's lastHeartbeatTime when less than half a second of the
// interval is left, writes heartbeatInterval and konnectorVersion (ValidVersion), and sets
// Heartbeating on every attached binding. It answers RequeueAfter the next renewal, or within 5 s
// after a failed write. Reads the connection's caches; thread-safe.
#pragma once

#include <string>

#include "konnector/context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::konnector::internal {

class Connection;

class HeartbeatReconciler final : public reconcile::Reconciler {
 public:
  // `connection` must outlive the reconciler.
  explicit HeartbeatReconciler(Connection& connection);
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  // SecretValid on `status_object`; the Secret copied to every attached binding's Secret.
  core::Status MirrorKubeconfig(const Json& cluster_binding, Json& status_object);
  void SetBindingCondition(const std::string& binding_key, const reconcile::SeverityCondition& c);

  Connection& connection_;
  Context& ctx_;
};

}  // namespace klutch::konnector::internal
