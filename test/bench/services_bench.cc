// klutch-bench-services: the data services `klutch broker` runs beside PostgreSQL and KeyValue
// (issue #26), each against its own floor measured in the same run on the same machine:
//   - MariaDB: provision -> last_operation succeeded of mariadb-single-nano-ssl, p50 of N runs,
//     against `mariadb-install-db` + `mariadbd` until it answers; target 1.5x floor + 0.5 s
//   - bind -> credentials, p50
//   - backup and restore of a database of ~50 MB (1 MB with --quick) through the backup
//     manager against bare `mariadb-dump` and a bare load with `mariadb`; target 1.3x
//   - the broker's RSS and each instance's RSS with 10 (2 with --quick) instances
//   - Prometheus: provision of prometheus-single-small (Prometheus and its Alertmanager) against
//     `prometheus` until /-/ready; backup and restore against the snapshot API + tar, and tar +
//     a restart; RSS with 10 instances
//   - Messaging: provision of messaging-single-nano-ssl against rabbitmq-server until its
//     management API answers; backup and restore against the bare definitions API calls
// Prints ratios and verdicts; asserts nothing about time. Run as root, instances run as
// `postgres` (InstanceUser).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "core/file.h"
#include "core/process.h"
#include "core/strings.h"
#include "http/client.h"
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
constexpr char kPromService[] = "klutch-a9s-prometheus";
constexpr char kMqService[] = "klutch-a9s-messaging4";

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

