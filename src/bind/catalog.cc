#include "bind/catalog.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::bind {
namespace {

using machinery::Json;

const machinery::GroupVersionResource kCompositions{"apiextensions.crossplane.io", "v1",
                                                    "compositions"};

// The schema of the CRD's storage version (else its first served one); nullptr when none.
const Json* StorageSchema(const Json& crd) {
  const Json* versions = machinery::Find(crd, {"spec", "versions"});
  if (versions == nullptr || !versions->is_array()) return nullptr;
  const Json* fallback = nullptr;
  for (const Json& v : *versions) {
    const Json* schema = machinery::Find(v, {"schema", "openAPIV3Schema"});
    if (schema == nullptr || !schema->is_object()) continue;
    const Json* storage = machinery::Find(v, {"storage"});
    if (storage != nullptr && storage->is_boolean() && *storage == true) return schema;
    if (fallback == nullptr) fallback = schema;
  }
  return fallback;
}

std::vector<std::string> EnumPlans(const Json& schema) {
  for (auto path :
       {std::initializer_list<std::string_view>{"properties", "spec", "properties", "plan", "enum"},
        std::initializer_list<std::string_view>{"properties", "spec", "properties", "parameters",
                                                "properties", "plan", "enum"}}) {
    const Json* e = machinery::Find(schema, path);
    if (e != nullptr && e->is_array()) {
      std::vector<std::string> out = machinery::Strings(e);
      if (!out.empty()) return out;
    }
  }
  return {};
}

bool IsIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.';
}

// The string literal compared to `operand` at `at` in `rule` (`operand == 'x'` or "x"),
// nullopt when `at` does not start such a comparison. Literals with escapes are skipped (no
// plan or Composition name needs one).
std::optional<std::string> ComparedLiteral(std::string_view rule, size_t at,
                                           std::string_view operand) {
  if (rule.substr(at, operand.size()) != operand) return std::nullopt;
  if (at > 0 && IsIdentifierChar(rule[at - 1])) return std::nullopt;
  size_t i = at + operand.size();
  if (i < rule.size() && IsIdentifierChar(rule[i])) return std::nullopt;
  auto skip_space = [&] {
    while (i < rule.size() && std::isspace(static_cast<unsigned char>(rule[i])) != 0) ++i;
  };
  skip_space();
  if (rule.substr(i, 2) != "==") return std::nullopt;
  i += 2;
  skip_space();
  if (i >= rule.size() || (rule[i] != '\'' && rule[i] != '"')) return std::nullopt;
  const char quote = rule[i++];
  const size_t end = rule.find(quote, i);
  if (end == std::string_view::npos) return std::nullopt;
  std::string_view literal = rule.substr(i, end - i);
  if (literal.empty() || literal.find('\\') != std::string_view::npos) return std::nullopt;
  return std::string(literal);
}

// The plans spec's validation rules allow, per Composition when the rules name one before the
// plans (Klutch's PostgreSQL XRD: `(self.compositionRef.name == 'a9s-postgresql' &&
// (self.plan == '...' || ...)) || (...)`). A plan compared before any Composition is named
// belongs to the group with an empty name.
std::vector<OfferedApi::PlanGroup> RulePlans(const Json& schema) {
  std::vector<OfferedApi::PlanGroup> groups;
  const Json* rules = machinery::Find(schema, {"properties", "spec", "x-kubernetes-validations"});
  if (rules == nullptr || !rules->is_array()) return groups;
  for (const Json& r : *rules) {
    const std::string rule = r.is_object() ? machinery::GetString(r, {"rule"}) : "";
    std::string composition;
    for (size_t at = rule.find("self."); at != std::string::npos; at = rule.find("self.", at + 1)) {
      if (auto c = ComparedLiteral(rule, at, "self.compositionRef.name")) {
        composition = *c;
        continue;
      }
      auto plan = ComparedLiteral(rule, at, "self.plan");
      if (!plan) continue;
      auto group = std::find_if(groups.begin(), groups.end(),
                                [&](const auto& g) { return g.composition == composition; });
      if (group == groups.end()) {
        groups.push_back({composition, {}});
        group = groups.end() - 1;
      }
      if (std::find(group->plans.begin(), group->plans.end(), *plan) == group->plans.end()) {
        group->plans.push_back(*plan);
      }
    }
  }
  return groups;
}

