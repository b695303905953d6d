// InstanceRegistry: the broker's instances and what may happen to them, with no HTTP in it.
// It keeps the records (one JSON file each, state.h), the loopback ports they use, and per
// instance a queue of operations (provision, update, deprovision, start, backup, restore) run
// by worker threads, one operation per instance at a time, on the engine of the instance's
// service (engines/data_service.h) with its nodes supervised (engines/supervisor.h). Requests
// return a typed RegistryResult; the HTTP fronts (osb_api.h, backup_api.h) map outcomes to status
// codes. A restarted registry resumes what was unfinished. Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "broker/broker_options.h"
#include "broker/catalog.h"
#include "broker/osb.h"
#include "broker/state.h"
#include "broker/state_dir.h"
#include "core/clock.h"
#include "core/status.h"
#include "core/sync.h"
#include "engines/data_service.h"
#include "engines/supervisor.h"

namespace klutch::broker {

// What a request came to.
enum class Outcome {
  kAccepted,     // an operation was queued: `operation` (OSB) or `id` (backup, restore)
  kDone,         // done now (a bind with its credentials, an unbind, a setting, a deletion)
  kAlreadyDone,  // the same request was made before; nothing changed
  kNoInstance,   // no instance of that ID and service type
  kNotFound,     // the instance exists, the backup named does not
  kGone,         // nothing to remove (deprovision, unbind)
  kConflict,     // exists with other attributes, or a restore runs already
  kBusy,         // the instance is in an operation that must finish first
  kNotReady,     // the instance's or the backup's state does not allow it
  kInUse,        // the backup is being made or restored
  kInvalid,      // the request asks for something impossible
  kShuttingDown,
  kFailed,  // the broker failed (saving state, finding a port, the engine)
};

struct RegistryResult {
  Outcome outcome = Outcome::kDone;
  std::string message;    // what happened, for the user (empty for kAccepted, kAlreadyDone)
  std::string operation;  // kAccepted by provision, update, deprovision: the operation key
  int64_t id = 0;         // kAccepted by a backup or restore: its ID
  Json credentials;       // Bind: kDone, kAlreadyDone
};

// A copy of an instance's record with the state the broker reports for it.
struct InstanceView {
  InstanceRecord record;
  // `failed` while one of its nodes is down or recovery_hold after it came back.
  std::string reported_state;
  // What went wrong: the outage while reported failed though provisioned, the record's
  // message otherwise.
  std::string message;
};

class InstanceRegistry {
 public:
  // Called after every operation with its kind ("provision", ...), result and duration.
  using OperationObserver = std::function<void(std::string_view kind, bool ok, double seconds)>;

  // options.engine must hold the broker CA already.
  InstanceRegistry(BrokerOptions options, OperationObserver observer);
  ~InstanceRegistry();  // Shutdown()
  InstanceRegistry(const InstanceRegistry&) = delete;
  InstanceRegistry& operator=(const InstanceRegistry&) = delete;

  // Loads every instance and resumes it: unfinished operations run again, running servers
  // are adopted, stopped ones started. kInternal naming the path when the state is unusable.
  core::Status Open();
  // Waits for running operations and stops the workers, then stops every instance unless
  // options say to leave them. Idempotent.
  void Shutdown();

  // OSB operations on instance `id` of service type `type` (requests parsed by osb.h).
  // Provision: kAccepted (also while the same provision runs, or again after it failed),
  // kAlreadyDone, kInvalid (service, plan, parameters), kConflict, kBusy (being deleted),
  // kShuttingDown, kFailed.
  RegistryResult Provision(std::string_view type, const std::string& id,
                           const ProvisionRequest& request);
  // kAccepted, kAlreadyDone (nothing changes), kNoInstance, kInvalid, kBusy, kFailed.
  RegistryResult Update(std::string_view type, const std::string& id, const UpdateRequest& request);
  // kAccepted (also while being deleted), kGone, kInvalid (other service), kBusy, kFailed.
  RegistryResult Deprovision(std::string_view type, const std::string& id,
                             std::string_view service_id);
  // kDone (new, with credentials), kAlreadyDone (the same bind), kNoInstance, kConflict,
  // kBusy (not provisioned), kInvalid, kFailed.
  RegistryResult Bind(std::string_view type, const std::string& id, const std::string& binding,
                      const BindRequest& request);
  // kDone, kGone (no such instance or binding), kFailed.
  RegistryResult Unbind(std::string_view type, const std::string& id, const std::string& binding);

  // Backup manager operations. CreateBackup: kAccepted, kNoInstance, kNotReady, kFailed.
  RegistryResult CreateBackup(std::string_view type, const std::string& id);
  // kDone, kNoInstance, kNotFound, kInUse, kInvalid (its file stayed), kFailed.
  RegistryResult DeleteBackup(std::string_view type, const std::string& id, int64_t backup);
  // kAccepted, kNoInstance, kNotFound, kNotReady, kConflict (a restore runs), kFailed.
  RegistryResult CreateRestore(std::string_view type, const std::string& id, int64_t backup);
  // Applies checked backup settings (encryption_key, exclude_from_auto_backup,
  // credentials_updated_by_user): kDone, kNoInstance, kFailed.
  RegistryResult ConfigureBackups(std::string_view type, const std::string& id,
                                  const Json& settings);

