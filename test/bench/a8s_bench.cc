// klutch-bench-a8s: `klutch operator` as a process (against a `klutch apiserver` process) with
// real PostgreSQL 15 servers, against floors measured in the same run on the same machine
// (issue #25):
//   - Postgresql (replicas 1) created -> status Running, p50 of N runs, against `initdb` +
//     `postgres` until it accepts connections; target 1.5x
//   - Postgresql (replicas 3) -> Running with 3 ready, p50, against that floor plus one
//     `pg_basebackup` of an empty cluster per standby; target 2x
//   - failover: SIGKILL of the primary's server (postmaster and backends) under a write load
//     through the binding's URI -> the first write accepted again, p50; target < 5 s
//   - Backup and Restore of a ~100 MB database (1 MB with --quick) -> Ready, against bare
//     `pg_dump -Fc` / `pg_restore --clean` of the same database, p50 of 3 rounds; target 1.3x
// Prints ratios and verdicts; asserts nothing about time. Run as root: servers run as
// `postgres`.
#include <fmt/format.h>
#include <libpq-fe.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "client/dynamic.h"
#include "core/file.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/json_numbers.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"
#include "test/bench/bench_util.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kKlutch = std::string(KLUTCH_BIN_DIR) + "/klutch";
const client::GroupVersionResource kPg{"postgresql.anynines.com", "v1beta3", "postgresqls"};
const client::GroupVersionResource kSb{"servicebindings.anynines.com", "v1beta3",
                                       "servicebindings"};
const client::GroupVersionResource kBackup{"backups.anynines.com", "v1beta3", "backups"};
const client::GroupVersionResource kRestore{"backups.anynines.com", "v1beta3", "restores"};

[[noreturn]] void Die(const std::string& what) {
  std::cerr << "klutch-bench-a8s: " << what << "\n";
  std::exit(1);
}

// `pg_basebackup` of an empty running cluster, as the operator takes one per standby; seconds.
double BasebackupFloor(const std::optional<core::UserIds>& user) {
  fs::path dir = NewTraversableDir("kbb-");
  Chown(dir, user);
  int port = FreePortNumber();
  auto init =
      core::RunProcess({.argv = {(kPgBin / "initdb").string(), "--pgdata", (dir / "p").string(),
                                 "--username", "admin", "--auth", "trust", "--no-sync"},
                        .user = user},
                       seconds(120));
  if (!init.ok() || init->exit_code != 0) Die("initdb for the base backup floor failed");
  StartedPostgres server = StartPostgresUntilReady(dir / "p", port, user, dir / "log");
  if (!server.up) Die("postgres for the base backup floor did not start");
  auto start = BenchClock::now();
  auto backup = core::RunProcess(
      {.argv = {(kPgBin / "pg_basebackup").string(), "--pgdata", (dir / "s").string(), "--host",
                "127.0.0.1", "--port", std::to_string(port), "--username", "admin",
                "--wal-method=stream", "--checkpoint=fast", "--no-sync"},
       .user = user},
      seconds(120));
  double s = Seconds(start, BenchClock::now());
  if (server.pid.ok()) core::StopProcess(*server.pid, seconds(10), SIGINT);
  fs::remove_all(dir);
  if (!backup.ok() || backup->exit_code != 0) Die("pg_basebackup failed");
  return s;
}

