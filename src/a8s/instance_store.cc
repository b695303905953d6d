#include "a8s/instance_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "a8s/a8s_names.h"
#include "core/net.h"
#include "core/random.h"
#include "engines/crypto.h"
#include "machinery/json_numbers.h"
#include "machinery/object.h"

namespace klutch::a8s {
namespace {

int64_t Int(const Json& j, std::string_view key) {
  const Json* v = machinery::Find(j, {key});
  return v != nullptr ? machinery::AsInt64(*v).value_or(0) : 0;
}

}  // namespace

Json ToJson(const InstanceRecord& r) {
  Json bindings = Json::object();
  for (const auto& [uid, b] : r.bindings) {
    bindings[uid] = {{"username", b.username}, {"password", b.password}};
  }
  return {{"uid", r.id},
          {"number", r.number},
          {"namespace", r.namespace_},
          {"name", r.name},
          {"ports", r.ports},
          {"database", r.database},
          {"admin_password", r.admin_password},
          {"replication_password", r.replication_password},
          {"parameters", r.parameters},
          {"applied_spec", r.applied_spec},
          {"applied_generation", r.applied_generation},
          {"provisioned", r.provisioned},
          {"primary", r.primary},
          {"rejoining", r.rejoining},
          {"promotion_pending", r.promotion_pending},
          {"set_aside", r.set_aside},
          {"encryption_key", r.encryption_key},
          {"bindings", bindings}};
}

core::Result<InstanceRecord> InstanceFromJson(const Json& j) {
  InstanceRecord r;
  r.id = machinery::GetString(j, {"uid"});
  r.number = Int(j, "number");
  if (r.id.empty() || r.number <= 0) return core::Invalid("record without uid or number");
  r.namespace_ = machinery::GetString(j, {"namespace"});
  r.name = machinery::GetString(j, {"name"});
  // A node is its index in `ports`: one bad entry makes the whole record unusable, never a
  // shorter list that would give one node's port to another.
  if (const Json* ports = machinery::Find(j, {"ports"}); ports != nullptr && ports->is_array()) {
    for (const Json& p : *ports) {
      auto port = machinery::AsInt64(p);
      if (!port || *port <= 0 || *port >= 65536) {
        return core::Invalid(
            fmt::format("ports[{}]: {} is not a TCP port", r.ports.size(), machinery::Dump(p)));
      }
      r.ports.push_back(static_cast<int>(*port));
    }
  }
  r.database = machinery::GetString(j, {"database"});
  r.admin_password = machinery::GetString(j, {"admin_password"});
  r.replication_password = machinery::GetString(j, {"replication_password"});
  if (const Json* p = machinery::Find(j, {"parameters"}); p != nullptr && p->is_object()) {
    r.parameters = *p;
  }
  if (const Json* s = machinery::Find(j, {"applied_spec"}); s != nullptr) r.applied_spec = *s;
  r.applied_generation = Int(j, "applied_generation");
  const Json* provisioned = machinery::Find(j, {"provisioned"});
  r.provisioned = provisioned != nullptr && *provisioned == true;
  r.encryption_key = machinery::GetString(j, {"encryption_key"});
  r.primary = static_cast<int>(Int(j, "primary"));
  if (r.primary < 0 || r.primary >= static_cast<int>(r.ports.size())) r.primary = 0;
  if (const Json* list = machinery::Find(j, {"rejoining"}); list != nullptr && list->is_array()) {
    for (const Json& n : *list) {
      auto node = machinery::AsInt64(n);
      if (node && *node >= 0 && *node < static_cast<int64_t>(r.ports.size()) &&
          *node != r.primary) {
        r.rejoining.push_back(static_cast<int>(*node));
      }
    }
  }
  if (const Json* list = machinery::Find(j, {"set_aside"}); list != nullptr && list->is_array()) {
    for (const Json& n : *list) {
      auto node = machinery::AsInt64(n);
      if (node && *node >= 0 && *node < static_cast<int64_t>(r.ports.size())) {
        r.set_aside.push_back(static_cast<int>(*node));
      }
    }
  }
  const Json* pending = machinery::Find(j, {"promotion_pending"});
  r.promotion_pending = pending != nullptr && *pending == true;
  if (const Json* b = machinery::Find(j, {"bindings"}); b != nullptr && b->is_object()) {
    for (const auto& [uid, account] : b->items()) {
      BindingAccount a;
      a.binding_uid = uid;
      a.username = machinery::GetString(account, {"username"});
      a.password = machinery::GetString(account, {"password"});
      r.bindings[uid] = std::move(a);
    }
  }
  return r;
}

core::Status InstanceStore::Load(std::vector<std::string>* errors) {
  KLUTCH_RETURN_IF_ERROR(dir_.Init());
  int64_t highest = dir_.CleanUp();
  core::MutexLock lock(mu_);
  for (const Json& json : dir_.LoadAllJson(errors)) {
    auto record = InstanceFromJson(json);
    if (!record.ok()) {
      const std::string uid = machinery::GetString(json, {"uid"});
      const std::string message =
          fmt::format("{}: {}", (dir_.InstanceDir(Int(json, "number")) / "instance.json").string(),
                      record.status().message());
      if (!uid.empty()) unreadable_[uid] = message;
      if (errors != nullptr) errors->push_back(message);
      continue;
    }
    for (int p : record->ports) ports_.insert(p);
    highest = std::max(highest, record->number);
    records_[record->id] = std::move(*record);
  }
  next_number_ = highest + 1;
  return core::Status::Ok();
}

std::optional<InstanceRecord> InstanceStore::Get(const std::string& uid) const {
  core::MutexLock lock(mu_);
  auto it = records_.find(uid);
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> InstanceStore::Unreadable(const std::string& uid) const {
  core::MutexLock lock(mu_);
  auto it = unreadable_.find(uid);
  if (it == unreadable_.end()) return std::nullopt;
  return it->second;
}

std::vector<InstanceRecord> InstanceStore::All() const {
  core::MutexLock lock(mu_);
  std::vector<InstanceRecord> out;
  for (const auto& [uid, r] : records_) out.push_back(r);
  return out;
}

core::Result<int> InstanceStore::FreePort(const std::string& host) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    KLUTCH_ASSIGN_OR_RETURN(int port, core::FreeTcpPort(host));
    if (ports_.insert(port).second) return port;
  }
  return core::Internal("no free loopback port for a new instance");
}

