#include "bind/kubeconfig_reconciler.h"

#include "apis/klutch/appclusterbinding.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "bind/object_writes.h"
#include "bind/provision.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::bind {

using client::Json;
using client::ObjectPtr;
using reconcile::Result;

struct KubeconfigReconciler::Pass {
  const Json& cb;
  const std::string ns;           // the cluster namespace
  const std::string secret_name;  // spec.kubeconfigSecretRef's, else the default
};

core::Result<Result> KubeconfigReconciler::Reconcile(const reconcile::Request& request) {
  ObjectPtr cb = ctx_.cluster_bindings.indexer().Get(request.Key());
  if (!cb || machinery::IsBeingDeleted(*cb)) return Result::Done();
  // In control-plane mode the Secret holds the App Cluster's kubeconfig, which is not ours.
  const Json* labels = machinery::Find(*cb, {"metadata", "labels"});
  if (labels != nullptr && labels->contains(apis::klutch::kAppClusterBindingNameLabel)) {
    return Result::Done();
  }
  ObjectPtr ns = ctx_.namespaces.indexer().Get(request.ns);
  if (!ns || machinery::IsBeingDeleted(*ns)) return Result::Done();
  std::string secret_name = machinery::GetString(*cb, {"spec", "kubeconfigSecretRef", "name"});
  if (secret_name.empty()) secret_name = apis::klutch::kKubeconfigSecretName;
  Pass pass{.cb = *cb, .ns = request.ns, .secret_name = std::move(secret_name)};
  KLUTCH_RUN_STEP(WaitForHalfLife(pass));
  return RenewToken(pass);
}

reconcile::Step KubeconfigReconciler::WaitForHalfLife(Pass& pass) {
  const auto now = ctx_.clock.Now();
  auto secret =
      client::ResourceClient(ctx_.rest, client::resources::kSecrets, pass.ns).Get(pass.secret_name);
  if (!secret.ok() && !core::IsNotFound(secret.status())) return secret.status();
  if (!secret.ok()) return reconcile::Continue();
  auto issued =
      core::ParseTime(machinery::Annotation(*secret, apis::klutch::kTokenIssuedAnnotation));
  auto expires =
      core::ParseTime(machinery::Annotation(*secret, apis::klutch::kTokenExpiresAnnotation));
  if (issued && expires && *expires > *issued) {
    const auto renew_at = *issued + (*expires - *issued) / 2;
    if (now < renew_at) return Result::RequeueAfter(Ms(renew_at - now));
  }
  return reconcile::Continue();
}

core::Result<Result> KubeconfigReconciler::RenewToken(Pass& pass) {
  ProvisionOptions options = ctx_.options.provision;
  options.clock = &ctx_.clock;
  auto account =
      GetOrCreate(client::ResourceClient(ctx_.rest, client::resources::kServiceAccounts, pass.ns),
                  {{"apiVersion", "v1"},
                   {"kind", "ServiceAccount"},
                   {"metadata", {{"name", apis::klutch::kBinderName}, {"namespace", pass.ns}}}});
  if (!account.ok()) return Failed(pass, account.status());
  auto issued = IssueKubeconfig(ctx_.rest, options, pass.ns);
  if (!issued.ok()) return Failed(pass, issued.status());
  auto written = WriteKubeconfigSecret(ctx_.rest, pass.ns, pass.secret_name, *issued);
  if (!written.ok()) return Failed(pass, written.status());
  return Result::RequeueAfter(Ms((issued->expires - issued->issued) / 2));
}

core::Result<Result> KubeconfigReconciler::Failed(Pass& pass, const core::Status& error) {
  ctx_.events.Event(pass.cb, reconcile::kEventTypeWarning, "KubeconfigRefreshFailed",
                    "renewing the konnector's token in Secret " + pass.secret_name + " failed: " +
                        error.message() + "; the konnector loses access when its token expires");
  return error;
}

}  // namespace klutch::bind