class Bench {
 public:
  explicit Bench(const fs::path& dir) : dir_(dir) {
    std::string error;
    api_ = ApiServerProcess::Start(dir / "api", {}, &error);
    if (api_ == nullptr) Die("klutch apiserver: " + error);
    admin_ = AdminClient(api_->kubeconfig());
    operator_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{kKlutch, "operator", "--kubeconfig", api_->kubeconfig().string(),
                                 "--state-dir", (dir / "operator").string(),
                                 "--health-probe-bind-address", "127.0.0.1:0", "--status-interval",
                                 "1s"},
        dir / "operator.log");
    bool up =
        Eventually([&] { return client::ResourceClient(*admin_, kRestore, "default").List().ok(); },
                   seconds(60));
    if (!up) Die("klutch operator did not install its CRDs:\n" + Log());
  }
  ~Bench() {
    operator_->Signal(SIGTERM, seconds(120));  // stops the servers
    operator_.reset();
    api_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Log() const { return ReadFileOrEmpty(dir_ / "operator.log"); }
  fs::path state() const { return dir_ / "operator"; }

  Json Create(const client::GroupVersionResource& gvr, const std::string& yaml) {
    auto object = machinery::ParseYaml(yaml);
    if (!object.ok()) Die(object.status().message());
    auto made = client::ResourceClient(*admin_, gvr, "default").Create(*object);
    if (!made.ok()) Die(made.status().ToString());
    return *made;
  }
  Json Get(const client::GroupVersionResource& gvr, const std::string& name) {
    auto got = client::ResourceClient(*admin_, gvr, "default").Get(name);
    return got.ok() ? *got : Json();
  }
  void Delete(const client::GroupVersionResource& gvr, const std::string& name) {
    (void)client::ResourceClient(*admin_, gvr, "default").Delete(name);
    Eventually([&] { return Get(gvr, name).is_null(); }, seconds(120));
  }

  // Postgresql created -> Running with `replicas` ready, seen through a watch (polling would
  // take CPU from the servers being measured); seconds.
  double Provision(const std::string& name, int replicas) {
    auto start = BenchClock::now();
    Json made = Create(kPg, fmt::format("apiVersion: postgresql.anynines.com/v1beta3\n"
                                        "kind: Postgresql\nmetadata: {{name: {}}}\n"
                                        "spec: {{version: 15, replicas: {}}}\n",
                                        name, replicas));
    if (!WaitFor(kPg, made, [&](const Json& pg) { return IsRunning(pg, replicas); })) {
      Die(name + " did not run:\n" + Log());
    }
    return Seconds(start, BenchClock::now());
  }

  // Watches `object` (from its resourceVersion) until `done` holds for it.
  bool WaitFor(const client::GroupVersionResource& gvr, const Json& object,
               const std::function<bool(const Json&)>& done) {
    if (done(object)) return true;
    client::ResourceClient rc(*admin_, gvr, "default");
    bool met = false;
    auto deadline = BenchClock::now() + seconds(600);
    std::string rv = machinery::GetString(object, {"metadata", "resourceVersion"});
    while (!met && BenchClock::now() < deadline) {
      auto end = rc.Watch({.field_selector = "metadata.name=" + machinery::Name(object),
                           .resource_version = rv,
                           .timeout_seconds = 60},
                          [&](const client::WatchEvent& e) {
                            if (e.object == nullptr) return true;
                            rv = machinery::GetString(*e.object, {"metadata", "resourceVersion"});
                            met = done(*e.object);
                            return !met;
                          });
      if (!end.ok()) return false;
    }
    return met;
  }
  bool Running(const std::string& name, int replicas) {
    return IsRunning(Get(kPg, name), replicas);
  }
  static bool IsRunning(const Json& pg, int replicas) {
    const Json* ready = machinery::Find(pg, {"status", "readyReplicas"});
    return machinery::GetString(pg, {"status", "clusterStatus"}) == "Running" && ready &&
           machinery::AsInt64(*ready) == replicas;
  }

  std::string Bind(const std::string& name) {
    Create(kSb, fmt::format("apiVersion: servicebindings.anynines.com/v1beta3\n"
                            "kind: ServiceBinding\nmetadata: {{name: {}}}\nspec:\n  instance: "
                            "{{apiVersion: postgresql.anynines.com/v1beta3, kind: Postgresql, "
                            "name: {}}}\n",
                            name, name));
    std::string uri;
    Poll(
        [&] {
          Json s = Get(client::resources::kSecrets, name + "-service-binding");
          auto v = core::Base64Decode(machinery::GetString(s, {"data", "uri"}));
          uri = v ? *v : "";
          return !uri.empty();
        },
        seconds(120));
    if (uri.empty()) Die("no binding Secret for " + name);
    return uri;
  }

  // The operator's record of a Postgresql.
  Json Record(const std::string& name) {
    std::string uid = machinery::Uid(Get(kPg, name));
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ / "operator" / "i", ec)) {
      auto j = machinery::ParseJson(ReadFileOrEmpty(e.path() / "instance.json"));
      if (j.ok() && machinery::GetString(*j, {"uid"}) == uid) return *j;
    }
    return Json();
  }

  // Backup or Restore created -> Ready=True (through a watch); seconds.
  double Job(const client::GroupVersionResource& gvr, const std::string& yaml,
             const std::string& name) {
    auto start = BenchClock::now();
    Json made = Create(gvr, yaml);
    if (!WaitFor(gvr, made, [](const Json& o) { return reconcile::IsConditionTrue(o, "Ready"); })) {
      Die(name + " did not complete:\n" + Log());
    }
    return Seconds(start, BenchClock::now());
  }

  static bool Poll(const std::function<bool()>& probe, seconds deadline) {
    auto until = BenchClock::now() + deadline;
    while (BenchClock::now() < until) {
      if (probe()) return true;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return probe();
  }

 private:
  fs::path dir_;
  std::unique_ptr<ApiServerProcess> api_;
  std::unique_ptr<client::RestClient> admin_;
  std::unique_ptr<ChildProcess> operator_;
};

