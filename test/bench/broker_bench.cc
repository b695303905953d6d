// klutch-bench-broker: `klutch broker` as a process against the floors measured in the same
// run on the same machine (issue #13):
//   - provision -> last_operation succeeded for postgresql-single-nano and
//     keyvalue-single-nano-ssl, p50 of N runs, against `initdb` + `postgres` until it accepts
//     connections, and `redis-server` until PING answers; target 2x floor + 0.5 s
//   - bind -> credentials, p50; target < 300 ms
//   - backup and restore of a database of ~100 MB (1 MB with --quick) through the backup
//     manager against bare `pg_dump -Fc` / `pg_restore --clean`; target 1.5x
//   - the broker's own RSS with 50 (2 with --quick) single-nano instances; target < 50 MiB
// Prints ratios and verdicts; asserts nothing about time. Run as root, instances run as
// `postgres`.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <iostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "client/dynamic.h"
#include "client/rest_client.h"
#include "core/file.h"
#include "core/process.h"
#include "core/strings.h"
#include "engines/data_service.h"
#include "http/client.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/bench/bench_util.h"
#include "test/bench/broker_process.h"
#include "test/support/control_plane.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kPgService[] = "klutch-a9s-postgresql15";
constexpr char kPgPlan[] = "klutch-postgresql-single-nano";
constexpr char kKvService[] = "klutch-a9s-keyvalue8";
constexpr char kKvPlan[] = "klutch-keyvalue-single-nano-ssl";

// redis-server until PING answers; seconds.
double RedisFloor(const std::optional<core::UserIds>& user) {
  fs::path dir = NewTraversableDir("kbr-");
  Chown(dir, user);
  int port = FreePortNumber();
  auto start = BenchClock::now();
  auto pid =
      core::SpawnProcess({.argv = {"/usr/bin/redis-server", "--port", std::to_string(port),
                                   "--bind", "127.0.0.1", "--dir", dir.string(), "--save", ""},
                          .user = user,
                          .output_file = dir / "log"});
  bool up = Eventually(
      [&] {
        auto r = core::RunProcess({.argv = {"redis-cli", "-p", std::to_string(port), "PING"}},
                                  seconds(2));
        return r.ok() && r->output.find("PONG") != std::string::npos;
      },
      seconds(30));
  double s = Seconds(start, BenchClock::now());
  if (pid.ok()) core::StopProcess(*pid, seconds(10));
  fs::remove_all(dir);
  if (!up) {
    std::cerr << "redis-server did not start\n";
    std::exit(1);
  }
  return s;
}

// Through the Control Plane: a claim applied (as kubectl would, one POST) until its Ready
// condition is True, and a ServiceBinding until its Secret exists; polled every 10 ms.
struct ControlPlaneTimes {
  std::vector<double> pg_claim, kv_claim, binding;
};

bool ReadyTrue(const core::Result<Json>& o) {
  if (!o.ok()) return false;
  const Json* conds = machinery::Find(*o, {"status", "conditions"});
  if (conds == nullptr || !conds->is_array()) return false;
  for (const auto& c : *conds) {
    if (machinery::GetString(c, {"type"}) == "Ready")
      return machinery::GetString(c, {"status"}) == "True";
  }
  return false;
}

double CreateAndWait(const client::ResourceClient& resource, const Json& object,
                     const std::function<bool()>& done) {
  auto start = BenchClock::now();
  auto r = resource.Create(object);
  if (!r.ok()) {
    std::cerr << "create " << machinery::Name(object) << ": " << r.status().message() << "\n";
    std::exit(1);
  }
  if (!Eventually([&] { return done(); }, seconds(300))) {
    std::cerr << "timed out waiting for " << machinery::Name(object) << "\n";
    std::exit(1);
  }
  return Seconds(start, BenchClock::now());
}

