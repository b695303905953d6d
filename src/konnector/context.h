// Internals of the konnector shared by its parts (konnector.cc, the connection, the syncers and
// every reconciler): the context every controller gets, the sync metrics, the index names, the
// binding's Secret check and the informer handler helper. Not a public header of the module.
#pragma once

#include <functional>
#include <string>

#include "client/informer.h"
#include "konnector/konnector.h"
#include "konnector/objects.h"
#include "reconcile/conditions.h"
#include "reconcile/controller.h"
#include "reconcile/events.h"
#include "reconcile/metrics.h"
#include "serving/metrics.h"

namespace klutch::konnector::internal {

// klutch_konnector_* families on /metrics.
struct SyncMetrics {
  explicit SyncMetrics(serving::MetricRegistry& registry);
  // Seconds from the watch event that made an object differ to the write that fixed it;
  // direction up (spec to the provider), down (status to the consumer), adopt, claim.
  serving::HistogramFamily& sync_seconds;
  serving::CounterFamily& sync_errors;  // direction, resource, reason
  serving::CounterFamily& writes;       // cluster (app|provider), verb
  serving::GaugeFamily& connections;
  serving::GaugeFamily& syncers;
  serving::CounterFamily& heartbeats;  // result
};

struct Context {
  client::RestClient& binding;  // where APIServiceBindings and their Secrets live
  client::RestClient& app;      // the App Cluster
  client::Informer& bindings;
  client::Informer& secrets;
  client::Informer& app_crds;
  client::Informer& app_namespaces;
  const KonnectorOptions& options;
  const core::Clock& clock;
  reconcile::EventRecorder& binding_events;
  reconcile::EventRecorder& app_events;
  SyncMetrics& metrics;
  reconcile::Metrics& controller_metrics;
};

// Index of the binding informer: "<secret namespace>/<secret name>" of each binding's
// kubeconfig Secret.
inline constexpr const char* kBySecretIndex = "byKubeconfigSecret";
// Index of a connection's APIServiceNamespace informer: status.namespace.
inline constexpr const char* kByProviderNamespaceIndex = "byProviderNamespace";

std::string SecretKeyOf(const Json& binding);  // "<ns>/<name>" of spec.kubeconfigSecretRef
// The check of `binding`'s kubeconfig Secret (§4.2) as the Secret cache has it.
KubeconfigCheck CheckBindingSecret(const Context& ctx, const Json& binding);

// An informer handler calling `fn` with the object on add, change and delete (a resync's
// unchanged object is skipped).
inline client::EventHandler OnChange(std::function<void(const Json&)> fn) {
  return {.on_add = [fn](const client::ObjectPtr& o) { fn(*o); },
          .on_update =
              [fn](const client::ObjectPtr& old, const client::ObjectPtr& o) {
                if (old != o) fn(*o);
              },
          .on_delete = [fn](const client::ObjectPtr& o) { fn(*o); }};
}

}  // namespace klutch::konnector::internal
