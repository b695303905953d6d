// §4.8: syncer lifecycle and the export's status.
#include "konnector/export_reconciler.h"

#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "konnector/connection.h"
#include "konnector/export_syncer.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

}  // namespace

ExportReconciler::ExportReconciler(Connection& connection)
    : connection_(connection), ctx_(connection.ctx()) {}

struct ExportReconciler::Pass {
  const std::string& name;
  ObjectPtr exp;      // the APIServiceExport, null when gone
  ObjectPtr binding;  // the attached binding of the same name, null when none
  ObjectPtr crd;      // the App Cluster's CRD of that name, null when none
  core::Status start_error = core::Status::Ok();  // a syncer that could not start
};

core::Result<Result> ExportReconciler::Reconcile(const Request& request) {
  if (!connection_.CachesSynced()) return Result::Done();
  Pass pass{
      .name = request.name,
      .exp = connection_.exports().indexer().Get(connection_.provider_ns() + "/" + request.name),
      .binding = connection_.BindingNamed(request.name),
      .crd = ctx_.app_crds.indexer().Get(request.name)};
  KLUTCH_RUN_STEP(EnsureSyncer(pass));
  if (!pass.exp) return Result::Done();
  return UpdateExportStatus(pass);
}

reconcile::Step ExportReconciler::EnsureSyncer(Pass& pass) {
  const ObjectPtr& exp = pass.exp;
  const ObjectPtr& binding = pass.binding;
  bool runnable = exp && binding && pass.crd && CrdOwnedBy(*pass.crd, *binding) &&
                  reconcile::IsConditionTrue(*pass.crd, "Established") &&
                  !FirstServedVersion(*exp).empty();
  // The provider namespace's uid (cluster-scoped exports) is read before taking the lock.
  std::string ns_uid;
  if (runnable && machinery::GetString(*exp, {"spec", "scope"}) == "Cluster") {
    auto ns = client::ResourceClient(connection_.provider(), client::resources::kNamespaces)
                  .Get(connection_.provider_ns());
    if (ns.ok()) {
      ns_uid = machinery::Uid(*ns);
    } else {
      pass.start_error = ns.status();
      runnable = false;
    }
  }
  std::shared_ptr<ExportSyncer> stale;
  const bool open = connection_.syncers().Update([&](SyncerRegistry::Map& syncers) {
    auto it = syncers.find(pass.name);
    int64_t generation = exp ? Generation(*exp) : 0;
    if (it != syncers.end() && (!runnable || it->second->generation() != generation ||
                                it->second->claims() != AcceptedClaims(*binding))) {
      stale = std::move(it->second);
      syncers.erase(it);
      it = syncers.end();
    }
    if (runnable && it == syncers.end()) {
      auto syncer = std::make_shared<ExportSyncer>(connection_, *exp, *binding, ns_uid);
      pass.start_error = syncer->Start();  // starts threads, never blocks
      if (pass.start_error.ok()) {
        // Tell it about the namespaces mapped so far.
        for (const auto& asn : connection_.service_namespaces().indexer().List()) {
          syncer->OnServiceNamespace(*asn, false);
        }
        syncers.emplace(pass.name, std::move(syncer));
      }
    }
    ctx_.metrics.syncers.With({{"connection", connection_.provider_ns()}})
        .Set(static_cast<double>(syncers.size()));
  });
  if (!open) return Result::Done();  // the connection stopped
  stale.reset();                     // stops outside the lock
  return reconcile::Continue();
}

core::Result<Result> ExportReconciler::UpdateExportStatus(const Pass& pass) {
  // The export's status (committer patch to the provider).
  Json modified = *pass.exp;
  if (pass.binding) {
    reconcile::MarkTrue(modified, "Connected", ctx_.clock);
    reconcile::MarkFalse(modified, "ConsumerInSync", "Unknown", reconcile::kSeverityInfo,
                         "the consumer does not report schema conformance", ctx_.clock);
  } else {
    reconcile::MarkFalse(modified, "Connected", "APIServiceBindingNotFound",
                         reconcile::kSeverityInfo, "no APIServiceBinding for this export",
                         ctx_.clock);
    reconcile::MarkFalse(modified, "ConsumerInSync", "NA", reconcile::kSeverityInfo,
                         "no APIServiceBinding for this export", ctx_.clock);
  }
  if (pass.crd && pass.binding && CrdOwnedBy(*pass.crd, *pass.binding)) {
    CopyCrdStatus(*pass.crd, modified);
  }
  if (!pass.start_error.ok()) {
    reconcile::MarkFalse(modified, "Syncing", "SyncerStartFailed", reconcile::kSeverityError,
                         pass.start_error.message(), ctx_.clock);
  } else {
    reconcile::RemoveCondition(modified, "Syncing");
  }
  reconcile::SetSummary(modified, ctx_.clock);
  auto r = reconcile::Committer(
               client::ResourceClient(connection_.provider(), apis::klutch::kApiServiceExports),
               std::string(apis::klutch::kKonnectorFieldManager))
               .CommitStatus(*pass.exp, modified);
  if (!r.ok()) return r.status();
  if (!pass.start_error.ok()) return pass.start_error;
  return Result::Done();
}

void ExportReconciler::CopyCrdStatus(const Json& crd, Json& modified) {
  if (const Json* conds = machinery::Find(crd, {"status", "conditions"});
      conds && conds->is_array()) {
    for (const Json& c : *conds) {
      std::string type = machinery::GetString(c, {"type"});
      if (type.empty() || type == reconcile::kReadyCondition) continue;
      std::string status = machinery::GetString(c, {"status"});
      reconcile::SeverityCondition sc{
          .type = type,
          .status = status,
          .severity = status == "True" ? "" : std::string(reconcile::kSeverityError),
          .last_transition_time = machinery::GetString(c, {"lastTransitionTime"}),
          .reason = machinery::GetString(c, {"reason"}),
          .message = machinery::GetString(c, {"message"})};
      reconcile::SetSeverityCondition(modified, sc, ctx_.clock);
    }
  }
  // Copied once the App Cluster has filled them (the export's schema requires kind and
  // plural in acceptedNames).
  const Json* accepted = machinery::Find(crd, {"status", "acceptedNames"});
  if (accepted && !machinery::GetString(*accepted, {"plural"}).empty()) {
    modified["status"]["acceptedNames"] = *accepted;
  }
  const Json* stored = machinery::Find(crd, {"status", "storedVersions"});
  if (stored && stored->is_array()) modified["status"]["storedVersions"] = *stored;
}

}  // namespace klutch::konnector::internal
