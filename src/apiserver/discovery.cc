#include "apiserver/discovery.h"

#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace klutch::apiserver {

std::string AggregatedDiscoveryVersion(std::string_view accept) {
  for (auto range : core::Split(accept, ',')) {
    bool group = false, as = false;
    std::string version;
    for (auto p : core::Split(range, ';')) {
      p = core::Trim(p);
      if (p == "g=apidiscovery.k8s.io") group = true;
      if (p == "as=APIGroupDiscoveryList") as = true;
      if (p.starts_with("v=")) version = std::string(p.substr(2));
    }
    if (group && as && (version == "v2" || version == "v2beta1")) return version;
  }
  return "";
}

namespace {

Json Gvk(const machinery::GroupVersionKind& k) {
  return {{"group", k.group}, {"version", k.version}, {"kind", k.kind}};
}

Json ResourceEntry(const ResourceInfo& r) {
  Json e = {{"resource", r.plural},
            {"responseKind", Gvk({r.group, r.version, r.kind})},
            {"scope", r.namespaced ? "Namespaced" : "Cluster"},
            {"singularResource", r.singular},
            {"verbs", r.verbs}};
  if (!r.short_names.empty()) e["shortNames"] = r.short_names;
  if (!r.categories.empty()) e["categories"] = r.categories;
  if (!r.subresources.empty()) {
    Json subs = Json::array();
    for (const auto& s : r.subresources) {
      subs.push_back({{"subresource", s.name}, {"responseKind", Gvk(s.kind)}, {"verbs", s.verbs}});
    }
    e["subresources"] = std::move(subs);
  }
  return e;
}

}  // namespace

Json AggregatedDiscovery(const Registry& registry, bool legacy, std::string_view version) {
  Json items = Json::array();
  auto all = registry.All();
  for (const auto& g : registry.Groups()) {
    if (legacy != g.name.empty()) continue;
    Json versions = Json::array();
    for (const auto& v : g.versions) {
      Json resources = Json::array();
      for (const auto& r : all) {
        if (r->group == g.name && r->version == v) resources.push_back(ResourceEntry(*r));
      }
      versions.push_back(
          {{"version", v}, {"resources", std::move(resources)}, {"freshness", "Current"}});
    }
    items.push_back({{"metadata", {{"name", g.name}, {"creationTimestamp", nullptr}}},
                     {"versions", std::move(versions)}});
  }
  return {{"kind", "APIGroupDiscoveryList"},
          {"apiVersion", "apidiscovery.k8s.io/" + std::string(version.empty() ? "v2" : version)},
          {"metadata", Json::object()},
          {"items", std::move(items)}};
}

Json LegacyApiVersions(std::string_view server_address) {
  return {{"kind", "APIVersions"},
          {"versions", Json::array({"v1"})},
          {"serverAddressByClientCIDRs",
           Json::array(
               {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", std::string(server_address)}}})}};
}

namespace {
Json GroupDoc(const GroupEntry& g) {
  Json versions = Json::array();
  for (const auto& v : g.versions) {
    versions.push_back({{"groupVersion", g.name + "/" + v}, {"version", v}});
  }
  return {{"name", g.name},
          {"versions", versions},
          {"preferredVersion", versions.empty() ? Json::object() : versions[0]}};
}
}  // namespace

Json LegacyApiGroupList(const Registry& registry) {
  Json groups = Json::array();
  for (const auto& g : registry.Groups()) {
    if (g.name.empty()) continue;
    groups.push_back(GroupDoc(g));
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", std::move(groups)}};
}

Json LegacyApiGroup(const Registry& registry, std::string_view group) {
  for (const auto& g : registry.Groups()) {
    if (g.name == group && !group.empty()) {
      Json doc = GroupDoc(g);
      doc["kind"] = "APIGroup";
      doc["apiVersion"] = "v1";
      return doc;
    }
  }
  return nullptr;
}

Json LegacyResourceList(const Registry& registry, std::string_view group,
                        std::string_view version) {
  if (!registry.HasGroupVersion(group, version)) return nullptr;
  Json resources = Json::array();
  for (const auto& r : registry.All()) {
    if (r->group != group || r->version != version) continue;
    Json e = {{"name", r->plural},
              {"singularName", r->singular},
              {"namespaced", r->namespaced},
              {"kind", r->kind},
              {"verbs", r->verbs}};
    if (!r->short_names.empty()) e["shortNames"] = r->short_names;
    if (!r->categories.empty()) e["categories"] = r->categories;
    resources.push_back(std::move(e));
    for (const auto& s : r->subresources) {
      Json se = {{"name", r->plural + "/" + s.name},
                 {"singularName", ""},
                 {"namespaced", r->namespaced},
                 {"kind", s.kind.kind},
                 {"verbs", s.verbs}};
      if (s.kind.group != r->group || s.kind.version != r->version) {
        se["group"] = s.kind.group;
        se["version"] = s.kind.version;
      }
      resources.push_back(std::move(se));
    }
  }
  std::string gv =
      group.empty() ? std::string(version) : std::string(group) + "/" + std::string(version);
  return {{"kind", "APIResourceList"},
          {"apiVersion", "v1"},
          {"groupVersion", gv},
          {"resources", std::move(resources)}};
}

}  // namespace klutch::apiserver
