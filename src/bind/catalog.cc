#include "bind/catalog.h"

#include <algorithm>
#include <map>

#include "bind/names.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::bind {
namespace {

using machinery::Json;

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

std::vector<std::string> Plans(const Json& schema) {
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
    api.plans = Plans(*schema);
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

std::vector<Json> Items(const Json& list) {
  std::vector<Json> out;
  if (const Json* items = machinery::Find(list, {"items"}); items && items->is_array()) {
    out.assign(items->begin(), items->end());
  }
  return out;
}

}  // namespace

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
  auto templates = client::ResourceClient(admin, kApiServiceExportTemplates).ListAll();
  if (!templates.ok()) {
    // No template CRD installed: nothing is offered (and the operator is told why).
    if (core::IsNotFound(templates.status())) {
      KLUTCH_LOG(kWarn, "bind", "no APIs offered: the CRD {} is not installed",
                 kApiServiceExportTemplates.GroupResource());
      return std::vector<OfferedApi>{};
    }
    return core::Status(templates.status())
        .Annotate("listing " + kApiServiceExportTemplates.GroupResource());
  }
  auto crds = client::ResourceClient(admin, client::resources::kCustomResourceDefinitions)
                  .ListAll({.skip_managed_fields = true});
  if (!crds.ok()) {
    return core::Status(crds.status()).Annotate("listing customresourcedefinitions");
  }
  return OfferedApisFrom(Items(*templates), Items(*crds), consumer_scope);
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
