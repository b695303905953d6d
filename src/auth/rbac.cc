#include "auth/rbac.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "core/strings.h"
#include "machinery/object.h"
#include "machinery/selector.h"

namespace klutch::auth {
namespace {

using machinery::Json;
using RuleSet = std::vector<PolicyRule>;

constexpr std::string_view kAll = "*";

bool Has(const std::vector<std::string>& set, std::string_view s) {
  for (const auto& e : set) {
    if (e == s) return true;
  }
  return false;
}

bool HasAll(const std::vector<std::string>& set, const std::vector<std::string>& want) {
  for (const auto& w : want) {
    if (!Has(set, w)) return false;
  }
  return true;
}

std::vector<std::string> StringList(const Json& obj, const char* field) {
  return machinery::Strings(machinery::Find(obj, {field}));
}

// Go's %q of a []string: ["a" "b"].
std::string QuoteList(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ' ';
    out += core::GoQuote(v[i]);
  }
  out += ']';
  return out;
}

// --- matching (kube's rbacv1helpers *Matches) -------------------------------------------------

bool VerbMatches(const PolicyRule& r, std::string_view verb) {
  for (const auto& v : r.verbs) {
    if (v == kAll || v == verb) return true;
  }
  return false;
}

bool GroupMatches(const PolicyRule& r, std::string_view group) {
  for (const auto& g : r.api_groups) {
    if (g == kAll || g == group) return true;
  }
  return false;
}

// Compares against "resource" or "resource/subresource" without building the combined string.
bool ResourceMatches(const PolicyRule& r, std::string_view resource, std::string_view sub) {
  for (const auto& rr : r.resources) {
    std::string_view rule = rr;
    if (rule == kAll) return true;
    if (sub.empty()) {
      if (rule == resource) return true;
      continue;
    }
    if (rule.size() == resource.size() + 1 + sub.size() && rule.starts_with(resource) &&
        rule[resource.size()] == '/' && rule.ends_with(sub)) {
      return true;
    }
    if (rule.size() == sub.size() + 2 && rule.starts_with("*/") && rule.ends_with(sub)) {
      return true;
    }
  }
  return false;
}

bool ResourceNameMatches(const PolicyRule& r, std::string_view name) {
  return r.resource_names.empty() || Has(r.resource_names, name);
}

// "x*" (any number of trailing stars) is a prefix; Go's TrimRight(url, "*").
bool UrlPatternMatches(std::string_view pattern, std::string_view path) {
  if (pattern == path) return true;
  if (!pattern.ends_with('*')) return false;
  while (!pattern.empty() && pattern.back() == '*') pattern.remove_suffix(1);
  return path.starts_with(pattern);
}

bool NonResourceUrlMatches(const PolicyRule& r, std::string_view path) {
  for (const auto& u : r.non_resource_urls) {
    if (u == kAll || UrlPatternMatches(u, path)) return true;
  }
  return false;
}

// --- coverage (kube's component-helpers Covers) -----------------------------------------------

std::vector<PolicyRule> Breakdown(const PolicyRule& rule) {
  std::vector<PolicyRule> out;
  for (const auto& group : rule.api_groups) {
    for (const auto& resource : rule.resources) {
      for (const auto& verb : rule.verbs) {
        if (rule.resource_names.empty()) {
          out.push_back({{verb}, {group}, {resource}, {}, {}});
        } else {
          for (const auto& name : rule.resource_names) {
            out.push_back({{verb}, {group}, {resource}, {name}, {}});
          }
        }
      }
    }
  }
  for (const auto& url : rule.non_resource_urls) {
    for (const auto& verb : rule.verbs) out.push_back({{verb}, {}, {}, {}, {url}});
  }
  return out;
}

bool ResourceCoversAll(const std::vector<std::string>& set, const std::vector<std::string>& want) {
  if (Has(set, kAll) || HasAll(set, want)) return true;
  for (const auto& path : want) {
    if (Has(set, path)) continue;
    auto slash = path.find('/');
    if (slash == std::string::npos) return false;
    if (!Has(set, "*/" + path.substr(slash + 1))) return false;
  }
  return true;
}

bool NonResourceUrlsCoverAll(const std::vector<std::string>& set,
                             const std::vector<std::string>& want) {
  for (const auto& path : want) {
    bool covered = false;
    for (const auto& owner : set) {
      if (UrlPatternMatches(owner, path)) {
        covered = true;
        break;
      }
    }
    if (!covered) return false;
  }
  return true;
}

bool RuleCovers(const PolicyRule& owner, const PolicyRule& sub) {
  bool verbs = Has(owner.verbs, kAll) || HasAll(owner.verbs, sub.verbs);
  bool groups = Has(owner.api_groups, kAll) || HasAll(owner.api_groups, sub.api_groups);
  bool resources = ResourceCoversAll(owner.resources, sub.resources);
  bool urls = NonResourceUrlsCoverAll(owner.non_resource_urls, sub.non_resource_urls);
  bool names = sub.resource_names.empty() ? owner.resource_names.empty()
                                          : owner.resource_names.empty() ||
                                                HasAll(owner.resource_names, sub.resource_names);
  return verbs && groups && resources && urls && names;
}

const std::vector<PolicyRule>& FullAuthority() {
  static const std::vector<PolicyRule> rules = {
      {{"*"}, {"*"}, {"*"}, {}, {}},
      {{"*"}, {}, {}, {}, {"*"}},
  };
  return rules;
}

// --- ClusterRoles and aggregation -------------------------------------------------------------

struct ClusterRoleInfo {
  std::string name;
  Json labels;  // metadata.labels, null when absent
  bool aggregated = false;
  std::vector<machinery::LabelSelector> selectors;  // of aggregationRule.clusterRoleSelectors
  RuleSet rules;                                    // as stored
};

ClusterRoleInfo ParseClusterRole(const Json& obj) {
  ClusterRoleInfo info;
  info.name = machinery::Name(obj);
  if (const Json* labels = machinery::Find(obj, {"metadata", "labels"})) info.labels = *labels;
  if (const Json* rules = machinery::Find(obj, {"rules"})) info.rules = ParseRules(*rules);
  const Json* agg = machinery::Find(obj, {"aggregationRule"});
  if (agg != nullptr && agg->is_object()) {
    info.aggregated = true;
    const Json* sels = machinery::Find(*agg, {"clusterRoleSelectors"});
    if (sels != nullptr && sels->is_array()) {
      for (const auto& s : *sels) {
        auto sel = machinery::LabelSelector::FromJson(s);
        info.selectors.push_back(sel.ok() ? *sel : machinery::LabelSelector::Nothing());
      }
    }
  }
  return info;
}

bool HasAggregationRule(const Json* obj) {
  if (obj == nullptr) return false;
  const Json* sels = machinery::Find(*obj, {"aggregationRule", "clusterRoleSelectors"});
  return sels != nullptr && sels->is_array() && !sels->empty();
}

// For roles[target]: per selector, the indices of the other roles (by name) it matches, in
// the order of `roles` (sorted by name).
std::vector<std::vector<size_t>> SelectorMatches(const std::vector<const ClusterRoleInfo*>& roles,
                                                 const ClusterRoleInfo& target) {
  std::vector<std::vector<size_t>> out;
  for (const auto& sel : target.selectors) {
    std::vector<size_t>& m = out.emplace_back();
    for (size_t i = 0; i < roles.size(); ++i) {
      if (roles[i]->name != target.name && sel.Matches(roles[i]->labels)) m.push_back(i);
    }
  }
  return out;
}

RuleSet Aggregate(const std::vector<std::vector<size_t>>& matches,
                  const std::function<const RuleSet&(size_t)>& rules_of) {
  RuleSet out;
  for (const auto& per_selector : matches) {
    for (size_t i : per_selector) {
      for (const auto& rule : rules_of(i)) {
        if (std::find(out.begin(), out.end(), rule) == out.end()) out.push_back(rule);
      }
    }
  }
  return out;
}

// The effective rules of every role of `roles` (sorted by name): stored rules for plain roles,
// the aggregation fixpoint for aggregated ones (updated in name order, at most one round more
// than there are aggregated roles, which bounds any chain of aggregated roles).
std::vector<RuleSet> ResolveAll(const std::vector<const ClusterRoleInfo*>& roles) {
  std::vector<RuleSet> effective;
  effective.reserve(roles.size());
  std::vector<std::pair<size_t, std::vector<std::vector<size_t>>>> aggregated;
  for (size_t i = 0; i < roles.size(); ++i) {
    effective.push_back(roles[i]->rules);
    if (roles[i]->aggregated) aggregated.emplace_back(i, SelectorMatches(roles, *roles[i]));
  }
  auto rules_of = [&](size_t i) -> const RuleSet& { return effective[i]; };
  for (size_t round = 0; round <= aggregated.size(); ++round) {
    bool changed = false;
    for (const auto& [i, matches] : aggregated) {
      RuleSet next = Aggregate(matches, rules_of);
      if (next != effective[i]) {
        effective[i] = std::move(next);
        changed = true;
      }
    }
    if (!changed) break;
  }
  return effective;
}

std::vector<const ClusterRoleInfo*> SortedByName(const std::vector<ClusterRoleInfo>& infos) {
  std::vector<const ClusterRoleInfo*> out;
  for (const auto& i : infos) out.push_back(&i);
  std::stable_sort(out.begin(), out.end(),
                   [](const auto* a, const auto* b) { return a->name < b->name; });
  return out;
}

// --- bindings -----------------------------------------------------------------------------

struct SubjectRef {
  std::string kind, name, ns;
};

struct BindingInfo {
  bool cluster = false;
  std::string ns, name;
  std::string role_kind, role_name;
  std::vector<SubjectRef> subjects;
};

BindingInfo ParseBinding(const Json& obj, bool cluster) {
  BindingInfo b;
  b.cluster = cluster;
  b.name = machinery::Name(obj);
  if (!cluster) b.ns = machinery::Namespace(obj);
  b.role_kind = machinery::GetString(obj, {"roleRef", "kind"});
  b.role_name = machinery::GetString(obj, {"roleRef", "name"});
  const Json* subjects = machinery::Find(obj, {"subjects"});
  if (subjects != nullptr && subjects->is_array()) {
    for (const auto& s : *subjects) {
      b.subjects.push_back({machinery::GetString(s, {"kind"}), machinery::GetString(s, {"name"}),
                            machinery::GetString(s, {"namespace"})});
    }
  }
  return b;
}

// The namespace a ServiceAccount subject names: its own, else the RoleBinding's ("" for a
// ClusterRoleBinding: such a subject applies to nobody).
const std::string& SubjectNamespace(const SubjectRef& s, const BindingInfo& b) {
  return s.ns.empty() ? b.ns : s.ns;
}

std::string ServiceAccountUser(std::string_view ns, std::string_view name) {
  std::string u = kServiceAccountPrefix;
  u.append(ns).append(":").append(name);
  return u;
}

bool AppliesTo(const UserInfo& user, const SubjectRef& s, const BindingInfo& b) {
  if (s.kind == "User") return user.name == s.name;
  if (s.kind == "Group") return user.InGroup(s.name);
  if (s.kind == "ServiceAccount") {
    const std::string& ns = SubjectNamespace(s, b);
    if (ns.empty()) return false;
    std::string_view u = user.name;
    std::string_view prefix = kServiceAccountPrefix;
    return u.size() == prefix.size() + ns.size() + 1 + s.name.size() && u.starts_with(prefix) &&
           u.substr(prefix.size(), ns.size()) == ns && u[prefix.size() + ns.size()] == ':' &&
           u.ends_with(s.name);
  }
  return false;
}

// kube's describeSubject: `User "alice"`, `ServiceAccount "sa/ns"`.
std::string DescribeSubject(const SubjectRef& s, const BindingInfo& b) {
  if (s.kind == "ServiceAccount") {
    return s.kind + " " + core::GoQuote(s.name + "/" + SubjectNamespace(s, b));
  }
  return s.kind + " " + core::GoQuote(s.name);
}

// kube's binding describers up to the subject, as Decision::reason starts:
// `RBAC: allowed by RoleBinding "name/ns" of Role "r" to `.
std::string ReasonPrefix(const BindingInfo& b) {
  return fmt::format("RBAC: allowed by {} {} of {} {} to ",
                     b.cluster ? "ClusterRoleBinding" : "RoleBinding",
                     core::GoQuote(b.cluster ? b.name : b.name + "/" + b.ns), b.role_kind,
                     core::GoQuote(b.role_name));
}

// kube's lister NotFound (singular resource) or unsupported-kind error for a binding's role.
std::string RoleResolutionError(const BindingInfo& b) {
  if (b.role_kind == "Role")
    return "role.rbac.authorization.k8s.io " + core::GoQuote(b.role_name) + " not found";
  if (b.role_kind == "ClusterRole") {
    return "clusterrole.rbac.authorization.k8s.io " + core::GoQuote(b.role_name) + " not found";
  }
  return "unsupported role reference kind: " + core::GoQuote(b.role_kind);
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

std::string Key(std::string_view ns, std::string_view name) {
  std::string k(ns);
  k.append("/").append(name);
  return k;
}

// apimachinery's NewForbidden for an RBAC resource.
core::Status RbacForbidden(std::string_view resource, std::string_view name,
                           const std::string& why) {
  core::Details d;
  d.name = std::string(name);
  d.group = kRbacGroup;
  d.kind = std::string(resource);
  std::string qualified = fmt::format("{}.{}", resource, kRbacGroup);
  std::string message =
      name.empty() ? fmt::format("{} is forbidden: {}", qualified, why)
                   : fmt::format("{} {} is forbidden: {}", qualified, core::GoQuote(name), why);
  return core::Status(core::Reason::kForbidden, std::move(message), std::move(d));
}

std::string EscalationMessage(const UserInfo& user, const RuleSet& missing) {
  std::set<std::string> descriptions;
  for (const auto& r : CompactRules(missing)) descriptions.insert(CompactString(r));
  std::string out =
      fmt::format("user {} (groups={}) is attempting to grant RBAC permissions not currently held:",
                  core::GoQuote(user.name), QuoteList(user.groups));
  for (const auto& d : descriptions) out.append("\n").append(d);
  return out;
}

// kube's IsOnlyMutatingGCFields: the update changes nothing but what garbage collection edits
// (plus server-managed bookkeeping that carries no permission).
bool OnlyGcFieldsChanged(const Json& obj, const Json& old) {
  auto strip = [](Json o) {
    if (o.is_object() && o.contains("metadata") && o["metadata"].is_object()) {
      for (const char* f : {"ownerReferences", "finalizers", "managedFields", "resourceVersion"}) {
        o["metadata"].erase(f);
      }
    }
    return o;
  };
  return strip(obj) == strip(old);
}

}  // namespace

// --- free functions -------------------------------------------------------------------------

std::vector<PolicyRule> ParseRules(const Json& rules) {
  std::vector<PolicyRule> out;
  if (!rules.is_array()) return out;
  for (const auto& r : rules) {
    if (!r.is_object()) continue;
    out.push_back({StringList(r, "verbs"), StringList(r, "apiGroups"), StringList(r, "resources"),
                   StringList(r, "resourceNames"), StringList(r, "nonResourceURLs")});
  }
  return out;
}

Json RulesToJson(const std::vector<PolicyRule>& rules) {
  Json out = Json::array();
  for (const auto& r : rules) {
    Json j = Json::object();
    j["verbs"] = r.verbs;
    if (!r.api_groups.empty()) j["apiGroups"] = r.api_groups;
    if (!r.resources.empty()) j["resources"] = r.resources;
    if (!r.resource_names.empty()) j["resourceNames"] = r.resource_names;
    if (!r.non_resource_urls.empty()) j["nonResourceURLs"] = r.non_resource_urls;
    out.push_back(std::move(j));
  }
  return out;
}

std::string CompactString(const PolicyRule& r) {
  std::vector<std::string> parts;
  if (!r.api_groups.empty()) parts.push_back("APIGroups:" + QuoteList(r.api_groups));
  if (!r.resources.empty()) parts.push_back("Resources:" + QuoteList(r.resources));
  if (!r.non_resource_urls.empty()) {
    parts.push_back("NonResourceURLs:" + QuoteList(r.non_resource_urls));
  }
  if (!r.resource_names.empty()) parts.push_back("ResourceNames:" + QuoteList(r.resource_names));
  if (!r.verbs.empty()) parts.push_back("Verbs:" + QuoteList(r.verbs));
  return "{" + core::Join(parts, ", ") + "}";
}

std::vector<PolicyRule> CompactRules(const std::vector<PolicyRule>& rules) {
  std::vector<PolicyRule> out;
  std::vector<PolicyRule> simple;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (const auto& r : rules) {
    bool is_simple = r.resource_names.empty() && r.non_resource_urls.empty() &&
                     r.api_groups.size() == 1 && r.resources.size() == 1;
    if (!is_simple) {
      out.push_back(r);
      continue;
    }
    auto [it, inserted] = index.try_emplace({r.api_groups[0], r.resources[0]}, simple.size());
    if (inserted) {
      simple.push_back(r);
    } else {
      auto& verbs = simple[it->second].verbs;
      verbs.insert(verbs.end(), r.verbs.begin(), r.verbs.end());
    }
  }
  out.insert(out.end(), simple.begin(), simple.end());
  return out;
}

bool RuleAllows(const PolicyRule& rule, const Attributes& a) {
  if (a.resource_request) {
    return VerbMatches(rule, a.verb) && GroupMatches(rule, a.api_group) &&
           ResourceMatches(rule, a.resource, a.subresource) && ResourceNameMatches(rule, a.name);
  }
  return VerbMatches(rule, a.verb) && NonResourceUrlMatches(rule, a.path);
}

bool Covers(const std::vector<PolicyRule>& owner, const std::vector<PolicyRule>& requested,
            std::vector<PolicyRule>* missing) {
  bool covered_all = true;
  for (const auto& rule : requested) {
    for (auto& piece : Breakdown(rule)) {
      bool covered = std::any_of(owner.begin(), owner.end(),
                                 [&](const PolicyRule& o) { return RuleCovers(o, piece); });
      if (covered) continue;
      covered_all = false;
      if (missing != nullptr) missing->push_back(std::move(piece));
    }
  }
  return covered_all;
}

std::optional<Json> AggregatedRules(const Json& cluster_role,
                                    const std::vector<Json>& all_cluster_roles) {
  ClusterRoleInfo target = ParseClusterRole(cluster_role);
  if (!target.aggregated) return std::nullopt;
  std::vector<ClusterRoleInfo> infos;
  infos.reserve(all_cluster_roles.size());
  for (const auto& o : all_cluster_roles) infos.push_back(ParseClusterRole(o));
  std::vector<const ClusterRoleInfo*> sorted = SortedByName(infos);
  auto matches = SelectorMatches(sorted, target);
  return RulesToJson(
      Aggregate(matches, [&](size_t i) -> const RuleSet& { return sorted[i]->rules; }));
}

int ResolveAggregation(std::vector<Json>& objects) {
  std::vector<ClusterRoleInfo> infos;
  std::vector<Json*> objs;
  for (auto& o : objects) {
    if (machinery::Kind(o) != "ClusterRole") continue;
    infos.push_back(ParseClusterRole(o));
    objs.push_back(&o);
  }
  std::vector<const ClusterRoleInfo*> sorted = SortedByName(infos);
  std::vector<RuleSet> effective = ResolveAll(sorted);
  int changed = 0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const ClusterRoleInfo* info = sorted[i];
    if (!info->aggregated) continue;
    Json& obj = *objs[static_cast<size_t>(info - infos.data())];
    Json rules = RulesToJson(effective[i]);
    const Json* old = machinery::Find(obj, {"rules"});
    if (old != nullptr && *old == rules) continue;
    obj["rules"] = std::move(rules);
    ++changed;
  }
  return changed;
}