ControlPlaneTimes MeasureControlPlane(int runs, std::string* manager_log) {
  ControlPlaneTimes t;
  fs::path dir = NewTraversableDir("kbc-");
  std::string error;
  auto cp = DataServicesControlPlane::Start(dir, {}, &error);
  if (!cp) {
    std::cerr << "control plane: " << error << "\n";
    std::exit(1);
  }
  auto rest = AdminClient(cp->server().kubeconfig());
  auto gvr = [](const char* plural) {
    return client::GroupVersionResource{"anynines.com", "v1", plural};
  };
  client::ResourceClient pgs(*rest, gvr("postgresqlinstances"), "default");
  client::ResourceClient kvs(*rest, gvr("keyvalueinstances"), "default");
  client::ResourceClient sbs(*rest, gvr("servicebindings"), "default");
  client::ResourceClient secrets(*rest, client::resources::kSecrets, "default");
  auto instance = [](const std::string& kind, const std::string& name, const std::string& service,
                     const std::string& plan, const std::string& composition) {
    return Json{
        {"apiVersion", "anynines.com/v1"},
        {"kind", kind},
        {"metadata", {{"name", name}, {"namespace", "default"}}},
        {"spec",
         {{"service", service}, {"plan", plan}, {"compositionRef", {{"name", composition}}}}}};
  };
  for (int i = 0; i < runs; ++i) {
    std::string name = fmt::format("bench-pg-{}", i);
    t.pg_claim.push_back(CreateAndWait(pgs,
                                       instance("PostgresqlInstance", name, "a9s-postgresql15",
                                                "postgresql-single-nano", "a9s-postgresql"),
                                       [&] { return ReadyTrue(pgs.Get(name)); }));
    Json binding = {{"apiVersion", "anynines.com/v1"},
                    {"kind", "ServiceBinding"},
                    {"metadata", {{"name", name + "-sb"}, {"namespace", "default"}}},
                    {"spec",
                     {{"instanceRef", name},
                      {"serviceInstanceType", "postgresql"},
                      {"compositionRef", {{"name", "a9s-servicebinding"}}}}}};
    t.binding.push_back(
        CreateAndWait(sbs, binding, [&] { return secrets.Get(name + "-sb-creds").ok(); }));
    (void)sbs.Delete(name + "-sb");
    (void)pgs.Delete(name);
  }
  for (int i = 0; i < runs; ++i) {
    std::string name = fmt::format("bench-kv-{}", i);
    t.kv_claim.push_back(CreateAndWait(kvs,
                                       instance("KeyvalueInstance", name, "a9s-keyvalue8",
                                                "keyvalue-single-nano-ssl", "a9s-keyvalue"),
                                       [&] { return ReadyTrue(kvs.Get(name)); }));
    (void)kvs.Delete(name);
  }
  // Everything gone before the broker stops (instances are deprovisioned through the claims).
  Eventually([&] { return fs::is_empty(cp->broker_state() / "i"); }, seconds(300));
  *manager_log = cp->ManagerLog();
  cp.reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
  return t;
}

