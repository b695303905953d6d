// ExportSyncer: the syncers of one APIServiceExport (bind-protocol.md §4.8-§4.13). It owns the
// consumer cache of the export's resource, the isolation strategy chosen by the export's scope
// (with the provider cache), the spec, status and adopt controllers (their reconcilers in
// spec_reconciler.h, status_reconciler.h, adopt_reconciler.h) and one ClaimSyncer per accepted
// permission claim, and maps the events of either side to the keys of both: the spec controller
// works on consumer keys, status and adopt on provider keys. Internal to the konnector. Start
// and Stop from one thread; OnServiceNamespace from any.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "konnector/context.h"

namespace klutch::konnector::internal {

class ClaimSyncer;
class Connection;
class Isolation;
class SyncLatency;
struct SyncerContext;

class ExportSyncer {
 public:
  // `namespace_uid`: the provider namespace's uid (cluster-scoped exports only).
  ExportSyncer(Connection& connection, const Json& export_object, const Json& binding,
               std::string namespace_uid);
  ~ExportSyncer();
  ExportSyncer(const ExportSyncer&) = delete;
  ExportSyncer& operator=(const ExportSyncer&) = delete;

  // Creates the caches and controllers and starts them; Invalid when the export serves no
  // version.
  core::Status Start();
  void Stop();
  int64_t generation() const { return generation_; }
  // The binding's accepted permission claims it was started with.
  const Json& claims() const { return claims_; }
  // An APIServiceNamespace appeared, changed or went away.
  void OnServiceNamespace(const Json& asn, bool deleted);

 private:
  void MakeControllers();
  // The event handlers of both caches: each change enqueues the keys of both sides.
  void Watch();

  Connection& connection_;
  Context& ctx_;
  std::string name_;
  int64_t generation_ = 0;
  client::GroupVersionResource gvr_;
  std::string kind_;
  std::string scope_;
  std::string provider_ns_uid_;
  Json claims_ = Json::array();  // the binding's accepted permission claims

  std::unique_ptr<client::Informer> consumer_;
  std::unique_ptr<Isolation> isolation_;
  std::unique_ptr<SyncLatency> latency_;
  std::unique_ptr<SyncerContext> sync_;

  std::unique_ptr<reconcile::Reconciler> spec_reconciler_, status_reconciler_, adopt_reconciler_;
  std::unique_ptr<reconcile::Controller> spec_, status_, adopt_;
  std::vector<std::unique_ptr<ClaimSyncer>> claim_syncers_;
};

}  // namespace klutch::konnector::internal