// `groups`' plans, each once, in order.
std::vector<std::string> UnionOf(const std::vector<OfferedApi::PlanGroup>& groups) {
  std::vector<std::string> out;
  for (const auto& g : groups) {
    for (const auto& p : g.plans) {
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
  }
  return out;
}

void SetPlans(const Json& schema, OfferedApi& api) {
  api.plans = EnumPlans(schema);
  if (!api.plans.empty()) return;
  std::vector<OfferedApi::PlanGroup> groups = RulePlans(schema);
  api.plans = UnionOf(groups);
  const bool per_composition = std::any_of(groups.begin(), groups.end(),
                                           [](const auto& g) { return !g.composition.empty(); });
  if (per_composition) api.plans_by_composition = std::move(groups);
}

OfferedApi Describe(const Json& crd, const Json& tmpl) {
  OfferedApi api;
  api.group = machinery::GetString(crd, {"spec", "group"});
  api.resource = machinery::GetString(crd, {"spec", "names", "plural"});
  api.kind = machinery::GetString(crd, {"spec", "names", "kind"});
  api.singular = machinery::GetString(crd, {"spec", "names", "singular"});
  api.scope = machinery::GetString(crd, {"spec", "scope"});
  api.crd_name = machinery::Name(crd);
  if (const Json* schema = StorageSchema(crd)) {
    api.description = machinery::GetString(*schema, {"description"});
    if (api.description.empty()) {
      api.description = machinery::GetString(*schema, {"properties", "spec", "description"});
    }
    SetPlans(*schema, api);
  }
  if (const Json* versions = machinery::Find(crd, {"spec", "versions"});
      versions && versions->is_array()) {
    for (const Json& v : *versions) {
      const Json* served = machinery::Find(v, {"served"});
      if (served != nullptr && served->is_boolean() && *served == true) {
        api.versions.push_back(machinery::GetString(v, {"name"}));
      }
    }
  }
  const Json* claims = machinery::Find(tmpl, {"spec", "permissionClaims"});
  api.permission_claims = claims != nullptr && claims->is_array() ? *claims : Json::array();
  api.template_namespace = machinery::Namespace(tmpl);
  api.template_name = machinery::Name(tmpl);
  return api;
}

std::vector<Json> CatalogItems(const Json& list) {
  std::vector<Json> out;
  if (const Json* items = machinery::Find(list, {"items"}); items && items->is_array()) {
    out.assign(items->begin(), items->end());
  }
  return out;
}

}  // namespace

void KeepPlansOfCompositions(OfferedApi& api, const std::vector<std::string>& existing) {
  if (api.plans_by_composition.empty()) return;
  std::erase_if(api.plans_by_composition, [&](const OfferedApi::PlanGroup& g) {
    return !g.composition.empty() &&
           std::find(existing.begin(), existing.end(), g.composition) == existing.end();
  });
  api.plans = UnionOf(api.plans_by_composition);
}

bool HidesClusterScoped(std::string_view consumer_scope) {
  return core::ToLower(consumer_scope) == "namespaced";
}

