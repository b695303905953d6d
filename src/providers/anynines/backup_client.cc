#include "providers/anynines/backup_client.h"

#include <fmt/format.h>

#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::providers::anynines {
namespace {

using machinery::GetString;

std::string BackupInstancePath(const std::string& id) { return "/instances/" + PathSegment(id); }

core::Status RequireInstance(const std::string& id, std::string_view what) {
  if (id.empty()) return core::Invalid(fmt::format("{}: instance_id is required", what));
  return core::Status::Ok();
}

core::Result<int64_t> IdOf(const ApiResponse& r, std::string_view what, const std::string& url) {
  auto id = IntField(r.json, "id");
  if (!id) return core::Internal(fmt::format("{} at {}: answer has no numeric id", what, url));
  return *id;
}

}  // namespace

std::optional<int64_t> IntField(const Json& object, std::string_view key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (const auto* i = it->get_ptr<const int64_t*>()) return *i;
  if (const auto* u = it->get_ptr<const uint64_t*>()) return static_cast<int64_t>(*u);
  if (const auto* d = it->get_ptr<const double*>()) return static_cast<int64_t>(*d);
  if (const auto* s = it->get_ptr<const std::string*>()) return core::ParseInt64(*s);
  return std::nullopt;
}

core::Result<std::unique_ptr<BackupClient>> BackupClient::New(ServiceEndpoint endpoint) {
  KLUTCH_ASSIGN_OR_RETURN(auto api, ApiClient::New(std::move(endpoint), "backup manager"));
  return std::unique_ptr<BackupClient>(new BackupClient(std::move(api)));
}

core::Result<int64_t> BackupClient::CreateBackup(const std::string& instance_id) {
  KLUTCH_RETURN_IF_ERROR(RequireInstance(instance_id, "create backup"));
  KLUTCH_ASSIGN_OR_RETURN(
      ApiResponse r,
      api_->Do("POST", BackupInstancePath(instance_id) + "/backups", nullptr, false));
  return IdOf(r, "create backup", url());
}

core::Result<Json> BackupClient::ListBackups(const std::string& instance_id) {
  KLUTCH_RETURN_IF_ERROR(RequireInstance(instance_id, "list backups"));
  KLUTCH_ASSIGN_OR_RETURN(
      ApiResponse r, api_->Do("GET", BackupInstancePath(instance_id) + "/backups", nullptr, false));
  return std::move(r.json);
}

core::Result<BackupInfo> BackupClient::GetBackup(const std::string& instance_id,
                                                 int64_t backup_id) {
  KLUTCH_RETURN_IF_ERROR(RequireInstance(instance_id, "get backup"));
  KLUTCH_ASSIGN_OR_RETURN(
      ApiResponse r,
      api_->Do("GET", fmt::format("{}/backups/{}", BackupInstancePath(instance_id), backup_id),
               nullptr, false));
  BackupInfo b;
  b.id = IntField(r.json, "id").value_or(backup_id);
  b.size = IntField(r.json, "size").value_or(0);
  b.status = GetString(r.json, {"status"});
  b.triggered_at = GetString(r.json, {"triggered_at"});
  b.finished_at = GetString(r.json, {"finished_at"});
  if (const Json* d = machinery::Find(r.json, {"downloadable"})) {
    if (const bool* v = d->get_ptr<const bool*>()) b.downloadable = *v;
  }
  return b;
}

core::Status BackupClient::DeleteBackup(const std::string& instance_id, int64_t backup_id) {
  KLUTCH_RETURN_IF_ERROR(RequireInstance(instance_id, "delete backup"));
  return api_
      ->Do("DELETE", fmt::format("{}/backups/{}", BackupInstancePath(instance_id), backup_id))
      .status();
}

core::Result<int64_t> BackupClient::CreateRestore(const std::string& instance_id,
                                                  int64_t backup_id) {
  KLUTCH_RETURN_IF_ERROR(RequireInstance(instance_id, "create restore"));
  KLUTCH_ASSIGN_OR_RETURN(
      ApiResponse r,
      api_->Do("POST",
               fmt::format("{}/backups/{}/restore", BackupInstancePath(instance_id), backup_id),
               nullptr, false));
  return IdOf(r, "create restore", url());
}

core::Result<Json> BackupClient::ListRestores(const std::string& instance_id) {
  KLUTCH_RETURN_IF_ERROR(RequireInstance(instance_id, "list restores"));
  KLUTCH_ASSIGN_OR_RETURN(
      ApiResponse r,
      api_->Do("GET", BackupInstancePath(instance_id) + "/restores", nullptr, false));
  return std::move(r.json);
}

core::Result<RestoreInfo> BackupClient::GetRestore(const std::string& instance_id,
                                                   int64_t restore_id) {
  KLUTCH_RETURN_IF_ERROR(RequireInstance(instance_id, "get restore"));
  KLUTCH_ASSIGN_OR_RETURN(
      ApiResponse r,
      api_->Do("GET", fmt::format("{}/restores/{}", BackupInstancePath(instance_id), restore_id),
               nullptr, false));
  RestoreInfo info;
  info.id = IntField(r.json, "id").value_or(restore_id);
  info.backup_id = IntField(r.json, "backup_id").value_or(0);
  info.status = GetString(r.json, {"status"});
  info.triggered_at = GetString(r.json, {"triggered_at"});
  info.finished_at = GetString(r.json, {"finished_at"});
  return info;
}

core::Result<Json> BackupClient::GetInstanceConfig(const std::string& instance_id) {
  KLUTCH_RETURN_IF_ERROR(RequireInstance(instance_id, "get instance config"));
  KLUTCH_ASSIGN_OR_RETURN(
      ApiResponse r, api_->Do("GET", BackupInstancePath(instance_id) + "/config", nullptr, false));
  return std::move(r.json);
}

core::Status BackupClient::UpdateBackupConfig(const std::string& instance_id, const Json& config) {
  KLUTCH_RETURN_IF_ERROR(RequireInstance(instance_id, "update backup config"));
  Json body = Json::object();
  if (config.is_object()) {
    for (const char* key :
         {"encryption_key", "exclude_from_auto_backup", "credentials_updated_by_user"}) {
      auto it = config.find(key);
      if (it != config.end() && !it->is_null()) body[key] = *it;
    }
  }
  if (body.empty()) {
    return core::Invalid(
        "update backup config: set at least one of encryption_key, exclude_from_auto_backup, "
        "credentials_updated_by_user");
  }
  return api_->Do("PUT", BackupInstancePath(instance_id), body).status();
}

core::Status BackupClient::CheckHealth(const std::string& path) {
  KLUTCH_ASSIGN_OR_RETURN(ApiResponse r, api_->Probe("GET", path));
  if (r.status < 200 || r.status > 299) {
    return UserError(fmt::format("health check failed with status code {}", r.status));
  }
  return core::Status::Ok();
}

}  // namespace klutch::providers::anynines
