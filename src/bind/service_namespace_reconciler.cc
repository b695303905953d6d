#include "bind/service_namespace_reconciler.h"

#include <memory>

#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "bind/names.h"
#include "bind/object_writes.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/committer.h"

namespace klutch::bind {

using client::Json;
using client::ObjectPtr;
using reconcile::Result;

struct ServiceNamespaceReconciler::Pass {
  const std::string cns;          // the cluster namespace
  const std::string owner_value;  // "<cluster ns>/<name>", the provider namespace's annotation
  client::ResourceClient namespaces;
  ObjectPtr asn;
  std::string target;  // the provider namespace
  ObjectPtr ns;        // the provider namespace as cached, created or read
};

core::Result<Result> ServiceNamespaceReconciler::Reconcile(const reconcile::Request& request) {
  Pass pass{.cns = request.ns,
            .owner_value = request.ns + "/" + request.name,
            .namespaces = client::ResourceClient(ctx_.rest, client::resources::kNamespaces)};
  pass.asn = ctx_.service_namespaces.indexer().Get(request.Key());
  if (!pass.asn) return DeleteProviderNamespaces(pass);
  if (machinery::IsBeingDeleted(*pass.asn)) return Result::Done();
  // Only cluster namespaces (those with a ClusterBinding) get provider namespaces.
  if (!ctx_.cluster_bindings.indexer().Get(pass.cns + "/" +
                                           std::string(apis::klutch::kClusterBindingName))) {
    return Result::Done();
  }
  pass.target = machinery::GetString(*pass.asn, {"status", "namespace"});
  if (pass.target.empty()) pass.target = pass.cns + "-" + request.name;
  if (pass.target.size() > 63) {
    return Failed(pass, "NamespaceNameTooLong",
                  "the provider namespace " + core::GoQuote(pass.target) +
                      " would be longer than 63 characters: use a shorter namespace name in the "
                      "consumer cluster");
  }
  KLUTCH_RUN_STEP(EnsureProviderNamespace(pass));
  if (ctx_.consumer_scope == "Namespaced") {
    KLUTCH_RETURN_IF_ERROR(EnsureRoleBinding(
        ctx_.rest, pass.target, std::string(apis::klutch::kBinderName), "ClusterRole",
        apis::klutch::BinderRoleName(pass.cns), pass.cns, std::string(apis::klutch::kBinderName)));
  }
  return ReportNamespace(pass);
}

core::Result<Result> ServiceNamespaceReconciler::DeleteProviderNamespaces(Pass& pass) {
  for (const ObjectPtr& ns :
       ctx_.namespaces.indexer().ByIndex(kByServiceNamespaceIndex, pass.owner_value)) {
    if (machinery::IsBeingDeleted(*ns)) continue;
    auto deleted =
        pass.namespaces.Delete(machinery::Name(*ns), {.precondition_uid = machinery::Uid(*ns)});
    if (!deleted.ok() && !core::IsNotFound(deleted.status()) &&
        !core::IsConflict(deleted.status())) {
      return deleted.status();
    }
  }
  return Result::Done();
}

reconcile::Step ServiceNamespaceReconciler::EnsureProviderNamespace(Pass& pass) {
  pass.ns = ctx_.namespaces.indexer().Get(pass.target);
  if (!pass.ns) {
    Json desired = {
        {"apiVersion", "v1"},
        {"kind", "Namespace"},
        {"metadata",
         {{"name", pass.target},
          {"annotations",
           {{std::string(apis::klutch::kApiServiceNamespaceAnnotation), pass.owner_value}}}}}};
    auto created = pass.namespaces.Create(desired, {.field_manager = std::string(kFieldManager)});
    if (!created.ok() && !core::IsAlreadyExists(created.status())) return created.status();
    if (created.ok()) {
      pass.ns = std::make_shared<const Json>(*created);
    } else {
      auto live = pass.namespaces.Get(pass.target);
      if (!live.ok()) return live.status();
      pass.ns = std::make_shared<const Json>(*std::move(live));
    }
  }
  if (machinery::Annotation(*pass.ns, apis::klutch::kApiServiceNamespaceAnnotation) !=
      pass.owner_value) {
    return Failed(pass, "NamespaceConflict",
                  "namespace " + core::GoQuote(pass.target) +
                      " already exists on the provider and does not belong to " + pass.owner_value +
                      ": the provider has to remove or rename it");
  }
  if (machinery::IsBeingDeleted(*pass.ns)) return Result::Done();  // its deletion event re-queues
  return reconcile::Continue();
}

core::Result<Result> ServiceNamespaceReconciler::ReportNamespace(Pass& pass) {
  Json modified = *pass.asn;
  modified["status"]["namespace"] = pass.target;
  auto committed =
      reconcile::Committer(client::ResourceClient(ctx_.rest, apis::klutch::kApiServiceNamespaces),
                           std::string(kFieldManager))
          .CommitStatus(*pass.asn, modified);
  if (!committed.ok()) return committed.status();
  return Result::Done();
}

core::Result<Result> ServiceNamespaceReconciler::Failed(Pass& pass, std::string_view reason,
                                                        const std::string& message) {
  ctx_.events.Event(*pass.asn, reconcile::kEventTypeWarning, reason, message);
  return core::Invalid(message);
}

}  // namespace klutch::bind
