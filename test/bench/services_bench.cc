// klutch-bench-services: the data services `klutch broker` runs beside PostgreSQL and KeyValue
// (issue #26), each against its own floor measured in the same run on the same machine:
//   - MariaDB: provision -> last_operation succeeded of mariadb-single-nano-ssl, p50 of N runs,
//     against `mariadb-install-db` + `mariadbd` until it answers; target 1.5x floor + 0.5 s
//   - bind -> credentials, p50
//   - backup and restore of a database of ~50 MB (1 MB with --quick) through the backup
//     manager against bare `mariadb-dump` and a bare load with `mariadb`; target 1.3x
//   - the broker's RSS and each instance's RSS with 10 (2 with --quick) instances
// Prints ratios and verdicts; asserts nothing about time. Run as root, instances run as
// `postgres` (InstanceUser).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "core/file.h"
#include "core/process.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/json_numbers.h"
#include "machinery/object.h"
#include "test/bench/bench_util.h"
#include "test/bench/broker_process.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;
using std::chrono::seconds;

constexpr char kService[] = "klutch-a9s-mariadb1011";
constexpr char kPlan[] = "klutch-mariadb-single-nano-ssl-1011";
constexpr char kDataPlan[] = "klutch-mariadb-single-small-ssl-1011";

// mariadb-install-db + mariadbd until `mariadb-admin ping` answers on its socket; seconds.
double MariadbFloor(const std::optional<core::UserIds>& user) {
  fs::path dir = NewTraversableDir("kbm-");
  Chown(dir, user);
  const std::string socket = (dir / "m.sock").string();
  const std::string conf = (dir / "my.cnf").string();
  (void)core::WriteFileAtomic(
      conf, fmt::format("[mariadbd]\ndatadir={}\nsocket={}\nport={}\nbind-address=127.0.0.1\n"
                        "log-error={}\npid-file={}\ninnodb_log_file_size=16M\n",
                        (dir / "data").string(), socket, FreePortNumber(),
                        (dir / "err.log").string(), (dir / "m.pid").string()));
  Chown(dir / "my.cnf", user);
  auto start = BenchClock::now();
  auto install = core::RunProcess(
      {.argv = {"/usr/bin/mariadb-install-db", "--defaults-file=" + conf, "--skip-test-db"},
       .user = user},
      seconds(120));
  auto pid = core::SpawnProcess({.argv = {"/usr/sbin/mariadbd", "--defaults-file=" + conf},
                                 .user = user,
                                 .output_file = dir / "out.log"});
  bool up = install.ok() && install->exit_code == 0 && pid.ok() &&
            Eventually(
                [&] {
                  auto r = core::RunProcess(
                      {.argv = {"mariadb-admin", "--no-defaults", "--socket", socket, "ping"}},
                      seconds(2));
                  // Refused as a user without an account still means it answers.
                  return r.ok() && (r->output.find("alive") != std::string::npos ||
                                    r->output.find("Access denied") != std::string::npos);
                },
                seconds(60));
  double s = Seconds(start, BenchClock::now());
  if (pid.ok()) core::StopProcess(*pid, seconds(30));
  fs::remove_all(dir);
  if (!up) {
    std::cerr << "mariadbd did not start: " << (install.ok() ? install->output : "") << "\n";
    std::exit(1);
  }
  return s;
}

// Runs `mariadb` as a binding over TLS; exits the benchmark when it fails.
std::string MariadbSql(const Json& creds, const fs::path& ca, const std::string& sql,
                       const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {
      "mariadb",  "--no-defaults",
      "--batch",  "--skip-column-names",
      "--ssl-ca", ca.string(),
      "--host",   machinery::GetString(creds, {"host"}),
      "--port",   std::to_string(machinery::AsInt64(creds["port"]).value_or(0)),
      "--user",   machinery::GetString(creds, {"username"})};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(machinery::GetString(creds, {"name"}));
  auto r = core::RunProcess(
      {.argv = argv, .env = {"MYSQL_PWD=" + machinery::GetString(creds, {"password"})}},
      seconds(1200), sql);
  if (!r.ok() || r->exit_code != 0) {
    std::cerr << "mariadb failed: " << (r.ok() ? r->output : r.status().message()) << "\n";
    std::exit(1);
  }
  return std::string(core::Trim(r->output));
}

// RSS of the processes whose command line mentions `needle`, in KiB.
long RssOfProcessesMentioning(const std::string& needle) {
  long total = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    auto pid = core::ParseInt64(e.path().filename().string());
    if (!pid) continue;
    std::string cmd = core::Join(core::ProcessCommandLine(static_cast<pid_t>(*pid)), " ");
    if (cmd.find(needle) != std::string::npos) total += RssKiB(static_cast<pid_t>(*pid));
  }
  return total;
}

