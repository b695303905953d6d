// AppClusterBindingReconciler (klutch-backend-appclusterbinding, control-plane mode,
// bind-protocol.md §2.6.5): an App Cluster connected from the Control Plane side. Once its
// kubeconfig Secret is valid (SecretValid), a pass makes everything in the binding root
// namespace `klutch-bind-<ns>-<name>`, labelled with the two back-references: the namespace,
// the konnector's ServiceAccount, the mirrored kubeconfig, the ClusterBinding, the connector's
// Role and RoleBinding, an APIServiceBinding and an export request per wanted API (unwanted
// ones and their exports deleted), the konnector Deployment (KonnectorDeployed), then
// ResourcesReady. Failed writes are collected into ResourcesReady=False, a Warning Event and
// a retry. Deleting the binding deletes its APIServiceBindings first (so the konnector releases
// the App Cluster's CRDs), then the root namespace, then the finalizer. Reads the informers'
// caches; thread-safe.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "bind/backend_context.h"
#include "bind/catalog.h"
#include "reconcile/committer.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::bind {

class AppClusterBindingReconciler final : public reconcile::Reconciler {
 public:
  // `ctx` must outlive the reconciler; ctx.app_cluster_bindings and the other control-plane
  // informers are set.
  explicit AppClusterBindingReconciler(BackendContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;                                             // what the steps of one reconcile share
  using WantedApiMap = std::map<std::string, OfferedApi>;  // export name -> offered API

  // A deleted binding: what it made goes (Cleanup), then the finalizer.
  core::Result<reconcile::Result> Delete(const client::Json& acb,
                                         const reconcile::Committer& committer);
  // Deletes what the binding made; Done once the root namespace is gone.
  core::Result<reconcile::Result> Cleanup(const client::Json& acb);
  reconcile::Step EnsureFinalizer(const client::Json& acb, const reconcile::Committer& committer);
  // Everything in the root namespace, once the kubeconfig Secret is valid.
  void Provision(Pass& pass);
  // The root namespace; the rest of the pass needs it.
  bool EnsureRootNamespace(Pass& pass);
  // The konnector's ServiceAccount, the kubeconfig Secret mirrored into the root namespace,
  // and the ClusterBinding.
  void EnsureClusterBinding(Pass& pass);
  // Role and RoleBinding of the control-plane konnector.
  void EnsureConnectorRbac(Pass& pass);
  // The offered APIs spec.apiExports lists, by export name; one no template offers is an
  // error.
  WantedApiMap WantedApis(Pass& pass);
  // An APIServiceBinding per wanted API (claims accepted); the binding's others deleted.
  void EnsureApiServiceBindings(Pass& pass, const WantedApiMap& desired);
  // Export requests and exports no longer wanted go; the names of the wanted APIs that have a
  // request that has not failed.
  std::set<std::string> DeleteUnwantedExports(Pass& pass, const WantedApiMap& desired);
  // Wanted APIs without export or pending request get an export request.
  void EnsureExportRequests(Pass& pass, const WantedApiMap& desired);
  // The konnector Deployment when spec.konnector.deploy, else none; KonnectorDeployed.
  void EnsureKonnectorDeployment(Pass& pass);
  // ResourcesReady from the failed writes, the status written; Failed when any failed.
  core::Result<reconcile::Result> ReportResources(Pass& pass);
  // The summary and the status written.
  core::Status CommitStatus(Pass& pass);
  // The status written with the condition the caller set, a Warning Event `reason` with
  // `message` when `event`; Done, or `message` as an error when `retry`.
  core::Result<reconcile::Result> Failed(Pass& pass, bool event, std::string_view reason,
                                         const std::string& message, bool retry);

  BackendContext& ctx_;
};

}  // namespace klutch::bind
