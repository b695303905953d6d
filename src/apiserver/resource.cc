#include "apiserver/resource.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "schema/structural.h"

namespace klutch::apiserver {

bool ResourceInfo::HasSubresource(std::string_view name) const {
  for (const auto& s : subresources) {
    if (s.name == name) return true;
  }
  return false;
}

void ResourceInfo::ToServed(Json& object) const {
  if (version != storage_version) object["apiVersion"] = ApiVersion();
  if (defaults_on_read) schema::ApplyDefaults(object, Schema());
}

machinery::SchemaCursor ResourceInfo::Schema() const {
  if (!schemas || schema_name.empty()) return {};
  auto it = schemas->find(schema_name);
  if (it == schemas->end()) return {};
  return machinery::SchemaCursor(&*it, schemas.get());
}

std::string ResourceInfo::KeyPrefix() const {
  return "/registry/" + (group.empty() ? std::string("core") : group) + "/" + plural + "/";
}

std::string ResourceInfo::Key(std::string_view ns, std::string_view name) const {
  std::string key = KeyPrefix();
  if (namespaced) {
    key += ns;
    key += '/';
  }
  key += name;
  return key;
}

namespace {

struct VersionParts {
  int major = 0;
  int stage = 3;  // 3 = GA, 2 = beta, 1 = alpha, 0 = not kube-like
  int minor = 0;
};

VersionParts ParseVersion(std::string_view v) {
  VersionParts p;
  if (v.size() < 2 || v[0] != 'v' || !std::isdigit(static_cast<unsigned char>(v[1]))) {
    p.stage = 0;
    return p;
  }
  size_t i = 1;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
    p.major = p.major * 10 + (v[i] - '0');
    ++i;
  }
  std::string_view rest = v.substr(i);
  auto minor_of = [&](std::string_view tail) {
    int m = 0;
    if (tail.empty()) return -1;
    for (char c : tail) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
      m = m * 10 + (c - '0');
    }
    return m;
  };
  if (rest.empty()) return p;
  if (rest.starts_with("beta")) {
    p.minor = minor_of(rest.substr(4));
    p.stage = p.minor < 0 ? 0 : 2;
  } else if (rest.starts_with("alpha")) {
    p.minor = minor_of(rest.substr(5));
    p.stage = p.minor < 0 ? 0 : 1;
  } else {
    p.stage = 0;
  }
  return p;
}

}  // namespace

bool VersionPreferred(std::string_view a, std::string_view b) {
  VersionParts pa = ParseVersion(a), pb = ParseVersion(b);
  if (pa.stage != pb.stage) return pa.stage > pb.stage;
  if (pa.stage == 0) return a < b;
  if (pa.major != pb.major) return pa.major > pb.major;
  return pa.minor > pb.minor;
}

void Registry::SetOwner(const std::string& owner, std::vector<ResourcePtr> resources) {
  std::vector<std::function<void()>> listeners;
  {
    core::MutexLock lock(mu_);
    owners_[owner] = std::move(resources);
    ++generation_;
    listeners = listeners_;
  }
  for (auto& l : listeners) l();
}

void Registry::RemoveOwner(const std::string& owner) {
  std::vector<std::function<void()>> listeners;
  {
    core::MutexLock lock(mu_);
    if (owners_.erase(owner) == 0) return;
    ++generation_;
    listeners = listeners_;
  }
  for (auto& l : listeners) l();
}

ResourcePtr Registry::Find(std::string_view group, std::string_view version,
                           std::string_view plural) const {
  core::MutexLock lock(mu_);
  for (const auto& [owner, list] : owners_) {
    for (const auto& r : list) {
      if (r->group == group && r->version == version && r->plural == plural) return r;
    }
  }
  return nullptr;
}

ResourcePtr Registry::FindKind(std::string_view group, std::string_view version,
                               std::string_view kind) const {
  core::MutexLock lock(mu_);
  for (const auto& [owner, list] : owners_) {
    for (const auto& r : list) {
      if (r->group == group && r->version == version && r->kind == kind) return r;
    }
  }
  return nullptr;
}

ResourcePtr Registry::FindStored(std::string_view group, std::string_view plural) const {
  core::MutexLock lock(mu_);
  ResourcePtr any;
  for (const auto& [owner, list] : owners_) {
    for (const auto& r : list) {
      if (r->group != group || r->plural != plural) continue;
      if (r->version == r->storage_version) return r;
      any = r;
    }
  }
  return any;
}

ResourcePtr Registry::FindGroupKind(std::string_view group, std::string_view kind) const {
  ResourcePtr any;
  {
    core::MutexLock lock(mu_);
    for (const auto& [owner, list] : owners_) {
      for (const auto& r : list) {
        if (r->group == group && r->kind == kind) {
          any = r;
          break;
        }
      }
      if (any) break;
    }
  }
  return any ? FindStored(any->group, any->plural) : nullptr;
}

std::vector<ResourcePtr> Registry::All() const {
  std::vector<ResourcePtr> out;
  {
    core::MutexLock lock(mu_);
    for (const auto& [owner, list] : owners_) out.insert(out.end(), list.begin(), list.end());
  }
  std::sort(out.begin(), out.end(), [](const ResourcePtr& a, const ResourcePtr& b) {
    return std::tie(a->group, a->version, a->plural) < std::tie(b->group, b->version, b->plural);
  });
  return out;
}

std::vector<GroupEntry> Registry::Groups() const {
  std::vector<GroupEntry> builtin, custom;
  std::map<std::string, bool> is_custom;
  std::map<std::string, std::vector<std::string>> versions;
  for (const auto& r : All()) {
    auto& vs = versions[r->group];
    if (std::find(vs.begin(), vs.end(), r->version) == vs.end()) vs.push_back(r->version);
    is_custom[r->group] = r->custom;
  }
  // Built-in groups in the order kube-apiserver lists them, then the rest by name.
  static const std::vector<std::string> kOrder = {"",
                                                  "apps",
                                                  "events.k8s.io",
                                                  "authentication.k8s.io",
                                                  "authorization.k8s.io",
                                                  "rbac.authorization.k8s.io",
                                                  "apiextensions.k8s.io",
                                                  "coordination.k8s.io"};
  std::vector<GroupEntry> out;
  for (const auto& g : kOrder) {
    auto it = versions.find(g);
    if (it == versions.end()) continue;
    out.push_back({g, it->second});
    versions.erase(it);
  }
  for (auto& [g, vs] : versions) out.push_back({g, vs});
  for (auto& e : out) {
    std::sort(e.versions.begin(), e.versions.end(),
              [](const std::string& a, const std::string& b) { return VersionPreferred(a, b); });
  }
  return out;
}

bool Registry::HasGroupVersion(std::string_view group, std::string_view version) const {
  core::MutexLock lock(mu_);
  for (const auto& [owner, list] : owners_) {
    for (const auto& r : list) {
      if (r->group == group && r->version == version) return true;
    }
  }
  return false;
}

uint64_t Registry::generation() const {
  core::MutexLock lock(mu_);
  return generation_;
}

void Registry::OnChange(std::function<void()> callback) {
  core::MutexLock lock(mu_);
  listeners_.push_back(std::move(callback));
}

}  // namespace klutch::apiserver