core::Result<InstanceRecord> InstanceStore::Create(const std::string& uid, const std::string& ns,
                                                   const std::string& name, int nodes,
                                                   const std::string& host) {
  InstanceRecord r;
  r.id = uid;
  r.namespace_ = ns;
  r.name = name;
  r.database = std::string(kDatabase);
  r.admin_password = core::RandomPassword(32);
  r.replication_password = core::RandomPassword(32);
  r.encryption_key = engines::NewBackupKey();
  {
    core::MutexLock lock(mu_);
    r.number = next_number_++;
    for (int i = 0; i < nodes; ++i) {
      KLUTCH_ASSIGN_OR_RETURN(int port, FreePort(host));
      r.ports.push_back(port);
    }
  }
  KLUTCH_RETURN_IF_ERROR(Save(r));
  return r;
}

core::Status InstanceStore::AddPorts(InstanceRecord& record, int nodes, const std::string& host) {
  {
    core::MutexLock lock(mu_);
    while (static_cast<int>(record.ports.size()) < nodes) {
      KLUTCH_ASSIGN_OR_RETURN(int port, FreePort(host));
      record.ports.push_back(port);
    }
  }
  return Save(record);
}

void InstanceStore::ReleasePorts(const std::vector<int>& ports) {
  core::MutexLock lock(mu_);
  for (int port : ports) ports_.erase(port);
}

core::Status InstanceStore::Save(const InstanceRecord& record) {
  core::MutexLock lock(mu_);
  KLUTCH_RETURN_IF_ERROR(dir_.SaveJson(record.number, ToJson(record)));
  records_[record.id] = record;
  return core::Status::Ok();
}

core::Status InstanceStore::Remove(const InstanceRecord& record) {
  KLUTCH_RETURN_IF_ERROR(dir_.Remove(record.number));
  core::MutexLock lock(mu_);
  records_.erase(record.id);
  locks_.erase(record.id);
  started_.erase(record.id);
  for (int p : record.ports) ports_.erase(p);
  return core::Status::Ok();
}

bool InstanceStore::Started(const std::string& uid) const {
  core::MutexLock lock(mu_);
  return started_.contains(uid);
}

void InstanceStore::SetStarted(const std::string& uid) {
  core::MutexLock lock(mu_);
  started_.insert(uid);
}

std::shared_ptr<core::Mutex> InstanceStore::LockFor(const std::string& uid) {
  core::MutexLock lock(mu_);
  auto& m = locks_[uid];
  if (m == nullptr) m = std::make_shared<core::Mutex>();
  return m;
}

}  // namespace klutch::a8s
