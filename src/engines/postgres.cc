// The PostgreSQL engine: an instance is a primary (node 0) and, on replica plans, two
// streaming standbys, each a `postgres` server process of Debian's PostgreSQL 15 with its own
// data directory and loopback port, run as the engine user. Administration goes over
// loopback TCP as the instance's superuser `klutch_admin`, whose password stays in its
// owner's state (the broker's or the operator's).
//
// Data ownership: the instance's database and everything in it belong to the NOLOGIN role
// `<db>_owner`; a binding is a LOGIN role that is a member of it and whose sessions start
// with `SET ROLE <db>_owner`, so tables created through one binding belong to the instance
// and outlive the binding.
#include <fmt/format.h>
#include <libpq-fe.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <system_error>
#include <thread>

#include "core/file.h"
#include "core/log.h"
#include "core/random.h"
#include "core/strings.h"
#include "core/sync.h"
#include "engines/data_service.h"
#include "machinery/gofmt.h"
#include "machinery/object.h"

namespace klutch::engines {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr char kReplicator[] = "replicator";

// --- libpq -------------------------------------------------------------------------------

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};

class PgConnection {
 public:
  static core::Result<PgConnection> Open(const std::string& host, int port,
                                         const std::string& password, const std::string& db,
                                         std::string_view sslmode) {
    std::string conninfo = fmt::format(
        "host={} port={} user={} dbname={} connect_timeout=5 sslmode={} "
        "application_name=klutch",
        host, port, kAdminUser, db, sslmode);
    // The password goes through the parameter-keyword API, never through a logged string.
    const char* keys[] = {"dbname", "password", nullptr};
    const char* values[] = {conninfo.c_str(), password.c_str(), nullptr};
    std::unique_ptr<PGconn, ConnDeleter> conn(PQconnectdbParams(keys, values, 1));
    if (conn == nullptr || PQstatus(conn.get()) != CONNECTION_OK) {
      return core::Unavailable(fmt::format("connect to PostgreSQL at {}:{}: {}", host, port,
                                           conn
                                               ? std::string(core::Trim(PQerrorMessage(conn.get())))
                                               : std::string("out of memory")));
    }
    // Server notices ("... does not exist, skipping") are not the engine's output.
    PQsetNoticeProcessor(
        conn.get(), [](void*, const char*) {}, nullptr);
    return PgConnection(std::move(conn));
  }

  core::Status Exec(const std::string& sql) {
    std::unique_ptr<PGresult, ResultDeleter> res(PQexec(conn_.get(), sql.c_str()));
    auto status = PQresultStatus(res.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return core::Internal(
          fmt::format("PostgreSQL: {}", std::string(core::Trim(PQerrorMessage(conn_.get())))));
    }
    return core::Status::Ok();
  }

  core::Result<std::vector<std::vector<std::string>>> Query(const std::string& sql) {
    std::unique_ptr<PGresult, ResultDeleter> res(PQexec(conn_.get(), sql.c_str()));
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK) {
      return core::Internal(
          fmt::format("PostgreSQL: {}", std::string(core::Trim(PQerrorMessage(conn_.get())))));
    }
    std::vector<std::vector<std::string>> rows;
    for (int r = 0; r < PQntuples(res.get()); ++r) {
      std::vector<std::string> row;
      for (int c = 0; c < PQnfields(res.get()); ++c) row.emplace_back(PQgetvalue(res.get(), r, c));
      rows.push_back(std::move(row));
    }
    return rows;
  }

  std::string Ident(std::string_view s) {
    std::unique_ptr<char, decltype(&PQfreemem)> q(
        PQescapeIdentifier(conn_.get(), s.data(), s.size()), &PQfreemem);
    return q ? std::string(q.get()) : std::string();
  }
  // The SCRAM verifier of `password` for `user` as a literal: the server never sees the
  // password itself (not in query texts, pg_stat_activity or statement logs).
  core::Result<std::string> PasswordLiteral(const std::string& user, const std::string& password) {
    std::unique_ptr<char, decltype(&PQfreemem)> v(
        PQencryptPasswordConn(conn_.get(), password.c_str(), user.c_str(), "scram-sha-256"),
        &PQfreemem);
    if (v == nullptr) {
      return core::Internal(fmt::format("PostgreSQL: {}", core::Trim(PQerrorMessage(conn_.get()))));
    }
    return Literal(v.get());
  }
  std::string Literal(std::string_view s) {
    std::unique_ptr<char, decltype(&PQfreemem)> q(PQescapeLiteral(conn_.get(), s.data(), s.size()),
                                                  &PQfreemem);
    return q ? std::string(q.get()) : std::string();
  }

 private:
  explicit PgConnection(std::unique_ptr<PGconn, ConnDeleter> conn) : conn_(std::move(conn)) {}
  std::unique_ptr<PGconn, ConnDeleter> conn_;
};

// --- parameters --------------------------------------------------------------------------

enum class ParamKind { kInt, kMemory, kBoolOnOff, kEnum, kString, kStringList };

struct ParamRule {
  const char* broker_key;
  const char* setting;  // postgresql.conf name ("" = not a server setting)
  ParamKind kind;
  int64_t min = 0;
  int64_t max = 0;
  std::vector<std::string> values;  // kEnum (case-insensitive) / kStringList
  bool restart = false;             // the setting only changes with a server restart
  int64_t unit_kb = 1;              // kMemory: the setting's unit (min and max count these)
  bool zero_disables = false;       // kInt: 0 turns the feature off, below min
};

