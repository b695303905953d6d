#include "bind/export_reconciler.h"

#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/register.h"
#include "bind/names.h"
#include "bind/snapshot.h"
#include "core/log.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::bind {

using client::Json;
using client::ObjectPtr;
using reconcile::Result;

namespace {
constexpr std::string_view kProviderInSync = "ProviderInSync";
}  // namespace

struct ExportReconciler::Pass {
  const Json& exported;
  const std::string key;
  client::ResourceClient exports;
  reconcile::Committer committer;
  Json modified;  // the export with the condition this pass sets
};

core::Result<Result> ExportReconciler::Reconcile(const reconcile::Request& request) {
  ObjectPtr exported = ctx_.exports.indexer().Get(request.Key());
  if (!exported || machinery::IsBeingDeleted(*exported)) return Result::Done();
  client::ResourceClient exports(ctx_.rest, apis::klutch::kApiServiceExports, request.ns);
  Pass pass{.exported = *exported,
            .key = request.Key(),
            .exports = exports,
            .committer = reconcile::Committer(exports, std::string(kFieldManager)),
            .modified = *exported};
  ObjectPtr crd = ctx_.crds.indexer().Get(request.name);
  if (!crd) return DeleteWithdrawn(pass);
  auto snapshot = CrdSnapshot(*crd);
  if (!snapshot.ok()) return Failed(pass, snapshot.status());
  KLUTCH_RUN_STEP(EnsureSnapshot(pass, *snapshot));
  return MarkInSync(pass);
}

core::Result<Result> ExportReconciler::DeleteWithdrawn(Pass& pass) {
  KLUTCH_LOG(kInfo, "bind", "deleting APIServiceExport {}: its CRD is gone", pass.key);
  auto deleted = pass.exports.Delete(machinery::Name(pass.exported),
                                     {.precondition_uid = machinery::Uid(pass.exported)});
  if (!deleted.ok() && !core::IsNotFound(deleted.status()) && !core::IsConflict(deleted.status())) {
    return deleted.status();
  }
  return Result::Done();
}

reconcile::Step ExportReconciler::EnsureSnapshot(Pass& pass, const Json& snapshot) {
  const std::string hash = SnapshotHash(snapshot);
  if (machinery::Annotation(pass.exported, apis::klutch::kSourceSpecHashAnnotation) == hash) {
    return reconcile::Continue();
  }
  pass.modified["spec"] = WithSnapshot(pass.modified.value("spec", Json::object()), snapshot);
  machinery::SetAnnotation(pass.modified, apis::klutch::kSourceSpecHashAnnotation, hash);
  auto committed = pass.committer.Commit(pass.exported, pass.modified);
  if (!committed.ok()) return committed.status();
  return Result::Done();  // the update event brings the status pass
}

core::Result<Result> ExportReconciler::MarkInSync(Pass& pass) {
  reconcile::MarkTrue(pass.modified, kProviderInSync, ctx_.clock);
  reconcile::SetSummary(pass.modified, ctx_.clock);
  auto committed = pass.committer.CommitStatus(pass.exported, pass.modified);
  if (!committed.ok()) return committed.status();
  return Result::Done();
}

core::Result<Result> ExportReconciler::Failed(Pass& pass, const core::Status& error) {
  const std::string message = error.message() +
                              "; the export keeps its last good copy until the provider fixes "
                              "the CustomResourceDefinition";
  const bool changed =
      reconcile::MarkFalse(pass.modified, kProviderInSync, "CustomResourceDefinitionUpdateFailed",
                           reconcile::kSeverityError, message, ctx_.clock);
  reconcile::SetSummary(pass.modified, ctx_.clock);
  auto committed = pass.committer.CommitStatus(pass.exported, pass.modified);
  if (!committed.ok()) return committed.status();
  if (changed) {
    ctx_.events.Event(pass.exported, reconcile::kEventTypeWarning,
                      "CustomResourceDefinitionUpdateFailed", message);
  }
  return Result::Done();
}

}  // namespace klutch::bind
