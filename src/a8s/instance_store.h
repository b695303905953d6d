// InstanceStore: the operator's records of the Postgresql instances it runs, one JSON file each
// in an engines::StateDir (`<state>/i/<n>/instance.json`, beside the nodes' directories), so that
// a restarted operator finds its instances, their logins and backups again; ports handed out
// once. Each record has a lock that every engine operation on the instance holds (one at a
// time per instance: a binding's login is never made while the instance restarts).
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/sync.h"
#include "engines/instance.h"
#include "engines/state_dir.h"
#include "machinery/json.h"

namespace klutch::a8s {

using machinery::Json;

// A ServiceBinding's login (engines::Account) and whose it is.
struct BindingAccount : engines::Account {
  std::string binding_uid;
};

// One instance: what the engine needs (id = the Postgresql's UID) and what the operator keeps.
struct InstanceRecord : engines::Instance {
  std::string namespace_;
  std::string name;
  // The spec the nodes were last built or changed with (ParsePostgresqlSpec's input), and the
  // generation it came from; empty until the first provision succeeded.
  Json applied_spec;
  int64_t applied_generation = 0;
  bool provisioned = false;
  // Set (and saved) before a standby is promoted, cleared once every other node follows it: a
  // restarted operator finishes what it finds set.
  bool promotion_pending = false;
  // Rejoining nodes whose data is set aside already (engine SetAside, once per rebuild): a
  // rebuild interrupted after its base backup must not set the fresh copy aside over it.
  std::vector<int> set_aside;
  std::string encryption_key;                      // hex AES-256 key of the instance's backups
  std::map<std::string, BindingAccount> bindings;  // by ServiceBinding UID
};

Json ToJson(const InstanceRecord& record);
core::Result<InstanceRecord> InstanceFromJson(const Json& json);

class InstanceStore {
 public:
  explicit InstanceStore(engines::StateDir dir) : dir_(std::move(dir)) {}
  InstanceStore(const InstanceStore&) = delete;
  InstanceStore& operator=(const InstanceStore&) = delete;

  const engines::StateDir& dir() const { return dir_; }
  // Creates the directories and loads every record; unreadable ones are reported in `errors`.
  core::Status Load(std::vector<std::string>* errors) EXCLUDES(mu_);

  // The record of the Postgresql with `uid`, if the operator has one.
  std::optional<InstanceRecord> Get(const std::string& uid) const EXCLUDES(mu_);
  std::vector<InstanceRecord> All() const EXCLUDES(mu_);
  // Why the record of Postgresql `uid` did not load (its file and the fault), if it did not.
  std::optional<std::string> Unreadable(const std::string& uid) const EXCLUDES(mu_);
  // A new record for the Postgresql `ns`/`name` with `uid`: its number, `nodes` free loopback
  // ports on `host`, passwords and a backup key, saved before it is returned.
  core::Result<InstanceRecord> Create(const std::string& uid, const std::string& ns,
                                      const std::string& name, int nodes, const std::string& host)
      EXCLUDES(mu_);
  // Gives `record` one more free port per node it lacks (a cluster growing to `nodes`).
  core::Status AddPorts(InstanceRecord& record, int nodes, const std::string& host) EXCLUDES(mu_);
  // Frees ports a record no longer holds (a rolled-back grow), for other instances to take.
  void ReleasePorts(const std::vector<int>& ports) EXCLUDES(mu_);
  core::Status Save(const InstanceRecord& record) EXCLUDES(mu_);
  // Removes the record, its directory and its backups, and frees its ports.
  core::Status Remove(const InstanceRecord& record) EXCLUDES(mu_);
  // Whether this process has started (or adopted) the servers of instance `uid`; the first
  // pass after a start does, once leading.
  bool Started(const std::string& uid) const EXCLUDES(mu_);
  void SetStarted(const std::string& uid) EXCLUDES(mu_);
  // The lock every engine operation on instance `uid` holds.
  std::shared_ptr<core::Mutex> LockFor(const std::string& uid) EXCLUDES(mu_);

 private:
  core::Result<int> FreePort(const std::string& host) REQUIRES(mu_);

  const engines::StateDir dir_;
  mutable core::Mutex mu_;
  std::map<std::string, InstanceRecord> records_ GUARDED_BY(mu_);  // by UID
  std::map<std::string, std::shared_ptr<core::Mutex>> locks_ GUARDED_BY(mu_);
  std::set<int> ports_ GUARDED_BY(mu_);
  std::set<std::string> started_ GUARDED_BY(mu_);
  std::map<std::string, std::string> unreadable_ GUARDED_BY(mu_);  // by UID
  int64_t next_number_ GUARDED_BY(mu_) = 1;
};

}  // namespace klutch::a8s
