// §4.7: the consumer CRD of each binding, and the binding's Connected condition.
#include "konnector/crd_reconciler.h"

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "konnector/connection.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

}  // namespace

CrdReconciler::CrdReconciler(Connection& connection)
    : connection_(connection), ctx_(connection.ctx()) {}

// A CRD controlled by an earlier APIServiceBinding of the same name that no longer exists
// anywhere in the App Cluster (a binding of that uid in another namespace still owns it).
bool CrdReconciler::AdoptableCrd(const Json& crd, const Json& binding) const {
  std::string earlier = EarlierBindingUid(crd, binding);
  if (earlier.empty()) return false;
  for (const ObjectPtr& b : ctx_.bindings.indexer().List()) {
    if (machinery::Uid(*b) == earlier) return false;
  }
  return true;
}

core::Result<Result> CrdReconciler::Reconcile(const Request& request) {
  if (!connection_.CachesSynced()) return Result::Done();
  if (!connection_.Attached(request.Key())) return Result::Done();
  ObjectPtr binding = ctx_.bindings.indexer().Get(request.Key());
  if (!binding) return Result::Done();
  Json modified = *binding;
  core::Status retry = core::Status::Ok();
  if (ObjectPtr exp =
          connection_.exports().indexer().Get(connection_.provider_ns() + "/" + request.name)) {
    retry = EnsureCrd(request.name, *exp, *binding, modified);
  } else {
    MarkNotConnected(modified, *binding, "APIServiceExportNotFound",
                     "APIServiceExport " + connection_.provider_ns() + "/" + request.name +
                         " not found on the provider; the provider no longer offers this API, "
                         "bind it again or delete this binding");
  }
  ObjectPtr cb =
      connection_.cluster_bindings().indexer().Get(connection_.provider_ns() + "/cluster");
  modified["status"]["providerPrettyName"] =
      cb ? machinery::GetString(*cb, {"spec", "providerPrettyName"}) : "";
  reconcile::MarkTrue(modified, "InformersSynced", ctx_.clock);
  reconcile::SetSummary(modified, ctx_.clock);
  auto r =
      reconcile::Committer(client::ResourceClient(ctx_.binding, apis::klutch::kApiServiceBindings),
                           std::string(apis::klutch::kKonnectorFieldManager))
          .CommitStatus(*binding, modified);
  if (!r.ok()) return r.status();
  if (!retry.ok()) return retry;
  return Result::Done();
}

core::Status CrdReconciler::EnsureCrd(const std::string& name, const Json& exp, const Json& binding,
                                      Json& modified) {
  core::Status retry = core::Status::Ok();
  Json desired = ExportToCrd(exp, binding);
  ObjectPtr existing = ctx_.app_crds.indexer().Get(name);
  if (!existing) {
    auto r = client::ResourceClient(ctx_.app, client::resources::kCustomResourceDefinitions)
                 .Create(desired);
    ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", "create"}});
    if (r.ok() || core::IsAlreadyExists(r.status())) {
      reconcile::MarkTrue(modified, "Connected", ctx_.clock);
    } else if (core::IsInvalid(r.status()) || r.status().reason() == core::Reason::kForbidden) {
      MarkNotConnected(
          modified, binding, "CustomResourceDefinitionCreateFailed",
          "the App Cluster refused CustomResourceDefinition " + name + ": " + r.status().message());
    } else {
      retry = r.status();
    }
  } else if (!CrdOwnedBy(*existing, binding) && AdoptableCrd(*existing, binding)) {
    // Left by an earlier binding of this name (unbound, then bound again): the CRD and the
    // objects kept in it are this binding's now, as kubectl users expect of a re-bind.
    Json adopted = *existing;
    adopted["spec"] = desired["spec"];
    adopted["metadata"]["ownerReferences"] = desired["metadata"]["ownerReferences"];
    if (UpdateCrd(adopted, binding, modified, retry)) {
      ctx_.binding_events.Event(binding, "Normal", "AdoptedCustomResourceDefinition",
                                "CustomResourceDefinition " + name +
                                    " was left by an earlier binding of this name; this "
                                    "binding serves it now");
    }
  } else if (!CrdOwnedBy(*existing, binding)) {
    MarkNotConnected(modified, binding, "ForeignCustomResourceDefinition",
                     "CustomResourceDefinition " + name +
                         " already exists in the App Cluster and is not owned by this binding; "
                         "delete it or bind under another name");
  } else {
    Json updated = *existing;
    updated["spec"] = desired["spec"];
    // The API server fills defaults (conversion, ...): compare only what we set.
    const Json* have = machinery::Find(*existing, {"spec"});
    if (have && Covers(*have, desired["spec"])) {
      reconcile::MarkTrue(modified, "Connected", ctx_.clock);
    } else {
      UpdateCrd(updated, binding, modified, retry);
    }
  }
  return retry;
}

bool CrdReconciler::UpdateCrd(const Json& crd, const Json& binding, Json& modified,
                              core::Status& retry) {
  auto r =
      client::ResourceClient(ctx_.app, client::resources::kCustomResourceDefinitions).Update(crd);
  ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", "update"}});
  if (r.ok()) {
    reconcile::MarkTrue(modified, "Connected", ctx_.clock);
  } else if (core::IsInvalid(r.status())) {
    MarkNotConnected(modified, binding, "CustomResourceDefinitionUpdateFailed",
                     "the App Cluster refused the update of CustomResourceDefinition " +
                         machinery::Name(crd) + ": " + r.status().message());
  } else {
    retry = r.status();  // conflicts and outages: try again (upstream swallows these)
  }
  return r.ok();
}

void CrdReconciler::MarkNotConnected(Json& modified, const Json& binding, const std::string& reason,
                                     const std::string& message) {
  if (reconcile::MarkFalse(modified, "Connected", reason, reconcile::kSeverityError, message,
                           ctx_.clock)) {
    ctx_.binding_events.Event(binding, "Warning", reason, message);
  }
}

}  // namespace klutch::konnector::internal