int Run(bool quick) {
  auto user = InstanceUser();
  const int runs = quick ? 1 : 5;
  const int instances = quick ? 2 : 10;
  const int megabytes = quick ? 1 : 50;
  fs::path dir = NewTraversableDir("kbs-");

  std::vector<double> floor, provision, bind;
  for (int i = 0; i < runs; ++i) floor.push_back(MariadbFloor(user));
  BrokerProcess broker(dir);
  for (int i = 0; i < runs; ++i) {
    std::string id = "bench-mdb-" + std::to_string(i);
    provision.push_back(broker.Provision("mariadb", id, kService, kPlan));
    auto start = BenchClock::now();
    broker.Bind("mariadb", id, "b", kService, kPlan);
    bind.push_back(Seconds(start, BenchClock::now()));
    broker.Deprovision("mariadb", id, kService);
  }

  // Backup and restore of `megabytes` MB against the bare tools, as the binding runs them.
  broker.Provision("mariadb", "bench-data", kService, kDataPlan);
  Json creds = broker.Bind("mariadb", "bench-data", "b", kService, kDataPlan);
  fs::path ca = dir / "ca.crt";
  (void)core::WriteFileAtomic(ca, machinery::GetString(creds, {"cacrt"}));
  MariadbSql(creds, ca,
             fmt::format("CREATE TABLE filler (id INT PRIMARY KEY, payload VARCHAR(1000));\n"
                         "INSERT INTO filler SELECT seq, REPEAT(MD5(seq), 31) FROM seq_1_to_{};\n",
                         megabytes * 1024));
  fs::path dump = dir / "bare.sql";
  auto t0 = BenchClock::now();
  auto bare_dump =
      core::RunProcess({.argv = {"mariadb-dump", "--no-defaults", "--ssl-ca", ca.string(), "--host",
                                 machinery::GetString(creds, {"host"}), "--port",
                                 std::to_string(machinery::AsInt64(creds["port"]).value_or(0)),
                                 "--user", machinery::GetString(creds, {"username"}),
                                 "--single-transaction", "--result-file=" + dump.string(),
                                 "--databases", machinery::GetString(creds, {"name"})},
                        .env = {"MYSQL_PWD=" + machinery::GetString(creds, {"password"})}},
                       seconds(1200));
  double bare_dump_s = Seconds(t0, BenchClock::now());
  if (!bare_dump.ok() || bare_dump->exit_code != 0) {
    std::cerr << "bare mariadb-dump failed: " << (bare_dump.ok() ? bare_dump->output : "") << "\n";
    return 1;
  }
  auto text = core::ReadFile(dump);
  const size_t size = text.ok() ? text->size() : 0;
  t0 = BenchClock::now();
  MariadbSql(creds, ca, text.ok() ? *text : "", {"--binary-mode"});
  double bare_load_s = Seconds(t0, BenchClock::now());
  double backup_s = broker.BackupManagerJob("mariadb", "/instances/bench-data/backups",
                                            "/instances/bench-data/backups/");
  int64_t backup_id = broker.last_job_id();
  double restore_s = broker.BackupManagerJob(
      "mariadb", fmt::format("/instances/bench-data/backups/{}/restore", backup_id),
      "/instances/bench-data/restores/");
  broker.Deprovision("mariadb", "bench-data", kService);

  // Many instances: the broker's memory and each instance's.
  long rss_before = RssKiB(broker.pid());
  for (int i = 0; i < instances; ++i) {
    broker.Provision("mariadb", "bench-many-" + std::to_string(i), kService, kPlan);
  }
  long rss_many = RssKiB(broker.pid());
  long rss_servers = RssOfProcessesMentioning((dir / "state" / "i").string());

  double floor50 = Percentile(floor, 0.5), p50 = Percentile(provision, 0.5);
  std::cout << fmt::format("klutch-bench-services ({} runs each{})\n", runs,
                           quick ? ", quick" : "");
  std::cout << fmt::format(
      "MariaDB provision mariadb-single-nano-ssl: p50 {:.3f} s; floor (mariadb-install-db + "
      "mariadbd answering) p50 {:.3f} s; ratio {:.2f}; target 1.5x floor + 0.5 s = {:.3f} s: "
      "{}\n",
      p50, floor50, p50 / floor50, 1.5 * floor50 + 0.5, Verdict(p50 <= 1.5 * floor50 + 0.5));
  std::cout << fmt::format("MariaDB bind (HTTP): p50 {:.1f} ms (max {:.1f} ms)\n",
                           Percentile(bind, 0.5) * 1000, Percentile(bind, 1.0) * 1000);
  std::cout << fmt::format(
      "MariaDB backup of a {} MB table ({} bytes dumped): {:.3f} s vs bare mariadb-dump {:.3f} s, "
      "ratio "
      "{:.2f}; target 1.3x: {}\n",
      megabytes, size, backup_s, bare_dump_s, backup_s / bare_dump_s,
      Verdict(backup_s <= 1.3 * bare_dump_s));
  std::cout << fmt::format(
      "MariaDB restore of it: {:.3f} s vs bare load with mariadb {:.3f} s, ratio {:.2f}; target "
      "1.3x: {}\n",
      restore_s, bare_load_s, restore_s / bare_load_s, Verdict(restore_s <= 1.3 * bare_load_s));
  std::cout << fmt::format(
      "{} MariaDB single-nano-ssl instances: broker RSS {:.1f} MiB (idle {:.1f} MiB); servers "
      "{:.1f} MiB in all, {:.1f} MiB each\n",
      instances, rss_many / 1024.0, rss_before / 1024.0, rss_servers / 1024.0,
      rss_servers / 1024.0 / instances);
  return 0;
}

}  // namespace
}  // namespace klutch::testing

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  return klutch::testing::Run(quick);
}
