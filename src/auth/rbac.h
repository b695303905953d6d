// RBAC: Kubernetes' rbac.authorization.k8s.io/v1 authorizer (Roles, ClusterRoles and their
// bindings), rule coverage for the escalation check, and ClusterRole aggregation.
//
// RbacAuthorizer is fed the RBAC objects (the whole set, then changes) and answers Authorize for
// each request from an immutable, indexed snapshot: subject (user or group name) -> bindings,
// bindings -> rules resolved when the snapshot is built. Writers rebuild the snapshot under a
// mutex and publish it atomically; readers never block writers nor each other. All methods are
// thread-safe. Free functions are pure.
//
// Semantics follow kube-apiserver: rules only add permissions, a binding whose role is missing
// grants nothing, a RoleBinding to a ClusterRole grants its rules in the binding's namespace
// only. system:masters is not special-cased by Authorize: it is the bootstrap cluster-admin
// binding (bootstrap_policy.h) that gives the group everything, as in Kubernetes.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/user.h"
#include "core/status.h"
#include "core/sync.h"
#include "machinery/json.h"

namespace klutch::auth {

inline constexpr char kRbacGroup[] = "rbac.authorization.k8s.io";

// One request, as the API server sees it (Kubernetes' authorizer.Attributes).
struct Attributes {
  const UserInfo* user = nullptr;  // nullptr is denied
  // Resource verbs: get list watch create update patch delete deletecollection, plus
  // impersonate, bind, escalate, ...; non-resource requests: the lowercase HTTP method.
  std::string verb;
  bool resource_request = true;
  // Resource requests. `ns` "" is a cluster-wide request (only ClusterRoleBindings apply).
  std::string ns, api_group, api_version, resource, subresource, name;
  // Non-resource requests ("/healthz", "/version", "/api", ...).
  std::string path;
};

struct Decision {
  bool allowed = false;
  // Allowed: `RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to User "z"` (for a
  // RoleBinding `RoleBinding "name/ns" ...`, a ServiceAccount subject `ServiceAccount "sa/ns"`).
  // Denied: "", or `RBAC: clusterrole.rbac.authorization.k8s.io "y" not found` when a binding
  // that applied referenced a missing role (as kube reports resolution errors).
  std::string reason;
};

// rbac.authorization.k8s.io/v1 PolicyRule.
struct PolicyRule {
  std::vector<std::string> verbs, api_groups, resources, resource_names, non_resource_urls;
  bool operator==(const PolicyRule&) const = default;
};

// The rules of a Role/ClusterRole `rules` array. Absent or mistyped fields read as empty; a
// `rules` that is not an array (null, absent) gives no rules.
std::vector<PolicyRule> ParseRules(const machinery::Json& rules);
// The JSON array form: `verbs` always, the other fields when not empty (Go's omitempty).
machinery::Json RulesToJson(const std::vector<PolicyRule>& rules);
// Kubernetes' compact form used in escalation messages, fields present only when non-empty:
// `{APIGroups:[""], Resources:["secrets"], ResourceNames:["a"], Verbs:["get" "list"]}`.
std::string CompactString(const PolicyRule& rule);
// Kubernetes' CompactRules: rules with exactly one group and one resource and nothing but verbs
// besides are merged per group/resource (verbs appended in order); other rules are kept as is.
std::vector<PolicyRule> CompactRules(const std::vector<PolicyRule>& rules);

// Whether `rule` grants the request, as kube's RuleAllows: "*" matches any verb, group, resource
// or URL; a rule resource matches "resource" or "resource/subresource" exactly, and
// "*/subresource" matches that subresource of any resource ("pods/*" is not a wildcard, as in
// Kubernetes); resourceNames empty = any name, otherwise the request's name must be listed (so
// list, watch, create and deletecollection, which carry no name, do not match); a
// nonResourceURL ending in "*" matches by prefix. A non-resource request checks only verbs and
// URLs; a resource request never matches a URL-only rule.
bool RuleAllows(const PolicyRule& rule, const Attributes& a);

// Kubernetes' Covers: whether the `owner` rules grant every permission of `requested`. The
// requested rules are broken into pieces of one verb/group/resource(/name) or one verb/URL; a
// piece is covered when a single owner rule grants it ("*" verbs/groups/resources, "*/sub" for
// subresources, owner resourceNames must include the piece's name and an owner restricted by
// names covers no unnamed piece, URL prefixes "x*"). The uncovered pieces are appended to
// `missing` (may be nullptr).
bool Covers(const std::vector<PolicyRule>& owner, const std::vector<PolicyRule>& requested,
            std::vector<PolicyRule>* missing);

// Aggregation, as kube's clusterrole-aggregation controller computes it: for a ClusterRole with
// `aggregationRule.clusterRoleSelectors`, the rules of every other ClusterRole (by
// metadata.name) whose labels match a selector, selector by selector and, within one, by role
// name, each rule once (first occurrence kept). Selectors that do not parse match nothing.
// nullopt when the role has no aggregationRule. Uses the `rules` of `all_cluster_roles` as given.
std::optional<machinery::Json> AggregatedRules(
    const machinery::Json& cluster_role, const std::vector<machinery::Json>& all_cluster_roles);
// Sets the `rules` of every aggregated ClusterRole of the list to its AggregatedRules, repeated
// until nothing changes (aggregated roles selecting aggregated roles, e.g. admin <- edit <- view).
// Objects of other kinds are left alone. Returns the number of roles whose rules changed.
int ResolveAggregation(std::vector<machinery::Json>& objects);

class RbacAuthorizer {
 public:
  RbacAuthorizer();
  ~RbacAuthorizer();
  RbacAuthorizer(const RbacAuthorizer&) = delete;
  RbacAuthorizer& operator=(const RbacAuthorizer&) = delete;

