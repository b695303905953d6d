// BackendControllers: the Control Plane controllers of the bind backend (bind-protocol.md §2.6,
// ADR 0013), on one reconcile::Manager whose client has the backend's rights:
//  - klutch-backend-serviceexportrequest: APIServiceExportRequest -> APIServiceExports (CRD
//    snapshot, template claims), ExportsReady/Ready/phase, Failed after `request_timeout`,
//    deleted `request_retention` after it finished (timed requeues, not resyncs);
//  - klutch-backend-serviceexport: APIServiceExport kept in step with its CRD (hash), deleted
//    with it; ProviderInSync;
//  - klutch-backend-servicenamespace: APIServiceNamespace -> provider Namespace
//    `<clusterNs>-<name>` (+ RoleBinding in Namespaced consumer scope), status.namespace;
//  - klutch-backend-clusterbinding: Healthy from heartbeats (requeued so a timeout is noticed
//    without events), the consumer's RBAC (RoleBinding, ClusterRole `klutch-binder-<ns>` with
//    exactly the exported resources and claims, ClusterRoleBinding only in Cluster scope);
//    a cluster namespace made by /bind whose ClusterBinding had no heartbeat within
//    `unconnected_cluster_grace` of its last bind is deleted with everything in it;
//  - klutch-backend-consumerquota: ResourceQuota `klutch-consumer` (object counts from
//    `consumer_quota`) in every cluster namespace made by /bind and its provider namespaces,
//    re-created when deleted, its claim kinds following the namespace's exports;
//  - klutch-backend-kubeconfig: the ClusterBinding's kubeconfig Secret always holds a
//    TokenRequest token with at least half its lifetime left;
//  - klutch-backend-appclusterbinding (control-plane mode): AppClusterBinding -> binding root
//    namespace, mirrored kubeconfig, ClusterBinding, Role/RoleBinding, APIServiceBindings,
//    export requests, konnector Deployment; cleanup behind a finalizer.
// Failures a user can act on become conditions and Warning Events on the object concerned.
// Setup() applies the static ClusterRole `klutch-binder` and registers informers and
// controllers; the manager starts them. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "bind/provision.h"
#include "client/rest_client.h"
#include "core/clock.h"
#include "core/status.h"
#include "reconcile/manager.h"

namespace klutch::bind {

struct BackendControllersOptions {
  // "Namespaced" or "Cluster" (case-insensitive): the exports' informerScope and whether the
  // consumer's ClusterRole is bound per provider namespace or cluster-wide.
  std::string consumer_scope = "Namespaced";
  // "Prefixed", "Namespaced" or "None" (case-insensitive): clusterScopedIsolation of exports
  // of cluster-scoped CRDs.
  std::string cluster_scoped_isolation = "Prefixed";
  // Run the AppClusterBinding controller (needs the apiservicebindings and
  // appclusterbindings CRDs).
  bool control_plane_mode = false;
  // How kubeconfigs are written (address, CA, server name, token lifetime); its clock is
  // replaced by `clock`.
  ProvisionOptions provision;
  // The konnector image of control-plane-mode Deployments.
  std::string konnector_image = "klutch:latest";
  // An export request still failing after this long is Failed; a finished one is deleted
  // after `request_retention`.
  std::chrono::seconds request_timeout{60};
  std::chrono::seconds request_retention{600};
  // A heartbeat this far in the future is clock drift.
  std::chrono::seconds heartbeat_drift{10};
  // A cluster namespace made by /bind (it carries the identity annotation) whose
  // ClusterBinding has had no heartbeat this long after its creation and after the last bind
  // is deleted, with its ServiceAccount, RoleBinding, Secrets, ClusterRole and
  // ClusterRoleBinding. A space whose konnector ever reported a heartbeat is never collected
  // this way. 0: never collect.
  std::chrono::seconds unconnected_cluster_grace{0};
  // The object counts of ResourceQuota `klutch-consumer` in consumer namespaces: resource
  // ("secrets", "<plural>.<group>") -> hard count (written as `count/<resource>`). The key
  // "claims" stands for every resource the namespace's exports offer that has no entry of
  // its own. Empty: no quota.
  std::map<std::string, int64_t> consumer_quota;
  int workers = 1;  // per controller
  // Who reports Events.
  std::string component = "klutch-backend";
  std::string instance;
  const core::Clock* clock = nullptr;  // nullptr: real time; must outlive the controllers
};

class BackendControllers {
 public:
  // `manager`'s client is used for every read and write; it must outlive this object.
  BackendControllers(reconcile::Manager& manager, BackendControllersOptions options);
  ~BackendControllers();  // Stop()
  BackendControllers(const BackendControllers&) = delete;
  BackendControllers& operator=(const BackendControllers&) = delete;

  // Validates the options (kInvalid naming the bad one), applies ClusterRole `klutch-binder`
  // (API errors as the server sent them), and registers informers and controllers with the
  // manager. Call once, before manager.Start().
  core::Status Setup();
  // Stops the event recorder (after the manager stopped the controllers). Idempotent.
  void Stop();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The value of --consumer-quota: comma-separated `<resource>=<count>` (resource as in
// BackendControllersOptions::consumer_quota, optionally written `count/<resource>`; counts
// 0 or more). "" is no quota. kInvalid names the bad entry.
core::Result<std::map<std::string, int64_t>> ParseConsumerQuota(std::string_view text);
// The default of --consumer-quota.
inline constexpr std::string_view kDefaultConsumerQuota =
    "claims=50,secrets=200,configmaps=100,apiserviceexportrequests.klutch.anynines.com=50,"
    "apiservicenamespaces.klutch.anynines.com=50";

// Creates or updates every provider-side CRD of `apis::ProviderCrdFiles(control_plane_mode)`
// and waits until each is Established (reconcile::InstallCrd; kTimeout names the CRD).
core::Status InstallProviderCrds(client::RestClient& admin, bool control_plane_mode,
                                 std::chrono::milliseconds timeout,
                                 const core::Clock& clock = core::RealClock::Get());

// The static ClusterRole `klutch-binder` (§2.6.1): what every consumer may do with its own
// bind objects, granted in its cluster namespace by RoleBinding `klutch-binder`.
machinery::Json BinderClusterRole();
// Creates or updates it.
core::Status ApplyBinderClusterRole(client::RestClient& admin);

}  // namespace klutch::bind
