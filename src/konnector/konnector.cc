// The konnector's top level (§4.1-§4.3): binding validity, one connection per distinct
// provider kubeconfig, the App Cluster caches, and the binding CRD installer.
#include "konnector/konnector.h"

#include <thread>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/register.h"
#include "apis/klutch_crds.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "konnector/connection.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"
#include "reconcile/crd_installer.h"

namespace klutch::konnector {

using client::ObjectPtr;
using internal::Connection;
using reconcile::Request;
using reconcile::Result;

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

    validity_ = std::make_unique<reconcile::FuncReconciler>(
        [this](const Request& r) { return ReconcileValidity(r); });
    connections_reconciler_ = std::make_unique<reconcile::FuncReconciler>(
        [this](const Request& r) { return ReconcileConnection(r); });
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
    auto& connections = manager_.AddController("klutch-konnector", *connections_reconciler_, 1);
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
    std::map<std::string, std::unique_ptr<Connection>> connections;
    {
      core::MutexLock lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      connections.swap(connections_);
      binding_connection_.clear();
    }
    connections.clear();
    std::vector<std::thread> closing;
    {
      core::MutexLock lock(mu_);
      closing.swap(closing_);
    }
    for (auto& t : closing) t.join();
    app_crds_->Stop();
    app_namespaces_->Stop();
    binding_events_.Stop();
    app_events_.Stop();
  }

  size_t connections() const {
    core::MutexLock lock(mu_);
    return connections_.size();
  }

 private:
  KubeconfigCheck Check(const Json& binding) {
    std::string key = machinery::GetString(binding, {"spec", "kubeconfigSecretRef", "key"});
    if (key.empty()) key = apis::klutch::kKubeconfigKey;
    std::string secret_key = internal::SecretKeyOf(binding);
    ObjectPtr secret = secrets_->indexer().Get(secret_key);
    return CheckKubeconfigSecret(secret.get(), secret_key, key, !options_.control_plane_mode);
  }

  // §4.2: SecretValid.
  core::Result<Result> ReconcileValidity(const Request& request) {
    ObjectPtr binding = bindings_->indexer().Get(request.Key());
    if (!binding) return Result::Done();
    KubeconfigCheck check = Check(*binding);
    Json modified = *binding;
    bool changed;
    if (check.valid) {
      changed = reconcile::MarkTrue(modified, "SecretValid", clock_);
    } else {
      changed = reconcile::MarkFalse(modified, "SecretValid", check.reason,
                                     reconcile::kSeverityError, check.message, clock_);
    }
    reconcile::SetSummary(modified, clock_);
    auto r = reconcile::Committer(
                 client::ResourceClient(manager_.rest(), apis::klutch::kApiServiceBindings),
                 std::string(apis::klutch::kKonnectorFieldManager))
                 .CommitStatus(*binding, modified);
    if (!r.ok()) return r.status();
    if (changed && !check.valid)
      binding_events_.Event(*binding, "Warning", check.reason, check.message);
    return Result::Done();
  }

  // §4.3: which connection serves each binding.
  core::Result<Result> ReconcileConnection(const Request& request) {
    const std::string key = request.Key();
    ObjectPtr binding = bindings_->indexer().Get(key);
    std::string connection_key;
    KubeconfigCheck check;
    if (binding) {
      if (options_.control_plane_mode) {
        connection_key = "control-plane";
      } else {
        check = Check(*binding);
        if (check.valid) connection_key = check.kubeconfig;
      }
    }
    core::MutexLock lock(mu_);
    if (stopped_) return Result::Done();
    std::unique_ptr<Connection> closed;
    auto bound = binding_connection_.find(key);
    if (bound != binding_connection_.end()) {
      if (bound->second == connection_key) return Result::Done();
      auto it = connections_.find(bound->second);
      if (it != connections_.end()) {
        it->second->Detach(key);
        if (it->second->Empty()) {
          closed = std::move(it->second);
          connections_.erase(it);
        }
      }
      binding_connection_.erase(bound);
    }
    if (closed) {
      // Stopping waits for requests in flight to a provider that may not answer: never on
      // this (the only) worker.
      std::shared_ptr<Connection> c(std::move(closed));
      closing_.emplace_back([c] { c->Stop(); });
    }
    if (connection_key.empty()) return Result::Done();
    auto it = connections_.find(connection_key);
    if (it == connections_.end()) {
      std::unique_ptr<Connection> connection;
      if (options_.control_plane_mode) {
        connection = std::make_unique<Connection>(*ctx_, connection_key, manager_.rest(), nullptr,
                                                  options_.binding_namespace);
      } else {
        auto provider = options_.new_client(check.config);
        if (!provider.ok()) {
          KLUTCH_LOG(kWarn, "konnector", "cannot connect binding {}: {}", key,
                     provider.status().message());
          return provider.status();
        }
        client::RestClient& rest = **provider;
        connection = std::make_unique<Connection>(*ctx_, connection_key, rest, std::move(*provider),
                                                  check.ns);
      }
      KLUTCH_LOG(kInfo, "konnector", "opening provider connection for namespace {} (binding {})",
                 connection->provider_ns(), key);
      connection->Start();
      it = connections_.emplace(connection_key, std::move(connection)).first;
    }
    it->second->Attach(key);
    binding_connection_[key] = connection_key;
    return Result::Done();
  }

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
  std::unique_ptr<reconcile::FuncReconciler> validity_;
  std::unique_ptr<reconcile::FuncReconciler> connections_reconciler_;

  mutable core::Mutex mu_;
  // Keyed by the kubeconfig text ("control-plane" in control-plane mode).
  std::map<std::string, std::unique_ptr<Connection>> connections_ GUARDED_BY(mu_);
  std::map<std::string, std::string> binding_connection_ GUARDED_BY(mu_);
  std::vector<std::thread> closing_ GUARDED_BY(mu_);  // connections being stopped
  bool stopped_ GUARDED_BY(mu_) = false;
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
