// Internals of the backend controllers shared by backend_controllers.cc (wiring) and the
// reconcilers (export_requests.cc, exports.cc, cluster_bindings.cc, app_cluster_bindings.cc): the
// context every reconciler gets and the pure helpers the unit tests check. Not a public header.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bind/backend_controllers.h"
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

inline const client::GroupVersionResource kResourceQuotas{"", "v1", "resourcequotas"};

// A requeue delay in whole milliseconds, at least 1 (0 would mean "no requeue").
inline std::chrono::milliseconds Ms(core::SystemTime::duration d) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(d),
                  std::chrono::milliseconds(1));
}

// Informer index names.
inline constexpr const char* kByExportIndex = "byExport";  // SER -> "<ns>/<plural>.<group>"
inline constexpr const char* kByCrdIndex = "byCrd";        // SER, export -> "<plural>.<group>"
inline constexpr const char* kByServiceNamespaceIndex =
    "byServiceNamespace";  // Namespace -> its api-service-namespace annotation
inline constexpr const char* kBySecretIndex = "byKubeconfigSecret";  // ACB -> "<ns>/<name>"
inline constexpr const char* kByClusterNamespaceIndex =
    "byClusterNamespace";  // provider Namespace -> the cluster namespace it was made for

struct Context {
  client::RestClient& rest;
  const BackendControllersOptions& options;
  const core::Clock& clock;
  reconcile::EventRecorder& events;
  std::string consumer_scope;  // normalised: Namespaced | Cluster
  std::string isolation;       // normalised: Prefixed | Namespaced | None
  client::Informer& export_requests;
  client::Informer& exports;
  client::Informer& service_namespaces;
  client::Informer& cluster_bindings;
  client::Informer& crds;
  client::Informer& templates;
  client::Informer& namespaces;
  client::Informer* quotas = nullptr;  // ours only (label); when consumer_quota is set
  // Control-plane mode only.
  client::Informer* app_cluster_bindings = nullptr;
  client::Informer* api_service_bindings = nullptr;
  client::Informer* secrets = nullptr;  // metadata only: changes of referenced Secrets
  client::Informer* deployments = nullptr;
};

core::Result<Result> ReconcileExportRequest(Context& ctx, const Request& request);
core::Result<Result> ReconcileExport(Context& ctx, const Request& request);
core::Result<Result> ReconcileServiceNamespace(Context& ctx, const Request& request);
core::Result<Result> ReconcileClusterBinding(Context& ctx, const Request& request);
core::Result<Result> ReconcileKubeconfig(Context& ctx, const Request& request);
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

// Informer contents as plain objects.
std::vector<Json> Objects(client::Informer& informer);

// Helpers for reconcilers.
core::Result<Json> GetOrCreate(const client::ResourceClient& rc, const Json& desired);
// A RoleBinding `name` in `ns` granting ClusterRole (or Role) `role` to the ServiceAccount
// `sa_ns`/`sa_name`; subjects fixed on drift, re-created when the immutable roleRef differs.
core::Status EnsureRoleBinding(client::RestClient& rest, const std::string& ns,
                               const std::string& name, const std::string& role_kind,
                               const std::string& role, const std::string& sa_ns,
                               const std::string& sa_name, const Json& labels = Json::object());
// Normalised option values; "" when invalid.
std::string NormaliseScope(std::string_view scope);
std::string NormaliseIsolation(std::string_view isolation);

}  // namespace klutch::bind::internal
