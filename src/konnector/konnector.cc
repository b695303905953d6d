// The konnector's top level (§4.1-§4.3): the App Cluster caches, the wiring of the binding
// validity and connection controllers, the shared context's metrics, and the binding CRD
// installer.
#include "konnector/konnector.h"

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/register.h"
#include "apis/klutch_crds.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "konnector/connection_reconciler.h"
#include "konnector/service_binding_reconciler.h"
#include "reconcile/crd_installer.h"

namespace klutch::konnector {

using reconcile::Request;

namespace internal {

SyncMetrics::SyncMetrics(serving::MetricRegistry& r)
    : sync_seconds(r.Histogram(
          "klutch_konnector_sync_duration_seconds",
          "Seconds from the watch event that made a bound object differ "
          "between the clusters to the write that made them agree",
          {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30})),
      sync_errors(r.Counter("klutch_konnector_sync_errors_total",
                            "Syncs a cluster refused, by direction, resource and reason")),
      writes(r.Counter("klutch_konnector_writes_total",
                       "Writes the konnector sent, by cluster (app, provider) and verb")),
      connections(r.Gauge("klutch_konnector_connections", "Open provider connections")),
      syncers(r.Gauge("klutch_konnector_syncers", "Running export syncers, by connection")),
      heartbeats(r.Counter("klutch_konnector_heartbeats_total",
                           "ClusterBinding heartbeat writes, by result")) {}

KubeconfigCheck CheckBindingSecret(const Context& ctx, const Json& binding) {
  std::string key = machinery::GetString(binding, {"spec", "kubeconfigSecretRef", "key"});
  if (key.empty()) key = apis::klutch::kKubeconfigKey;
  std::string secret_key = SecretKeyOf(binding);
  client::ObjectPtr secret = ctx.secrets.indexer().Get(secret_key);
  return CheckKubeconfigSecret(secret.get(), secret_key, key, !ctx.options.control_plane_mode);
}

}  // namespace internal

class Konnector::Impl {
 public:
  Impl(reconcile::Manager& manager, client::RestClient& app, KonnectorOptions options)
      : manager_(manager),
        app_(app),
        options_(std::move(options)),
        clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
        binding_events_(manager.rest(), {options_.component, options_.instance}, &clock_),
        app_events_(app, {options_.component, options_.instance}, &clock_),
        metrics_(manager.metric_registry()) {
    if (!options_.new_client) {
      options_.new_client = [](const client::RestConfig& config) {
        return client::RestClient::New(config);
      };
    }
    client::InformerOptions o{.clock = &clock_};
    app_crds_ =
        std::make_unique<client::Informer>(app_, client::resources::kCustomResourceDefinitions, o);
    app_namespaces_ = std::make_unique<client::Informer>(app_, client::resources::kNamespaces, o);
  }

  ~Impl() { Stop(); }

  core::Status Setup() {
    client::InformerOptions scoped{.ns = options_.binding_namespace, .clock = &clock_};
    bindings_ = &manager_.Informer(apis::klutch::kApiServiceBindings, scoped);
    secrets_ = &manager_.Informer(client::resources::kSecrets, scoped);
    core::Status s = bindings_->indexer().AddIndex(internal::kBySecretIndex, [](const Json& b) {
      return std::vector<std::string>{internal::SecretKeyOf(b)};
    });
    if (!s.ok()) return s;
    ctx_ = std::make_unique<internal::Context>(
        internal::Context{.binding = manager_.rest(),
                          .app = app_,
                          .bindings = *bindings_,
                          .secrets = *secrets_,
                          .app_crds = *app_crds_,
                          .app_namespaces = *app_namespaces_,
                          .options = options_,
                          .clock = clock_,
                          .binding_events = binding_events_,
                          .app_events = app_events_,
                          .metrics = metrics_,
                          .controller_metrics = manager_.metrics()});

    validity_ = std::make_unique<internal::ServiceBindingReconciler>(*ctx_);
    connections_ = std::make_unique<internal::ConnectionReconciler>(*ctx_);
    auto by_secret = [this](const Json& secret) {
      std::vector<Request> out;
      for (const auto& b :
           bindings_->indexer().ByIndex(internal::kBySecretIndex, client::ObjectKey(secret))) {
        out.push_back({machinery::Namespace(*b), machinery::Name(*b)});
      }
      return out;
    };
    auto& validity =
        manager_.AddController("klutch-konnector-servicebinding", *validity_, options_.workers);
    validity.For(*bindings_);
    validity.Watches(*secrets_, by_secret);
    // One worker: connections are opened and closed in one place.
    auto& connections = manager_.AddController("klutch-konnector", *connections_, 1);
    connections.For(*bindings_);
    connections.Watches(*secrets_, by_secret);
    return core::Status::Ok();
  }

  core::Status StartAppInformers(std::chrono::milliseconds timeout) {
    app_crds_->Start();
    app_namespaces_->Start();
    if (!app_crds_->WaitForSync(timeout) || !app_namespaces_->WaitForSync(timeout)) {
      return core::Status(core::Reason::kTimeout,
                          "the App Cluster's CustomResourceDefinitions and Namespaces did not "
                          "list within the timeout");
    }
    return core::Status::Ok();
  }

  void Stop() {
    if (connections_ && !connections_->Stop()) return;  // stopped before
    app_crds_->Stop();
    app_namespaces_->Stop();
    binding_events_.Stop();
    app_events_.Stop();
  }

  size_t connections() const { return connections_ ? connections_->connections() : 0; }

 private:
  reconcile::Manager& manager_;
  client::RestClient& app_;
  KonnectorOptions options_;
  const core::Clock& clock_;
  reconcile::EventRecorder binding_events_;
  reconcile::EventRecorder app_events_;
  internal::SyncMetrics metrics_;
  std::unique_ptr<client::Informer> app_crds_;
  std::unique_ptr<client::Informer> app_namespaces_;
  client::Informer* bindings_ = nullptr;
  client::Informer* secrets_ = nullptr;
  std::unique_ptr<internal::Context> ctx_;
  std::unique_ptr<internal::ServiceBindingReconciler> validity_;
  std::unique_ptr<internal::ConnectionReconciler> connections_;
};

Konnector::Konnector(reconcile::Manager& manager, client::RestClient& app, KonnectorOptions options)
    : impl_(std::make_unique<Impl>(manager, app, std::move(options))) {}
Konnector::~Konnector() = default;
core::Status Konnector::Setup() { return impl_->Setup(); }
core::Status Konnector::StartAppInformers(std::chrono::milliseconds timeout) {
  return impl_->StartAppInformers(timeout);
}
void Konnector::Stop() { impl_->Stop(); }
size_t Konnector::connections() const { return impl_->connections(); }

core::Status InstallBindingCrd(client::RestClient& app, std::chrono::milliseconds timeout,
                               const core::Clock& clock) {
  auto crd = machinery::ParseYaml(apis::KlutchCrdYaml(apis::kApiServiceBindingsCrdFile));
  if (!crd.ok()) return crd.status();
  core::Status s = reconcile::InstallCrd(app, *crd, timeout, clock);
  if (s.reason() == core::Reason::kTimeout) {
    return core::Status(core::Reason::kTimeout, s.message() + " in the App Cluster");
  }
  return s;
}

}  // namespace klutch::konnector