  // Feed: the whole set, then changes. Objects are full JSON objects of kind Role, ClusterRole,
  // RoleBinding or ClusterRoleBinding; other kinds are ignored. Aggregated ClusterRoles take
  // their aggregated rules (ResolveAggregation), whatever their stored `rules` say. Each call
  // rebuilds the snapshot (a few ms with 1,000 bindings): feed an initial list with
  // Replace, not one Upsert per object.
  void Replace(const std::vector<machinery::Json>& objects) EXCLUDES(mu_);
  void Upsert(const machinery::Json& object) EXCLUDES(mu_);
  // No-op when absent. `ns` is ignored for the cluster-scoped kinds.
  void Remove(std::string_view kind, std::string_view ns, std::string_view name) EXCLUDES(mu_);
  // Several changes with one snapshot rebuild (a storage batch): each object is upserted, or
  // removed when `removed` (its kind, namespace and name are used).
  struct Change {
    machinery::Json object;
    bool removed = false;
  };
  void Apply(const std::vector<Change>& changes) EXCLUDES(mu_);

  Decision Authorize(const Attributes& a) const;

  // Every rule that applies to `user` in namespace `ns`: ClusterRoleBindings' first (ordered by
  // binding name), then that namespace's RoleBindings; `ns` "" = cluster-wide only. Each
  // binding contributes once. For SelfSubjectRulesReview and the escalation check.
  std::vector<PolicyRule> RulesFor(const UserInfo& user, std::string_view ns) const;

  // The escalation check kube-apiserver's RBAC storage runs when `user` creates or updates an
  // RBAC object (`old_object` = the stored object on update, nullptr on create).
  //  - Role/ClusterRole: OK for system:masters, or when the user may "escalate" roles /
  //    clusterroles in the object's scope (the name counts on update only, as kube checks the
  //    request's name), or when RulesFor(user, namespace) Covers the new rules. Setting or
  //    keeping an aggregationRule additionally needs full authority (`*` on everything).
  //  - RoleBinding/ClusterRoleBinding: OK for system:masters, or when the user may "bind" the
  //    referenced role in the binding's scope (resourceNames may name it), or covers the
  //    referenced role's rules.
  //  - Either: an update changing only ownerReferences/finalizers (what garbage collection
  //    edits) is OK.
  // Errors: Forbidden `<resource>.rbac.authorization.k8s.io "<name>" is forbidden: user "alice"
  // (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently
  // held:\n{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}` (missing pieces compacted,
  // one per line, sorted); NotFound when a binding's role does not exist; BadRequest for an
  // object that is not one of the four kinds or a roleRef of another kind.
  core::Status ConfirmNoEscalation(const UserInfo& user, const machinery::Json& role_or_binding,
                                   const machinery::Json* old_object = nullptr) const;

 private:
  struct State;
  struct Snapshot;

  std::shared_ptr<const Snapshot> Load() const { return snapshot_.load(std::memory_order_acquire); }
  void Rebuild() REQUIRES(mu_);
  void UpsertLocked(const machinery::Json& object) REQUIRES(mu_);
  bool RemoveLocked(std::string_view kind, std::string_view ns, std::string_view name)
      REQUIRES(mu_);

  core::Mutex mu_;  // serializes writers
  std::unique_ptr<State> state_ GUARDED_BY(mu_);
  std::atomic<std::shared_ptr<const Snapshot>> snapshot_;
};

}  // namespace klutch::auth
