// The default RBAC policy kube-apiserver creates at startup (its "bootstrappolicy"): the
// ClusterRoles and ClusterRoleBindings clients and users expect to find, e.g. `kubectl create
// rolebinding --clusterrole=edit`, discovery for every authenticated user, /healthz and
// /version for everyone. Pure data; thread-safe.
#pragma once

#include <vector>

#include "machinery/json.h"

namespace klutch::auth {

// ClusterRoles: cluster-admin, admin, edit, view (aggregated from the system:aggregate-to-*
// roles by the rbac.authorization.k8s.io/aggregate-to-{admin,edit,view} labels),
// system:aggregate-to-{admin,edit,view}, system:discovery, system:basic-user,
// system:public-info-viewer, system:monitoring, system:auth-delegator,
// system:service-account-issuer-discovery. ClusterRoleBindings: cluster-admin -> Group
// system:masters; system:discovery and system:basic-user -> system:authenticated;
// system:public-info-viewer -> system:authenticated and system:unauthenticated;
// system:monitoring -> Group system:monitoring; system:service-account-issuer-discovery ->
// system:serviceaccounts. Every object carries the label kubernetes.io/bootstrapping=rbac-defaults
// and the annotation rbac.authorization.kubernetes.io/autoupdate=true, as kube's. The aggregated
// roles carry the rules aggregation gives them (ResolveAggregation), as a running cluster shows
// them once its aggregation controller has run. apiVersion rbac.authorization.k8s.io/v1; roles
// first, then bindings, each by name.
std::vector<machinery::Json> BootstrapPolicy();

}  // namespace klutch::auth
