// What the broker remembers about each instance, persisted as one JSON file per instance
// (`<state>/i/<n>/instance.json`, written atomically, mode 0600, by StateDir: state_dir.h) so that
// a restarted broker finds its instances, their bindings, backups and unfinished operations again.
// Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "engines/instance.h"
#include "machinery/json.h"

namespace klutch::broker {

using machinery::Json;

// Instance states as the a9s instance document reports them (data-services §4.1).
inline constexpr char kStateDeploying[] = "deploying";
inline constexpr char kStateProvisioned[] = "provisioned";
inline constexpr char kStateFailed[] = "failed";
inline constexpr char kStateDeleting[] = "deleting";

// A binding: its account (engines::Account: username, password) and what the broker keeps.
struct BindingRecord : engines::Account {
  std::string id;
  std::string created_at;
  Json credentials = Json::object();  // as the bind response returned them
  // The bind request that made it ("" in records written before these were kept).
  std::string service_id;
  std::string plan_id;
  Json parameters = Json::object();
};

// Backup and restore statuses (data-services §6.5).
struct BackupRecord {
  int64_t id = 0;
  std::string status;  // queued, running, done, failed, deleted
  std::string triggered_at;
  std::string finished_at;
  uint64_t size = 0;  // bytes of the encrypted file
  std::string file;   // name under the instance's backup directory
  std::string key;    // hex AES-256 key the file was encrypted with
  std::string message;
};

struct RestoreRecord {
  int64_t id = 0;
  int64_t backup_id = 0;
  std::string status;
  std::string triggered_at;
  std::string finished_at;
  std::string message;
};

// An instance: what its engine needs (engines::Instance: id = the platform's instance_id,
// number = the broker's own numeric id (a9s `id`) and directory name, parameters, ports,
// database, passwords) and what the broker keeps besides.
struct InstanceRecord : engines::Instance {
  std::string service_id;
  std::string plan_id;
  std::string organization_guid;
  std::string space_guid;
  Json context = Json::object();
  std::string state;  // deploying, provisioned, failed, deleting
  std::string message;

  // The last operation the platform started (OSB last_operation).
  std::string operation;  // provision, update, deprovision
  std::string operation_key;
  std::string operation_state;  // in progress, succeeded, failed
  std::string operation_description;
  std::string previous_plan_id;               // the plan an update comes from
  Json previous_parameters = Json::object();  // and its parameters

  std::string encryption_key;  // hex, AES-256 key for this instance's backups

  std::string created_at;
  std::string updated_at;
  std::string provisioned_at;

  std::map<std::string, BindingRecord> bindings;
  std::vector<BackupRecord> backups;
  std::vector<RestoreRecord> restores;
  int64_t next_backup_id = 1;
  int64_t next_restore_id = 1;
  Json backup_config = Json::object();  // PUT /instances/{id} of the backup manager
};

Json ToJson(const InstanceRecord& record);
core::Result<InstanceRecord> InstanceFromJson(const Json& json);

// The current time as RFC 3339 with milliseconds ("2026-11-26T02:00:00.000Z").
std::string NowTimestamp();

}  // namespace klutch::broker
