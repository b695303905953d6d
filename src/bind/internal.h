// Internals of the backend controllers shared by backend_controllers.cc (wiring) and the
// reconcilers still written as functions over the context (cluster_bindings.cc,
// app_cluster_bindings.cc), and the pure helpers the unit tests check. Not a public header.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bind/backend_context.h"
#include "bind/object_writes.h"
#include "client/dynamic.h"
#include "client/informer.h"
#include "reconcile/conditions.h"
#include "reconcile/controller.h"
#include "reconcile/events.h"

namespace klutch::bind::internal {

using client::Json;
using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;
using Context = BackendContext;

inline const client::GroupVersionResource kResourceQuotas{"", "v1", "resourcequotas"};

core::Result<Result> ReconcileClusterBinding(Context& ctx, const Request& request);
// Keyed by namespace name (request.ns empty).
core::Result<Result> ReconcileConsumerQuota(Context& ctx, const Request& request);
core::Result<Result> ReconcileAppClusterBinding(Context& ctx, const Request& request);

// ---- pure helpers ----

// The Healthy condition of a ClusterBinding at `now` (§2.6.1), and when to look again (0:
// only on the next event).
struct Health {
  reconcile::SeverityCondition condition;
  std::chrono::milliseconds recheck{0};
};
Health HeartbeatHealth(const Json& cluster_binding, core::SystemTime now,
                       std::chrono::seconds drift);

// The rules of ClusterRole `klutch-binder-<ns>`: for every export, its resource and its
// status subresource, and every permission claim's resource; one rule per API group with the
// resources sorted and de-duplicated. Exported resources get every object verb; status gets
// get/patch/update.
Json BinderRules(const std::vector<ObjectPtr>& exports);

// spec.hard of ResourceQuota `klutch-consumer` for a consumer whose cluster namespace holds
// `exports` (see BackendControllersOptions::consumer_quota): "count/<resource>" -> count as a
// string, sorted; empty when `quota` is.
Json QuotaHard(const std::map<std::string, int64_t>& quota, const std::vector<ObjectPtr>& exports);

// When a space no konnector connected to is due for collection: `grace` after the later of
// the ClusterBinding's creation and the namespace's last bind; nullopt when it is not
// collectable (a heartbeat was seen, no identity annotation, no last-bound annotation (made
// before binds recorded it), made for an AppClusterBinding, or grace is 0).
std::optional<core::SystemTime> UnconnectedDeadline(const Json& cluster_binding, const Json& ns,
                                                    std::chrono::seconds grace);

}  // namespace klutch::bind::internal