// A bare Prometheus of the bench's own (no auth), for the floor and the bare backup tools.
class BarePrometheus {
 public:
  explicit BarePrometheus(const std::optional<core::UserIds>& user)
      : user_(user), dir_(NewTraversableDir("kbp-")), port_(FreePortNumber()) {
    Chown(dir_, user);
    (void)core::WriteFileAtomic(
        dir_ / "prometheus.yml",
        fmt::format("scrape_configs:\n- job_name: self\n  scrape_interval: 1s\n"
                    "  static_configs: [{{targets: ['127.0.0.1:{}']}}]\n",
                    port_));
    Chown(dir_ / "prometheus.yml", user);
  }
  ~BarePrometheus() {
    Stop();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Starts it; seconds until /-/ready answers 200.
  double Start() {
    auto start = BenchClock::now();
    auto pid = core::SpawnProcess(
        {.argv = {"/usr/bin/prometheus", "--config.file=" + (dir_ / "prometheus.yml").string(),
                  "--storage.tsdb.path=" + (dir_ / "data").string(),
                  fmt::format("--web.listen-address=127.0.0.1:{}", port_),
                  "--web.enable-admin-api"},
         .user = user_,
         .output_file = dir_ / "log"});
    bool up = pid.ok() && Eventually([&] { return Get("/-/ready").first == 200; }, seconds(60));
    if (!up) {
      std::cerr << "prometheus did not start: " << ReadFileOrEmpty(dir_ / "log") << "\n";
      std::exit(1);
    }
    pid_ = *pid;
    return Seconds(start, BenchClock::now());
  }
  void Stop() {
    if (pid_ > 0) core::StopProcess(pid_, seconds(30));
    pid_ = 0;
  }
  std::pair<int, std::string> Get(const std::string& target, const std::string& method = "GET") {
    http::Client client({.port = static_cast<uint16_t>(port_)});
    auto r = client.Do(method, target);
    return r.ok() ? std::pair{r->status, r->body} : std::pair{0, std::string()};
  }
  const fs::path& dir() const { return dir_; }

 private:
  std::optional<core::UserIds> user_;
  fs::path dir_;
  int port_;
  pid_t pid_ = 0;
};

// A bare RabbitMQ node of the bench's own (with its own epmd), for the floor and the bare
// definitions export and import; seconds until its management API answers.
double RabbitmqFloor(const std::optional<core::UserIds>& user, double* bare_export,
                     double* bare_import) {
  fs::path dir = NewTraversableDir("kbq-");
  fs::create_directories(dir / "home");
  const int amqp = FreePortNumber(), api = FreePortNumber(), epmd_port = FreePortNumber(),
            dist = FreePortNumber();
  (void)core::WriteFileAtomic(
      dir / "rabbitmq.conf",
      fmt::format("listeners.tcp.default = 127.0.0.1:{}\nmanagement.tcp.ip = 127.0.0.1\n"
                  "management.tcp.port = {}\ndefault_user = bench\ndefault_pass = bench\n"
                  "default_user_tags.administrator = true\nloopback_users = none\n",
                  amqp, api));
  (void)core::WriteFileAtomic(dir / "enabled_plugins", "[rabbitmq_management].\n");
  Chown(dir, user);
  Chown(dir / "home", user);
  Chown(dir / "rabbitmq.conf", user);
  Chown(dir / "enabled_plugins", user);
  auto epmd = core::SpawnProcess(
      {.argv = {"/usr/bin/epmd", "-port", std::to_string(epmd_port), "-address", "127.0.0.1"},
       .user = user});
  auto start = BenchClock::now();
  auto server = core::SpawnProcess(
      {.argv = {"/usr/lib/rabbitmq/bin/rabbitmq-server"},
       .env = {"HOME=" + (dir / "home").string(), fmt::format("ERL_EPMD_PORT={}", epmd_port),
               "RABBITMQ_NODENAME=bench@localhost", fmt::format("RABBITMQ_DIST_PORT={}", dist),
               "RABBITMQ_MNESIA_BASE=" + (dir / "mnesia").string(),
               "RABBITMQ_LOG_BASE=" + (dir / "log").string(), "RABBITMQ_LOGS=-",
               "RABBITMQ_CONFIG_FILE=" + (dir / "rabbitmq.conf").string(),
               "RABBITMQ_ENABLED_PLUGINS_FILE=" + (dir / "enabled_plugins").string(),
               "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-start_epmd false"},
       .user = user,
       .output_file = dir / "server.log"});
  http::Headers auth;
  auth.Add("Authorization", "Basic " + core::Base64Encode("bench:bench"));
  auto call = [&](const std::string& method, const std::string& target, std::string body = {}) {
    http::Client client({.port = static_cast<uint16_t>(api)});
    http::Headers h = auth;
    if (!body.empty()) h.Add("Content-Type", "application/json");
    auto r = client.Do(method, target, h, std::move(body));
    return r.ok() ? std::pair{r->status, r->body} : std::pair{0, std::string()};
  };
  bool up = server.ok() &&
            Eventually([&] { return call("GET", "/api/overview").first == 200; }, seconds(120));
  double s = Seconds(start, BenchClock::now());
  if (up && bare_export != nullptr) {
    call("PUT", "/api/queues/%2F/bench", "{\"durable\":true}");
    auto t = BenchClock::now();
    auto definitions = call("GET", "/api/definitions");
    *bare_export = Seconds(t, BenchClock::now());
    t = BenchClock::now();
    call("POST", "/api/definitions", definitions.second);
    *bare_import = Seconds(t, BenchClock::now());
  }
  if (server.ok()) core::StopProcess(*server, seconds(60));
  if (epmd.ok()) core::StopProcess(*epmd, seconds(10));
  fs::remove_all(dir);
  if (!up) {
    std::cerr << "rabbitmq-server did not start\n";
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
  // Prometheus: the floor is a bare prometheus until /-/ready; backup and restore against the
  // same snapshot API with tar, and tar with a restart.
  std::vector<double> prom_floor, prom_provision, prom_bind;
  double bare_snapshot_s = 0, bare_unpack_s = 0;
  {
    BarePrometheus bare(user);
    for (int i = 0; i < runs; ++i) {
      prom_floor.push_back(bare.Start());
      if (i + 1 < runs) bare.Stop();
    }
    std::this_thread::sleep_for(seconds(2));  // a few samples
    auto t = BenchClock::now();
    auto snap = bare.Get("/api/v1/admin/tsdb/snapshot", "POST");
    auto name = machinery::ParseJson(snap.second);
    fs::path snapshot =
        bare.dir() / "data" / "snapshots" /
        (name.ok() ? machinery::GetString(*name, {"data", "name"}) : std::string("?"));
    fs::path tarball = dir / "bare-prometheus.tar";
    auto packed = core::RunProcess({.argv = {"tar", "--create", "--file", tarball.string(),
                                             "--directory", snapshot.string(), "."}},
                                   seconds(600));
    bare_snapshot_s = Seconds(t, BenchClock::now());
    t = BenchClock::now();
    bare.Stop();
    fs::path incoming = bare.dir() / "incoming";
    fs::create_directories(incoming);
    auto unpacked = core::RunProcess({.argv = {"tar", "--extract", "--file", tarball.string(),
                                               "--directory", incoming.string()}},
                                     seconds(600));
    fs::rename(bare.dir() / "data", bare.dir() / "old");
    fs::rename(incoming, bare.dir() / "data");
    Chown(bare.dir() / "data", user);
    bare.Start();
    bare_unpack_s = Seconds(t, BenchClock::now());
    if (snap.first != 200 || !packed.ok() || packed->exit_code != 0 || !unpacked.ok() ||
        unpacked->exit_code != 0) {
      std::cerr << "bare snapshot/tar failed: " << snap.second << "\n";
      return 1;  // before the broker starts: nothing is left running
    }
  }
  std::vector<double> mq_floor;
  double bare_export_s = 0, bare_import_s = 0;
  for (int i = 0; i < std::min(runs, 3); ++i) {
    mq_floor.push_back(RabbitmqFloor(user, i == 0 ? &bare_export_s : nullptr, &bare_import_s));
  }
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

  for (int i = 0; i < runs; ++i) {
    std::string id = "bench-prom-" + std::to_string(i);
    prom_provision.push_back(
        broker.Provision("prometheus", id, kPromService, "klutch-prometheus-single-small"));
    auto start = BenchClock::now();
    broker.Bind("prometheus", id, "b", kPromService, "klutch-prometheus-single-small");
    prom_bind.push_back(Seconds(start, BenchClock::now()));
    if (i + 1 < runs) broker.Deprovision("prometheus", id, kPromService);
  }
  const std::string kept = "bench-prom-" + std::to_string(runs - 1);
  std::this_thread::sleep_for(seconds(2));
  double prom_backup_s = broker.BackupManagerJob("prometheus", "/instances/" + kept + "/backups",
                                                 "/instances/" + kept + "/backups/");
  double prom_restore_s = broker.BackupManagerJob(
      "prometheus", fmt::format("/instances/{}/backups/{}/restore", kept, broker.last_job_id()),
      "/instances/" + kept + "/restores/");
  broker.Deprovision("prometheus", kept, kPromService);
  long prom_rss_before = RssKiB(broker.pid());
  for (int i = 0; i < instances; ++i) {
    broker.Provision("prometheus", "bench-prom-many-" + std::to_string(i), kPromService,
                     "klutch-prometheus-single-small");
  }
  long prom_rss_many = RssKiB(broker.pid());
  long prom_rss_servers = RssOfProcessesMentioning((dir / "state" / "i").string()) - rss_servers;

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
  // Messaging: provision and bind of messaging-single-nano-ssl, backup and restore (the
  // definitions) against the bare API calls, RSS with `instances` nodes.
  std::vector<double> mq_provision, mq_bind;
  const std::string kMqPlan = "klutch-messaging-single-nano-ssl";
  for (int i = 0; i < std::min(runs, 3); ++i) {
    std::string id = "bench-mq-" + std::to_string(i);
    mq_provision.push_back(broker.Provision("messaging", id, kMqService, kMqPlan));
    auto start = BenchClock::now();
    broker.Bind("messaging", id, "b", kMqService, kMqPlan);
    mq_bind.push_back(Seconds(start, BenchClock::now()));
  }
  double mq_backup_s = broker.BackupManagerJob("messaging", "/instances/bench-mq-0/backups",
                                               "/instances/bench-mq-0/backups/");
  double mq_restore_s = broker.BackupManagerJob(
      "messaging", fmt::format("/instances/bench-mq-0/backups/{}/restore", broker.last_job_id()),
      "/instances/bench-mq-0/restores/");
  long before_mq = RssOfProcessesMentioning((dir / "state" / "i").string());
  for (int i = std::min(runs, 3); i < instances; ++i) {
    broker.Provision("messaging", "bench-mq-" + std::to_string(i), kMqService, kMqPlan);
  }
  long mq_rss = RssOfProcessesMentioning((dir / "state" / "i").string()) - before_mq;
  const int mq_count = std::max(instances - std::min(runs, 3), 1);

  double pf50 = Percentile(prom_floor, 0.5), pp50 = Percentile(prom_provision, 0.5);
  std::cout << fmt::format(
      "Prometheus provision prometheus-single-small (Prometheus + Alertmanager): p50 {:.3f} s; "
      "floor (prometheus until /-/ready) p50 {:.3f} s; ratio {:.2f}; target 1.5x floor + 0.5 s "
      "= {:.3f} s: {}\n",
      pp50, pf50, pp50 / pf50, 1.5 * pf50 + 0.5, Verdict(pp50 <= 1.5 * pf50 + 0.5));
  std::cout << fmt::format("Prometheus bind (HTTP, a bcrypt hash): p50 {:.1f} ms\n",
                           Percentile(prom_bind, 0.5) * 1000);
  std::cout << fmt::format(
      "Prometheus backup (snapshot + tar): {:.3f} s vs bare snapshot API + tar {:.3f} s, ratio "
      "{:.2f}; target 1.3x: {}\n",
      prom_backup_s, bare_snapshot_s, prom_backup_s / bare_snapshot_s,
      Verdict(prom_backup_s <= 1.3 * bare_snapshot_s));
  std::cout << fmt::format(
      "Prometheus restore: {:.3f} s vs bare stop + untar + start until ready {:.3f} s, ratio "
      "{:.2f}; target 1.3x: {}\n",
      prom_restore_s, bare_unpack_s, prom_restore_s / bare_unpack_s,
      Verdict(prom_restore_s <= 1.3 * bare_unpack_s));
  std::cout << fmt::format(
      "{} Prometheus instances: broker RSS {:.1f} MiB (before {:.1f} MiB); Prometheus + "
      "Alertmanager {:.1f} MiB in all, {:.1f} MiB each pair\n",
      instances, prom_rss_many / 1024.0, prom_rss_before / 1024.0, prom_rss_servers / 1024.0,
      prom_rss_servers / 1024.0 / instances);
  double mf50 = Percentile(mq_floor, 0.5), mp50 = Percentile(mq_provision, 0.5);
  std::cout << fmt::format(
      "Messaging provision messaging-single-nano-ssl (RabbitMQ + its epmd): p50 {:.3f} s; floor "
      "(rabbitmq-server until its management API answers) p50 {:.3f} s; ratio {:.2f}; target "
      "1.5x floor + 0.5 s = {:.3f} s: {}\n",
      mp50, mf50, mp50 / mf50, 1.5 * mf50 + 0.5, Verdict(mp50 <= 1.5 * mf50 + 0.5));
  std::cout << fmt::format("Messaging bind (HTTP: vhost, user, permissions): p50 {:.1f} ms\n",
                           Percentile(mq_bind, 0.5) * 1000);
  std::cout << fmt::format(
      "Messaging backup (definitions export): {:.3f} s vs bare GET /api/definitions {:.3f} s; "
      "restore {:.3f} s vs bare POST {:.3f} s (fixed costs of the job: backup-manager polling "
      "every 10 ms, encryption)\n",
      mq_backup_s, bare_export_s, mq_restore_s, bare_import_s);
  std::cout << fmt::format("Messaging: {} more nodes take {:.1f} MiB, {:.1f} MiB each\n", mq_count,
                           mq_rss / 1024.0, mq_rss / 1024.0 / mq_count);
  return 0;
}

}  // namespace
}  // namespace klutch::testing

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  return klutch::testing::Run(quick);
}
