// §4.3: one connection per distinct provider kubeconfig.
#include "konnector/connection_reconciler.h"

#include "core/log.h"
#include "konnector/connection.h"

namespace klutch::konnector::internal {

ConnectionReconciler::ConnectionReconciler(Context& ctx) : ctx_(ctx) {}

ConnectionReconciler::~ConnectionReconciler() { Stop(); }

bool ConnectionReconciler::Stop() {
  std::map<std::string, std::unique_ptr<Connection>> connections;
  {
    core::MutexLock lock(mu_);
    if (stopped_) return false;
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
  return true;
}

size_t ConnectionReconciler::connections() const {
  core::MutexLock lock(mu_);
  return connections_.size();
}

core::Result<reconcile::Result> ConnectionReconciler::Reconcile(const reconcile::Request& request) {
  const std::string key = request.Key();
  client::ObjectPtr binding = ctx_.bindings.indexer().Get(key);
  std::string connection_key;
  KubeconfigCheck check;
  if (binding) {
    if (ctx_.options.control_plane_mode) {
      connection_key = "control-plane";
    } else {
      check = CheckBindingSecret(ctx_, *binding);
      if (check.valid) connection_key = check.kubeconfig;
    }
  }
  core::MutexLock lock(mu_);
  if (stopped_) return reconcile::Result::Done();
  if (!DetachFromOther(key, connection_key)) return reconcile::Result::Done();
  if (connection_key.empty()) return reconcile::Result::Done();
  KLUTCH_ASSIGN_OR_RETURN(Connection * connection, EnsureConnection(key, connection_key, check));
  connection->Attach(key);
  binding_connection_[key] = connection_key;
  return reconcile::Result::Done();
}

bool ConnectionReconciler::DetachFromOther(const std::string& key,
                                           const std::string& connection_key) {
  auto bound = binding_connection_.find(key);
  if (bound == binding_connection_.end()) return true;
  if (bound->second == connection_key) return false;
  std::unique_ptr<Connection> closed;
  auto it = connections_.find(bound->second);
  if (it != connections_.end()) {
    it->second->Detach(key);
    if (it->second->Empty()) {
      closed = std::move(it->second);
      connections_.erase(it);
    }
  }
  binding_connection_.erase(bound);
  if (closed) {
    // Stopping waits for requests in flight to a provider that may not answer: never on
    // this (the only) worker.
    std::shared_ptr<Connection> c(std::move(closed));
    closing_.emplace_back([c] { c->Stop(); });
  }
  return true;
}

core::Result<Connection*> ConnectionReconciler::EnsureConnection(const std::string& key,
                                                                 const std::string& connection_key,
                                                                 const KubeconfigCheck& check) {
  auto it = connections_.find(connection_key);
  if (it != connections_.end()) return it->second.get();
  std::unique_ptr<Connection> connection;
  if (ctx_.options.control_plane_mode) {
    connection = std::make_unique<Connection>(ctx_, connection_key, ctx_.binding, nullptr,
                                              ctx_.options.binding_namespace);
  } else {
    auto provider = ctx_.options.new_client(check.config);
    if (!provider.ok()) {
      KLUTCH_LOG(kWarn, "konnector", "cannot connect binding {}: {}", key,
                 provider.status().message());
      return provider.status();
    }
    client::RestClient& rest = **provider;
    connection =
        std::make_unique<Connection>(ctx_, connection_key, rest, std::move(*provider), check.ns);
  }
  KLUTCH_LOG(kInfo, "konnector", "opening provider connection for namespace {} (binding {})",
             connection->provider_ns(), key);
  connection->Start();
  return connections_.emplace(connection_key, std::move(connection)).first->second.get();
}

}  // namespace klutch::konnector::internal