  // The instance `id` when it exists and belongs to a service of `type`.
  std::optional<InstanceView> Get(std::string_view type, std::string_view id);
  // Every instance of a service of `type`.
  std::vector<InstanceView> List(std::string_view type);
  // Instances by (service name, reported state), every state of every service counted.
  std::map<std::pair<std::string, std::string>, int> CountByServiceAndState();
  engines::NodeCounts Nodes() const { return supervisor_.Counts(); }
  const BrokerOptions& options() const { return options_; }

 private:
  enum class OpKind { kProvision, kUpdate, kDeprovision, kStart, kBackup, kRestore };
  struct Op {
    OpKind kind = OpKind::kStart;
    int64_t id = 0;  // backup or restore id
  };
  struct Entry {
    core::Mutex mu;
    InstanceRecord record GUARDED_BY(mu);
    std::deque<Op> pending GUARDED_BY(mu);
    bool running GUARDED_BY(mu) = false;
    bool degraded GUARDED_BY(mu) = false;  // a node is down (the supervisor restarts it)
    std::string degraded_detail GUARDED_BY(mu);
    core::MonoTime recovered_at GUARDED_BY(mu){};  // when the last outage ended
    bool removed GUARDED_BY(mu) = false;
    // Serialises engine calls on this instance (operations, binds, unbinds).
    core::Mutex engine_mu;
  };
  static const char* OpName(OpKind kind);

  // instance_registry.cc: records, ports, requests.
  void Resume(InstanceRecord record);
  std::vector<std::shared_ptr<Entry>> Entries();
  std::shared_ptr<Entry> Find(std::string_view id, std::string_view type);
  std::string ReportedState(const Entry& e) REQUIRES(e.mu);
  InstanceView ViewOf(const Entry& e) REQUIRES(e.mu);
  engines::DataService& EngineFor(const Service& s) { return *engines_.find(s.engine)->second; }
  core::Result<int> AllocatePort();
  void ReleasePorts(const std::vector<int>& ports);
  RegistryResult ProvisionAgain(const std::shared_ptr<Entry>& entry, const ProvisionRequest& req);
  RegistryResult ProvisionNew(const std::string& id, const ProvisionRequest& req, const Plan& plan);

  // instance_operations.cc: the per-instance operation queue and its workers.
  void Enqueue(const std::shared_ptr<Entry>& entry, Op op);
  void Work();
  core::Status Run(Entry& entry, const Op& op);
  core::Status RunUpdate(Entry& entry, engines::DataService& engine, const Service& service,
                         const Plan& plan, InstanceRecord& rec);
  core::Status RunDeprovision(Entry& entry, const InstanceRecord& rec);
  core::Status RollBack(engines::DataService& engine, const InstanceRecord& rec, const Plan& tried,
                        const Plan& previous);
  void FinishOperation(Entry& entry, const core::Status& status, const std::string& key,
                       const Plan* rolled_back_to = nullptr);
  template <typename Fn>
  void UpdateBackup(Entry& entry, int64_t id, Fn fn);
  template <typename Fn>
  void UpdateRestore(Entry& entry, int64_t id, Fn fn);
  core::Status RunBackup(Entry& entry, engines::DataService& engine, const InstanceRecord& rec,
                         const Plan& plan, int64_t id);
  // Marks backups beyond the retention deleted and removes their files; the caller holds the
  // entry's lock and saves the record.
  void ApplyRetention(Entry& entry) REQUIRES(entry.mu);
  core::Status RunRestore(Entry& entry, engines::DataService& engine, const InstanceRecord& rec,
                          const Plan& plan, int64_t id);
  void OnNodeChange(const std::string& id, bool up, const std::string& detail);
  void QuotaLoop();
  void CheckQuota(Entry& entry);

  BrokerOptions options_;
  const OperationObserver observer_;
  StateDir state_;
  std::map<Engine, std::unique_ptr<engines::DataService>> engines_;

  core::Mutex mu_;
  core::CondVar cv_;        // workers wait here for ready_
  core::CondVar quota_cv_;  // the quota loop sleeps here
  bool shut_down_ GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<Entry>> instances_ GUARDED_BY(mu_);
  std::deque<std::string> ready_ GUARDED_BY(mu_);
  int64_t next_number_ GUARDED_BY(mu_) = 1;
  core::Mutex ports_mu_;
  std::set<int> used_ports_ GUARDED_BY(ports_mu_);
  std::vector<std::thread> workers_;
  std::thread quota_thread_;
  // Last: destroyed first, so that its watcher thread never calls OnNodeChange on members
  // that are gone.
  engines::Supervisor supervisor_;
};

}  // namespace klutch::broker