// --- RbacAuthorizer -----------------------------------------------------------------------

// What writers keep: the parsed objects, by key. Shared pointers so a rebuild reuses them.
struct RbacAuthorizer::State {
  std::map<std::string, std::shared_ptr<const RuleSet>> roles;              // "ns/name"
  std::map<std::string, ClusterRoleInfo> cluster_roles;                     // by name
  std::map<std::string, std::shared_ptr<const BindingInfo>> role_bindings;  // "ns/name"
  std::map<std::string, std::shared_ptr<const BindingInfo>> cluster_role_bindings;
};

namespace {

struct CompiledBinding {
  std::shared_ptr<const BindingInfo> info;
  std::shared_ptr<const RuleSet> rules;  // nullptr: the role does not exist
  size_t seq = 0;                        // cluster bindings first, each by key
  // Decision::reason, prepared so that an allowed request costs one concatenation.
  std::string reason_prefix;
  std::vector<std::string> subject_descriptions;  // parallel to info->subjects

  std::string Reason(const UserInfo& user) const {
    const auto& subjects = info->subjects;
    for (size_t i = 0; i < subjects.size(); ++i) {
      if (AppliesTo(user, subjects[i], *info)) return reason_prefix + subject_descriptions[i];
    }
    return reason_prefix;
  }
};

struct Index {
  StringMap<std::vector<const CompiledBinding*>> by_user;  // incl. ServiceAccount users
  StringMap<std::vector<const CompiledBinding*>> by_group;
};

void AddTo(StringMap<std::vector<const CompiledBinding*>>& map, std::string key,
           const CompiledBinding* b) {
  auto& list = map[std::move(key)];
  if (list.empty() || list.back() != b) list.push_back(b);
}

}  // namespace

