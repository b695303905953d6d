// Reconcilers behind the API server's access control, on the src/reconcile framework:
//
// ClusterRoleAggregationReconciler (klutch-apiserver-clusterrole-aggregation): a ClusterRole
// with an aggregationRule has as its rules the union of the rules of the ClusterRoles its
// selectors match (auth::AggregatedRules), rewritten whenever any ClusterRole changes, as
// kube-controller-manager's clusterrole-aggregation controller does.
//
// ServiceAccountTokenReconciler (klutch-apiserver-serviceaccount-token): a Secret of type
// kubernetes.io/service-account-token naming a ServiceAccount in its
// kubernetes.io/service-account.name annotation gets data.token (a legacy token signed by the
// server), data.ca.crt, data.namespace and the account's uid annotation; a Secret whose
// account is gone (or was re-created, another uid) is deleted, as kube's tokens controller
// does. Thread-safe.
#pragma once

#include <functional>
#include <string>

#include "client/informer.h"
#include "reconcile/controller.h"

namespace klutch::controllers {

class ClusterRoleAggregationReconciler final : public reconcile::Reconciler {
 public:
  ClusterRoleAggregationReconciler(client::RestClient& rest, client::Indexer& cluster_roles)
      : rest_(rest), cluster_roles_(cluster_roles) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  client::RestClient& rest_;
  client::Indexer& cluster_roles_;
};

class ServiceAccountTokenReconciler final : public reconcile::Reconciler {
 public:
  // Issues a legacy token for (namespace, account name, account uid, secret name).
  using IssueToken =
      std::function<core::Result<std::string>(const std::string& ns, const std::string& name,
                                              const std::string& uid, const std::string& secret)>;
  ServiceAccountTokenReconciler(client::RestClient& rest, client::Indexer& secrets,
                                client::Indexer& service_accounts, IssueToken issue,
                                std::string ca_pem)
      : rest_(rest),
        secrets_(secrets),
        service_accounts_(service_accounts),
        issue_(std::move(issue)),
        ca_pem_(std::move(ca_pem)) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  client::RestClient& rest_;
  client::Indexer& secrets_;
  client::Indexer& service_accounts_;
  IssueToken issue_;
  std::string ca_pem_;
};

}  // namespace klutch::controllers