std::vector<OfferedApi> OfferedApisFrom(const std::vector<Json>& templates,
                                        const std::vector<Json>& crds,
                                        std::string_view consumer_scope) {
  // (group, resource) -> the first template by namespace/name, so the choice is stable.
  std::map<std::pair<std::string, std::string>, const Json*> selected;
  std::vector<const Json*> sorted;
  for (const Json& t : templates) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](const Json* a, const Json* b) {
    return std::make_pair(machinery::Namespace(*a), machinery::Name(*a)) <
           std::make_pair(machinery::Namespace(*b), machinery::Name(*b));
  });
  for (const Json* t : sorted) {
    std::pair<std::string, std::string> key{
        std::string(core::Trim(machinery::GetString(*t, {"spec", "APIServiceSelector", "group"}))),
        std::string(
            core::Trim(machinery::GetString(*t, {"spec", "APIServiceSelector", "resource"})))};
    if (key.second.empty()) continue;
    selected.emplace(std::move(key), t);
  }
  const bool hide_cluster = HidesClusterScoped(consumer_scope);
  std::vector<OfferedApi> out;
  for (const Json& crd : crds) {
    const std::string group = machinery::GetString(crd, {"spec", "group"});
    const std::string plural = machinery::GetString(crd, {"spec", "names", "plural"});
    auto it = selected.find({group, plural});
    if (it == selected.end()) continue;
    if (hide_cluster && machinery::GetString(crd, {"spec", "scope"}) == "Cluster") continue;
    out.push_back(Describe(crd, *it->second));
  }
  std::sort(out.begin(), out.end(),
            [](const OfferedApi& a, const OfferedApi& b) { return a.crd_name < b.crd_name; });
  return out;
}

core::Result<std::vector<OfferedApi>> ListOfferedApis(client::RestClient& admin,
                                                      const std::string& consumer_scope) {
  auto templates =
      client::ResourceClient(admin, apis::klutch::kApiServiceExportTemplates).ListAll();
  if (!templates.ok()) {
    // No template CRD installed: nothing is offered (and the operator is told why).
    if (core::IsNotFound(templates.status())) {
      KLUTCH_LOG(kWarn, "bind", "no APIs offered: the CRD {} is not installed",
                 apis::klutch::kApiServiceExportTemplates.GroupResource());
      return std::vector<OfferedApi>{};
    }
    return core::Status(templates.status())
        .Annotate("listing " + apis::klutch::kApiServiceExportTemplates.GroupResource());
  }
  auto crds = client::ResourceClient(admin, client::resources::kCustomResourceDefinitions)
                  .ListAll({.skip_managed_fields = true});
  if (!crds.ok()) {
    return core::Status(crds.status()).Annotate("listing customresourcedefinitions");
  }
  std::vector<OfferedApi> apis =
      OfferedApisFrom(CatalogItems(*templates), CatalogItems(*crds), consumer_scope);
  // Plans of Compositions this Control Plane lacks cannot be used: narrow to those it has.
  if (std::any_of(apis.begin(), apis.end(),
                  [](const OfferedApi& a) { return !a.plans_by_composition.empty(); })) {
    auto compositions = client::ResourceClient(admin, kCompositions).ListAll();
    if (compositions.ok()) {
      std::vector<std::string> names;
      for (const Json& c : CatalogItems(*compositions)) names.push_back(machinery::Name(c));
      for (OfferedApi& api : apis) KeepPlansOfCompositions(api, names);
    } else {
      KLUTCH_LOG(kInfo, "bind", "catalog: plans shown for every Composition: {}",
                 compositions.status().message());
    }
  }
  return apis;
}

core::Result<OfferedApi> FindOfferedApi(client::RestClient& admin,
                                        const std::string& consumer_scope, const std::string& group,
                                        const std::string& resource) {
  KLUTCH_ASSIGN_OR_RETURN(std::vector<OfferedApi> apis, ListOfferedApis(admin, consumer_scope));
  for (OfferedApi& api : apis) {
    if (api.group == group && api.resource == resource) return std::move(api);
  }
  return core::NotFound("the API " + core::GoQuote(resource + "." + group) +
                        " is not offered by this provider: no APIServiceExportTemplate selects "
                        "an installed CustomResourceDefinition with group " +
                        core::GoQuote(group) + " and resource " + core::GoQuote(resource));
}

}  // namespace klutch::bind