// Immutable once published.
struct RbacAuthorizer::Snapshot {
  std::vector<CompiledBinding> bindings;  // never resized after indexing
  Index cluster;
  StringMap<Index> namespaces;
  StringMap<std::shared_ptr<const RuleSet>> roles;  // "ns/name"
  StringMap<std::shared_ptr<const RuleSet>> cluster_roles;

  // Bindings from `idx` that apply to `user` (by user name, then group), in any order.
  template <typename F>
  static const CompiledBinding* Visit(const Index& idx, const UserInfo& user, F&& f) {
    if (auto it = idx.by_user.find(user.name); it != idx.by_user.end()) {
      for (const CompiledBinding* b : it->second) {
        if (f(b)) return b;
      }
    }
    for (const auto& g : user.groups) {
      auto it = idx.by_group.find(g);
      if (it == idx.by_group.end()) continue;
      for (const CompiledBinding* b : it->second) {
        if (f(b)) return b;
      }
    }
    return nullptr;
  }

  // The bindings that apply to `user` in `ns` (cluster-wide first), each once, in seq order.
  std::vector<const CompiledBinding*> BindingsFor(const UserInfo& user, std::string_view ns) const {
    std::vector<const CompiledBinding*> out;
    auto collect = [&](const Index& idx) {
      size_t start = out.size();
      Visit(idx, user, [&](const CompiledBinding* b) {
        out.push_back(b);
        return false;
      });
      std::sort(out.begin() + static_cast<std::ptrdiff_t>(start), out.end(),
                [](const auto* a, const auto* b) { return a->seq < b->seq; });
      out.erase(std::unique(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()),
                out.end());
    };
    collect(cluster);
    if (!ns.empty()) {
      if (auto it = namespaces.find(ns); it != namespaces.end()) collect(it->second);
    }
    return out;
  }
};