// SIGKILL of the primary's postmaster and backends under a write load through `uri`: seconds
// until the first write is accepted again.
double Failover(Bench& bench, const std::string& name, const std::string& uri) {
  PGconn* setup = PQconnectdb(uri.c_str());
  PQclear(PQexec(setup, "create table if not exists w(id bigserial primary key)"));
  PQfinish(setup);
  std::atomic<bool> stop{false}, killed{false};
  std::atomic<int64_t> resumed_ns{0};
  std::thread writer([&] {
    PGconn* c = PQconnectdb(uri.c_str());
    while (!stop) {
      PGresult* r = PQexec(c, "insert into w default values");
      bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
      PQclear(r);
      if (ok && killed && resumed_ns == 0) resumed_ns = NowNs();
      if (!ok) {
        PQfinish(c);
        std::this_thread::sleep_for(milliseconds(5));
        c = PQconnectdb(uri.c_str());
      }
    }
    PQfinish(c);
  });
  std::this_thread::sleep_for(milliseconds(500));
  Json record = bench.Record(name);
  const int64_t primary = machinery::AsInt64(record["primary"]).value_or(0);
  std::string pidfile = ReadFileOrEmpty(bench.state() / "i" / machinery::Dump(record["number"]) /
                                        fmt::format("n{}", primary) / "data" / "postmaster.pid");
  auto pid = core::ParseInt64(core::Trim(pidfile.substr(0, pidfile.find('\n'))));
  if (!pid) Die("no postmaster.pid of the primary");
  const int64_t killed_ns = NowNs();
  auto kill = RunShell(fmt::format("kill -9 {} $(pgrep -P {})", *pid, *pid), {}, "/", seconds(10));
  killed = true;
  bool resumed = Eventually([&] { return resumed_ns != 0; }, seconds(120));
  stop = true;
  writer.join();
  if (kill.exit_code != 0 || !resumed) Die("writes did not resume:\n" + bench.Log());
  // Back to three servers (the old primary rejoined) before the next run.
  bool settled = Bench::Poll(
      [&] {
        Json now = bench.Record(name);
        return machinery::AsInt64(now["primary"]) != primary && now["rejoining"].empty() &&
               now["promotion_pending"] == false && bench.Running(name, 3);
      },
      seconds(300));
  if (!settled) Die("the cluster did not settle after the failover:\n" + bench.Log());
  return static_cast<double>(resumed_ns - killed_ns) / 1e9;
}

