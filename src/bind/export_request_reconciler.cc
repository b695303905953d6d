#include "bind/export_request_reconciler.h"

#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/register.h"
#include "bind/names.h"
#include "bind/snapshot.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::bind {

using client::Json;
using client::ObjectPtr;
using reconcile::Result;

namespace {
constexpr std::string_view kExportsReady = "ExportsReady";
}  // namespace

struct ExportRequestReconciler::Pass {
  const Json& ser;
  const std::string ns;
  client::ResourceClient requests;
  core::SystemTime::duration age;
  std::string phase;            // Pending when not set yet
  std::vector<Json> templates;  // the APIServiceExportTemplates
  std::optional<Failure> failure;
};

core::Result<Result> ExportRequestReconciler::Reconcile(const reconcile::Request& request) {
  ObjectPtr ser = ctx_.export_requests.indexer().Get(request.Key());
  if (!ser || machinery::IsBeingDeleted(*ser)) return Result::Done();
  const auto now = ctx_.clock.Now();
  const auto created =
      core::ParseTime(machinery::GetString(*ser, {"metadata", "creationTimestamp"})).value_or(now);
  Pass pass{.ser = *ser,
            .ns = request.ns,
            .requests = client::ResourceClient(ctx_.rest, apis::klutch::kApiServiceExportRequests,
                                               request.ns),
            .age = now - created,
            .phase = machinery::GetString(*ser, {"status", "phase"})};
  if (pass.phase.empty()) pass.phase = "Pending";
  if (pass.phase != "Pending") return DeleteFinished(pass);
  KLUTCH_RUN_STEP(EnsureExports(pass));
  if (pass.failure) return Failed(pass, *pass.failure);
  return MarkSucceeded(pass);
}

core::Result<Result> ExportRequestReconciler::DeleteFinished(Pass& pass) {
  // Sessions are garbage: gone `request_retention` after they ended.
  if (pass.age < ctx_.options.request_retention) {
    return Result::RequeueAfter(Ms(ctx_.options.request_retention - pass.age));
  }
  auto deleted = pass.requests.Delete(machinery::Name(pass.ser),
                                      {.precondition_uid = machinery::Uid(pass.ser)});
  if (!deleted.ok() && !core::IsNotFound(deleted.status()) && !core::IsConflict(deleted.status())) {
    return deleted.status();
  }
  return Result::Done();
}

reconcile::Step ExportRequestReconciler::EnsureExports(Pass& pass) {
  pass.templates = Objects(ctx_.templates);
  core::Status error;
  const Json* resources = machinery::Find(pass.ser, {"spec", "resources"});
  if (resources != nullptr && resources->is_array()) {
    for (const Json& r : *resources) {
      error = EnsureExport(pass, r);
      if (pass.failure || !error.ok()) break;
    }
  }
  if (!error.ok()) {
    ctx_.events.Event(pass.ser, reconcile::kEventTypeWarning, "ExportFailed",
                      error.message() + " (retrying)");
  }
  return error;
}

core::Status ExportRequestReconciler::EnsureExport(Pass& pass, const Json& resource) {
  const std::string group = machinery::GetString(resource, {"group"});
  const std::string plural = machinery::GetString(resource, {"resource"});
  const std::string name = group.empty() ? plural : plural + "." + group;
  ObjectPtr crd = ctx_.crds.indexer().Get(name);
  if (!crd) {
    pass.failure = Failure{"CRDNotFound",
                           "CustomResourceDefinition " + core::GoQuote(name) +
                               " does not exist on the provider: check group and resource of the "
                               "request, or ask the provider to install it"};
    return core::Status::Ok();
  }
  if (ctx_.exports.indexer().Get(pass.ns + "/" + name)) return core::Status::Ok();
  std::vector<OfferedApi> offered = OfferedApisFrom(pass.templates, {*crd}, ctx_.consumer_scope);
  if (offered.empty()) {
    pass.failure = Failure{
        "CRDNotOffered",
        "no APIServiceExportTemplate offers " + core::GoQuote(name) +
            (HidesClusterScoped(ctx_.consumer_scope) ? " to consumers with namespaced scope" : "") +
            ": ask the provider to offer it, or bind an API from its catalog"};
    return core::Status::Ok();
  }
  return CreateExport(pass, *crd, offered.front());
}

// The export of `crd` for a consumer of the request's namespace.
core::Status ExportRequestReconciler::CreateExport(Pass& pass, const Json& crd,
                                                   const OfferedApi& offered) {
  auto snapshot = CrdSnapshot(crd);
  if (!snapshot.ok()) {
    pass.failure =
        Failure{"CRDInvalid", snapshot.status().message() +
                                  "; the provider has to fix the CustomResourceDefinition"};
    return core::Status::Ok();
  }
  Json spec = *snapshot;
  spec["informerScope"] = ctx_.consumer_scope;
  spec["permissionClaims"] = offered.permission_claims;
  if (offered.scope == "Cluster") spec["clusterScopedIsolation"] = ctx_.isolation;
  Json object = {
      {"apiVersion", apis::klutch::kApiVersion},
      {"kind", "APIServiceExport"},
      {"metadata",
       {{"name", machinery::Name(crd)},
        {"namespace", pass.ns},
        {"annotations",
         {{std::string(apis::klutch::kSourceSpecHashAnnotation), SnapshotHash(*snapshot)}}}}},
      {"spec", std::move(spec)}};
  auto created = client::ResourceClient(ctx_.rest, apis::klutch::kApiServiceExports, pass.ns)
                     .Create(object, {.field_manager = std::string(kFieldManager)});
  if (!created.ok() && !core::IsAlreadyExists(created.status())) {
    return core::Status(created.status())
        .Annotate("creating APIServiceExport " + pass.ns + "/" + machinery::Name(crd));
  }
  return core::Status::Ok();
}

core::Result<Result> ExportRequestReconciler::MarkSucceeded(Pass& pass) {
  Json modified = pass.ser;
  reconcile::MarkTrue(modified, kExportsReady, ctx_.clock);
  modified["status"]["phase"] = "Succeeded";
  return CommitStatus(pass, modified);
}

core::Result<Result> ExportRequestReconciler::Failed(Pass& pass, const Failure& failure) {
  Json modified = pass.ser;
  const bool changed = reconcile::MarkFalse(modified, kExportsReady, failure.reason,
                                            reconcile::kSeverityError, failure.message, ctx_.clock);
  if (pass.age >= ctx_.options.request_timeout) {
    modified["status"]["phase"] = "Failed";
    modified["status"]["terminalMessage"] = failure.message;
  } else {
    modified["status"]["phase"] = "Pending";
  }
  auto next = CommitStatus(pass, modified);
  if (!next.ok()) return next.status();
  if (changed) {
    ctx_.events.Event(pass.ser, reconcile::kEventTypeWarning, failure.reason, failure.message);
  }
  return next;
}

core::Result<Result> ExportRequestReconciler::CommitStatus(Pass& pass, Json& modified) {
  reconcile::SetSummary(modified, ctx_.clock);
  auto committed = reconcile::Committer(pass.requests, std::string(kFieldManager))
                       .CommitStatus(pass.ser, modified);
  if (!committed.ok()) return committed.status();
  if (machinery::GetString(modified, {"status", "phase"}) == "Pending") {
    return Result::RequeueAfter(Ms(ctx_.options.request_timeout - pass.age));
  }
  return Result::RequeueAfter(Ms(ctx_.options.request_retention - pass.age));
}

}  // namespace klutch::bind
