#include "auth/bootstrap_policy.h"

#include "auth/rbac.h"
#include "core/status.h"

namespace klutch::auth {
namespace {

using machinery::Json;

// The roles and bindings as kube-apiserver's bootstrap policy defines them (Kubernetes 1.30),
// without the metadata every object shares (added below). Only the cluster-wide roles clients
// rely on; the controller and node roles of kube's own components are left out.
constexpr char kPolicy[] = R"yaml(
- kind: ClusterRole
  metadata: {name: admin}
  aggregationRule:
    clusterRoleSelectors:
    - matchLabels: {rbac.authorization.k8s.io/aggregate-to-admin: "true"}
- kind: ClusterRole
  metadata: {name: cluster-admin}
  rules:
  - {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
  - {nonResourceURLs: ["*"], verbs: ["*"]}
- kind: ClusterRole
  metadata:
    name: edit
    labels: {rbac.authorization.k8s.io/aggregate-to-admin: "true"}
  aggregationRule:
    clusterRoleSelectors:
    - matchLabels: {rbac.authorization.k8s.io/aggregate-to-edit: "true"}
- kind: ClusterRole
  metadata:
    name: system:aggregate-to-admin
    labels: {rbac.authorization.k8s.io/aggregate-to-admin: "true"}
  rules:
  - apiGroups: [authorization.k8s.io]
    resources: [localsubjectaccessreviews]
    verbs: [create]
  - apiGroups: [rbac.authorization.k8s.io]
    resources: [rolebindings, roles]
    verbs: [create, delete, deletecollection, get, list, patch, update, watch]
- kind: ClusterRole
  metadata:
    name: system:aggregate-to-edit
    labels: {rbac.authorization.k8s.io/aggregate-to-edit: "true"}
  rules:
  - apiGroups: [""]
    resources: [pods/attach, pods/exec, pods/portforward, pods/proxy, secrets, services/proxy]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [serviceaccounts]
    verbs: [impersonate]
  - apiGroups: [""]
    resources: [pods, pods/attach, pods/exec, pods/portforward, pods/proxy]
    verbs: [create, delete, deletecollection, patch, update]
  - apiGroups: [""]
    resources: [pods/eviction]
    verbs: [create]
  - apiGroups: [""]
    resources: [configmaps, events, persistentvolumeclaims, replicationcontrollers,
                replicationcontrollers/scale, secrets, serviceaccounts, services, services/proxy]
    verbs: [create, delete, deletecollection, patch, update]
  - apiGroups: [""]
    resources: [serviceaccounts/token]
    verbs: [create]
  - apiGroups: [apps]
    resources: [daemonsets, deployments, deployments/rollback, deployments/scale, replicasets,
                replicasets/scale, statefulsets, statefulsets/scale]
    verbs: [create, delete, deletecollection, patch, update]
  - apiGroups: [autoscaling]
    resources: [horizontalpodautoscalers]
    verbs: [create, delete, deletecollection, patch, update]
  - apiGroups: [batch]
    resources: [cronjobs, jobs]
    verbs: [create, delete, deletecollection, patch, update]
  - apiGroups: [extensions]
    resources: [daemonsets, deployments, deployments/rollback, deployments/scale, ingresses,
                networkpolicies, replicasets, replicasets/scale, replicationcontrollers/scale]
    verbs: [create, delete, deletecollection, patch, update]
  - apiGroups: [policy]
    resources: [poddisruptionbudgets]
    verbs: [create, delete, deletecollection, patch, update]
  - apiGroups: [networking.k8s.io]
    resources: [ingresses, networkpolicies]
    verbs: [create, delete, deletecollection, patch, update]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create, delete, deletecollection, get, list, patch, update, watch]
- kind: ClusterRole
  metadata:
    name: system:aggregate-to-view
    labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
  rules:
  - apiGroups: [""]
    resources: [configmaps, endpoints, persistentvolumeclaims, persistentvolumeclaims/status,
                pods, replicationcontrollers, replicationcontrollers/scale, serviceaccounts,
                services, services/status]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [bindings, events, limitranges, namespaces/status, pods/log, pods/status,
                replicationcontrollers/status, resourcequotas, resourcequotas/status]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [namespaces]
    verbs: [get, list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [get, list, watch]
  - apiGroups: [apps]
    resources: [controllerrevisions, daemonsets, daemonsets/status, deployments,
                deployments/scale, deployments/status, replicasets, replicasets/scale,
                replicasets/status, statefulsets, statefulsets/scale, statefulsets/status]
    verbs: [get, list, watch]
  - apiGroups: [autoscaling]
    resources: [horizontalpodautoscalers, horizontalpodautoscalers/status]
    verbs: [get, list, watch]
  - apiGroups: [batch]
    resources: [cronjobs, cronjobs/status, jobs, jobs/status]
    verbs: [get, list, watch]
  - apiGroups: [extensions]
    resources: [daemonsets, daemonsets/status, deployments, deployments/scale,
                deployments/status, ingresses, ingresses/status, networkpolicies, replicasets,
                replicasets/scale, replicasets/status, replicationcontrollers/scale]
    verbs: [get, list, watch]
  - apiGroups: [policy]
    resources: [poddisruptionbudgets, poddisruptionbudgets/status]
    verbs: [get, list, watch]
  - apiGroups: [networking.k8s.io]
    resources: [ingresses, ingresses/status, networkpolicies]
    verbs: [get, list, watch]
- kind: ClusterRole
  metadata: {name: system:auth-delegator}
  rules:
  - apiGroups: [authentication.k8s.io]
    resources: [tokenreviews]
    verbs: [create]
  - apiGroups: [authorization.k8s.io]
    resources: [subjectaccessreviews]
    verbs: [create]
- kind: ClusterRole
  metadata: {name: system:basic-user}
  rules:
  - apiGroups: [authorization.k8s.io]
    resources: [selfsubjectaccessreviews, selfsubjectrulesreviews]
    verbs: [create]
  - apiGroups: [authentication.k8s.io]
    resources: [selfsubjectreviews]
    verbs: [create]
- kind: ClusterRole
  metadata: {name: system:discovery}
  rules:
  - nonResourceURLs: [/api, /api/*, /apis, /apis/*, /healthz, /livez, /openapi, /openapi/*,
                      /readyz, /version, /version/]
    verbs: [get]
- kind: ClusterRole
  metadata: {name: system:monitoring}
  rules:
  - nonResourceURLs: [/healthz, /healthz/*, /livez, /livez/*, /metrics, /metrics/slis, /readyz,
                      /readyz/*]
    verbs: [get]
- kind: ClusterRole
  metadata: {name: system:public-info-viewer}
  rules:
  - nonResourceURLs: [/healthz, /livez, /readyz, /version, /version/]
    verbs: [get]
- kind: ClusterRole
  metadata: {name: system:service-account-issuer-discovery}
  rules:
  - nonResourceURLs: [/.well-known/openid-configuration, /openid/v1/jwks]
    verbs: [get]
- kind: ClusterRole
  metadata:
    name: view
    labels: {rbac.authorization.k8s.io/aggregate-to-edit: "true"}
  aggregationRule:
    clusterRoleSelectors:
    - matchLabels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
- kind: ClusterRoleBinding
  metadata: {name: cluster-admin}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
  subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:masters}
- kind: ClusterRoleBinding
  metadata: {name: system:basic-user}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:basic-user}
  subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:authenticated}
- kind: ClusterRoleBinding
  metadata: {name: system:discovery}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:discovery}
  subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:authenticated}
- kind: ClusterRoleBinding
  metadata: {name: system:monitoring}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:monitoring}
  subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:monitoring}
- kind: ClusterRoleBinding
  metadata: {name: system:public-info-viewer}
  roleRef:
    apiGroup: rbac.authorization.k8s.io
    kind: ClusterRole
    name: system:public-info-viewer
  subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:authenticated}
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:unauthenticated}
- kind: ClusterRoleBinding
  metadata: {name: system:service-account-issuer-discovery}
  roleRef:
    apiGroup: rbac.authorization.k8s.io
    kind: ClusterRole
    name: system:service-account-issuer-discovery
  subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:serviceaccounts}
)yaml";

std::vector<Json> Build() {
  core::Result<Json> parsed = machinery::ParseYaml(kPolicy);
  KLUTCH_CHECK(parsed.ok() && parsed->is_array());  // constant data: a failure is a bug here
  std::vector<Json> out;
  for (Json& o : *parsed) {
    o["apiVersion"] = std::string(kRbacGroup) + "/v1";
    Json& meta = o["metadata"];
    meta["labels"]["kubernetes.io/bootstrapping"] = "rbac-defaults";
    meta["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = "true";
    out.push_back(std::move(o));
  }
  ResolveAggregation(out);
  return out;
}

}  // namespace

std::vector<Json> BootstrapPolicy() {
  static const std::vector<Json> policy = Build();
  return policy;
}

}  // namespace klutch::auth
