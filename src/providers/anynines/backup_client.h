// BackupClient: the a9s Backup Manager API client of provider-anynines (data-services.md §6.5).
//
// Basic auth, no OSB version header, a JSON body only when there is one; error answers are
// ServiceErrors (api_client.h) with the body's `error` and `description`. Backup and restore IDs
// are the manager's integers. The instance ID is the provider-generated OSB instance ID.
//
// Thread-safe: any number of threads may call at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "providers/anynines/api_client.h"

namespace klutch::providers::anynines {

// Backup and restore statuses.
inline constexpr std::string_view kBackupQueued = "queued";
inline constexpr std::string_view kBackupRunning = "running";
inline constexpr std::string_view kBackupDone = "done";
inline constexpr std::string_view kBackupFailed = "failed";
inline constexpr std::string_view kBackupDeleted = "deleted";

struct BackupInfo {
  int64_t id = 0;
  int64_t size = 0;
  std::string status, triggered_at, finished_at;
  bool downloadable = false;
};

struct RestoreInfo {
  int64_t id = 0;
  int64_t backup_id = 0;
  std::string status, triggered_at, finished_at;
};

class BackupClient {
 public:
  // See ApiClient::New for the errors.
  static core::Result<std::unique_ptr<BackupClient>> New(ServiceEndpoint endpoint);

  // POST /instances/{id}/backups -> the new backup's ID.
  core::Result<int64_t> CreateBackup(const std::string& instance_id);
  // GET /instances/{id}/backups: the array as answered.
  core::Result<Json> ListBackups(const std::string& instance_id);
  core::Result<BackupInfo> GetBackup(const std::string& instance_id, int64_t backup_id);
  // DELETE /instances/{id}/backups/{backup_id}; 423 while it is being restored.
  core::Status DeleteBackup(const std::string& instance_id, int64_t backup_id);
  // POST /instances/{id}/backups/{backup_id}/restore -> the restore's ID (202).
  core::Result<int64_t> CreateRestore(const std::string& instance_id, int64_t backup_id);
  core::Result<Json> ListRestores(const std::string& instance_id);
  core::Result<RestoreInfo> GetRestore(const std::string& instance_id, int64_t restore_id);
  // GET /instances/{id}/config.
  core::Result<Json> GetInstanceConfig(const std::string& instance_id);
  // PUT /instances/{id} with encryption_key / exclude_from_auto_backup /
  // credentials_updated_by_user (kInvalid unless `config` sets at least one of them).
  core::Status UpdateBackupConfig(const std::string& instance_id, const Json& config);

  // §4.6: GET <path> must answer 2xx; otherwise UserError
  // `health check failed with status code <code>`, or Unreachable.
  core::Status CheckHealth(const std::string& path);

  const std::string& url() const { return api_->url(); }
  const ServiceEndpoint& endpoint() const { return api_->endpoint(); }

 private:
  explicit BackupClient(std::unique_ptr<ApiClient> api) : api_(std::move(api)) {}
  std::unique_ptr<ApiClient> api_;
};

// An integer field that a manager may send as a number or a numeric string; nullopt otherwise.
std::optional<int64_t> IntField(const Json& object, std::string_view key);

}  // namespace klutch::providers::anynines