RbacAuthorizer::RbacAuthorizer() : state_(std::make_unique<State>()) {
  snapshot_.store(std::make_shared<const Snapshot>(), std::memory_order_release);
}

RbacAuthorizer::~RbacAuthorizer() = default;

void RbacAuthorizer::Replace(const std::vector<Json>& objects) {
  core::MutexLock lock(mu_);
  state_ = std::make_unique<State>();
  for (const auto& o : objects) UpsertLocked(o);
  Rebuild();
}

void RbacAuthorizer::Upsert(const Json& object) {
  core::MutexLock lock(mu_);
  UpsertLocked(object);
  Rebuild();
}

void RbacAuthorizer::UpsertLocked(const Json& o) {
  std::string kind = machinery::Kind(o);
  if (kind == "Role") {
    const Json* rules = machinery::Find(o, {"rules"});
    state_->roles[Key(machinery::Namespace(o), machinery::Name(o))] =
        std::make_shared<const RuleSet>(rules ? ParseRules(*rules) : RuleSet{});
  } else if (kind == "ClusterRole") {
    ClusterRoleInfo info = ParseClusterRole(o);
    std::string name = info.name;
    state_->cluster_roles[name] = std::move(info);
  } else if (kind == "RoleBinding") {
    state_->role_bindings[Key(machinery::Namespace(o), machinery::Name(o))] =
        std::make_shared<const BindingInfo>(ParseBinding(o, false));
  } else if (kind == "ClusterRoleBinding") {
    state_->cluster_role_bindings[machinery::Name(o)] =
        std::make_shared<const BindingInfo>(ParseBinding(o, true));
  }
}

