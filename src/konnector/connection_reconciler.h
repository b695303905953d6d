// ConnectionReconciler (klutch-konnector, bind-protocol.md §4.3), on APIServiceBinding keys:
// which provider connection serves each binding. It owns the connections, one per distinct
// provider kubeconfig ("control-plane" in control-plane mode): a binding whose valid kubeconfig
// changed is detached from its old connection (closed, on a thread of its own, once it serves
// no binding) and attached to the connection of its kubeconfig, opened on first use. Run with
// one worker: connections are opened and closed in one place. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/sync.h"
#include "konnector/context.h"
#include "reconcile/controller.h"

namespace klutch::konnector::internal {

class Connection;

class ConnectionReconciler final : public reconcile::Reconciler {
 public:
  // `ctx` must outlive the reconciler.
  explicit ConnectionReconciler(Context& ctx);
  ~ConnectionReconciler();  // Stop()
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

  // Stops every connection and waits for those being closed; later passes do nothing. False
  // when it had stopped before.
  bool Stop();
  // How many provider connections are open.
  size_t connections() const;

 private:
  // Detaches binding `key` from the connection it had unless that is `connection_key`'s;
  // false when it already is (nothing to do).
  bool DetachFromOther(const std::string& key, const std::string& connection_key) REQUIRES(mu_);
  // The connection of `connection_key`, opened and started when there is none.
  core::Result<Connection*> EnsureConnection(const std::string& key,
                                             const std::string& connection_key,
                                             const KubeconfigCheck& check) REQUIRES(mu_);

  Context& ctx_;
  mutable core::Mutex mu_;
  // Keyed by the kubeconfig text ("control-plane" in control-plane mode).
  std::map<std::string, std::unique_ptr<Connection>> connections_ GUARDED_BY(mu_);
  std::map<std::string, std::string> binding_connection_ GUARDED_BY(mu_);
  std::vector<std::thread> closing_ GUARDED_BY(mu_);  // connections being stopped
  bool stopped_ GUARDED_BY(mu_) = false;
};

}  // namespace klutch::konnector::internal
