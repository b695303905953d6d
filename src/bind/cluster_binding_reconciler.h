// ClusterBindingReconciler (klutch-backend-clusterbinding, bind-protocol.md §2.6.1): a
// ClusterBinding's Healthy condition from the konnector's heartbeats (requeued so that a
// timeout is noticed without events), and the consumer's RBAC in its cluster namespace:
// RoleBinding `klutch-binder`, ClusterRole `klutch-binder-<ns>` with exactly the exported
// resources and claims, its ClusterRoleBinding only in Cluster consumer scope. A failed RBAC
// write is PermissionsReady=False with a Warning Event and retried. A cluster namespace made
// by /bind whose ClusterBinding had no heartbeat within `unconnected_cluster_grace` of its last
// bind is deleted with everything in it. Reads the informers' caches; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "bind/backend_context.h"
#include "reconcile/conditions.h"
#include "reconcile/controller.h"

namespace klutch::bind {

// The Healthy condition of a ClusterBinding at `now` (§2.6.1), and when to look again (0:
// only on the next event).
struct Health {
  reconcile::SeverityCondition condition;
  std::chrono::milliseconds recheck{0};
};
Health HeartbeatHealth(const client::Json& cluster_binding, core::SystemTime now,
                       std::chrono::seconds drift);

// The rules of ClusterRole `klutch-binder-<ns>`: for every export, its resource and its
// status subresource, and every permission claim's resource; one rule per API group with the
// resources sorted and de-duplicated. Exported resources get every object verb; status gets
// get/patch/update.
client::Json BinderRules(const std::vector<client::ObjectPtr>& exports);

// When a space no konnector connected to is due for collection: `grace` after the later of
// the ClusterBinding's creation and the namespace's last bind; nullopt when it is not
// collectable (a heartbeat was seen, no identity annotation, no last-bound annotation (made
// before binds recorded it), made for an AppClusterBinding, or grace is 0).
std::optional<core::SystemTime> UnconnectedDeadline(const client::Json& cluster_binding,
                                                    const client::Json& ns,
                                                    std::chrono::seconds grace);

class ClusterBindingReconciler final : public reconcile::Reconciler {
 public:
  // `ctx` must outlive the reconciler.
  explicit ClusterBindingReconciler(BackendContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share

  // Deletes the cluster namespace `cached_ns` of a consumer whose konnector never connected
  // (checked again on the live objects) and the cluster-scoped RBAC made for it.
  core::Result<reconcile::Result> CollectUnconnected(const client::Json& cached_ns,
                                                     std::chrono::seconds grace);
  // Healthy from the heartbeats (on pass.modified).
  void CheckHealth(Pass& pass);
  // The consumer's RBAC (§2.7): RoleBinding, ClusterRole, ClusterRoleBinding.
  core::Status EnsureRbac(Pass& pass);
  // ClusterRole `klutch-binder-<ns>` with `rules`, owned by the cluster Namespace.
  core::Status EnsureBinderRole(const client::Json& ns, const client::Json& rules);
  // ClusterRoleBinding `klutch-binder-<ns>`: present exactly in Cluster consumer scope.
  core::Status EnsureBinderClusterRoleBinding(const client::Json& ns);
  // The summary and the status written; a Warning Event for a worse health.
  core::Status CommitStatus(Pass& pass);
  // The next look: at the health's recheck or the collection deadline, whichever is first.
  reconcile::Result Recheck(const Pass& pass) const;
  // PermissionsReady=False with `rbac`, the status written, a Warning Event RBACFailed when
  // the condition changed; `rbac` (retried).
  core::Result<reconcile::Result> Failed(Pass& pass, const core::Status& rbac);

  BackendContext& ctx_;
};

}  // namespace klutch::bind
