#include "apiserver/quota.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "apiserver/rest_storage.h"
#include "cel/quantity.h"
#include "core/log.h"
#include "core/strings.h"

namespace klutch::apiserver {

using machinery::Find;

namespace {

constexpr const char* kManager = "klutch-apiserver";

// Core resources a quota may count under their plain name, as kube's object count evaluators
// register them (pods, counted by the pod evaluator, are not served here).
constexpr std::array<std::string_view, 6> kLegacyNames = {
    "configmaps", "persistentvolumeclaims", "replicationcontrollers", "resourcequotas", "secrets",
    "services"};

bool IsLegacyName(std::string_view plural) {
  return std::find(kLegacyNames.begin(), kLegacyNames.end(), plural) != kLegacyNames.end();
}

// "a=1,b=2" in key order, as kube's quota admission prints resource lists.
std::string PrettyPrint(const std::vector<std::pair<std::string, std::string>>& items) {
  std::vector<std::pair<std::string, std::string>> sorted = items;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> parts;
  for (const auto& [k, v] : sorted) parts.push_back(k + "=" + v);
  return core::Join(parts, ",");
}

}  // namespace

std::string QuantityText(const Json& v) {
  const std::string* text = v.get_ptr<const std::string*>();
  return text ? *text : machinery::Dump(v);
}

std::optional<double> QuantityValue(const Json& v) {
  if (!v.is_string() && !v.is_number()) return std::nullopt;
  return cel::QuantityAsDouble(QuantityText(v));
}

ObjectCountQuota::ObjectCountQuota(RestStorage& rest) : rest_(rest) {}

std::vector<std::string> ObjectCountQuota::KeysFor(const ResourceInfo& r) {
  if (!r.namespaced || r.create_only) return {};
  std::vector<std::string> keys;
  keys.push_back(r.group.empty() ? "count/" + r.plural : "count/" + r.plural + "." + r.group);
  if (r.group.empty() && IsLegacyName(r.plural)) keys.push_back(r.plural);
  return keys;
}

core::Mutex& ObjectCountQuota::LockFor(std::string_view ns) {
  return locks_[std::hash<std::string_view>()(ns) % locks_.size()];
}

core::Result<std::vector<ObjectCountQuota::Quota>> ObjectCountQuota::QuotasIn(std::string_view ns) {
  std::vector<Quota> out;
  ResourcePtr quotas = rest_.registry().FindStored("", "resourcequotas");
  if (!quotas) return out;
  KLUTCH_ASSIGN_OR_RETURN(ListOutcome list, rest_.List(*quotas, ns, {}));
  for (auto& item : list.items) {
    const Json& q = item.Object();
    Quota quota;
    quota.name = machinery::Name(q);
    const Json* hard = Find(q, {"spec", "hard"});
    quota.hard = hard && hard->is_object() ? *hard : Json::object();
    const Json* status = Find(q, {"status"});
    quota.status = status ? *status : Json();
    out.push_back(std::move(quota));
  }
  return out;
}

core::Result<int64_t> ObjectCountQuota::Count(const ResourceInfo& r, std::string_view ns) {
  storage::ListRequest req;
  req.prefix = r.KeyPrefix() + std::string(ns) + "/";
  req.keys_only = true;  // a count: never read the objects (a namespace may hold 200 MiB)
  req.limit = 1000;      // pages, so a large namespace is not held in memory at once
  int64_t count = 0;
  while (true) {
    KLUTCH_ASSIGN_OR_RETURN(storage::ListResult page, rest_.store().List(req));
    count += static_cast<int64_t>(page.items.size());
    if (!page.more || page.items.empty()) break;
    req.start_after = page.items.back().key;
    req.revision = page.revision;
  }
  return count;
}

core::Status ObjectCountQuota::AdmitCreate(const ResourceInfo& r, std::string_view ns,
                                           std::string_view name, bool dry_run,
                                           const std::function<core::Status()>& write) {
  const std::vector<std::string> keys = KeysFor(r);
  if (keys.empty()) return write();
  auto limits = [&](const Quota& q) {
    return std::any_of(keys.begin(), keys.end(), [&](const auto& k) { return q.hard.contains(k); });
  };
  // Most namespaces have no quota on most resources: those creates take no lock. A quota
  // created while such a create is in flight may miss it until the next recount.
  {
    KLUTCH_ASSIGN_OR_RETURN(std::vector<Quota> quotas, QuotasIn(ns));
    if (std::none_of(quotas.begin(), quotas.end(), limits)) return write();
  }
  core::MutexLock lock(LockFor(ns));
  KLUTCH_ASSIGN_OR_RETURN(std::vector<Quota> quotas, QuotasIn(ns));
  std::optional<int64_t> used;
  for (const Quota& q : quotas) {
    if (!limits(q)) continue;
    if (!used) {
      KLUTCH_ASSIGN_OR_RETURN(int64_t n, Count(r, ns));
      used = n;
    }
    std::vector<std::pair<std::string, std::string>> requested, in_use, limited;
    for (const std::string& key : keys) {
      if (!q.hard.contains(key)) continue;
      std::optional<double> hard = QuantityValue(q.hard[key]);
      if (!hard || static_cast<double>(*used + 1) <= *hard) continue;
      requested.emplace_back(key, "1");
      in_use.emplace_back(key, std::to_string(*used));
      limited.emplace_back(key, QuantityText(q.hard[key]));
    }
    if (requested.empty()) continue;
    const std::string why =
        fmt::format("exceeded quota: {}, requested: {}, used: {}, limited: {}", q.name,
                    PrettyPrint(requested), PrettyPrint(in_use), PrettyPrint(limited));
    core::Details d;
    d.name = std::string(name);
    d.group = r.group;
    d.kind = r.plural;
    return core::Status(core::Reason::kForbidden,
                        fmt::format("{} \"{}\" is forbidden: {}", r.GroupResource(), name, why),
                        std::move(d));
  }
  KLUTCH_RETURN_IF_ERROR(write());
  if (!dry_run) RecountLocked(ns, &r);
  return core::Status::Ok();
}

void ObjectCountQuota::Removed(const ResourceInfo& r, std::string_view ns) {
  if (KeysFor(r).empty()) return;
  core::MutexLock lock(LockFor(ns));
  RecountLocked(ns, &r);
}

void ObjectCountQuota::QuotaWritten(std::string_view ns) {
  core::MutexLock lock(LockFor(ns));
  RecountLocked(ns, nullptr);
}

void ObjectCountQuota::RecountLocked(std::string_view ns, const ResourceInfo* only) {
  auto quotas = QuotasIn(ns);
  if (!quotas.ok()) {
    KLUTCH_LOG(kWarn, "apiserver", "quotas of namespace {} not recounted: {}", ns,
               quotas.status().message());
    return;
  }
  ResourcePtr quota_resource = rest_.registry().FindStored("", "resourcequotas");
  if (!quota_resource) return;
  const std::vector<std::string> only_keys = only ? KeysFor(*only) : std::vector<std::string>{};
  std::map<std::string, int64_t> counted;  // by resource, within this recount
  for (const Quota& q : *quotas) {
    if (only && std::none_of(only_keys.begin(), only_keys.end(),
                             [&](const auto& k) { return q.hard.contains(k); })) {
      continue;
    }
    Json used = Json::object();
    bool failed = false;
    for (const auto& [key, value] : q.hard.items()) {
      if (key == "services.loadbalancers" || key == "services.nodeports") continue;
      // count/<plural>[.<group>] or a legacy core name; anything else (pods, cpu, memory,
      // storage) belongs to resources this server does not serve.
      ResourcePtr counted_resource;
      if (key.starts_with("count/")) {
        const std::string rest = key.substr(6);
        const size_t dot = rest.find('.');
        counted_resource = rest_.registry().FindStored(
            dot == std::string::npos ? "" : rest.substr(dot + 1), rest.substr(0, dot));
      } else if (IsLegacyName(key)) {
        counted_resource = rest_.registry().FindStored("", key);
      }
      if (!counted_resource || !counted_resource->namespaced) {
        used[key] = "0";
        continue;
      }
      const std::string id = counted_resource->GroupResource();
      auto it = counted.find(id);
      if (it == counted.end()) {
        auto n = Count(*counted_resource, ns);
        if (!n.ok()) {
          failed = true;
          break;
        }
        it = counted.emplace(id, *n).first;
      }
      used[key] = std::to_string(it->second);
    }
    if (failed) continue;
    Json status = {{"hard", q.hard}, {"used", std::move(used)}};
    if (q.status == status) continue;
    auto res = rest_.Mutate(
        *quota_resource, ns, q.name,
        [&](Json& object) {
          object["status"] = status;
          return core::Status::Ok();
        },
        WriteOptions{.field_manager = kManager, .subresource = "status"});
    if (!res.ok() && !core::IsNotFound(res.status())) {
      KLUTCH_LOG(kWarn, "apiserver", "status of resourcequota {}/{} not written: {}", ns, q.name,
                 res.status().message());
    }
  }
}

}  // namespace klutch::apiserver