int Run(bool quick) {
  auto user = InstanceUser();
  const int runs = quick ? 1 : 5;
  const int replica_runs = quick ? 1 : 3;
  const int megabytes = quick ? 1 : 100;
  const int job_runs = quick ? 1 : 3;
  fs::path dir = NewTraversableDir("kba-");

  std::vector<double> floor, basebackup, single, replica, failover;
  for (int i = 0; i < runs; ++i) floor.push_back(PostgresFloor(user));
  for (int i = 0; i < runs; ++i) basebackup.push_back(BasebackupFloor(user));

  Bench bench(dir);
  for (int i = 0; i < runs; ++i) {
    const std::string name = fmt::format("single-{}", i);
    single.push_back(bench.Provision(name, 1));
    bench.Delete(kPg, name);
  }
  for (int i = 0; i < replica_runs; ++i) {
    const std::string name = fmt::format("replica-{}", i);
    replica.push_back(bench.Provision(name, 3));
    if (i == 0) {
      const std::string uri = bench.Bind(name);
      for (int k = 0; k < replica_runs; ++k) failover.push_back(Failover(bench, name, uri));
      bench.Delete(kSb, name);
    }
    bench.Delete(kPg, name);
  }

  // Backup and restore of a database of `megabytes` MB against bare pg_dump / pg_restore of it.
  bench.Provision("data", 1);
  const std::string uri = bench.Bind("data");
  if (std::string failed = FillDatabase(uri, megabytes); !failed.empty()) {
    Die("filling the database failed: " + failed);
  }
  Json record = bench.Record("data");
  const std::string port = machinery::Dump(record["ports"][0]);
  const std::vector<std::string> env = {
      "PGPASSWORD=" + machinery::GetString(record, {"admin_password"}), "PGSSLMODE=prefer"};
  fs::path dump = dir / "bare.dump";
  // Rounds of bare pg_dump, Backup, bare pg_restore, Restore, alternating so that each pair
  // meets the same server state; p50 of each.
  std::vector<double> bare_dumps, backups, bare_restores, restores;
  for (int k = 0; k < job_runs; ++k) {
    auto t0 = BenchClock::now();
    auto bare_dump =
        core::RunProcess({.argv = {(kPgBin / "pg_dump").string(), "--format=custom", "--no-sync",
                                   "-h", "127.0.0.1", "-p", port, "-U", "klutch_admin", "-d",
                                   "a9s_apps_default_db", "-f", dump.string()},
                          .env = env},
                         seconds(600));
    bare_dumps.push_back(Seconds(t0, BenchClock::now()));
    const std::string b = fmt::format("b{}", k), r = fmt::format("r{}", k);
    backups.push_back(bench.Job(kBackup,
                                fmt::format("apiVersion: backups.anynines.com/v1beta3\nkind: "
                                            "Backup\nmetadata: {{name: {}}}\nspec:\n  "
                                            "serviceInstance: {{apiGroup: postgresql.anynines.com, "
                                            "kind: Postgresql, name: data}}\n",
                                            b),
                                b));
    t0 = BenchClock::now();
    auto bare_restore =
        core::RunProcess({.argv = {(kPgBin / "pg_restore").string(), "--clean", "--if-exists",
                                   "--single-transaction", "-h", "127.0.0.1", "-p", port, "-U",
                                   "klutch_admin", "-d", "a9s_apps_default_db", dump.string()},
                          .env = env},
                         seconds(600));
    bare_restores.push_back(Seconds(t0, BenchClock::now()));
    if (!bare_dump.ok() || bare_dump->exit_code != 0 || !bare_restore.ok() ||
        bare_restore->exit_code != 0) {
      Die("bare pg_dump/pg_restore failed");
    }
    restores.push_back(bench.Job(kRestore,
                                 fmt::format("apiVersion: backups.anynines.com/v1beta3\nkind: "
                                             "Restore\nmetadata: {{name: {}}}\nspec:\n  "
                                             "backupName: {}\n  serviceInstance: {{apiGroup: "
                                             "postgresql.anynines.com, kind: Postgresql, name: "
                                             "data}}\n",
                                             r, b),
                                 r));
  }
  const double bare_dump_s = Percentile(bare_dumps, 0.5), backup_s = Percentile(backups, 0.5);
  const double bare_restore_s = Percentile(bare_restores, 0.5);
  const double restore_s = Percentile(restores, 0.5);

  const double floor50 = Percentile(floor, 0.5), bb50 = Percentile(basebackup, 0.5);
  const double single50 = Percentile(single, 0.5), replica50 = Percentile(replica, 0.5);
  const double replica_floor = floor50 + 2 * bb50;
  const double failover50 = Percentile(failover, 0.5);
  std::cout << fmt::format("klutch-bench-a8s ({} runs, {} replica runs{})\n", runs, replica_runs,
                           quick ? ", quick" : "");
  auto samples = [](const std::vector<double>& v) {
    std::string out;
    for (double x : v) out += fmt::format(" {:.3f}", x);
    return out;
  };
  std::cout << "samples (s): floor" << samples(floor) << "; replicas 1" << samples(single)
            << "; replicas 3" << samples(replica) << "; failover" << samples(failover) << "\n";
  std::cout << "samples (s): pg_dump" << samples(bare_dumps) << "; Backup" << samples(backups)
            << "; pg_restore" << samples(bare_restores) << "; Restore" << samples(restores) << "\n";
  std::cout << fmt::format(
      "Postgresql replicas 1 -> Running: p50 {:.3f} s; floor (initdb + postgres until it "
      "answers) p50 {:.3f} s; ratio {:.2f}x (target 1.5x: {})\n",
      single50, floor50, single50 / floor50, Verdict(single50 <= 1.5 * floor50));
  std::cout << fmt::format(
      "Postgresql replicas 3 -> Running 3/3: p50 {:.3f} s; floor (the above + 2 x pg_basebackup "
      "of an empty cluster, p50 {:.3f} s) {:.3f} s; ratio {:.2f}x (target 2x: {})\n",
      replica50, bb50, replica_floor, replica50 / replica_floor,
      Verdict(replica50 <= 2 * replica_floor));
  std::cout << fmt::format(
      "failover: SIGKILL of the primary's server -> first write accepted through the binding's "
      "URI: p50 {:.3f} s, max {:.3f} s (target < 5 s: {})\n",
      failover50, *std::max_element(failover.begin(), failover.end()), Verdict(failover50 < 5));
  std::cout << fmt::format(
      "backup of {} MB: p50 {:.3f} s; bare pg_dump -Fc p50 {:.3f} s; ratio {:.2f}x (target 1.3x: "
      "{})\n",
      megabytes, backup_s, bare_dump_s, backup_s / bare_dump_s,
      Verdict(backup_s <= 1.3 * bare_dump_s));
  std::cout << fmt::format(
      "restore of {} MB: p50 {:.3f} s; bare pg_restore --clean p50 {:.3f} s; ratio {:.2f}x "
      "(target 1.3x: {})\n",
      megabytes, restore_s, bare_restore_s, restore_s / bare_restore_s,
      Verdict(restore_s <= 1.3 * bare_restore_s));
  return 0;
}

}  // namespace
}  // namespace klutch::testing

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  return klutch::testing::Run(quick);
}
