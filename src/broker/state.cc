#include "broker/state.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <system_error>

#include "broker/state_dir.h"
#include "core/file.h"
#include "core/random.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::broker {
namespace {

std::string Str(const Json& j, std::string_view key) { return machinery::GetString(j, {key}); }

int64_t Int(const Json& j, std::string_view key, int64_t fallback = 0) {
  const Json* v = machinery::Find(j, {key});
  if (v == nullptr) return fallback;
  if (const auto* i = v->get_ptr<const int64_t*>()) return *i;
  if (const auto* u = v->get_ptr<const uint64_t*>()) return static_cast<int64_t>(*u);
  return fallback;
}

Json Obj(const Json& j, std::string_view key) {
  const Json* v = machinery::Find(j, {key});
  return v != nullptr && v->is_object() ? *v : Json::object();
}

}  // namespace

Json ToJson(const InstanceRecord& r) {
  Json bindings = Json::object();
  for (const auto& [id, b] : r.bindings) {
    bindings[id] = {{"username", b.username},     {"password", b.password},
                    {"created_at", b.created_at}, {"credentials", b.credentials},
                    {"service_id", b.service_id}, {"plan_id", b.plan_id},
                    {"parameters", b.parameters}};
  }
  Json backups = Json::array();
  for (const auto& b : r.backups) {
    backups.push_back({{"id", b.id},
                       {"status", b.status},
                       {"triggered_at", b.triggered_at},
                       {"finished_at", b.finished_at},
                       {"size", b.size},
                       {"file", b.file},
                       {"key", b.key},
                       {"message", b.message}});
  }
  Json restores = Json::array();
  for (const auto& x : r.restores) {
    restores.push_back({{"id", x.id},
                        {"backup_id", x.backup_id},
                        {"status", x.status},
                        {"triggered_at", x.triggered_at},
                        {"finished_at", x.finished_at},
                        {"message", x.message}});
  }
  return {{"id", r.id},
          {"number", r.number},
          {"service_id", r.service_id},
          {"plan_id", r.plan_id},
          {"organization_guid", r.organization_guid},
          {"space_guid", r.space_guid},
          {"parameters", r.parameters},
          {"context", r.context},
          {"state", r.state},
          {"message", r.message},
          {"operation", r.operation},
          {"operation_key", r.operation_key},
          {"operation_state", r.operation_state},
          {"operation_description", r.operation_description},
          {"previous_plan_id", r.previous_plan_id},
          {"previous_parameters", r.previous_parameters},
          {"ports", r.ports},
          {"database", r.database},
          {"admin_password", r.admin_password},
          {"replication_password", r.replication_password},
          {"encryption_key", r.encryption_key},
          {"created_at", r.created_at},
          {"updated_at", r.updated_at},
          {"provisioned_at", r.provisioned_at},
          {"bindings", bindings},
          {"backups", backups},
          {"restores", restores},
          {"next_backup_id", r.next_backup_id},
          {"next_restore_id", r.next_restore_id},
          {"backup_config", r.backup_config}};
}

core::Result<InstanceRecord> InstanceFromJson(const Json& j) {
  if (!j.is_object()) return core::Invalid("instance record: not a JSON object");
  InstanceRecord r;
  r.id = Str(j, "id");
  r.number = Int(j, "number");
  if (r.id.empty() || r.number <= 0) return core::Invalid("instance record: no id or number");
  r.service_id = Str(j, "service_id");
  r.plan_id = Str(j, "plan_id");
  r.organization_guid = Str(j, "organization_guid");
  r.space_guid = Str(j, "space_guid");
  r.parameters = Obj(j, "parameters");
  r.context = Obj(j, "context");
  r.state = Str(j, "state");
  r.message = Str(j, "message");
  r.operation = Str(j, "operation");
  r.operation_key = Str(j, "operation_key");
  r.operation_state = Str(j, "operation_state");
  r.operation_description = Str(j, "operation_description");
  r.previous_plan_id = Str(j, "previous_plan_id");
  r.previous_parameters = Obj(j, "previous_parameters");
  if (const Json* ports = machinery::Find(j, {"ports"}); ports != nullptr && ports->is_array()) {
    for (const auto& p : *ports) {
      // Unsigned and signed integers share nlohmann's storage; get_ptr<int64_t> reads both.
      if (const auto* i = p.get_ptr<const int64_t*>()) r.ports.push_back(static_cast<int>(*i));
    }
  }
  r.database = Str(j, "database");
  r.admin_password = Str(j, "admin_password");
  r.replication_password = Str(j, "replication_password");
  r.encryption_key = Str(j, "encryption_key");
  r.created_at = Str(j, "created_at");
  r.updated_at = Str(j, "updated_at");
  r.provisioned_at = Str(j, "provisioned_at");
  const Json bindings = Obj(j, "bindings");
  for (const auto& [id, b] : bindings.items()) {
    BindingRecord& binding = r.bindings[id];
    binding.id = id;
    binding.username = Str(b, "username");
    binding.password = Str(b, "password");
    binding.created_at = Str(b, "created_at");
    binding.credentials = Obj(b, "credentials");
    binding.service_id = Str(b, "service_id");
    binding.plan_id = Str(b, "plan_id");
    binding.parameters = Obj(b, "parameters");
  }
  if (const Json* list = machinery::Find(j, {"backups"}); list != nullptr && list->is_array()) {
    for (const auto& b : *list) {
      r.backups.push_back(BackupRecord{.id = Int(b, "id"),
                                       .status = Str(b, "status"),
                                       .triggered_at = Str(b, "triggered_at"),
                                       .finished_at = Str(b, "finished_at"),
                                       .size = static_cast<uint64_t>(Int(b, "size")),
                                       .file = Str(b, "file"),
                                       .key = Str(b, "key"),
                                       .message = Str(b, "message")});
    }
  }
  if (const Json* list = machinery::Find(j, {"restores"}); list != nullptr && list->is_array()) {
    for (const auto& x : *list) {
      r.restores.push_back(RestoreRecord{.id = Int(x, "id"),
                                         .backup_id = Int(x, "backup_id"),
                                         .status = Str(x, "status"),
                                         .triggered_at = Str(x, "triggered_at"),
                                         .finished_at = Str(x, "finished_at"),
                                         .message = Str(x, "message")});
    }
  }
  r.next_backup_id = Int(j, "next_backup_id", 1);
  r.next_restore_id = Int(j, "next_restore_id", 1);
  r.backup_config = Obj(j, "backup_config");
  return r;
}

std::string NowTimestamp() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms.count());
}

std::vector<InstanceRecord> StateDir::LoadAll(std::vector<std::string>* errors) const {
  std::vector<InstanceRecord> out;
  for (const Json& json : LoadAllJson(errors)) {
    auto record = InstanceFromJson(json);
    if (!record.ok()) {
      if (errors != nullptr) errors->push_back(record.status().message());
      continue;
    }
    out.push_back(std::move(*record));
  }
  return out;
}

}  // namespace klutch::broker