const std::vector<ParamRule>& Rules() {
  static const std::vector<std::string> kLevels = {"DEBUG5", "DEBUG4", "DEBUG3", "DEBUG2",
                                                   "DEBUG1", "INFO",   "NOTICE", "WARNING",
                                                   "ERROR",  "LOG",    "FATAL",  "PANIC"};
  static const std::vector<ParamRule> rules = {
      {"max_connections", "max_connections", ParamKind::kInt, 10, 10000, {}, true},
      {"effective_cache_size",
       "effective_cache_size",
       ParamKind::kMemory,
       1,
       INT32_MAX,
       {},
       false,
       8},
      {"work_mem", "work_mem", ParamKind::kMemory, 64, INT32_MAX, {}},
      {"maintenance_work_mem", "maintenance_work_mem", ParamKind::kMemory, 1024, INT32_MAX, {}},
      {"temp_file_limit", "temp_file_limit", ParamKind::kInt, -1, INT32_MAX, {}},
      {"track_io_timing", "track_io_timing", ParamKind::kBoolOnOff, 0, 0, {}},
      {"archive_timeout", "archive_timeout", ParamKind::kInt, 10, 1073741823, {}, false, 1, true},
      {"statement_timeout", "statement_timeout", ParamKind::kInt, 0, INT32_MAX, {}},
      {"idle_in_transaction_session_timeout",
       "idle_in_transaction_session_timeout",
       ParamKind::kInt,
       0,
       INT32_MAX,
       {}},
      {"wal_level_logical", "wal_level", ParamKind::kBoolOnOff, 0, 0, {}, true},
      {"wal_writer_delay", "wal_writer_delay", ParamKind::kInt, 1, 10000, {}},
      {"max_replication_slots", "max_replication_slots", ParamKind::kInt, 0, 1000, {}, true},
      {"max_wal_senders", "max_wal_senders", ParamKind::kInt, 0, 1000, {}, true},
      {"synchronous_commit",
       "synchronous_commit",
       ParamKind::kEnum,
       0,
       0,
       {"on", "off", "local", "remote_write", "remote_apply"}},
      {"client_min_messages",
       "client_min_messages",
       ParamKind::kEnum,
       0,
       0,
       {"DEBUG5", "DEBUG4", "DEBUG3", "DEBUG2", "DEBUG1", "LOG", "NOTICE", "WARNING", "ERROR"}},
      {"pg_log_min_messages", "log_min_messages", ParamKind::kEnum, 0, 0, kLevels},
      {"pg_log_min_error_statement", "log_min_error_statement", ParamKind::kEnum, 0, 0, kLevels},
      {"log_statement", "log_statement", ParamKind::kEnum, 0, 0, {"none", "ddl", "mod", "all"}},
      {"log_error_verbosity",
       "log_error_verbosity",
       ParamKind::kEnum,
       0,
       0,
       {"TERSE", "DEFAULT", "VERBOSE"}},
      {"max_locks_per_transaction",
       "max_locks_per_transaction",
       ParamKind::kInt,
       10,
       INT32_MAX,
       {},
       true},
      {"ssl_ciphers", "ssl_ciphers", ParamKind::kString, 0, 0, {}},
      {"ssl_min_protocol_version",
       "ssl_min_protocol_version",
       ParamKind::kEnum,
       0,
       0,
       {"TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"}},
      {"data_checksums", "", ParamKind::kEnum, 0, 0, {"enabled", "disabled"}},
      {"role_privileges", "", ParamKind::kStringList, 0, 0, {"CREATEDB"}},
  };
  return rules;
}

