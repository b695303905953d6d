// The MariaDB engine behind a9s-mariadb106 and a9s-mariadb1011: an instance is a `mariadbd`
// of Debian's mariadb-server (node 0, the primary) and, on cluster plans, two replicas that
// follow its binary log by GTID, each with its own data directory and loopback port, run as
// the engine user. The owner administers every node over a unix socket in the node directory
// (mode 0700) as `klutch_admin`, through the `mariadb` client with the SQL on stdin (never on a
// command line, where other local users could read a binding's password).
//
// Accounts are made on each node by the engine (never replicated: a replica seeded later
// would miss them and stop at the first statement about them); data changes reach the
// replicas through the primary's binary log. A binding is the user `b<12 hex>`@`%` with every
// privilege on the instance's databases, no global ones.
#include <fmt/format.h>
#include <openssl/sha.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>
#include <system_error>

#include "core/file.h"
#include "core/log.h"
#include "core/strings.h"
#include "engines/data_service.h"
#include "machinery/gofmt.h"

namespace klutch::engines {
namespace mariadb {  // its own names: the engines build as one unit (ADR 0015)
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr char kReplicationUser[] = "klutch_repl";
// The names the broker gives bindings (BindingUsername): only these are a binding's account.
constexpr char kBindingUserPattern[] = "^b[0-9a-f]{12}$";
constexpr milliseconds kSqlTimeout{60000};
// Databases the server keeps for itself: never an instance's.
constexpr std::string_view kSystemDatabases[] = {"mysql", "information_schema",
                                                 "performance_schema", "sys"};

// A string literal of MariaDB's SQL (backslash escapes are on by default).
std::string Literal(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    if (c == '\0') {
      out += "\\0";
      continue;
    }
    out += c;
  }
  return out + "'";
}

std::string Ident(std::string_view s) {
  std::string out = "`";
  for (char c : s) {
    if (c == '`') out += '`';
    out += c;
  }
  return out + "`";
}

// A database name as GRANT and REVOKE read it: there `_` and `%` are wildcards (a grant on
// `mysq_`.* would be a grant on `mysql`), so both are escaped.
std::string GrantIdent(std::string_view db) {
  std::string escaped;
  for (char c : db) {
    if (c == '_' || c == '%') escaped += '\\';
    escaped += c;
  }
  return Ident(escaped);
}

// The mysql_native_password hash of `password`: "*" and the upper-case hex of SHA1(SHA1()).
std::string NativePasswordHash(std::string_view password) {
  unsigned char once[SHA_DIGEST_LENGTH];
  unsigned char twice[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(password.data()), password.size(), once);
  SHA1(once, sizeof(once), twice);
  return "*" + core::ToUpper(core::HexEncode(
                   std::string_view(reinterpret_cast<const char*>(twice), sizeof(twice))));
}

// A value of the option files (my.cnf), quoted so that no character ends the line.
std::string OptionValue(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// --- parameters (data-services §5.1, MariaDB) ----------------------------------------------

constexpr std::string_view kParamNames[] = {"binlog_expire_days", "databases",
                                            "grant_performance_schema_permissions"};

std::optional<int64_t> AsInt(const Json& v) {
  if (const auto* i = v.get_ptr<const int64_t*>()) return *i;
  if (const auto* u = v.get_ptr<const uint64_t*>()) {
    if (*u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}

std::optional<bool> AsBool(const Json& v) {
  if (const auto* b = v.get_ptr<const bool*>()) return *b;
  if (const auto* s = v.get_ptr<const std::string*>()) {
    if (*s == "true") return true;
    if (*s == "false") return false;
  }
  return std::nullopt;
}

bool SystemDatabase(std::string_view name) {
  return std::any_of(std::begin(kSystemDatabases), std::end(kSystemDatabases),
                     [&](std::string_view s) {
                       return name.size() == s.size() &&
                              std::equal(name.begin(), name.end(), s.begin(), [](char a, char b) {
                                return std::tolower(static_cast<unsigned char>(a)) == b;
                              });
                     });
}

core::Status CheckDatabases(const Json& value) {
  if (!value.is_array() || value.size() > 64) {
    return core::Invalid(fmt::format(
        "parameter databases: {} is not a list of at most 64 database names", ShownValue(value)));
  }
  static const std::regex kName("^[A-Za-z0-9_]{1,64}$");
  for (const Json& item : value) {
    const auto* name = item.get_ptr<const std::string*>();
    if (name == nullptr || !std::regex_match(*name, kName)) {
      return core::Invalid(fmt::format(
          "parameter databases: {} is not a database name of 1 to 64 letters, digits and _",
          ShownValue(item)));
    }
    if (SystemDatabase(*name)) {
      return core::Invalid(fmt::format(
          "parameter databases: {} is a database of the server itself; choose another name",
          core::GoQuote(*name)));
    }
  }
  return core::Status::Ok();
}

core::Status CheckParameter(const std::string& key, const Json& value) {
  if (key == "binlog_expire_days") {
    // The server keeps binary logs for 0 (for ever) to 99 days; the XRD asks for at least 1.
    if (auto days = AsInt(value); !days || *days < 1 || *days > 99) {
      return core::Invalid(fmt::format(
          "parameter binlog_expire_days: {} is not a number of days from 1 to 99 (MariaDB's "
          "expire_logs_days)",
          ShownValue(value)));
    }
    return core::Status::Ok();
  }
  if (key == "databases") return CheckDatabases(value);
  if (key == "grant_performance_schema_permissions") {
    if (!AsBool(value)) {
      return core::Invalid(
          fmt::format("parameter grant_performance_schema_permissions: {} is not true or false",
                      ShownValue(value)));
    }
    return core::Status::Ok();
  }
  std::vector<std::string> known(std::begin(kParamNames), std::end(kParamNames));
  return core::Invalid(fmt::format("unknown parameter {}; MariaDB instances accept {}",
                                   core::GoQuote(key), core::Join(known, ", ")));
}

// The instance's databases: its own and those of the `databases` parameter, in that order.
std::vector<std::string> Databases(const Instance& in) {
  std::vector<std::string> out = {in.database};
  const Json* extra = nullptr;
  if (auto it = in.parameters.find("databases"); it != in.parameters.end()) extra = &*it;
  if (extra != nullptr && CheckDatabases(*extra).ok()) {
    for (const Json& item : *extra) {
      const std::string& name = *item.get_ptr<const std::string*>();
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
  }
  return out;
}

// How long binary logs are kept: the parameter, else a week (never purging them would fill
// the disk outside any quota).
int64_t BinlogDays(const Instance& in) {
  auto it = in.parameters.find("binlog_expire_days");
  if (it == in.parameters.end() || !CheckParameter("binlog_expire_days", *it).ok()) return 7;
  return AsInt(*it).value_or(7);
}

bool GrantsPerformanceSchema(const Instance& in) {
  auto it = in.parameters.find("grant_performance_schema_permissions");
  return it != in.parameters.end() && AsBool(*it).value_or(false);
}

// Whether a MariaDB server greets on `socket`: its first packet carries protocol version 10
// (an error packet, 0xff, is a server that refuses connections, e.g. while shutting down).
bool Greets(const fs::path& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = socket_path.string();
  if (path.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  timeval tv{.tv_sec = 0, .tv_usec = 500000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    unsigned char header[5];
    ok = ::recv(fd, header, sizeof(header), MSG_WAITALL) == 5 && header[4] == 10;
  }
  ::close(fd);
  return ok;
}

class MariadbService final : public DataService {
 public:
  explicit MariadbService(EngineContext ctx) : ctx_(std::move(ctx)) {}

  NodeSpec Node(const Instance& in, const PlanLimits& /*plan*/, int index) const override {
    NodeSpec spec;
    spec.process.argv = {ctx_.mariadbd.string(), "--defaults-file=" + Conf(in, index).string()};
    spec.process.user = ctx_.user;
    // The server writes its own log (log-error); this file gets what it prints before that.
    spec.process.output_file = NodeDir(in, index) / "mariadbd.out";
    spec.pid_file = NodeDir(in, index) / "mariadbd.pid";
    spec.match = Conf(in, index).string();
    fs::path socket = Socket(in, index);
    spec.ready = [socket] { return Greets(socket); };
    return spec;
  }

  core::Status ValidateParameters(const Json& parameters) const override {
    if (!parameters.is_object()) return core::Invalid("parameters must be a JSON object");
    for (const auto& [key, value] : parameters.items()) {
      if (value.is_null()) {
        if (std::find(std::begin(kParamNames), std::end(kParamNames), key) ==
            std::end(kParamNames)) {
          return CheckParameter(key, value);
        }
        continue;
      }
      KLUTCH_RETURN_IF_ERROR(CheckParameter(key, value));
    }
    return core::Status::Ok();
  }

  core::Status Provision(Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    KLUTCH_RETURN_IF_ERROR(InitNode(in, plan, 0));
    KLUTCH_RETURN_IF_ERROR(StartNode(in, plan, 0, runner));
    KLUTCH_RETURN_IF_ERROR(CreateDatabases(in));
    for (int node = 1; node < plan.nodes; ++node) {
      KLUTCH_RETURN_IF_ERROR(AddReplica(in, plan, node, runner));
    }
    return core::Status::Ok();
  }

  core::Status Start(const Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    for (int node = 0; node < plan.nodes && node < static_cast<int>(in.ports.size()); ++node) {
      if (!fs::exists(NodeDir(in, node) / kInitializedMarker)) continue;
      KLUTCH_RETURN_IF_ERROR(WriteConfig(in, plan, node));
      KLUTCH_RETURN_IF_ERROR(StartNode(in, plan, node, runner));
    }
    return core::Status::Ok();
  }

  // Settings change on the running servers (every one of them is dynamic in MariaDB 10.11)
  // and in their option files; new databases are made and granted to every binding; a
  // single instance that becomes a cluster gets its replicas seeded from the primary.
  core::Status Update(Instance& in, const PlanLimits& from, const PlanLimits& to,
                      NodeRunner& runner) override {
    int old_nodes = std::min<int>(from.nodes, static_cast<int>(in.ports.size()));
    for (int node = 0; node < old_nodes; ++node) {
      KLUTCH_RETURN_IF_ERROR(WriteConfig(in, to, node));
      if (!runner.Alive(in.id, node)) {
        KLUTCH_RETURN_IF_ERROR(StartNode(in, to, node, runner));
      }
      KLUTCH_RETURN_IF_ERROR(Sql(in, node, LiveSettings(in, to)).status());
    }
    KLUTCH_RETURN_IF_ERROR(CreateDatabases(in));
    for (int node = 0; node < old_nodes; ++node) KLUTCH_RETURN_IF_ERROR(GrantBindings(in, node));
    for (int node = old_nodes; node < to.nodes; ++node) {
      KLUTCH_RETURN_IF_ERROR(AddReplica(in, to, node, runner));
    }
    return core::Status::Ok();
  }

  core::Result<Json> Bind(const Instance& in, const PlanLimits& plan,
                          const Account& binding) override {
    const std::string user = fmt::format("{}@'%'", Literal(binding.username));
    // A binding made while a restore runs waits, locked, like the others, until it ends.
    const bool restoring = fs::exists(ctx_.InstanceDir(in.number) / "locked-for-restore");
    std::string sql = fmt::format(
        "SET sql_log_bin=0;\nCREATE USER IF NOT EXISTS {0} IDENTIFIED BY {1}{2}{3};\n"
        "ALTER USER {0} IDENTIFIED BY {1}{2}{3};\n",
        user, Literal(binding.password), plan.tls && !plan.tls_optional ? " REQUIRE SSL" : "",
        restoring ? " ACCOUNT LOCK" : "");
    sql += Grants(in, binding.username);
    for (int node = 0; node < Nodes(in, plan); ++node) {
      KLUTCH_RETURN_IF_ERROR(Sql(in, node, sql).status());
    }
    const int port = in.ports[0];
    Json credentials = {
        {"host", ctx_.host},
        {"hosts", Json::array({ctx_.host})},
        {"name", in.database},
        {"password", binding.password},
        {"port", port},
        {"uri", fmt::format("mysql://{}:{}@{}:{}/{}", core::PercentEncode(binding.username),
                            core::PercentEncode(binding.password), ctx_.host, port, in.database)},
        {"username", binding.username}};
    if (plan.tls) credentials["cacrt"] = ctx_.ca_pem;
    return credentials;
  }

  core::Status Unbind(const Instance& in, const PlanLimits& /*plan*/,
                      const Account& binding) override {
    for (int node = 0; node < static_cast<int>(in.ports.size()); ++node) {
      if (!fs::exists(NodeDir(in, node) / kInitializedMarker)) continue;
      // A dropped user's sessions would go on; they end with it.
      KLUTCH_RETURN_IF_ERROR(Sql(in, node,
                                 fmt::format("SET sql_log_bin=0;\nDROP USER IF EXISTS {}@'%';",
                                             Literal(binding.username)))
                                 .status());
      KLUTCH_RETURN_IF_ERROR(KillSessions(in, node, {binding.username}));
    }
    return core::Status::Ok();
  }

  // A logical dump of the instance's databases (tables, views, triggers, routines, events),
  // one consistent snapshot of InnoDB data, that recreates them when loaded.
  core::Status Backup(const Instance& in, const PlanLimits& /*plan*/,
                      const fs::path& out) override {
    KLUTCH_ASSIGN_OR_RETURN(core::ProcessSpec dump, Dump(in, in.primary, out));
    return RunTool(dump, std::chrono::hours(6));
  }

  // The backup replaces the instance's databases on the primary (the replicas follow through
  // the binary log). MariaDB cannot undo DDL, so all-or-nothing comes from a safety dump of
  // what is there, taken before and loaded back should the backup fail to load; bindings are
  // locked out meanwhile. A marker and the safety dump on disk let the next Restore (the broker
  // resumes an interrupted one) or EnforceQuota undo what a crash midway left.
  core::Status Restore(const Instance& in, const PlanLimits& /*plan*/, const fs::path& file,
                       NodeRunner& /*runner*/) override {
    ActiveInstances::Guard restoring(restoring_, in.id);
    // A restore the broker resumes after being killed midway begins from the data as it was.
    KLUTCH_RETURN_IF_ERROR(FinishInterruptedRestore(in));
    const fs::path locked = ctx_.InstanceDir(in.number) / "locked-for-restore";
    const fs::path safety = ctx_.InstanceDir(in.number) / "restore-safety.sql";
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(locked, ""));
    KLUTCH_RETURN_IF_ERROR(LockBindings(in, true));
    const fs::path partial = safety.string() + ".partial";
    auto dump = Dump(in, in.primary, partial);
    core::Status status = dump.ok() ? RunTool(*dump, std::chrono::hours(6)) : dump.status();
    if (status.ok()) {
      std::error_code ec;
      fs::rename(partial, safety, ec);
      if (ec) status = core::Internal(fmt::format("keep the safety dump: {}", ec.message()));
    }
    if (status.ok()) {
      status = Load(in, file);
      if (!status.ok()) {
        if (auto undone = Load(in, safety); !undone.ok()) {
          status = core::Internal(fmt::format(
              "{}; loading back the data from before the restore failed too ({}): it is kept "
              "in {}",
              status.message(), undone.message(), safety.string()));
          return status;
        }
      }
    }
    std::error_code ec;
    fs::remove(safety, ec);
    fs::remove(partial, ec);
    if (auto unlocked = LockBindings(in, false); !unlocked.ok() && status.ok()) status = unlocked;
    if (status.ok()) fs::remove(locked, ec);
    return status;
  }

  // Over the plan's quota the primary turns read-only (for everyone but the administrator);
  // below it, writable again. It also undoes a restore an earlier process left midway.
  std::string EnforceQuota(const Instance& in, const PlanLimits& plan) override {
    if (!restoring_.Contains(in.id)) {
      if (auto finished = FinishInterruptedRestore(in); !finished.ok()) {
        KLUTCH_LOG(kWarn, "engines", "instance {}: {}", in.id, finished.message());
      }
    }
    int64_t used = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(DataDir(in, in.primary), ec)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_directory() && !SystemDatabase(name) && !name.starts_with('#')) {
        used += DirectorySize(entry.path());
      }
    }
    const bool over = used > plan.disk_quota_bytes;
    const fs::path marker = ctx_.InstanceDir(in.number) / "read-only-over-quota";
    if (over || fs::exists(marker)) {
      auto set = Sql(in, in.primary, fmt::format("SET GLOBAL read_only={};", over ? 1 : 0));
      if (set.ok()) {
        std::error_code ec;
        if (over) {
          (void)core::WriteFileAtomic(marker, "");
        } else {
          fs::remove(marker, ec);
        }
      }
    }
    if (!over) return "";
    return fmt::format(
        "disk quota exceeded: {} MiB used of {} MiB; the instance is read-only until the plan "
        "is upgraded or the platform drops or truncates tables (InnoDB files do not shrink when "
        "rows are deleted)",
        used >> 20, plan.disk_quota_bytes >> 20);
  }

 private:
  fs::path NodeDir(const Instance& in, int node) const { return ctx_.NodeDir(in.number, node); }
  fs::path DataDir(const Instance& in, int node) const { return NodeDir(in, node) / "data"; }
  fs::path Conf(const Instance& in, int node) const { return NodeDir(in, node) / "my.cnf"; }
  fs::path ClientConf(const Instance& in, int node) const {
    return NodeDir(in, node) / "client.cnf";
  }
  fs::path Socket(const Instance& in, int node) const { return NodeDir(in, node) / "m.sock"; }
  fs::path Tool(std::string_view name) const { return ctx_.mariadb_bin / name; }
  int Nodes(const Instance& in, const PlanLimits& plan) const {
    return std::min<int>(plan.nodes, static_cast<int>(in.ports.size()));
  }

  // Runs `sql` on a node as the administrator; the output of its queries, tab-separated.
  core::Result<std::string> Sql(const Instance& in, int node, const std::string& sql) const {
    core::ProcessSpec spec{.argv = {Tool("mariadb").string(),
                                    "--defaults-file=" + ClientConf(in, node).string(), "--batch",
                                    "--skip-column-names", "--connect-timeout=10"}};
    KLUTCH_ASSIGN_OR_RETURN(auto result, core::RunProcess(spec, kSqlTimeout, sql));
    if (result.exit_code != 0) {
      return core::Internal(fmt::format("MariaDB node {}: {}", node, core::Trim(result.output)));
    }
    return result.output;
  }

  // mariadb-dump of every database of the instance: those it declares (made again first, had
  // a binding dropped one) and those it declared once and dropped from `databases` since (their
  // data stays, and so does its backup).
  core::Result<core::ProcessSpec> Dump(const Instance& in, int node, const fs::path& out) const {
    KLUTCH_RETURN_IF_ERROR(CreateDatabases(in));
    std::vector<std::string> system;
    for (std::string_view db : kSystemDatabases) system.push_back(Literal(db));
    KLUTCH_ASSIGN_OR_RETURN(
        std::string names,
        Sql(in, node,
            fmt::format("SELECT schema_name FROM information_schema.schemata WHERE schema_name NOT "
                        "IN ({}) ORDER BY schema_name;",
                        core::Join(system, ", "))));
    core::ProcessSpec spec{
        .argv = {Tool("mariadb-dump").string(), "--defaults-file=" + ClientConf(in, node).string(),
                 "--single-transaction", "--routines", "--events", "--triggers",
                 "--add-drop-database", "--result-file=" + out.string(), "--databases"}};
    for (auto name : core::Split(names, '\n')) {
      if (!core::Trim(name).empty()) spec.argv.emplace_back(core::Trim(name));
    }
    return spec;
  }

  core::Status Load(const Instance& in, const fs::path& file) const {
    core::ProcessSpec cat{.argv = {"cat", "--", file.string()}};
    core::ProcessSpec load{.argv = {Tool("mariadb").string(),
                                    "--defaults-file=" + ClientConf(in, in.primary).string(),
                                    "--batch", "--binary-mode", "--connect-timeout=10"}};
    return RunTools({cat, load}, std::chrono::hours(6));
  }

  // GRANT statements that give binding `user` the instance's databases.
  std::string Grants(const Instance& in, const std::string& user) const {
    std::string sql;
    for (const auto& db : Databases(in)) {
      sql +=
          fmt::format("GRANT ALL PRIVILEGES ON {}.* TO {}@'%';\n", GrantIdent(db), Literal(user));
    }
    if (GrantsPerformanceSchema(in)) {
      sql += fmt::format("GRANT SELECT ON performance_schema.* TO {}@'%';\n", Literal(user));
    }
    return sql;
  }

  core::Result<std::vector<std::string>> BindingUsers(const Instance& in, int node) const {
    KLUTCH_ASSIGN_OR_RETURN(
        std::string out,
        Sql(in, node,
            fmt::format("SELECT user FROM mysql.user WHERE host = '%' AND user REGEXP {};",
                        Literal(kBindingUserPattern))));
    std::vector<std::string> users;
    for (auto line : core::Split(out, '\n')) {
      if (!core::Trim(line).empty()) users.emplace_back(core::Trim(line));
    }
    return users;
  }

  core::Status GrantBindings(const Instance& in, int node) const {
    KLUTCH_ASSIGN_OR_RETURN(auto users, BindingUsers(in, node));
    if (users.empty()) return core::Status::Ok();
    std::string sql = "SET sql_log_bin=0;\n";
    for (const auto& user : users) {
      sql += Grants(in, user);
      // Taken back when the parameter went; an account that never had it answers with an
      // error, which is the same outcome.
      if (!GrantsPerformanceSchema(in)) {
        (void)Sql(in, node,
                  fmt::format("SET sql_log_bin=0;\nREVOKE SELECT ON performance_schema.* FROM "
                              "{}@'%';",
                              Literal(user)));
      }
    }
    return Sql(in, node, sql).status();
  }

  core::Status KillSessions(const Instance& in, int node,
                            const std::vector<std::string>& users) const {
    if (users.empty()) return core::Status::Ok();
    std::vector<std::string> literals;
    for (const auto& u : users) literals.push_back(Literal(u));
    KLUTCH_ASSIGN_OR_RETURN(
        std::string ids,
        Sql(in, node,
            fmt::format("SELECT id FROM information_schema.processlist WHERE user IN ({});",
                        core::Join(literals, ", "))));
    for (auto id : core::Split(ids, '\n')) {
      if (core::Trim(id).empty()) continue;
      // A session that ended meanwhile is no error.
      (void)Sql(in, node, fmt::format("KILL CONNECTION {};", core::Trim(id)));
    }
    return core::Status::Ok();
  }

  // Locks (or unlocks) every binding's account on the primary and ends its sessions.
  core::Status LockBindings(const Instance& in, bool lock) const {
    KLUTCH_ASSIGN_OR_RETURN(auto users, BindingUsers(in, in.primary));
    if (users.empty()) return core::Status::Ok();
    std::string sql = "SET sql_log_bin=0;\n";
    for (const auto& u : users) {
      sql += fmt::format("ALTER USER {}@'%' ACCOUNT {};\n", Literal(u), lock ? "LOCK" : "UNLOCK");
    }
    KLUTCH_RETURN_IF_ERROR(Sql(in, in.primary, sql).status());
    return lock ? KillSessions(in, in.primary, users) : core::Status::Ok();
  }

  // Puts back what a restore that was cut off midway found (its safety dump) and unlocks the
  // bindings; nothing when no restore was cut off.
  core::Status FinishInterruptedRestore(const Instance& in) {
    const fs::path locked = ctx_.InstanceDir(in.number) / "locked-for-restore";
    if (!fs::exists(locked)) return core::Status::Ok();
    const fs::path safety = ctx_.InstanceDir(in.number) / "restore-safety.sql";
    std::error_code ec;
    if (fs::exists(safety)) {
      if (auto undone = Load(in, safety); !undone.ok()) {
        return core::Internal(
            fmt::format("loading back the data from before an interrupted restore failed: {}",
                        undone.message()));
      }
      fs::remove(safety, ec);
    }
    fs::remove(safety.string() + ".partial", ec);
    KLUTCH_RETURN_IF_ERROR(LockBindings(in, false));
    fs::remove(locked, ec);
    return core::Status::Ok();
  }

  core::Status CreateDatabases(const Instance& in) const {
    std::string sql;
    for (const auto& db : Databases(in)) {
      sql += fmt::format("CREATE DATABASE IF NOT EXISTS {};\n", Ident(db));
    }
    return Sql(in, in.primary, sql).status();
  }

  // The settings a running server takes without a restart.
  std::string LiveSettings(const Instance& in, const PlanLimits& plan) const {
    const int64_t days = BinlogDays(in);
    return fmt::format(
        "SET GLOBAL innodb_buffer_pool_size={};\nSET GLOBAL max_connections={};\n"
        "SET GLOBAL expire_logs_days={};\n",
        int64_t{plan.shared_buffers_mb} << 20, plan.max_connections, days);
  }

  core::Status WriteConfig(const Instance& in, const PlanLimits& plan, int node) const {
    const fs::path dir = NodeDir(in, node);
    std::string conf = "# Written by klutch; changes here are replaced.\n[mariadbd]\n";
    conf += fmt::format(
        "datadir={}\nsocket={}\npid-file={}\nlog-error={}\ninit-file={}\nport={}\n"
        "bind-address={}\nskip-name-resolve\nskip-symbolic-links\nlocal-infile=0\ntmpdir={}\n",
        OptionValue(DataDir(in, node).string()), OptionValue(Socket(in, node).string()),
        OptionValue((dir / "mariadbd.pid").string()), OptionValue((dir / "mariadbd.log").string()),
        OptionValue((dir / "init.sql").string()), in.ports[static_cast<size_t>(node)], ctx_.host,
        // Its own: a starting server deletes every #sql* file in its tmpdir, another server's
        // temporary tables (and a concurrent mariadb-install-db's) among them in a shared /tmp.
        OptionValue((dir / "tmp").string()));
    conf += fmt::format(
        "character-set-server=utf8mb4\ncollation-server=utf8mb4_unicode_ci\n"
        "innodb_log_file_size=16M\ninnodb_buffer_pool_size={}M\nmax_connections={}\n"
        // The caches of Aria and MyISAM (system tables, on-disk temporary tables) at 8 MB
        // rather than 128 MB each: a nano instance's RSS falls from about 100 MB to 25 MB.
        "aria_pagecache_buffer_size=8M\nkey_buffer_size=8M\ninnodb_log_buffer_size=4M\n",
        plan.shared_buffers_mb, plan.max_connections);
    conf += fmt::format(
        "server_id={}\nlog_bin=binlog\nbinlog_format=ROW\nrelay_log=relay\ngtid_strict_mode=ON\n",
        node + 1);
    conf += fmt::format("expire_logs_days={}\nmax_allowed_packet=1G\n", BinlogDays(in));
    if (node != in.primary) conf += "read_only=ON\n";
    if (plan.tls) {
      KLUTCH_RETURN_IF_ERROR(EnsureServerCertificate(ctx_, dir / "tls"));
      conf += fmt::format("ssl-cert={}\nssl-key={}\nssl-ca={}\n",
                          OptionValue((dir / "tls" / "server.crt").string()),
                          OptionValue((dir / "tls" / "server.key").string()),
                          OptionValue((dir / "tls" / "ca.crt").string()));
      if (!plan.tls_optional) conf += "require_secure_transport=ON\n";
    }
    std::error_code ec;
    if (!fs::exists(dir / "tmp")) {
      fs::create_directories(dir / "tmp", ec);
      if (ec) return core::Internal(fmt::format("create {}/tmp: {}", dir.string(), ec.message()));
      KLUTCH_RETURN_IF_ERROR(ChownTo(dir / "tmp", ctx_.user));
    }
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(Conf(in, node), conf));
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(
        ClientConf(in, node),
        fmt::format("[client]\nuser={}\npassword={}\nsocket={}\nmax_allowed_packet=1G\n",
                    kAdminUser, OptionValue(in.admin_password),
                    OptionValue(Socket(in, node).string()))));
    // Run at every start, before the server takes connections: the administrator and the
    // replication account exist with the instance's passwords, whatever happened to them.
    std::string init = fmt::format(
        "SET sql_log_bin=0;\n"
        "CREATE USER IF NOT EXISTS {0}@localhost IDENTIFIED BY PASSWORD {1};\n"
        "ALTER USER {0}@localhost IDENTIFIED BY PASSWORD {1} ACCOUNT UNLOCK;\n"
        "GRANT ALL PRIVILEGES ON *.* TO {0}@localhost WITH GRANT OPTION;\n"
        "CREATE USER IF NOT EXISTS {2}@{3} IDENTIFIED BY PASSWORD {4};\n"
        "ALTER USER {2}@{3} IDENTIFIED BY PASSWORD {4}{5};\n"
        "GRANT REPLICATION SLAVE ON *.* TO {2}@{3};\n",
        Literal(kAdminUser), Literal(NativePasswordHash(in.admin_password)),
        Literal(kReplicationUser), Literal(ctx_.host),
        Literal(NativePasswordHash(in.replication_password)), plan.tls ? " REQUIRE SSL" : "");
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "init.sql", init));
    for (const char* name : {"my.cnf", "client.cnf", "init.sql"}) {
      fs::permissions(dir / name, fs::perms::owner_read | fs::perms::owner_write);
    }
    // The server reads these; client.cnf (the administrator's password) is the owner's only.
    for (const char* name : {"my.cnf", "init.sql"}) {
      KLUTCH_RETURN_IF_ERROR(ChownTo(dir / name, ctx_.user));
    }
    return core::Status::Ok();
  }

  core::Status InitNode(const Instance& in, const PlanLimits& plan, int node) {
    const fs::path dir = NodeDir(in, node);
    if (fs::exists(dir / kInitializedMarker)) return WriteConfig(in, plan, node);
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    if (ec) return core::Internal(fmt::format("create {}: {}", dir.string(), ec.message()));
    fs::permissions(ctx_.InstanceDir(in.number),
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
    fs::permissions(dir, fs::perms::owner_all, ec);
    if (Socket(in, node).string().size() >= sizeof(sockaddr_un::sun_path)) {
      return core::Internal(fmt::format(
          "the state directory {} is too deep for MariaDB's socket; use a shorter --state-dir",
          ctx_.instances_dir.string()));
    }
    KLUTCH_RETURN_IF_ERROR(ChownTo(dir, ctx_.user));
    KLUTCH_RETURN_IF_ERROR(WriteConfig(in, plan, node));
    core::ProcessSpec install{
        .argv = {Tool("mariadb-install-db").string(), "--defaults-file=" + Conf(in, node).string(),
                 "--auth-root-authentication-method=socket", "--skip-test-db"},
        .user = ctx_.user,
        .output_file = dir / "install.log"};
    if (core::Status installed = RunTool(install, std::chrono::minutes(5)); !installed.ok()) {
      auto log = core::ReadFile(dir / "install.log");
      auto server = core::ReadFile(dir / "mariadbd.log");
      std::string tail =
          (log.ok() ? log->substr(0, 300) : "") + " ... " +
          (server.ok() ? server->substr(server->size() > 600 ? server->size() - 600 : 0) : "");
      return core::Internal(fmt::format("{} {}", installed.message(), core::Trim(tail)));
    }
    return core::WriteFileAtomic(dir / kInitializedMarker, "mariadb\n");
  }

  core::Status StartNode(const Instance& in, const PlanLimits& plan, int node, NodeRunner& runner) {
    return StartAndWait(ctx_, runner, in.id, node, Node(in, plan, node),
                        NodeDir(in, node) / "mariadbd.log", fmt::format("MariaDB node {}", node));
  }

  // Makes node `node` a replica of the primary: a new server, the bindings' accounts as the
  // primary has them, a consistent dump of the primary's databases (with the binary log
  // position it was taken at), then replication from there.
  core::Status AddReplica(const Instance& in, const PlanLimits& plan, int node,
                          NodeRunner& runner) {
    const fs::path dir = NodeDir(in, node);
    const bool seeded = fs::exists(dir / "seeded");
    KLUTCH_RETURN_IF_ERROR(InitNode(in, plan, node));
    KLUTCH_RETURN_IF_ERROR(StartNode(in, plan, node, runner));
    if (seeded) return core::Status::Ok();
    KLUTCH_ASSIGN_OR_RETURN(auto users, BindingUsers(in, in.primary));
    std::string accounts = "SET sql_log_bin=0;\n";
    for (const auto& user : users) {
      KLUTCH_ASSIGN_OR_RETURN(
          std::string create,
          Sql(in, in.primary, fmt::format("SHOW CREATE USER {}@'%';", Literal(user))));
      std::string_view statement = core::Trim(create);
      if (!statement.starts_with("CREATE USER ")) {
        return core::Internal(fmt::format("SHOW CREATE USER {}: unexpected answer {}", user,
                                          core::GoQuote(statement)));
      }
      accounts += fmt::format("CREATE USER IF NOT EXISTS {};\n", statement.substr(12));
      accounts += Grants(in, user);
    }
    // A seeding cut off after CHANGE MASTER left replication running: it starts over.
    KLUTCH_RETURN_IF_ERROR(Sql(in, node, "STOP SLAVE;\nRESET SLAVE ALL;\n" + accounts).status());
    KLUTCH_ASSIGN_OR_RETURN(core::ProcessSpec dump, Dump(in, in.primary, "/dev/stdout"));
    dump.argv.insert(dump.argv.begin() + 2, {"--gtid", "--master-data=1"});
    core::ProcessSpec load{.argv = {Tool("mariadb").string(),
                                    "--defaults-file=" + ClientConf(in, node).string(), "--batch",
                                    "--binary-mode", "--init-command=SET sql_log_bin=0"}};
    KLUTCH_RETURN_IF_ERROR(RunTools({dump, load}, std::chrono::hours(6)));
    KLUTCH_RETURN_IF_ERROR(
        Sql(in, node,
            fmt::format("CHANGE MASTER TO MASTER_HOST={}, MASTER_PORT={}, MASTER_USER={}, "
                        "MASTER_PASSWORD={}, MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1{};\n"
                        "START SLAVE;\n",
                        Literal(ctx_.host), in.ports[static_cast<size_t>(in.primary)],
                        Literal(kReplicationUser), Literal(in.replication_password),
                        plan.tls ? ", MASTER_SSL=1" : ""))
            .status());
    return core::WriteFileAtomic(dir / "seeded", "");
  }

  EngineContext ctx_;
  ActiveInstances restoring_;  // instances a Restore of this process runs on
};

}  // namespace
}  // namespace mariadb

std::unique_ptr<DataService> NewMariadbService(const EngineContext& context) {
  return std::make_unique<mariadb::MariadbService>(context);
}

}  // namespace klutch::engines
