// BackendContext: what the backend's reconcilers share (export_request_reconciler.h,
// export_reconciler.h, service_namespace_reconciler.h, cluster_binding_reconciler.h,
// kubeconfig_reconciler.h, consumer_quota_reconciler.h, app_cluster_binding_reconciler.h),
// built once by BackendControllers (backend_controllers.h): the REST client, the options,
// time, Events, the normalised scopes and the informers with the indexes named below. The
// informer pointers of the optional controllers are set in BackendControllers::Setup, before
// any reconcile runs; afterwards nothing here changes. Not a public header.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "bind/backend_controllers.h"
#include "client/dynamic.h"
#include "client/informer.h"
#include "reconcile/events.h"

namespace klutch::bind {

// Informer index names.
inline constexpr const char* kByExportIndex = "byExport";  // SER -> "<ns>/<plural>.<group>"
inline constexpr const char* kByCrdIndex = "byCrd";        // SER, export -> "<plural>.<group>"
inline constexpr const char* kByServiceNamespaceIndex =
    "byServiceNamespace";  // Namespace -> its api-service-namespace annotation
inline constexpr const char* kBySecretIndex = "byKubeconfigSecret";  // ACB -> "<ns>/<name>"
inline constexpr const char* kByClusterNamespaceIndex =
    "byClusterNamespace";  // provider Namespace -> the cluster namespace it was made for

struct BackendContext {
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

// A requeue delay in whole milliseconds, at least 1 (0 would mean "no requeue").
inline std::chrono::milliseconds Ms(core::SystemTime::duration d) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(d),
                  std::chrono::milliseconds(1));
}

// Informer contents as plain objects.
inline std::vector<client::Json> Objects(client::Informer& informer) {
  std::vector<client::Json> out;
  for (const client::ObjectPtr& o : informer.indexer().List()) out.push_back(*o);
  return out;
}

}  // namespace klutch::bind
