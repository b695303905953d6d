// DataService: the data-service engines behind `klutch broker` and `klutch operator`: how an
// instance of PostgreSQL, Redis, MariaDB, Prometheus or RabbitMQ is created, changed, bound, backed
// up and restored on this machine. Engines run blocking commands (initdb, pg_basebackup, pg_dump,
// SQL and RESP administration) and are called from their owner's workers, one operation per
// instance at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/process.h"
#include "core/status.h"
#include "core/sync.h"
#include "engines/instance.h"
#include "engines/node_runner.h"
#include "engines/resource_limits.h"

namespace klutch::engines {

// The administrative user the engines create in every instance they run (PostgreSQL role, Redis
// ACL user) and administer it as.
inline constexpr char kAdminUser[] = "klutch_admin";
// The file an engine writes into a node's directory once the node is fully initialised; a
// directory without it is a half-made node, made again.
inline constexpr char kInitializedMarker[] = ".klutch-initialized";

// Shared settings of the engines.
struct EngineContext {
  // Each instance's files live in instances_dir/<number> (the broker: <state>/i).
  std::filesystem::path instances_dir;
  std::filesystem::path InstanceDir(int64_t number) const {
    return instances_dir / std::to_string(number);
  }
  // Node `node` of an instance keeps its files here.
  std::filesystem::path NodeDir(int64_t number, int node) const {
    return InstanceDir(number) / ("n" + std::to_string(node));
  }
  std::optional<core::UserIds> user;  // instances run as this account (required as root)
  std::filesystem::path postgres_bin = "/usr/lib/postgresql/15/bin";
  std::filesystem::path redis_server = "/usr/bin/redis-server";
  // MariaDB's server, and the directory of mariadb-install-db, mariadb and mariadb-dump.
  std::filesystem::path mariadbd = "/usr/sbin/mariadbd";
  std::filesystem::path mariadb_bin = "/usr/bin";
  // Prometheus, its config checker and the Alertmanager (Debian's prometheus and
  // prometheus-alertmanager).
  std::filesystem::path prometheus = "/usr/bin/prometheus";
  std::filesystem::path promtool = "/usr/bin/promtool";
  std::filesystem::path alertmanager = "/usr/bin/prometheus-alertmanager";
  // RabbitMQ's start script (Debian's rabbitmq-server; not the /usr/sbin wrapper, which runs
  // only as root or rabbitmq) and Erlang's epmd.
  std::filesystem::path rabbitmq_server = "/usr/lib/rabbitmq/bin/rabbitmq-server";
  std::filesystem::path epmd = "/usr/bin/epmd";
  std::string host = "127.0.0.1";  // where instances listen (loopback only)
  std::string ca_pem;              // the owner's CA, for TLS plans
  std::string ca_key_pem;
  std::chrono::milliseconds ready_timeout{60000};
  // Replicated PostgreSQL instances fail over: a dead primary is not restarted in place; its
  // owner promotes a standby (ChooseNewPrimary, Promote) and rejoins the old one (Rejoin).
  bool failover = false;
};

class DataService {
 public:
  virtual ~DataService() = default;

  // The process of node `index` with the plan's limits and the instance's parameters.
  virtual NodeSpec Node(const Instance& instance, const PlanLimits& plan, int index) const = 0;
  // Checks engine parameters before anything changes: kInvalid naming the parameter.
  virtual core::Status ValidateParameters(const Json& parameters) const = 0;
  // Builds the instance from what exists (idempotent: a half-made node is made again) and
  // starts every node.
  virtual core::Status Provision(Instance& instance, const PlanLimits& plan,
                                 NodeRunner& runner) = 0;
  // Applies a new plan and/or parameters to a running instance (adds standbys, restarts
  // with new limits, reloads settings).
  virtual core::Status Update(Instance& instance, const PlanLimits& from, const PlanLimits& to,
                              NodeRunner& runner) = 0;
  // Starts every node of an existing instance (after its owner restarted).
  virtual core::Status Start(const Instance& instance, const PlanLimits& plan,
                             NodeRunner& runner) = 0;
  // Creates the binding's account and returns the credentials object of the bind response.
  virtual core::Result<Json> Bind(const Instance& instance, const PlanLimits& plan,
                                  const Account& binding) = 0;
  // Drops the binding's account and ends its sessions; a missing account is fine.
  virtual core::Status Unbind(const Instance& instance, const PlanLimits& plan,
                              const Account& binding) = 0;
  // Writes a full backup of the instance's data to `out` (plain, unencrypted).
  virtual core::Status Backup(const Instance& instance, const PlanLimits& plan,
                              const std::filesystem::path& out) = 0;
  // Replaces the instance's data with the backup in `in`, all or nothing: a failed restore
  // leaves the data as it was.
  virtual core::Status Restore(const Instance& instance, const PlanLimits& plan,
                               const std::filesystem::path& in, NodeRunner& runner) = 0;
  // Marks the instance read-only when its data passed the plan's disk quota (and writable
  // again below it). Returns a message for the instance when over quota, "" otherwise.
  // It also finishes what an operation killed midway left behind (a database a restore of an
  // earlier process closed to its users).
  virtual std::string EnforceQuota(const Instance& instance, const PlanLimits& plan) = 0;