void RbacAuthorizer::Remove(std::string_view kind, std::string_view ns, std::string_view name) {
  core::MutexLock lock(mu_);
  if (RemoveLocked(kind, ns, name)) Rebuild();
}

bool RbacAuthorizer::RemoveLocked(std::string_view kind, std::string_view ns,
                                  std::string_view name) {
  size_t erased = 0;
  if (kind == "Role") {
    erased = state_->roles.erase(Key(ns, name));
  } else if (kind == "ClusterRole") {
    erased = state_->cluster_roles.erase(std::string(name));
  } else if (kind == "RoleBinding") {
    erased = state_->role_bindings.erase(Key(ns, name));
  } else if (kind == "ClusterRoleBinding") {
    erased = state_->cluster_role_bindings.erase(std::string(name));
  }
  return erased > 0;
}

void RbacAuthorizer::Apply(const std::vector<Change>& changes) {
  if (changes.empty()) return;
  core::MutexLock lock(mu_);
  for (const auto& c : changes) {
    if (c.removed) {
      RemoveLocked(machinery::Kind(c.object), machinery::Namespace(c.object),
                   machinery::Name(c.object));
    } else {
      UpsertLocked(c.object);
    }
  }
  Rebuild();
}

void RbacAuthorizer::Rebuild() {
  auto snap = std::make_shared<Snapshot>();

  std::vector<const ClusterRoleInfo*> sorted;
  for (const auto& [name, info] : state_->cluster_roles) sorted.push_back(&info);
  std::vector<RuleSet> effective = ResolveAll(sorted);
  for (size_t i = 0; i < sorted.size(); ++i) {
    snap->cluster_roles.emplace(sorted[i]->name,
                                std::make_shared<const RuleSet>(std::move(effective[i])));
  }
  for (const auto& [key, rules] : state_->roles) snap->roles.emplace(key, rules);

  auto role_rules = [&](const BindingInfo& b) -> std::shared_ptr<const RuleSet> {
    if (b.role_kind == "ClusterRole") {
      auto it = snap->cluster_roles.find(b.role_name);
      return it == snap->cluster_roles.end() ? nullptr : it->second;
    }
    if (b.role_kind == "Role" && !b.cluster) {
      auto it = snap->roles.find(Key(b.ns, b.role_name));
      return it == snap->roles.end() ? nullptr : it->second;
    }
    return nullptr;
  };
  snap->bindings.reserve(state_->cluster_role_bindings.size() + state_->role_bindings.size());
  for (const auto* map : {&state_->cluster_role_bindings, &state_->role_bindings}) {
    for (const auto& [key, info] : *map) {
      CompiledBinding& b = snap->bindings.emplace_back();
      b.info = info;
      b.rules = role_rules(*info);
      b.seq = snap->bindings.size() - 1;
      b.reason_prefix = ReasonPrefix(*info);
      for (const SubjectRef& s : info->subjects) {
        b.subject_descriptions.push_back(DescribeSubject(s, *info));
      }
    }
  }

  for (const CompiledBinding& b : snap->bindings) {
    const BindingInfo& info = *b.info;
    Index& idx = info.cluster ? snap->cluster : snap->namespaces[info.ns];
    for (const SubjectRef& s : info.subjects) {
      if (s.kind == "User") {
        AddTo(idx.by_user, s.name, &b);
      } else if (s.kind == "Group") {
        AddTo(idx.by_group, s.name, &b);
      } else if (s.kind == "ServiceAccount") {
        const std::string& ns = SubjectNamespace(s, info);
        if (!ns.empty()) AddTo(idx.by_user, ServiceAccountUser(ns, s.name), &b);
      }
    }
  }
  snapshot_.store(std::move(snap), std::memory_order_release);
}