int Run(bool quick) {
  auto user = InstanceUser();
  // --quick (the slow-tier smoke test) shows every step still works, at the smallest sizes.
  const int runs = quick ? 1 : 10;
  const int instances = quick ? 2 : 50;
  const int megabytes = quick ? 1 : 100;
  fs::path dir = NewTraversableDir("kbb-");

  std::vector<double> pg_floor, kv_floor, pg_claim, kv_claim, bind;
  for (int i = 0; i < runs; ++i) pg_floor.push_back(PostgresFloor(user));
  for (int i = 0; i < runs; ++i) kv_floor.push_back(RedisFloor(user));

  std::string manager_log;
  ControlPlaneTimes cp = MeasureControlPlane(runs, &manager_log);

  BrokerProcess broker(dir);
  for (int i = 0; i < runs; ++i) {
    std::string id = "bench-pg-" + std::to_string(i);
    pg_claim.push_back(broker.Provision("postgresql", id, kPgService, kPgPlan));
    auto start = BenchClock::now();
    broker.Bind("postgresql", id, "b", kPgService, kPgPlan);
    bind.push_back(Seconds(start, BenchClock::now()));
    broker.Deprovision("postgresql", id, kPgService);
  }
  for (int i = 0; i < runs; ++i) {
    std::string id = "bench-kv-" + std::to_string(i);
    kv_claim.push_back(broker.Provision("keyvalue", id, kKvService, kKvPlan));
    broker.Deprovision("keyvalue", id, kKvService);
  }

  // Backup and restore of a database of `megabytes` MB against bare pg_dump / pg_restore.
  broker.Provision("postgresql", "bench-data", kPgService, "klutch-postgresql-single-small");
  Json creds =
      broker.Bind("postgresql", "bench-data", "b", kPgService, "klutch-postgresql-single-small");
  std::string uri = creds["uri"].get<std::string>();
  if (std::string failed = FillDatabase(uri, megabytes); !failed.empty()) {
    std::cerr << "filling the database failed: " << failed << "\n";
    return 1;
  }
  auto size = core::RunProcess(
      {.argv = {"psql", uri, "-tAc", "SELECT pg_database_size(current_database())"}}, seconds(30));
  fs::path dump = dir / "bare.dump";
  std::string port = std::to_string(creds["port"].get<int>());
  std::string user_name = creds["username"].get<std::string>();
  std::string db = creds["name"].get<std::string>();
  std::vector<std::string> env = {"PGPASSWORD=" + creds["password"].get<std::string>()};
  auto t0 = BenchClock::now();
  auto bare_dump = core::RunProcess(
      {.argv = {(kPgBin / "pg_dump").string(), "--format=custom", "--no-sync", "-h", "127.0.0.1",
                "-p", port, "-U", user_name, "-d", db, "-f", dump.string()},
       .env = env},
      seconds(600));
  double bare_dump_s = Seconds(t0, BenchClock::now());
  t0 = BenchClock::now();
  auto bare_restore = core::RunProcess(
      {.argv = {(kPgBin / "pg_restore").string(), "--clean", "--if-exists", "--single-transaction",
                "-h", "127.0.0.1", "-p", port, "-U", user_name, "-d", db, dump.string()},
       .env = env},
      seconds(600));
  double bare_restore_s = Seconds(t0, BenchClock::now());
  if (!bare_dump.ok() || bare_dump->exit_code != 0 || !bare_restore.ok() ||
      bare_restore->exit_code != 0) {
    std::cerr << "bare pg_dump/pg_restore failed: " << (bare_dump.ok() ? bare_dump->output : "")
              << (bare_restore.ok() ? bare_restore->output : "") << "\n";
    return 1;
  }
  double backup_s = broker.BackupManagerJob("postgresql", "/instances/bench-data/backups",
                                            "/instances/bench-data/backups/");
  int64_t backup_id = broker.last_job_id();
  double restore_s = broker.BackupManagerJob(
      "postgresql", fmt::format("/instances/bench-data/backups/{}/restore", backup_id),
      "/instances/bench-data/restores/");
  broker.Deprovision("postgresql", "bench-data", kPgService);

  // Many instances: the broker's own memory.
  long rss_before = RssKiB(broker.pid());
  auto many_start = BenchClock::now();
  for (int i = 0; i < instances; ++i) {
    std::string id = "bench-many-" + std::to_string(i);
    int status = 0;
    broker.Call("postgresql", "PUT", "/v2/service_instances/" + id + "?accepts_incomplete=true",
                {{"service_id", kPgService},
                 {"plan_id", kPgPlan},
                 {"organization_guid", "o"},
                 {"space_guid", "s"}},
                &status);
  }
  bool all = Eventually(
      [&] {
        Json list = broker.Call("postgresql", "GET", "/instances");
        int ready = 0;
        for (const auto& r : list["resources"]) ready += r["state"] == "provisioned";
        return ready == instances;
      },
      seconds(1800));
  double many_s = Seconds(many_start, BenchClock::now());
  long rss_many = RssKiB(broker.pid());

  double pg_floor50 = Percentile(pg_floor, 0.5), kv_floor50 = Percentile(kv_floor, 0.5);
  double pg50 = Percentile(pg_claim, 0.5), kv50 = Percentile(kv_claim, 0.5),
         bind50 = Percentile(bind, 0.5);
  std::cout << fmt::format("klutch-bench-broker ({} runs each{})\n", runs, quick ? ", quick" : "");
  std::cout << fmt::format(
      "broker provision alone postgresql-single-nano: p50 {:.3f} s; floor (initdb + postgres "
      "accepting) p50 {:.3f} s; "
      "ratio {:.2f}; target 2x floor + 0.5 s = {:.3f} s: {}\n",
      pg50, pg_floor50, pg50 / pg_floor50, 2 * pg_floor50 + 0.5,
      Verdict(pg50 <= 2 * pg_floor50 + 0.5));
  std::cout << fmt::format(
      "broker provision alone keyvalue-single-nano-ssl: p50 {:.3f} s; floor (redis-server "
      "answering PING) p50 {:.3f} s; "
      "ratio {:.2f}; target 2x floor + 0.5 s = {:.3f} s: {}\n",
      kv50, kv_floor50, kv50 / kv_floor50, 2 * kv_floor50 + 0.5,
      Verdict(kv50 <= 2 * kv_floor50 + 0.5));
  double cp_pg = Percentile(cp.pg_claim, 0.5), cp_kv = Percentile(cp.kv_claim, 0.5);
  double cp_bind = Percentile(cp.binding, 0.5);
  std::cout << fmt::format(
      "claim PostgresqlInstance single-nano -> Ready=True (Control Plane: apiserver, manager, "
      "broker): "
      "p50 {:.3f} s; ratio to floor {:.2f}; target 2x floor + 0.5 s = {:.3f} s: {}\n",
      cp_pg, cp_pg / pg_floor50, 2 * pg_floor50 + 0.5, Verdict(cp_pg <= 2 * pg_floor50 + 0.5));
  std::cout << fmt::format(
      "claim KeyvalueInstance single-nano-ssl -> Ready=True: p50 {:.3f} s; ratio to floor {:.2f}; "
      "target 2x floor + 0.5 s = {:.3f} s: {}\n",
      cp_kv, cp_kv / kv_floor50, 2 * kv_floor50 + 0.5, Verdict(cp_kv <= 2 * kv_floor50 + 0.5));
  std::cout << fmt::format(
      "ServiceBinding claim -> Secret <binding>-creds: p50 {:.1f} ms; target < 300 ms: {}\n",
      cp_bind * 1000, Verdict(cp_bind < 0.3));
  std::cout << fmt::format(
      "broker bind alone (HTTP): p50 {:.1f} ms (max {:.1f} ms); target < 300 ms: {}\n",
      bind50 * 1000, Percentile(bind, 1.0) * 1000, Verdict(bind50 < 0.3));
  std::cout << fmt::format(
      "backup of a {} MB database ({} bytes): {:.3f} s vs bare pg_dump {:.3f} s, ratio {:.2f}; "
      "target 1.5x: {}\n",
      megabytes, size.ok() ? std::string(core::Trim(size->output)) : "?", backup_s, bare_dump_s,
      backup_s / bare_dump_s, Verdict(backup_s <= 1.5 * bare_dump_s));
  std::cout << fmt::format(
      "restore of it: {:.3f} s vs bare pg_restore --clean {:.3f} s, ratio {:.2f}; target 1.5x: "
      "{}\n",
      restore_s, bare_restore_s, restore_s / bare_restore_s,
      Verdict(restore_s <= 1.5 * bare_restore_s));
  std::cout << fmt::format(
      "{} single-nano instances: all provisioned {} in {:.1f} s; broker RSS {:.1f} MiB (idle "
      "{:.1f} MiB); "
      "target < 50 MiB: {}\n",
      instances, all ? "yes" : "NO", many_s, rss_many / 1024.0, rss_before / 1024.0,
      Verdict(rss_many < 50 * 1024));
  return all ? 0 : 1;
}

}  // namespace
}  // namespace klutch::testing

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  return klutch::testing::Run(quick);
}