const ParamRule* FindRule(std::string_view key) {
  for (const auto& r : Rules()) {
    if (key == r.broker_key) return &r;
  }
  return nullptr;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::optional<int64_t> AsInt(const Json& v) {
  if (const auto* i = v.get_ptr<const int64_t*>()) return *i;
  if (const auto* u = v.get_ptr<const uint64_t*>()) {
    if (*u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(*u);
  }
  if (const auto* s = v.get_ptr<const std::string*>()) {
    return core::ParseInt64(*s);
  }
  return std::nullopt;
}

std::optional<bool> AsBool(const Json& v) {
  if (const auto* b = v.get_ptr<const bool*>()) return *b;
  if (const auto* s = v.get_ptr<const std::string*>()) {
    if (EqualsIgnoreCase(*s, "on") || EqualsIgnoreCase(*s, "true")) return true;
    if (EqualsIgnoreCase(*s, "off") || EqualsIgnoreCase(*s, "false")) return false;
  }
  return std::nullopt;
}

// A memory string ("64MB") in the setting's units as PostgreSQL rounds it (to the nearest
// unit); INT64_MAX when it overflows; nullopt when it is no such string.
std::optional<int64_t> MemoryUnits(const Json& value, const ParamRule& rule) {
  const auto* s = value.get_ptr<const std::string*>();
  static const std::regex kMemory("^([1-9][0-9]{0,18})(kB|MB|GB|TB)$");
  std::smatch m;
  if (s == nullptr || !std::regex_match(*s, m, kMemory)) return std::nullopt;
  auto number = core::ParseInt64(m[1].str());
  if (!number) return INT64_MAX;
  std::string unit = m[2].str();
  int64_t factor = unit == "kB"   ? 1
                   : unit == "MB" ? 1024
                   : unit == "GB" ? 1024 * 1024
                                  : 1024LL * 1024 * 1024;
  int64_t kb = 0;
  if (__builtin_mul_overflow(*number, factor, &kb)) return INT64_MAX;
  return kb / rule.unit_kb + (kb % rule.unit_kb * 2 >= rule.unit_kb ? 1 : 0);
}

core::Status CheckIntRange(const std::string& key, const Json& value, const ParamRule& rule) {
  auto v = AsInt(value);
  if (rule.zero_disables && v == 0) return core::Status::Ok();
  if (!v || *v < rule.min || *v > rule.max) {
    return core::Invalid(fmt::format("parameter {}: {} is not {}an integer from {} to {}", key,
                                     machinery::GoSprint(value),
                                     rule.zero_disables ? "0 (off) or " : "", rule.min, rule.max));
  }
  return core::Status::Ok();
}

core::Status CheckParameter(const std::string& key, const Json& value) {
  const ParamRule* rule = FindRule(key);
  if (rule == nullptr) {
    std::vector<std::string> known;
    for (const auto& r : Rules()) known.emplace_back(r.broker_key);
    return core::Invalid(fmt::format("unknown parameter {}; PostgreSQL instances accept {}",
                                     core::GoQuote(key), core::Join(known, ", ")));
  }
  if (value.is_null()) return core::Status::Ok();  // reset to the default
  switch (rule->kind) {
    case ParamKind::kInt:
      return CheckIntRange(key, value, *rule);
    case ParamKind::kMemory: {
      // An integer (the setting's unit, kB or 8 kB pages) or a number with a unit: "64MB".
      std::string unit = rule->unit_kb == 1 ? "kB" : fmt::format("{}kB", rule->unit_kb);
      std::string range =
          fmt::format("from {} to {} (units of {}; or a number with kB, MB, GB or TB)", rule->min,
                      rule->max, unit);
      if (AsInt(value)) {
        auto v = AsInt(value);
        if (*v < rule->min || *v > rule->max) {
          return core::Invalid(fmt::format("parameter {}: {} is out of range: PostgreSQL takes {}",
                                           key, machinery::Dump(value), range));
        }
        return core::Status::Ok();
      }
      auto units = MemoryUnits(value, *rule);
      if (!units) {
        return core::Invalid(
            fmt::format("parameter {}: {} is not an amount of memory such as 4096 (kB) or \"64MB\"",
                        key, machinery::Dump(value)));
      }
      if (*units < rule->min || *units > rule->max) {
        return core::Invalid(fmt::format("parameter {}: {} is out of range: PostgreSQL takes {}",
                                         key, machinery::Dump(value), range));
      }
      return core::Status::Ok();
    }
    case ParamKind::kBoolOnOff:
      if (!AsBool(value)) {
        return core::Invalid(fmt::format("parameter {}: {} is not on/off (or true/false)", key,
                                         machinery::GoSprint(value)));
      }
      return core::Status::Ok();
    case ParamKind::kEnum: {
      const auto* s = value.get_ptr<const std::string*>();
      if (s != nullptr) {
        for (const auto& allowed : rule->values) {
          if (EqualsIgnoreCase(*s, allowed)) return core::Status::Ok();
        }
      }
      return core::Invalid(fmt::format("parameter {}: {} is not one of {}", key,
                                       machinery::GoSprint(value), core::Join(rule->values, ", ")));
    }
    case ParamKind::kStringList: {
      bool ok = value.is_array();
      if (ok) {
        for (const auto& item : value) {
          const auto* s = item.get_ptr<const std::string*>();
          ok = ok && s != nullptr &&
               std::any_of(rule->values.begin(), rule->values.end(),
                           [&](const std::string& a) { return EqualsIgnoreCase(*s, a); });
        }
      }
      if (!ok) {
        return core::Invalid(
            fmt::format("parameter {}: must be a list of {} (CREATEROLE and REPLICATION are not "
                        "granted: they would reach the server's files and every database on it)",
                        key, core::Join(rule->values, ", ")));
      }
      return core::Status::Ok();
    }
    case ParamKind::kString: {
      // Written into the configuration quoted (ConfString); control characters would still
      // end the line.
      const auto* s = value.get_ptr<const std::string*>();
      bool printable =
          s != nullptr && s->size() <= 1024 && std::all_of(s->begin(), s->end(), [](char c) {
            return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
          });
      if (!printable) {
        return core::Invalid(
            fmt::format("parameter {}: {} must be a string of at most 1024 printable characters",
                        key, machinery::GoSprint(value)));
      }
      return core::Status::Ok();
    }
  }
  return core::Status::Ok();
}

bool Rejoining(const Instance& in, int node) {
  return std::find(in.rejoining.begin(), in.rejoining.end(), node) != in.rejoining.end();
}

// How the engine's own connections (and its tools') use TLS with the instance.
std::string_view SslMode(const PlanLimits& plan) {
  if (!plan.tls) return "disable";
  return plan.tls_optional ? "prefer" : "require";
}

std::string ConfString(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "''";
    else if (c == '\\')
      out += "\\\\";
    else
      out += c;
  }
  return out + "'";
}

// The settings of `klutch.conf` for one node, in a fixed order; restart-only ones are
// collected in `restart_settings` so that a change can be told from a reload.
std::string RenderConfig(const EngineContext& ctx, const Instance& in, const PlanLimits& plan,
                         int node, std::string* restart_settings) {
  fs::path node_dir = ctx.NodeDir(in.number, node);
  std::map<std::string, std::string> settings;
  std::set<std::string> restart = {
      "shared_buffers",        "max_connections",           "wal_level", "max_wal_senders",
      "max_replication_slots", "max_locks_per_transaction", "port",      "ssl"};
  settings["listen_addresses"] = ConfString(ctx.host);
  settings["port"] = std::to_string(in.ports[static_cast<size_t>(node)]);
  settings["unix_socket_directories"] = "''";
  settings["shared_buffers"] = ConfString(fmt::format("{}MB", plan.shared_buffers_mb));
  settings["max_connections"] = std::to_string(plan.max_connections);
  settings["wal_level"] = "replica";
  settings["max_wal_senders"] = "10";
  settings["wal_keep_size"] = ConfString("256MB");
  settings["hot_standby"] = "on";
  settings["logging_collector"] = "off";
  settings["dynamic_shared_memory_type"] = "posix";
  if (plan.tls) {
    settings["ssl"] = "on";
    settings["ssl_cert_file"] = ConfString((node_dir / "tls" / "server.crt").string());
    settings["ssl_key_file"] = ConfString((node_dir / "tls" / "server.key").string());
    settings["ssl_ca_file"] = ConfString((node_dir / "tls" / "ca.crt").string());
  } else {
    settings["ssl"] = "off";
  }
  for (const auto& [key, value] : in.parameters.items()) {
    const ParamRule* rule = FindRule(key);
    if (rule == nullptr || std::string_view(rule->setting).empty() || value.is_null()) continue;
    // Parameters were checked when they came in; one a record holds from before a check
    // existed is left out rather than written.
    if (!CheckParameter(key, value).ok()) continue;
    std::string rendered;
    if (key == "wal_level_logical") {
      rendered = AsBool(value).value_or(false) ? "logical" : "replica";
    } else if (rule->kind == ParamKind::kInt ||
               (rule->kind == ParamKind::kMemory && AsInt(value))) {
      int64_t v = AsInt(value).value_or(0);
      // A plan's size is a limit: parameters may lower max_connections, not raise it; and
      // replica plans keep enough WAL senders for their standbys and a base backup.
      if (key == "max_connections") v = std::min<int64_t>(v, plan.max_connections);
      if (key == "max_wal_senders") v = std::max<int64_t>(v, plan.nodes + 2);
      rendered = std::to_string(v);
    } else if (rule->kind == ParamKind::kBoolOnOff) {
      rendered = AsBool(value).value_or(false) ? "on" : "off";
    } else if (const auto* s = value.get_ptr<const std::string*>()) {
      rendered = ConfString(*s);
    } else {
      continue;
    }
    settings[rule->setting] = rendered;
  }
  if (node != in.primary) {
    settings["primary_conninfo"] = ConfString(
        fmt::format("host={} port={} user={} password={} application_name=node{} sslmode={}",
                    ctx.host, in.ports[static_cast<size_t>(in.primary)], kReplicator,
                    in.replication_password, node, SslMode(plan)));
  } else if (plan.synchronous_standby && plan.nodes > 1) {
    // A commit returns once one standby has the WAL on disk: promoting the standby that has
    // received the most loses no acknowledged commit.
    std::vector<std::string> names;
    for (int other = 0; other < plan.nodes; ++other) {
      if (other != in.primary) names.push_back(fmt::format("node{}", other));
    }
    settings["synchronous_standby_names"] =
        ConfString(fmt::format("ANY 1 ({})", core::Join(names, ", ")));
  }
  std::string out = "# Written by klutch; changes here are replaced.\n";
  for (const auto& [k, v] : settings) {
    out += fmt::format("{} = {}\n", k, v);
    if (restart_settings != nullptr && restart.contains(k)) {
      *restart_settings += fmt::format("{} = {}\n", k, v);
    }
  }
  return out;
}

std::string RenderHba(const Instance& in, const PlanLimits& plan) {
  return fmt::format(
      "# Written by klutch.\n"
      "host    all          {}  127.0.0.1/32  scram-sha-256\n"
      "host    replication  {}    127.0.0.1/32  scram-sha-256\n"
      "{}  {}  all  127.0.0.1/32  scram-sha-256\n",
      kAdminUser, kReplicator, plan.tls && !plan.tls_optional ? "hostssl" : "host   ", in.database);
}

std::string OwnerRole(const Instance& in) { return in.database + "_owner"; }

class PostgresService final : public DataService {
 public:
  explicit PostgresService(EngineContext ctx) : ctx_(std::move(ctx)) {}

  fs::path NodeDir(const Instance& in, int node) const { return ctx_.NodeDir(in.number, node); }
  fs::path DataDir(const Instance& in, int node) const { return NodeDir(in, node) / "data"; }

  NodeSpec Node(const Instance& in, const PlanLimits& plan, int index) const override {
    NodeSpec spec;
    spec.process.argv = {(ctx_.postgres_bin / "postgres").string(), "-D",
                         DataDir(in, index).string()};
    spec.process.user = ctx_.user;
    spec.process.output_file = NodeDir(in, index) / "postgres.log";
    spec.pid_file = DataDir(in, index) / "postmaster.pid";
    spec.match = DataDir(in, index).string();
    spec.stop_signal = SIGINT;
    // A cluster that fails over promotes a standby when its primary dies; restarting the old
    // primary in place as well would make two.
    spec.restart = !(ctx_.failover && plan.nodes > 1 && index == in.primary);
    std::string host = ctx_.host;
    int port = in.ports[static_cast<size_t>(index)];
    bool tls = plan.tls;
    spec.ready = [host, port, tls] {
      std::string conninfo =
          fmt::format("host={} port={} dbname=postgres connect_timeout=1 sslmode={}", host, port,
                      tls ? "prefer" : "disable");
      return PQping(conninfo.c_str()) == PQPING_OK;
    };
    return spec;
  }

  core::Status ValidateParameters(const Json& parameters) const override {
    if (!parameters.is_object()) return core::Invalid("parameters must be a JSON object");
    for (const auto& [key, value] : parameters.items()) {
      KLUTCH_RETURN_IF_ERROR(CheckParameter(key, value));
    }
    return core::Status::Ok();
  }

  core::Status Provision(Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    // Commits wait for a synchronous standby only once there are standbys.
    PlanLimits building = plan;
    building.synchronous_standby = false;
    KLUTCH_RETURN_IF_ERROR(InitPrimary(in, building));
    KLUTCH_RETURN_IF_ERROR(StartNode(in, building, in.primary, runner));
    KLUTCH_RETURN_IF_ERROR(SetUpAccounts(in, building));
    for (int node = 0; node < plan.nodes; ++node) {
      if (node == in.primary) continue;
      KLUTCH_RETURN_IF_ERROR(InitStandby(in, plan, node));
      KLUTCH_RETURN_IF_ERROR(StartNode(in, plan, node, runner));
    }
    return ApplyPrimarySettings(in, plan);
  }

  // The primary first; a former primary waiting to rejoin is never started as it is (it could
  // accept writes beside the new primary): Rejoin makes it a standby first.
  core::Status Start(const Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    std::vector<int> order = {in.primary};
    for (int node = 0; node < plan.nodes && node < static_cast<int>(in.ports.size()); ++node) {
      if (node != in.primary) order.push_back(node);
    }
    for (int node : order) {
      if (Rejoining(in, node) || !fs::exists(DataDir(in, node) / kInitializedMarker)) continue;
      KLUTCH_RETURN_IF_ERROR(StartNode(in, plan, node, runner));
    }
    return core::Status::Ok();
  }

  core::Status Update(Instance& in, const PlanLimits& from, const PlanLimits& to,
                      NodeRunner& runner) override {
    // A standby refuses to start with fewer connections or WAL senders than its primary
    // has: when a limit (the plan's or a parameter) goes down, restart the primary first;
    // otherwise the standbys first.
    int old_nodes = std::min<int>(from.nodes, static_cast<int>(in.ports.size()));
    std::vector<int> order = {in.primary};
    for (int node = 0; node < old_nodes; ++node) {
      if (node != in.primary && !Rejoining(in, node)) order.push_back(node);
    }
    if (!LowersStandbyLimits(in, to)) std::reverse(order.begin(), order.end());
    // After the primary restarted with lower limits, a standby starts with them only once it
    // has replayed the primary's record of the change (a standby checks its control file).
    std::string primary_lsn;
    // Growing from one node: the primary waits for standbys only once they exist.
    PlanLimits config = to;
    if (old_nodes < to.nodes && old_nodes < 2) config.synchronous_standby = false;
    for (int node : order) {
      std::string restart_before;
      std::string restart_after;
      auto old_conf = core::ReadFile(DataDir(in, node) / "klutch.restart");
      if (old_conf.ok()) restart_before = *old_conf;
      if (node != in.primary && !primary_lsn.empty()) {
        KLUTCH_RETURN_IF_ERROR(WaitReplayed(in, node, primary_lsn, SslMode(to)));
      }
      KLUTCH_RETURN_IF_ERROR(WriteConfig(in, config, node, &restart_after));
      // A node restarted by the supervisor since also runs the new settings, but only a
      // start through StartNode records that: compare with what the last such start had.
      bool reloaded = false;
      if (restart_before == restart_after) {
        auto conn = Connect(in, node, "postgres", SslMode(to));
        reloaded = conn.ok() && conn->Exec("SELECT pg_reload_conf()").ok();
      }
      // Restart-only settings change with a restart; so do all of them on a node that does
      // not answer (one a failed update left restarting, being rolled back).
      if (!reloaded) {
        runner.Stop(in.id, node);
        KLUTCH_RETURN_IF_ERROR(StartNode(in, to, node, runner));
        if (node == in.primary && order.front() == in.primary && old_nodes > 1) {
          KLUTCH_ASSIGN_OR_RETURN(auto conn, Connect(in, in.primary, "postgres", SslMode(to)));
          KLUTCH_ASSIGN_OR_RETURN(auto rows, conn.Query("SELECT pg_current_wal_lsn()"));
          if (!rows.empty()) primary_lsn = rows[0][0];
        }
      }
    }
    for (int node = old_nodes; node < to.nodes; ++node) {
      KLUTCH_RETURN_IF_ERROR(InitStandby(in, to, node));
      KLUTCH_RETURN_IF_ERROR(StartNode(in, to, node, runner));
    }
    if (old_nodes >= to.nodes) return core::Status::Ok();
    if (ctx_.failover) {
      // The primary of a cluster that fails over is not restarted in place any more: watched
      // again with that (the running process adopted).
      KLUTCH_RETURN_IF_ERROR(runner.Start(in.id, in.primary, Node(in, to, in.primary)));
    }
    return ApplyPrimarySettings(in, to);
  }

  // The primary's configuration as `plan` has it (synchronous standbys included), reloaded.
  core::Status ApplyPrimarySettings(const Instance& in, const PlanLimits& plan) {
    if (!plan.synchronous_standby) return core::Status::Ok();
    KLUTCH_RETURN_IF_ERROR(WriteConfig(in, plan, in.primary, nullptr));
    KLUTCH_ASSIGN_OR_RETURN(auto conn, Connect(in, in.primary, "postgres", SslMode(plan)));
    return conn.Exec("SELECT pg_reload_conf()");
  }

  core::Result<int> ChooseNewPrimary(const Instance& in, const PlanLimits& plan,
                                     bool every_standby) override {
    int best = -1;
    int64_t best_lsn = -1;
    std::string last = "no standby answers";
    for (int node = 0; node < plan.nodes && node < static_cast<int>(in.ports.size()); ++node) {
      if (node == in.primary || Rejoining(in, node)) continue;
      auto conn = Connect(in, node, "postgres", SslMode(plan));
      if (!conn.ok()) {
        if (every_standby) {
          return core::Unavailable(
              fmt::format("standby {} does not answer yet: {}", node, conn.status().message()));
        }
        last = conn.status().message();
        continue;
      }
      // What the standby has received (streamed), else replayed; a node no longer in recovery
      // was promoted already (a failover interrupted after its promotion): it is the one.
      auto rows = conn->Query(
          "SELECT pg_is_in_recovery(), pg_wal_lsn_diff(coalesce(pg_last_wal_receive_lsn(), "
          "pg_last_wal_replay_lsn(), pg_current_wal_lsn()), '0/0')::bigint");
      if (!rows.ok() || rows->empty()) continue;
      if ((*rows)[0][0] == "f") return node;
      int64_t lsn = core::ParseInt64((*rows)[0][1]).value_or(0);
      if (lsn > best_lsn) {
        best = node;
        best_lsn = lsn;
      }
    }
    if (best < 0) return core::Unavailable("no standby to promote: " + last);
    return best;
  }

  core::Status Promote(const Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    {
      KLUTCH_ASSIGN_OR_RETURN(auto conn, Connect(in, in.primary, "postgres", SslMode(plan)));
      KLUTCH_ASSIGN_OR_RETURN(auto rows, conn.Query("SELECT pg_is_in_recovery()"));
      if (!rows.empty() && rows[0][0] == "t") {
        KLUTCH_ASSIGN_OR_RETURN(auto promoted, conn.Query("SELECT pg_promote(true, 60)"));
        if (promoted.empty() || promoted[0][0] != "t") {
          return core::Unavailable(
              fmt::format("PostgreSQL node {} did not finish its promotion in time", in.primary));
        }
      }
      KLUTCH_RETURN_IF_ERROR(WriteConfig(in, plan, in.primary, nullptr));
      KLUTCH_RETURN_IF_ERROR(conn.Exec("SELECT pg_reload_conf()"));
    }
    // Watched again as the primary it is now (the running process adopted, not restarted).
    KLUTCH_RETURN_IF_ERROR(runner.Start(in.id, in.primary, Node(in, plan, in.primary)));
    for (int node = 0; node < plan.nodes && node < static_cast<int>(in.ports.size()); ++node) {
      if (node == in.primary || Rejoining(in, node)) continue;
      KLUTCH_RETURN_IF_ERROR(WriteConfig(in, plan, node, nullptr));
      // primary_conninfo takes effect on reload; a node that does not answer reads it when it
      // starts.
      auto conn = Connect(in, node, "postgres", SslMode(plan));
      if (conn.ok()) (void)conn->Exec("SELECT pg_reload_conf()");
    }
    return core::Status::Ok();
  }

  core::Status Rejoin(const Instance& in, const PlanLimits& plan, int node,
                      NodeRunner& runner) override {
    if (node == in.primary) return core::Invalid("the primary cannot rejoin itself");
    runner.Stop(in.id, node);
    std::error_code ec;
    fs::remove(DataDir(in, node) / kInitializedMarker, ec);
    KLUTCH_RETURN_IF_ERROR(InitStandby(in, plan, node));
    return StartNode(in, plan, node, runner);
  }

  StandbyState InspectStandby(const Instance& in, const PlanLimits& plan, int node) override {
    StandbyState state;
    auto conn = Connect(in, node, "postgres", SslMode(plan));
    if (!conn.ok()) return state;
    auto rows = conn->Query(
        "SELECT pg_is_in_recovery(), EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = "
        "'streaming'), coalesce(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0'), 0)::bigint");
    if (!rows.ok() || rows->empty()) return state;
    state.answers = true;
    state.primary = (*rows)[0][0] == "f";
    state.streaming = (*rows)[0][1] == "t";
    state.replayed = core::ParseInt64((*rows)[0][2]).value_or(0);
    return state;
  }

  core::Result<fs::path> SetAside(const Instance& in, int node, NodeRunner& runner) override {
    if (node == in.primary) return core::Invalid("the primary's data is not set aside");
    runner.Stop(in.id, node);
    const fs::path kept = NodeDir(in, node) / "diverged";
    // Only a whole data directory is kept: none (set aside already, by a call that was
    // interrupted before the rebuild) or half a base backup (a rebuild interrupted) is not.
    if (!fs::exists(DataDir(in, node) / kInitializedMarker)) {
      return fs::exists(kept) ? kept : fs::path();
    }
    std::error_code ec;
    fs::remove_all(kept, ec);
    if (ec) return core::Internal(fmt::format("remove {}: {}", kept.string(), ec.message()));
    fs::rename(DataDir(in, node), kept, ec);
    if (ec) {
      return core::Internal(fmt::format("move {} to {}: {}", DataDir(in, node).string(),
                                        kept.string(), ec.message()));
    }
    return kept;
  }

  // Waits (up to ready_timeout) until standby `node` has replayed the primary's WAL up to
  // `lsn`.
  core::Status WaitReplayed(const Instance& in, int node, const std::string& lsn,
                            std::string_view sslmode) {
    auto deadline = std::chrono::steady_clock::now() + ctx_.ready_timeout;
    std::string last = "no answer";
    while (std::chrono::steady_clock::now() < deadline) {
      auto conn = Connect(in, node, "postgres", sslmode);
      if (conn.ok()) {
        auto rows = conn->Query(fmt::format(
            "SELECT coalesce(pg_last_wal_replay_lsn() >= {}::pg_lsn, false)", conn->Literal(lsn)));
        if (rows.ok() && !rows->empty() && (*rows)[0][0] == "t") return core::Status::Ok();
        last = rows.ok() ? "behind" : rows.status().message();
      } else {
        last = conn.status().message();
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return core::Unavailable(
        fmt::format("PostgreSQL standby {} did not replay the primary's WAL up to {} in time ({})",
                    node, lsn, last));
  }

  // Whether the primary's new settings have fewer connections or WAL senders than the ones
  // it last started with (klutch.restart).
  bool LowersStandbyLimits(const Instance& in, const PlanLimits& to) const {
    auto before = core::ReadFile(DataDir(in, in.primary) / "klutch.restart");
    if (!before.ok()) return false;
    std::string after;
    (void)RenderConfig(ctx_, in, to, in.primary, &after);
    auto value = [](const std::string& settings, std::string_view key) -> std::optional<int64_t> {
      for (auto line : core::Split(settings, '\n')) {
        auto eq = line.find(" = ");
        if (eq != std::string_view::npos && line.substr(0, eq) == key) {
          return core::ParseInt64(core::Trim(line.substr(eq + 3)));
        }
      }
      return std::nullopt;
    };
    for (std::string_view key : {"max_connections", "max_wal_senders"}) {
      auto old_value = value(*before, key);
      auto new_value = value(after, key);
      if (old_value && new_value && *new_value < *old_value) return true;
    }
    return false;
  }

  core::Result<Json> Bind(const Instance& in, const PlanLimits& plan,
                          const Account& binding) override {
    KLUTCH_ASSIGN_OR_RETURN(auto conn, Connect(in, in.primary, "postgres", SslMode(plan)));
    std::string privileges;
    if (const Json* list = machinery::Find(in.parameters, {"role_privileges"});
        list != nullptr && list->is_array()) {
      for (const auto& p : *list) {
        if (const auto* s = p.get_ptr<const std::string*>()) {
          for (const auto& allowed : {"CREATEDB"}) {
            if (EqualsIgnoreCase(*s, allowed)) privileges += std::string(" ") + allowed;
          }
        }
      }
    }
    std::string role = conn.Ident(binding.username);
    std::string owner = conn.Ident(OwnerRole(in));
    KLUTCH_ASSIGN_OR_RETURN(std::string password,
                            conn.PasswordLiteral(binding.username, binding.password));
    KLUTCH_ASSIGN_OR_RETURN(auto rows,
                            conn.Query(fmt::format("SELECT 1 FROM pg_roles WHERE rolname = {}",
                                                   conn.Literal(binding.username))));
    if (rows.empty()) {
      KLUTCH_RETURN_IF_ERROR(conn.Exec(fmt::format("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}{}",
                                                   role, password, owner, privileges)));
    } else {
      KLUTCH_RETURN_IF_ERROR(
          conn.Exec(fmt::format("ALTER ROLE {} LOGIN PASSWORD {}", role, password)));
    }
    KLUTCH_RETURN_IF_ERROR(
        conn.Exec(fmt::format("ALTER ROLE {} SET role = {}", role, conn.Literal(OwnerRole(in)))));
    int port = in.ports[static_cast<size_t>(in.primary)];
    Json credentials = {
        {"host", ctx_.host},
        {"hosts", Json::array({ctx_.host})},
        {"name", in.database},
        {"password", binding.password},
        {"port", port},
        {"uri",
         fmt::format("postgres://{}:{}@{}:{}/{}{}", binding.username, binding.password, ctx_.host,
                     port, in.database, plan.tls && !plan.tls_optional ? "?sslmode=require" : "")},
        {"username", binding.username}};
    if (plan.tls) credentials["cacrt"] = ctx_.ca_pem;
    return credentials;
  }

  core::Status Unbind(const Instance& in, const PlanLimits& plan, const Account& binding) override {
    const std::string_view sslmode = SslMode(plan);
    KLUTCH_ASSIGN_OR_RETURN(auto conn, Connect(in, in.primary, "postgres", sslmode));
    KLUTCH_ASSIGN_OR_RETURN(auto rows,
                            conn.Query(fmt::format("SELECT 1 FROM pg_roles WHERE rolname = {}",
                                                   conn.Literal(binding.username))));
    if (rows.empty()) return core::Status::Ok();
    std::string role = conn.Ident(binding.username);
    // No new sessions, then end the open ones: the old password stops working at once.
    KLUTCH_RETURN_IF_ERROR(conn.Exec(fmt::format("ALTER ROLE {} NOLOGIN", role)));
    KLUTCH_RETURN_IF_ERROR(conn.Exec(
        fmt::format("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = {}",
                    conn.Literal(binding.username))));
    {
      KLUTCH_ASSIGN_OR_RETURN(auto db, Connect(in, in.primary, in.database, sslmode));
      KLUTCH_RETURN_IF_ERROR(
          db.Exec(fmt::format("REASSIGN OWNED BY {} TO {}", role, db.Ident(OwnerRole(in)))));
      KLUTCH_RETURN_IF_ERROR(db.Exec(fmt::format("DROP OWNED BY {}", role)));
    }
    return conn.Exec(fmt::format("DROP ROLE IF EXISTS {}", role));
  }

  core::Status Backup(const Instance& in, const PlanLimits& plan, const fs::path& out) override {
    core::ProcessSpec spec;
    spec.argv = {(ctx_.postgres_bin / "pg_dump").string(),
                 "--format=custom",
                 "--no-sync",
                 "--host",
                 ctx_.host,
                 "--port",
                 std::to_string(in.ports[static_cast<size_t>(in.primary)]),
                 "--username",
                 kAdminUser,
                 "--dbname",
                 in.database,
                 "--file",
                 out.string()};
    spec.env = {"PGPASSWORD=" + in.admin_password, "PGSSLMODE=" + std::string(SslMode(plan)),
                "PGCONNECT_TIMEOUT=10"};
    return RunTool(std::move(spec), std::chrono::hours(6));
  }

  // Restores in place, in one transaction: everything the owner role and the bindings own
  // is dropped and the dump recreated as the owner, so that the database holds exactly the
  // backup's data (tables created since are gone) and a failed restore changes nothing. The
  // dump's owners and grants (which may name rotated-away binding roles) are skipped.
  // Meanwhile the database is closed to the bindings (they get "permission denied for
  // database"); a marker file says so until it is open again, for EnforceQuota to reopen it
  // should the operator die midway.
  core::Status Restore(const Instance& in, const PlanLimits& plan, const fs::path& file,
                       NodeRunner& /*runner*/) override {
    const std::string_view sslmode = SslMode(plan);
    KLUTCH_ASSIGN_OR_RETURN(auto conn, Connect(in, in.primary, "postgres", sslmode));
    const std::string owner = conn.Ident(OwnerRole(in));
    // EnforceQuota leaves the database closed while this runs (also beside a bind).
    ActiveInstances::Guard restoring(restoring_, in.id);

    const fs::path closed = ctx_.InstanceDir(in.number) / "closed-for-restore";
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(closed, ""));
    KLUTCH_RETURN_IF_ERROR(conn.Exec(
        fmt::format("REVOKE CONNECT ON DATABASE {} FROM {}", conn.Ident(in.database), owner)));
    // Waits (up to 10 s each) for the sessions to end: their locks would hold the restore up.
    core::Status status = conn.Exec(fmt::format(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = {} AND "
        "pid <> pg_backend_pid() AND usename <> {}",
        conn.Literal(in.database), conn.Literal(kAdminUser)));
    if (status.ok()) {
      // pg_restore's script begins the transaction and ends it with COMMIT: a pg_restore that
      // dies midway never commits, and psql stops at the first error; both roll back. (psql
      // must not get --single-transaction: at the end of a cut-off script it would commit.)
      // The owner and its members (the bindings) are listed inside the transaction, so that a
      // binding made or removed meanwhile is no surprise.
      const std::string prelude = fmt::format(
          "BEGIN; DO $klutch_restore$ BEGIN EXECUTE (SELECT 'DROP OWNED BY ' || "
          "string_agg(quote_ident(rolname), ', ') FROM pg_roles WHERE rolname = {0} OR oid IN "
          "(SELECT m.member FROM pg_auth_members m JOIN pg_roles o ON o.oid = m.roleid WHERE "
          "o.rolname = {0})); END $klutch_restore$; GRANT CONNECT, TEMPORARY ON DATABASE {1} TO "
          "{2}; CREATE SCHEMA IF NOT EXISTS public AUTHORIZATION {2}; SET ROLE {2}",
          conn.Literal(OwnerRole(in)), conn.Ident(in.database), owner);
      core::ProcessSpec dump{.argv = {(ctx_.postgres_bin / "pg_restore").string(), "--no-owner",
                                      "--no-privileges", "--single-transaction", "--exit-on-error",
                                      "--file=-", file.string()}};
      core::ProcessSpec apply{
          .argv = {(ctx_.postgres_bin / "psql").string(), "--no-psqlrc", "--quiet",
                   "--set=ON_ERROR_STOP=1", "--host", ctx_.host, "--port",
                   std::to_string(in.ports[static_cast<size_t>(in.primary)]), "--username",
                   kAdminUser, "--dbname", in.database, "--command", prelude, "--file=-"},
          // Also when over quota, where sessions start read-only.
          .env = {"PGPASSWORD=" + in.admin_password, "PGSSLMODE=" + std::string(sslmode),
                  "PGCONNECT_TIMEOUT=10", "PGOPTIONS=-c default_transaction_read_only=off"}};
      status = RunTools({dump, apply}, std::chrono::hours(6));
      if (!status.ok() && status.message().find("out of shared memory") != std::string::npos) {
        status = core::Internal(status.message() +
                                " (a restore locks every table it drops and creates in one "
                                "transaction: raise max_locks_per_transaction)");
      }
    }
    // Open again (on success the transaction granted CONNECT already; granting twice is
    // harmless and covers a success reported without a commit).
    if (auto opened = ReopenAfterRestore(in, sslmode); !opened.ok()) {
      if (status.ok()) return opened;
      return core::Internal(fmt::format("{}; reopening the database failed too: {}",
                                        status.message(), opened.message()));
    }
    return status;
  }

  std::string EnforceQuota(const Instance& in, const PlanLimits& plan) override {
    if (fs::exists(ctx_.InstanceDir(in.number) / "closed-for-restore") &&
        !restoring_.Contains(in.id)) {
      if (auto opened = ReopenAfterRestore(in, SslMode(plan)); !opened.ok()) {
        KLUTCH_LOG(kWarn, "engines", "reopening database {} after an interrupted restore: {}",
                   in.database, opened.message());
      }
    }
    // The instance's data as PostgreSQL counts it (WAL and catalogs are the server's).
    int64_t used = 0;
    {
      auto conn = Connect(in, in.primary, "postgres", SslMode(plan));
      if (!conn.ok()) return "";
      auto rows =
          conn->Query(fmt::format("SELECT pg_database_size({})", conn->Literal(in.database)));
      if (!rows.ok() || rows->empty()) return "";
      used = core::ParseInt64((*rows)[0][0]).value_or(0);
    }
    bool over = used > plan.disk_quota_bytes;
    fs::path marker = NodeDir(in, in.primary) / "over-quota";
    bool marked = fs::exists(marker);
    if (over != marked) {
      auto conn = Connect(in, in.primary, "postgres", SslMode(plan));
      if (conn.ok()) {
        auto status =
            conn->Exec(fmt::format("ALTER DATABASE {} SET default_transaction_read_only = {}",
                                   conn->Ident(in.database), over ? "on" : "off"));
        if (status.ok() && over) {
          // Sessions already open would keep writing: end them; new ones start read-only.
          status = conn->Exec(fmt::format(
              "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = {} AND "
              "usename <> {}",
              conn->Literal(in.database), conn->Literal(kAdminUser)));
        }
        if (status.ok()) {
          if (over) {
            (void)core::WriteFileAtomic(marker, std::to_string(used));
          } else {
            std::error_code ec;
            fs::remove(marker, ec);
          }
        }
      }
    }
    if (!over) return "";
    return fmt::format(
        "disk quota exceeded: {} MiB used of {} MiB; sessions are read-only until data is "
        "deleted (connect with options='-c default_transaction_read_only=off' to delete) or "
        "the plan is upgraded",
        used >> 20, plan.disk_quota_bytes >> 20);
  }

 private:
  core::Result<PgConnection> Connect(const Instance& in, int node, const std::string& db,
                                     std::string_view sslmode) const {
    return PgConnection::Open(ctx_.host, in.ports[static_cast<size_t>(node)], in.admin_password, db,
                              sslmode);
  }

  core::Status WriteConfig(const Instance& in, const PlanLimits& plan, int node,
                           std::string* restart_settings) {
    fs::path data = DataDir(in, node);
    std::string restart;
    KLUTCH_RETURN_IF_ERROR(
        core::WriteFileAtomic(data / "klutch.conf", RenderConfig(ctx_, in, plan, node, &restart)));
    // The restart-only settings the running server has are in klutch.restart, written once a
    // start with them succeeded (StartNode); until then they wait in klutch.restart.pending.
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(data / "klutch.restart.pending", restart));
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(data / "pg_hba.conf", RenderHba(in, plan)));
    if (plan.tls) KLUTCH_RETURN_IF_ERROR(EnsureServerCertificate(ctx_, NodeDir(in, node) / "tls"));
    if (restart_settings != nullptr) *restart_settings = restart;
    KLUTCH_RETURN_IF_ERROR(ChownTo(data / "klutch.conf", ctx_.user));
    KLUTCH_RETURN_IF_ERROR(ChownTo(data / "klutch.restart.pending", ctx_.user));
    return ChownTo(data / "pg_hba.conf", ctx_.user);
  }

  core::Status PrepareNodeDir(const Instance& in, int node) {
    fs::path dir = NodeDir(in, node);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return core::Internal(fmt::format("create {}: {}", dir.string(), ec.message()));
    fs::remove_all(DataDir(in, node), ec);
    // The instance directory must be traversable by the engine user.
    fs::permissions(ctx_.InstanceDir(in.number),
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
    return ChownTo(dir, ctx_.user);
  }

  core::Status AppendInclude(const Instance& in, int node) {
    fs::path conf = DataDir(in, node) / "postgresql.conf";
    KLUTCH_ASSIGN_OR_RETURN(std::string text, core::ReadFile(conf));
    if (text.find("include_if_exists = 'klutch.conf'") == std::string::npos) {
      text += "\ninclude_if_exists = 'klutch.conf'\n";
      KLUTCH_RETURN_IF_ERROR(
          core::WriteFileAtomic(conf, text, fs::perms::owner_read | fs::perms::owner_write));
      KLUTCH_RETURN_IF_ERROR(ChownTo(conf, ctx_.user));
    }
    return core::Status::Ok();
  }

  core::Status InitPrimary(const Instance& in, const PlanLimits& plan) {
    if (fs::exists(DataDir(in, in.primary) / kInitializedMarker))
      return WriteConfig(in, plan, in.primary, nullptr);
    KLUTCH_RETURN_IF_ERROR(PrepareNodeDir(in, in.primary));
    fs::path pwfile = NodeDir(in, in.primary) / "pwfile";
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(pwfile, in.admin_password + "\n"));
    KLUTCH_RETURN_IF_ERROR(ChownTo(pwfile, ctx_.user));
    core::ProcessSpec spec;
    spec.argv = {(ctx_.postgres_bin / "initdb").string(),
                 "--pgdata",
                 DataDir(in, in.primary).string(),
                 "--username",
                 kAdminUser,
                 "--pwfile",
                 pwfile.string(),
                 "--auth",
                 "scram-sha-256",
                 "--encoding",
                 "UTF8",
                 "--locale",
                 "C.UTF-8",
                 "--no-sync"};
    if (machinery::GetString(in.parameters, {"data_checksums"}) == "enabled") {
      spec.argv.push_back("--data-checksums");
    }
    spec.user = ctx_.user;
    spec.cwd = NodeDir(in, in.primary);
    auto result = core::RunProcess(spec, std::chrono::minutes(5));
    std::error_code ec;
    fs::remove(pwfile, ec);
    if (!result.ok()) return result.status();
    if (result->exit_code != 0) {
      return core::Internal(fmt::format("initdb failed (exit {}): {}", result->exit_code,
                                        std::string(core::Trim(result->output))));
    }
    KLUTCH_RETURN_IF_ERROR(AppendInclude(in, in.primary));
    KLUTCH_RETURN_IF_ERROR(WriteConfig(in, plan, in.primary, nullptr));
    KLUTCH_RETURN_IF_ERROR(
        core::WriteFileAtomic(DataDir(in, in.primary) / kInitializedMarker, "primary\n"));
    return ChownTo(DataDir(in, in.primary) / kInitializedMarker, ctx_.user);
  }

  core::Status InitStandby(const Instance& in, const PlanLimits& plan, int node) {
    if (fs::exists(DataDir(in, node) / kInitializedMarker)) {
      return WriteConfig(in, plan, node, nullptr);
    }
    KLUTCH_RETURN_IF_ERROR(PrepareNodeDir(in, node));
    core::ProcessSpec spec;
    spec.argv = {(ctx_.postgres_bin / "pg_basebackup").string(),
                 "--pgdata",
                 DataDir(in, node).string(),
                 "--host",
                 ctx_.host,
                 "--port",
                 std::to_string(in.ports[static_cast<size_t>(in.primary)]),
                 "--username",
                 kReplicator,
                 "--wal-method=stream",
                 "--checkpoint=fast",
                 "--no-sync"};
    spec.env = {"PGPASSWORD=" + in.replication_password, "PGSSLMODE=" + std::string(SslMode(plan))};
    spec.user = ctx_.user;
    spec.cwd = NodeDir(in, node);
    KLUTCH_ASSIGN_OR_RETURN(auto result, core::RunProcess(spec, std::chrono::minutes(30)));
    if (result.exit_code != 0) {
      return core::Internal(fmt::format("pg_basebackup for standby {} failed (exit {}): {}", node,
                                        result.exit_code, std::string(core::Trim(result.output))));
    }
    std::error_code ec;
    fs::remove(DataDir(in, node) / kInitializedMarker, ec);
    fs::remove(DataDir(in, node) / "postmaster.pid", ec);
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(DataDir(in, node) / "standby.signal", ""));
    KLUTCH_RETURN_IF_ERROR(AppendInclude(in, node));
    KLUTCH_RETURN_IF_ERROR(WriteConfig(in, plan, node, nullptr));
    KLUTCH_RETURN_IF_ERROR(
        core::WriteFileAtomic(DataDir(in, node) / kInitializedMarker, "standby\n"));
    return ChownTo(DataDir(in, node), ctx_.user);
  }

  core::Status StartNode(const Instance& in, const PlanLimits& plan, int node, NodeRunner& runner) {
    KLUTCH_RETURN_IF_ERROR(StartAndWait(ctx_, runner, in.id, node, Node(in, plan, node),
                                        NodeDir(in, node) / "postgres.log",
                                        fmt::format("PostgreSQL node {}", node)));
    std::error_code ec;
    fs::path data = DataDir(in, node);
    if (fs::exists(data / "klutch.restart.pending")) {
      fs::rename(data / "klutch.restart.pending", data / "klutch.restart", ec);
    }
    return core::Status::Ok();
  }

  core::Status SetUpAccounts(const Instance& in, const PlanLimits& plan) {
    const std::string_view sslmode = SslMode(plan);
    KLUTCH_ASSIGN_OR_RETURN(auto conn, Connect(in, in.primary, "postgres", sslmode));
    std::string owner = OwnerRole(in);
    KLUTCH_ASSIGN_OR_RETURN(
        auto roles, conn.Query(fmt::format("SELECT rolname FROM pg_roles WHERE rolname IN ({}, {})",
                                           conn.Literal(kReplicator), conn.Literal(owner))));
    std::set<std::string> have;
    for (const auto& row : roles) have.insert(row[0]);
    KLUTCH_ASSIGN_OR_RETURN(std::string replication_password,
                            conn.PasswordLiteral(kReplicator, in.replication_password));
    if (!have.contains(kReplicator)) {
      KLUTCH_RETURN_IF_ERROR(
          conn.Exec(fmt::format("CREATE ROLE {} REPLICATION LOGIN", kReplicator)));
    }
    KLUTCH_RETURN_IF_ERROR(
        conn.Exec(fmt::format("ALTER ROLE {} PASSWORD {}", kReplicator, replication_password)));
    if (!have.contains(owner)) {
      KLUTCH_RETURN_IF_ERROR(conn.Exec(fmt::format("CREATE ROLE {} NOLOGIN", conn.Ident(owner))));
    }
    KLUTCH_ASSIGN_OR_RETURN(auto dbs,
                            conn.Query(fmt::format("SELECT 1 FROM pg_database WHERE datname = {}",
                                                   conn.Literal(in.database))));
    if (dbs.empty()) {
      KLUTCH_RETURN_IF_ERROR(conn.Exec(
          fmt::format("CREATE DATABASE {} OWNER {}", conn.Ident(in.database), conn.Ident(owner))));
    }
    KLUTCH_RETURN_IF_ERROR(
        conn.Exec(fmt::format("REVOKE ALL ON DATABASE {} FROM PUBLIC", conn.Ident(in.database))));
    KLUTCH_RETURN_IF_ERROR(conn.Exec(fmt::format("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}",
                                                 conn.Ident(in.database), conn.Ident(owner))));
    // Bindings may watch their own server (pg_stat_replication, pg_stat_activity in full), not
    // read its settings (primary_conninfo holds the replication password).
    KLUTCH_RETURN_IF_ERROR(
        conn.Exec(fmt::format("GRANT pg_read_all_stats TO {}", conn.Ident(owner))));
    return PrepareDatabase(in, in.database, sslmode);
  }

  // Lets the bindings connect to the database again after a restore closed it.
  core::Status ReopenAfterRestore(const Instance& in, std::string_view sslmode) {
    KLUTCH_ASSIGN_OR_RETURN(auto conn, Connect(in, in.primary, "postgres", sslmode));
    KLUTCH_RETURN_IF_ERROR(
        conn.Exec(fmt::format("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}",
                              conn.Ident(in.database), conn.Ident(OwnerRole(in)))));
    std::error_code ec;
    fs::remove(ctx_.InstanceDir(in.number) / "closed-for-restore", ec);
    return core::Status::Ok();
  }

  // Who may use a database of the instance: only the owner role (and so every binding), with
  // the public schema its own.
  core::Status PrepareDatabase(const Instance& in, const std::string& name,
                               std::string_view sslmode) {
    {
      KLUTCH_ASSIGN_OR_RETURN(auto conn, Connect(in, in.primary, "postgres", sslmode));
      KLUTCH_RETURN_IF_ERROR(
          conn.Exec(fmt::format("REVOKE ALL ON DATABASE {} FROM PUBLIC", conn.Ident(name))));
      KLUTCH_RETURN_IF_ERROR(conn.Exec(fmt::format("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}",
                                                   conn.Ident(name), conn.Ident(OwnerRole(in)))));
    }
    KLUTCH_ASSIGN_OR_RETURN(auto db, Connect(in, in.primary, name, sslmode));
    KLUTCH_RETURN_IF_ERROR(
        db.Exec(fmt::format("ALTER SCHEMA public OWNER TO {}", db.Ident(OwnerRole(in)))));
    return db.Exec("REVOKE ALL ON SCHEMA public FROM PUBLIC");
  }

  EngineContext ctx_;
  ActiveInstances restoring_;  // instances a Restore of this process runs on
};

}  // namespace

std::unique_ptr<DataService> NewPostgresService(const EngineContext& context) {
  return std::make_unique<PostgresService>(context);
}

}  // namespace klutch::engines
