// ClaimSyncer: the wiring of one accepted permission claim (bind-protocol.md §4.13), the
// Secrets or ConfigMaps the konnector copies between the mapped namespaces. It owns the
// consumer cache (cluster-wide) and the provider cache (one informer per mapped provider
// namespace) of the claimed resource and the controller running a ClaimReconciler, whose keys
// are provider keys: every event of either side and every newly mapped namespace enqueues the
// objects the claim names. Internal to the konnector. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "client/multi_namespace_informer.h"
#include "konnector/context.h"

namespace klutch::konnector::internal {

class ClaimReconciler;
class Connection;

class ClaimSyncer {
 public:
  ClaimSyncer(Connection& connection, const Json& claim);
  ~ClaimSyncer();
  ClaimSyncer(const ClaimSyncer&) = delete;
  ClaimSyncer& operator=(const ClaimSyncer&) = delete;

  void Start();
  void Stop();
  void OnServiceNamespace(const std::string& cns, const std::string& pns, bool deleted);

 private:
  void EnqueueConsumer(const Json& c);

  Connection& connection_;
  std::unique_ptr<client::Informer> consumer_;
  std::unique_ptr<client::MultiNamespaceInformer> provider_;
  std::unique_ptr<ClaimReconciler> reconciler_;
  std::unique_ptr<reconcile::Controller> controller_;
};

}  // namespace klutch::konnector::internal
