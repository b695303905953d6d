#include "client/discovery.h"

#include <fmt/format.h>

#include <algorithm>

namespace klutch::client {

namespace {

constexpr const char* kAggregatedAccept =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json";

std::vector<std::string> Strings(const Json& o, const char* key) {
  return machinery::Strings(machinery::Find(o, {key}));
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

core::Status RestMapper::LoadAggregated(bool& supported, std::vector<ResourceMapping>& out) {
  supported = true;
  for (const char* path : {"/api", "/apis"}) {
    KLUTCH_ASSIGN_OR_RETURN(Json doc, rest_.DoJson({.path = path, .accept = kAggregatedAccept}));
    if (machinery::GetString(doc, {"kind"}) != "APIGroupDiscoveryList") {
      supported = false;
      return core::Status::Ok();
    }
    const Json* items = machinery::Find(doc, {"items"});
    if (!items || !items->is_array()) continue;
    for (const auto& group : *items) {
      std::string g = machinery::GetString(group, {"metadata", "name"});
      const Json* versions = machinery::Find(group, {"versions"});
      if (!versions || !versions->is_array()) continue;
      bool first = true;
      for (const auto& v : *versions) {
        std::string version = machinery::GetString(v, {"version"});
        const Json* resources = machinery::Find(v, {"resources"});
        if (resources && resources->is_array()) {
          for (const auto& r : *resources) {
            ResourceMapping m;
            m.gvr = {g, version, machinery::GetString(r, {"resource"})};
            std::string kind = machinery::GetString(r, {"responseKind", "kind"});
            m.gvk = {g, version, kind};
            m.namespaced = machinery::GetString(r, {"scope"}) != "Cluster";
            m.singular = machinery::GetString(r, {"singularResource"});
            m.short_names = Strings(r, "shortNames");
            m.verbs = Strings(r, "verbs");
            m.categories = Strings(r, "categories");
            m.preferred_version = first;
            if (!m.gvr.resource.empty() && !kind.empty()) out.push_back(std::move(m));
          }
        }
        first = false;
      }
    }
  }
  return core::Status::Ok();
}

core::Status RestMapper::LoadLegacy(std::vector<ResourceMapping>& out) {
  struct GV {
    std::string group, version;
    bool preferred;
  };
  std::vector<GV> gvs;
  KLUTCH_ASSIGN_OR_RETURN(Json api, rest_.DoJson({.path = "/api"}));
  bool first = true;
  for (const auto& v : Strings(api, "versions")) {
    gvs.push_back({"", v, first});
    first = false;
  }
  KLUTCH_ASSIGN_OR_RETURN(Json apis, rest_.DoJson({.path = "/apis"}));
  if (const Json* groups = machinery::Find(apis, {"groups"}); groups && groups->is_array()) {
    for (const auto& g : *groups) {
      std::string name = machinery::GetString(g, {"name"});
      std::string preferred = machinery::GetString(g, {"preferredVersion", "version"});
      const Json* versions = machinery::Find(g, {"versions"});
      if (!versions || !versions->is_array()) continue;
      for (const auto& v : *versions) {
        std::string version = machinery::GetString(v, {"version"});
        gvs.push_back({name, version, version == preferred});
      }
    }
  }
  for (const auto& gv : gvs) {
    std::string path =
        gv.group.empty() ? "/api/" + gv.version : "/apis/" + gv.group + "/" + gv.version;
    auto list = rest_.DoJson({.path = path});
    if (!list.ok()) {
      if (core::IsNotFound(list.status())) continue;  // a group going away meanwhile
      return list.status();
    }
    const Json* resources = machinery::Find(*list, {"resources"});
    if (!resources || !resources->is_array()) continue;
    for (const auto& r : *resources) {
      std::string name = machinery::GetString(r, {"name"});
      if (name.empty() || name.find('/') != std::string::npos) continue;  // subresources
      ResourceMapping m;
      m.gvr = {gv.group, gv.version, name};
      m.gvk = {gv.group, gv.version, machinery::GetString(r, {"kind"})};
      const Json* ns = machinery::Find(r, {"namespaced"});
      const bool* namespaced = ns ? ns->get_ptr<const bool*>() : nullptr;
      m.namespaced = namespaced != nullptr && *namespaced;
      m.singular = machinery::GetString(r, {"singularName"});
      m.short_names = Strings(r, "shortNames");
      m.verbs = Strings(r, "verbs");
      m.categories = Strings(r, "categories");
      m.preferred_version = gv.preferred;
      out.push_back(std::move(m));
    }
  }
  return core::Status::Ok();
}

core::Status RestMapper::Refresh() {
  core::MutexLock lock(mu_);
  std::vector<ResourceMapping> fresh;
  bool aggregated = false;
  KLUTCH_RETURN_IF_ERROR(LoadAggregated(aggregated, fresh));
  if (!aggregated) {
    fresh.clear();
    KLUTCH_RETURN_IF_ERROR(LoadLegacy(fresh));
  }
  mappings_ = std::move(fresh);
  loaded_ = true;
  last_refresh_ = std::chrono::steady_clock::now();
  return core::Status::Ok();
}

core::Status RestMapper::EnsureLoaded(bool force_if_stale) {
  {
    core::MutexLock lock(mu_);
    if (loaded_ && (!force_if_stale ||
                    std::chrono::steady_clock::now() - last_refresh_ < min_refresh_interval_)) {
      return core::Status::Ok();
    }
  }
  return Refresh();
}

core::Result<ResourceMapping> RestMapper::ForKind(std::string_view group, std::string_view kind,
                                                  std::string_view version) {
  for (int pass = 0; pass < 2; ++pass) {
    KLUTCH_RETURN_IF_ERROR(EnsureLoaded(/*force_if_stale=*/pass == 1));
    core::MutexLock lock(mu_);
    const ResourceMapping* any = nullptr;
    for (const auto& m : mappings_) {
      if (m.gvk.group != group || m.gvk.kind != kind) continue;
      if (!version.empty()) {
        if (m.gvk.version == version) return m;
        continue;
      }
      if (m.preferred_version) return m;
      if (!any) any = &m;
    }
    if (any) return *any;
  }
  return core::NotFound(fmt::format(
      "no matches for kind \"{}\" in {}", kind,
      version.empty()
          ? fmt::format("group \"{}\"", group)
          : fmt::format("version \"{}{}{}\"", group, group.empty() ? "" : "/", version)));
}

core::Result<ResourceMapping> RestMapper::ForResource(std::string_view name) {
  std::string n = Lower(name);
  std::string group;
  if (auto dot = n.find('.'); dot != std::string::npos) {
    group = n.substr(dot + 1);
    n = n.substr(0, dot);
  }
  for (int pass = 0; pass < 2; ++pass) {
    KLUTCH_RETURN_IF_ERROR(EnsureLoaded(pass == 1));
    core::MutexLock lock(mu_);
    const ResourceMapping* best = nullptr;
    for (const auto& m : mappings_) {
      if (!group.empty() && m.gvr.group != group) continue;
      bool match = m.gvr.resource == n || m.singular == n || Lower(m.gvk.kind) == n ||
                   std::find(m.short_names.begin(), m.short_names.end(), n) != m.short_names.end();
      if (!match) continue;
      // Prefer the core group, then the preferred version, as kubectl does.
      if (!best || (m.preferred_version && !best->preferred_version) ||
          (m.gvr.group.empty() && !best->gvr.group.empty())) {
        best = &m;
      }
    }
    if (best) return *best;
  }
  return core::NotFound(
      fmt::format("the server doesn't have a resource type \"{}\"", std::string(name)));
}

std::vector<ResourceMapping> RestMapper::All() {
  core::MutexLock lock(mu_);
  return mappings_;
}

}  // namespace klutch::client
