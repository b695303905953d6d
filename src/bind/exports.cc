// Export requests -> exports (§2.6.4) and exports kept in step with their CRDs (§2.6.3).
#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/register.h"
#include "bind/catalog.h"
#include "bind/internal.h"
#include "bind/names.h"
#include "bind/snapshot.h"
#include "core/log.h"
#include "core/strings.h"
#include "reconcile/committer.h"

namespace klutch::bind::internal {
namespace {

constexpr std::string_view kExportsReady = "ExportsReady";
constexpr std::string_view kProviderInSync = "ProviderInSync";

struct Failure {
  std::string reason;
  std::string message;
};

// The export of `crd` for a consumer of the request's namespace, or the failure to report.
std::optional<Failure> CreateExport(Context& ctx, const std::string& ns, const Json& crd,
                                    const OfferedApi& offered, core::Status& error) {
  auto snapshot = CrdSnapshot(crd);
  if (!snapshot.ok()) {
    return Failure{"CRDInvalid", snapshot.status().message() +
                                     "; the provider has to fix the CustomResourceDefinition"};
  }
  Json spec = *snapshot;
  spec["informerScope"] = ctx.consumer_scope;
  spec["permissionClaims"] = offered.permission_claims;
  if (offered.scope == "Cluster") spec["clusterScopedIsolation"] = ctx.isolation;
  Json object = {
      {"apiVersion", apis::klutch::kApiVersion},
      {"kind", "APIServiceExport"},
      {"metadata",
       {{"name", machinery::Name(crd)},
        {"namespace", ns},
        {"annotations",
         {{std::string(apis::klutch::kSourceSpecHashAnnotation), SnapshotHash(*snapshot)}}}}},
      {"spec", std::move(spec)}};
  auto created = client::ResourceClient(ctx.rest, apis::klutch::kApiServiceExports, ns)
                     .Create(object, {.field_manager = std::string(kFieldManager)});
  if (!created.ok() && !core::IsAlreadyExists(created.status())) {
    error = core::Status(created.status())
                .Annotate("creating APIServiceExport " + ns + "/" + machinery::Name(crd));
  }
  return std::nullopt;
}

}  // namespace

core::Result<Result> ReconcileExportRequest(Context& ctx, const Request& request) {
  ObjectPtr ser = ctx.export_requests.indexer().Get(request.Key());
  if (!ser || machinery::IsBeingDeleted(*ser)) return Result::Done();
  const auto now = ctx.clock.Now();
  const auto created =
      core::ParseTime(machinery::GetString(*ser, {"metadata", "creationTimestamp"})).value_or(now);
  const auto age = now - created;
  std::string phase = machinery::GetString(*ser, {"status", "phase"});
  if (phase.empty()) phase = "Pending";

  client::ResourceClient requests(ctx.rest, apis::klutch::kApiServiceExportRequests, request.ns);
  if (phase != "Pending") {
    // Sessions are garbage: gone `request_retention` after they ended.
    if (age >= ctx.options.request_retention) {
      auto deleted = requests.Delete(request.name, {.precondition_uid = machinery::Uid(*ser)});
      if (!deleted.ok() && !core::IsNotFound(deleted.status()) &&
          !core::IsConflict(deleted.status())) {
        return deleted.status();
      }
      return Result::Done();
    }
    return Result::RequeueAfter(Ms(ctx.options.request_retention - age));
  }

  std::optional<Failure> failure;
  core::Status error;
  const std::vector<Json> templates = Objects(ctx.templates);
  const Json* resources = machinery::Find(*ser, {"spec", "resources"});
  if (resources != nullptr && resources->is_array()) {
    for (const Json& r : *resources) {
      const std::string group = machinery::GetString(r, {"group"});
      const std::string resource = machinery::GetString(r, {"resource"});
      const std::string name = group.empty() ? resource : resource + "." + group;
      ObjectPtr crd = ctx.crds.indexer().Get(name);
      if (!crd) {
        failure = Failure{"CRDNotFound",
                          "CustomResourceDefinition " + core::GoQuote(name) +
                              " does not exist on the provider: check group and resource of the "
                              "request, or ask the provider to install it"};
        break;
      }
      if (ctx.exports.indexer().Get(request.ns + "/" + name)) continue;
      std::vector<OfferedApi> offered = OfferedApisFrom(templates, {*crd}, ctx.consumer_scope);
      if (offered.empty()) {
        failure = Failure{
            "CRDNotOffered",
            "no APIServiceExportTemplate offers " + core::GoQuote(name) +
                (HidesClusterScoped(ctx.consumer_scope) ? " to consumers with namespaced scope"
                                                        : "") +
                ": ask the provider to offer it, or bind an API from its catalog"};
        break;
      }
      failure = CreateExport(ctx, request.ns, *crd, offered.front(), error);
      if (failure || !error.ok()) break;
    }
  }
  if (!error.ok()) {
    ctx.events.Event(*ser, reconcile::kEventTypeWarning, "ExportFailed",
                     error.message() + " (retrying)");
    return error;
  }

  Json modified = *ser;
  bool changed;
  if (!failure) {
    changed = reconcile::MarkTrue(modified, kExportsReady, ctx.clock);
    modified["status"]["phase"] = "Succeeded";
  } else {
    changed = reconcile::MarkFalse(modified, kExportsReady, failure->reason,
                                   reconcile::kSeverityError, failure->message, ctx.clock);
    if (age >= ctx.options.request_timeout) {
      modified["status"]["phase"] = "Failed";
      modified["status"]["terminalMessage"] = failure->message;
    } else {
      modified["status"]["phase"] = "Pending";
    }
  }
  reconcile::SetSummary(modified, ctx.clock);
  auto committed =
      reconcile::Committer(requests, std::string(kFieldManager)).CommitStatus(*ser, modified);
  if (!committed.ok()) return committed.status();
  if (failure && changed) {
    ctx.events.Event(*ser, reconcile::kEventTypeWarning, failure->reason, failure->message);
  }
  const std::string now_phase = machinery::GetString(modified, {"status", "phase"});
  if (now_phase == "Pending") return Result::RequeueAfter(Ms(ctx.options.request_timeout - age));
  return Result::RequeueAfter(Ms(ctx.options.request_retention - age));
}

core::Result<Result> ReconcileExport(Context& ctx, const Request& request) {
  ObjectPtr exported = ctx.exports.indexer().Get(request.Key());
  if (!exported || machinery::IsBeingDeleted(*exported)) return Result::Done();
  client::ResourceClient exports(ctx.rest, apis::klutch::kApiServiceExports, request.ns);
  ObjectPtr crd = ctx.crds.indexer().Get(request.name);
  if (!crd) {
    // The provider withdrew the API: the export goes (the konnector stops syncing it).
    KLUTCH_LOG(kInfo, "bind", "deleting APIServiceExport {}: its CRD is gone", request.Key());
    auto deleted = exports.Delete(request.name, {.precondition_uid = machinery::Uid(*exported)});
    if (!deleted.ok() && !core::IsNotFound(deleted.status()) &&
        !core::IsConflict(deleted.status())) {
      return deleted.status();
    }
    return Result::Done();
  }
  reconcile::Committer committer(exports, std::string(kFieldManager));
  Json modified = *exported;
  auto snapshot = CrdSnapshot(*crd);
  if (!snapshot.ok()) {
    const std::string message = snapshot.status().message() +
                                "; the export keeps its last good copy until the provider fixes "
                                "the CustomResourceDefinition";
    bool changed =
        reconcile::MarkFalse(modified, kProviderInSync, "CustomResourceDefinitionUpdateFailed",
                             reconcile::kSeverityError, message, ctx.clock);
    reconcile::SetSummary(modified, ctx.clock);
    auto committed = committer.CommitStatus(*exported, modified);
    if (!committed.ok()) return committed.status();
    if (changed) {
      ctx.events.Event(*exported, reconcile::kEventTypeWarning,
                       "CustomResourceDefinitionUpdateFailed", message);
    }
    return Result::Done();
  }
  const std::string hash = SnapshotHash(*snapshot);
  if (machinery::Annotation(*exported, apis::klutch::kSourceSpecHashAnnotation) != hash) {
    modified["spec"] = WithSnapshot(modified.value("spec", Json::object()), *snapshot);
    machinery::SetAnnotation(modified, apis::klutch::kSourceSpecHashAnnotation, hash);
    auto committed = committer.Commit(*exported, modified);
    if (!committed.ok()) return committed.status();
    return Result::Done();  // the update event brings the status pass
  }
  reconcile::MarkTrue(modified, kProviderInSync, ctx.clock);
  reconcile::SetSummary(modified, ctx.clock);
  auto committed = committer.CommitStatus(*exported, modified);
  if (!committed.ok()) return committed.status();
  return Result::Done();
}

}  // namespace klutch::bind::internal