Decision RbacAuthorizer::Authorize(const Attributes& a) const {
  Decision d;
  if (a.user == nullptr) return d;
  std::shared_ptr<const Snapshot> snap = Load();
  std::vector<const CompiledBinding*> unresolved;  // allocates only when a role is missing
  auto allows = [&](const CompiledBinding* b) {
    if (b->rules == nullptr) {
      unresolved.push_back(b);
      return false;
    }
    for (const PolicyRule& r : *b->rules) {
      if (RuleAllows(r, a)) return true;
    }
    return false;
  };
  const CompiledBinding* hit = Snapshot::Visit(snap->cluster, *a.user, allows);
  if (hit == nullptr && !a.ns.empty()) {
    if (auto it = snap->namespaces.find(a.ns); it != snap->namespaces.end()) {
      hit = Snapshot::Visit(it->second, *a.user, allows);
    }
  }
  if (hit != nullptr) {
    d.allowed = true;
    d.reason = hit->Reason(*a.user);
    return d;
  }
  if (!unresolved.empty()) {
    // kube's aggregate error: one message as is, several in brackets, duplicates once.
    std::vector<std::string> errors;
    for (const CompiledBinding* b : unresolved) {
      std::string e = RoleResolutionError(*b->info);
      if (std::find(errors.begin(), errors.end(), e) == errors.end()) errors.push_back(e);
    }
    d.reason = "RBAC: " + (errors.size() == 1 ? errors[0] : "[" + core::Join(errors, ", ") + "]");
  }
  return d;
}