  // Failover of replicated instances (EngineContext::failover); engines without it refuse.
  // The standby to promote now: of those answering, the one that has received the most WAL.
  // With `every_standby`, kUnavailable while one of them does not answer (it may hold the only
  // copy of an acknowledged commit); without, kUnavailable when none answers.
  virtual core::Result<int> ChooseNewPrimary(const Instance& instance, const PlanLimits& plan,
                                             bool every_standby);
  // Makes instance.primary the primary (promoting it while it is still a standby; nothing when
  // it is one already) and points every other node that runs and is not rejoining at it.
  virtual core::Status Promote(const Instance& instance, const PlanLimits& plan,
                               NodeRunner& runner);
  // Makes `node` (a former primary) a standby of instance.primary: its data replaced by a base
  // backup of the primary, then started.
  virtual core::Status Rejoin(const Instance& instance, const PlanLimits& plan, int node,
                              NodeRunner& runner);
  // How standby `node` stands towards instance.primary.
  struct StandbyState {
    bool answers = false;
    bool primary = false;    // it runs as a primary itself (promoted by hand: a split brain)
    bool streaming = false;  // it receives the primary's WAL
    int64_t replayed = 0;    // how far it has replayed WAL (bytes)
  };
  virtual StandbyState InspectStandby(const Instance& instance, const PlanLimits& plan, int node);
  // Stops `node` and moves its whole data directory (one with the initialized marker) out of
  // the way, for Rejoin to rebuild it: kept in the returned directory, replacing what an
  // earlier call kept there, until the instance goes; empty when nothing is kept. The caller
  // calls it once per rebuild: a rebuilt node has a whole data directory again.
  virtual core::Result<std::filesystem::path> SetAside(const Instance& instance, int node,
                                                       NodeRunner& runner);
};

std::unique_ptr<DataService> NewPostgresService(const EngineContext& context);
std::unique_ptr<DataService> NewRedisService(const EngineContext& context);
std::unique_ptr<DataService> NewMariadbService(const EngineContext& context);
std::unique_ptr<DataService> NewPrometheusService(const EngineContext& context);
std::unique_ptr<DataService> NewRabbitmqService(const EngineContext& context);

// The instances an operation of this process works on (a restore under way), so that
// EnforceQuota, which also finishes what an operation of an earlier process left midway, leaves
// them alone. Thread-safe.
class ActiveInstances {
 public:
  class Guard {
   public:
    Guard(ActiveInstances& set, std::string id) : set_(set), id_(std::move(id)) {
      core::MutexLock lock(set_.mu_);
      set_.ids_.insert(id_);
    }
    ~Guard() {
      core::MutexLock lock(set_.mu_);
      set_.ids_.erase(id_);
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    ActiveInstances& set_;
    std::string id_;
  };
  bool Contains(const std::string& id) const {
    core::MutexLock lock(mu_);
    return ids_.contains(id);
  }

 private:
  mutable core::Mutex mu_;
  std::set<std::string> ids_ GUARDED_BY(mu_);
};

// Helpers shared by the engines.
// Chowns `path` (recursively) to the engine user, when there is one.
core::Status ChownTo(const std::filesystem::path& path, const std::optional<core::UserIds>& user);
// Total bytes of the regular files under `path`.
int64_t DirectorySize(const std::filesystem::path& path);
// Starts (or adopts) a node through `runner` and waits until its readiness probe answers,
// up to context.ready_timeout; kUnavailable with the tail of `log` otherwise, and as soon as
// the process has exited four times without answering (a server refusing its configuration
// does not get better by restarting it; a passing conflict, such as its port being taken for
// a moment, gets the supervisor's first restarts, about 1.5 s). `what` names the server in
// the message ("PostgreSQL node 1").
core::Status StartAndWait(const EngineContext& context, NodeRunner& runner,
                          const std::string& instance, int node, NodeSpec spec,
                          const std::filesystem::path& log, std::string_view what);
// Runs a client tool of the engine to completion (pg_dump, pg_restore, ...): kInternal with
// its exit code and output when it fails.
core::Status RunTool(core::ProcessSpec spec, std::chrono::milliseconds timeout);
// The same for `stages[0] | stages[1] | ...`: kInternal naming every tool that failed.
core::Status RunTools(const std::vector<core::ProcessSpec>& stages,
                      std::chrono::milliseconds timeout);
// Moves every running node of `instance` (its server, found through Node's pid_file) into its
// control group "<instance id>-n<node>" with plan.cpu and plan.memory_bytes; a node already there
// is left alone. kInternal naming the node when one cannot be limited.
core::Status LimitNodes(const ResourceLimiter& limiter, const DataService& engine,
                        const Instance& instance, const PlanLimits& plan);
// Removes the control groups of `instance`'s nodes (once its servers are stopped).
void RemoveNodeLimits(const ResourceLimiter& limiter, const Instance& instance);
// A tenant's parameter value as a message shows it: JSON, cut at 200 characters.
std::string ShownValue(const Json& value);
// A running process (not this one) whose command line contains `match`, which must name
// files only one process uses (a node's config file).
std::optional<pid_t> FindProcess(std::string_view match);
// Writes the instance's TLS server certificate and key (issued by the context's CA for
// the loopback address) into `dir` as server.crt / server.key / ca.crt, once.
core::Status EnsureServerCertificate(const EngineContext& context,
                                     const std::filesystem::path& dir);

}  // namespace klutch::engines