std::vector<PolicyRule> RbacAuthorizer::RulesFor(const UserInfo& user, std::string_view ns) const {
  std::shared_ptr<const Snapshot> snap = Load();
  std::vector<PolicyRule> out;
  for (const CompiledBinding* b : snap->BindingsFor(user, ns)) {
    if (b->rules != nullptr) out.insert(out.end(), b->rules->begin(), b->rules->end());
  }
  return out;
}

core::Status RbacAuthorizer::ConfirmNoEscalation(const UserInfo& user, const Json& obj,
                                                 const Json* old_object) const {
  const std::string kind = machinery::Kind(obj);
  const std::string name = machinery::Name(obj);
  const bool is_role = kind == "Role" || kind == "ClusterRole";
  const bool is_binding = kind == "RoleBinding" || kind == "ClusterRoleBinding";
  if (!is_role && !is_binding) {
    return core::BadRequest(
        fmt::format("{} is not an RBAC role or binding kind", core::GoQuote(kind)));
  }
  // system:masters is what the API server's own loopback client uses: kube lets it escalate
  // before any policy exists.
  if (user.InGroup(kMastersGroup)) return core::Status::Ok();
  if (old_object != nullptr && OnlyGcFieldsChanged(obj, *old_object)) return core::Status::Ok();

  const bool cluster = kind == "ClusterRole" || kind == "ClusterRoleBinding";
  const std::string ns = cluster ? "" : machinery::Namespace(obj);
  std::string resource = kind == "Role"          ? "roles"
                         : kind == "ClusterRole" ? "clusterroles"
                         : kind == "RoleBinding" ? "rolebindings"
                                                 : "clusterrolebindings";
  std::shared_ptr<const Snapshot> snap = Load();

  RuleSet rules;
  if (is_role) {
    Attributes escalate;
    escalate.user = &user;
    escalate.verb = "escalate";
    escalate.ns = ns;
    escalate.api_group = kRbacGroup;
    escalate.api_version = "*";
    escalate.resource = resource;
    // kube checks the request's name: empty on create (POST to the collection).
    if (old_object != nullptr) escalate.name = name;
    if (Authorize(escalate).allowed) return core::Status::Ok();
    if (const Json* r = machinery::Find(obj, {"rules"})) rules = ParseRules(*r);
  } else {
    std::string ref_kind = machinery::GetString(obj, {"roleRef", "kind"});
    std::string ref_name = machinery::GetString(obj, {"roleRef", "name"});
    if (ref_kind != "Role" && ref_kind != "ClusterRole") {
      return core::BadRequest("unsupported role reference kind: " + core::GoQuote(ref_kind));
    }
    std::string ref_resource = ref_kind == "Role" ? "roles" : "clusterroles";
    Attributes bind;
    bind.user = &user;
    bind.verb = "bind";
    bind.ns = ns;
    bind.api_group = machinery::GetString(obj, {"roleRef", "apiGroup"});
    bind.resource = ref_resource;
    bind.name = ref_name;
    if (Authorize(bind).allowed) return core::Status::Ok();
    std::shared_ptr<const RuleSet> ref_rules;
    if (ref_kind == "ClusterRole") {
      if (auto it = snap->cluster_roles.find(ref_name); it != snap->cluster_roles.end()) {
        ref_rules = it->second;
      }
    } else if (!ns.empty()) {
      if (auto it = snap->roles.find(Key(ns, ref_name)); it != snap->roles.end()) {
        ref_rules = it->second;
      }
    }
    if (ref_rules == nullptr) {
      core::Details d;
      d.name = ref_name;
      d.group = kRbacGroup;
      d.kind = ref_resource;
      return core::Status(
          core::Reason::kNotFound,
          fmt::format("{}.{} {} not found", ref_resource, kRbacGroup, core::GoQuote(ref_name)),
          std::move(d));
    }
    rules = *ref_rules;
  }

  RuleSet owner;
  for (const CompiledBinding* b : snap->BindingsFor(user, ns)) {
    if (b->rules != nullptr) owner.insert(owner.end(), b->rules->begin(), b->rules->end());
  }
  RuleSet missing;
  if (!Covers(owner, rules, &missing)) {
    return RbacForbidden(resource, name, EscalationMessage(user, missing));
  }
  if (kind == "ClusterRole" && (HasAggregationRule(&obj) || HasAggregationRule(old_object)) &&
      !Covers(owner, FullAuthority(), nullptr)) {
    return RbacForbidden(resource, name,
                         "must have cluster-admin privileges to use the aggregationRule");
  }
  return core::Status::Ok();
}

}  // namespace klutch::auth
