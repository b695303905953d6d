// Shared by the benchmarks that drive processes: time, memory of a process, percentiles,
// an unthrottled admin client from a kubeconfig, a /metrics scraper for the counters a
// controller process publishes, and the floor of a PostgreSQL instance (initdb + start) that
// the data-service benchmarks compare with.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "client/rest_client.h"
#include "core/file.h"
#include "core/net.h"
#include "core/process.h"
#include "core/random.h"
#include "http/client.h"
#include "test/support/wait.h"

namespace klutch::testing {

using BenchClock = std::chrono::steady_clock;

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(BenchClock::now().time_since_epoch())
      .count();
}
inline double Seconds(BenchClock::time_point a, BenchClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// VmRSS of a process (this one by default), KiB; -1 when unknown.
inline long RssKiB(pid_t pid = 0) {
  if (pid == 0) pid = ::getpid();
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  }
  return -1;
}

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

inline const char* Verdict(bool met) { return met ? "met" : "missed"; }

// An unthrottled client as the administrator of the server whose kubeconfig is `path`.
inline std::unique_ptr<client::RestClient> AdminClient(const std::filesystem::path& kubeconfig) {
  auto config = client::LoadKubeconfig({.paths = {kubeconfig}});
  if (!config.ok()) return nullptr;
  config->qps = 0;  // the benchmark's own clients are never throttled
  auto rest = client::RestClient::New(*config);
  return rest.ok() ? std::move(*rest) : nullptr;
}

// A watch of one resource in one namespace ("" = all) from "now", re-established when the
// server ends it. `on_event` gets each event (bookmarks and errors left out) with the time it
// was decoded.
class Watcher {
 public:
  using Handler = std::function<void(const client::WatchEvent&, int64_t now_ns)>;
  Watcher(client::RestClient& rest, const client::GroupVersionResource& gvr, const std::string& ns,
          Handler on_event, std::string label_selector = {})
      : rc_(rest, gvr, ns), on_event_(std::move(on_event)), selector_(std::move(label_selector)) {}
  ~Watcher() { Stop(); }

  bool Start() {
    auto list = rc_.List({.label_selector = selector_, .limit = 1});
    if (!list.ok()) return false;
    std::string rv = machinery::GetString(*list, {"metadata", "resourceVersion"});
    thread_ = std::thread([this, rv]() mutable {
      while (!stop_) {
        auto end = rc_.Watch(
            {.label_selector = selector_, .resource_version = rv, .skip_managed_fields = true},
            [&](const client::WatchEvent& e) {
              const int64_t now = NowNs();
              if (e.type == client::EventType::kBookmark || e.type == client::EventType::kError) {
                return true;
              }
              on_event_(e, now);
              return true;
            },
            &canceller_);
        if (end.ok() && !end->last_resource_version.empty()) rv = end->last_resource_version;
        if (!end.ok() || end->gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    return true;
  }
  void Stop() {
    stop_ = true;
    canceller_.Cancel();
    if (thread_.joinable()) thread_.join();
  }

 private:
  client::ResourceClient rc_;
  Handler on_event_;
  std::string selector_;
  client::StreamCanceller canceller_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// ---- a controller process's /metrics ----

struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
};

inline Series ParseSeries(const std::string& key) {
  Series s;
  size_t brace = key.find('{');
  s.name = key.substr(0, brace);
  if (brace == std::string::npos) return s;
  static const std::regex label(R"re((\w+)="((?:[^"\\]|\\.)*)")re");
  std::string body = key.substr(brace);
  for (std::sregex_iterator it(body.begin(), body.end(), label), end; it != end; ++it) {
    s.labels[(*it)[1].str()] = (*it)[2].str();
  }
  return s;
}

using Scrape = std::map<std::string, double>;  // series (name{labels}) -> value

inline std::optional<Scrape> ScrapeMetrics(uint16_t port) {
  http::Client c({.port = port});
  auto r = c.Do("GET", "/metrics");
  if (!r.ok() || r->status != 200) return std::nullopt;
  Scrape out;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    out[line.substr(0, sp)] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return out;
}

inline Scrape Delta(const Scrape& before, const Scrape& after) {
  Scrape d;
  for (const auto& [k, v] : after) {
    auto it = before.find(k);
    d[k] = v - (it == before.end() ? 0.0 : it->second);
  }
  return d;
}

// Sum of family `name` over the series whose labels include `match`.
inline double Sum(const Scrape& s, const std::string& name,
                  const std::map<std::string, std::string>& match = {}) {
  double total = 0;
  for (const auto& [k, v] : s) {
    if (!k.starts_with(name)) continue;
    Series series = ParseSeries(k);
    if (series.name != name) continue;
    bool ok = true;
    for (const auto& [lk, lv] : match) ok = ok && series.labels[lk] == lv;
    if (ok) total += v;
  }
  return total;
}

// ---- the floor of a data-service instance ----

inline const std::filesystem::path kPgBin = "/usr/lib/postgresql/15/bin";

// The account instances run as: `postgres` when run as root (as the broker runs them), else
// this process's own (nullopt). Exits when root has no postgres account.
inline std::optional<core::UserIds> InstanceUser() {
  if (::getuid() != 0) return std::nullopt;
  auto u = core::LookupUser("postgres");
  if (!u.ok()) {
    std::cerr << "the postgres account is needed when run as root\n";
    std::exit(1);
  }
  return *u;
}

// A fresh directory under /tmp that other users may traverse (instances run as their own
// account below it).
inline std::filesystem::path NewTraversableDir(const std::string& prefix) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path("/tmp") / (prefix + core::RandomSuffix(6));
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  return dir;
}

inline void Chown(const std::filesystem::path& p, const std::optional<core::UserIds>& user) {
  if (user) (void)!::chown(p.c_str(), user->uid, user->gid);
}

inline int FreePortNumber() {
  auto port = core::FreeTcpPort("127.0.0.1");
  if (!port.ok()) {
    std::cerr << port.status().message() << "\n";
    std::exit(1);
  }
  return *port;
}

// Fills the database at `uri` with a table `filler` of about `megabytes` MB (compressible
// rows, as data often is); psql's output on failure, "" on success.
inline std::string FillDatabase(const std::string& uri, int megabytes) {
  auto fill = core::RunProcess(
      {.argv = {"psql", uri, "-v", "ON_ERROR_STOP=1", "-qc",
                "CREATE TABLE filler AS SELECT g AS id, repeat(md5(g::text), 8) AS payload FROM "
                "generate_series(1, " +
                    std::to_string(static_cast<int64_t>(megabytes) * 1024 * 1024 / 300) + ") g"}},
      std::chrono::seconds(600));
  if (!fill.ok()) return fill.status().message();
  if (fill->exit_code != 0) return "psql: " + fill->output;
  return "";
}

// Starts `postgres` on `data` (loopback `port`, its log in `log`) as `user` and waits until
// pg_isready answers (60 s at most). The PID (when it started) and whether it answered.
struct StartedPostgres {
  core::Result<pid_t> pid;
  bool up = false;
};
inline StartedPostgres StartPostgresUntilReady(const std::filesystem::path& data, int port,
                                               const std::optional<core::UserIds>& user,
                                               const std::filesystem::path& log) {
  using std::chrono::seconds;
  StartedPostgres out{core::SpawnProcess(
      {.argv = {(kPgBin / "postgres").string(), "-D", data.string(), "-p", std::to_string(port),
                "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="},
       .user = user,
       .output_file = log})};
  out.up = Eventually(
      [&] {
        auto r = core::RunProcess({.argv = {(kPgBin / "pg_isready").string(), "-h", "127.0.0.1",
                                            "-p", std::to_string(port), "-q"}},
                                  seconds(2));
        return r.ok() && r->exit_code == 0;
      },
      seconds(60));
  return out;
}

// `initdb` (with the broker's options) plus `postgres` until pg_isready answers, as `user`;
// seconds. Exits when either fails.
inline double PostgresFloor(const std::optional<core::UserIds>& user) {
  namespace fs = std::filesystem;
  using std::chrono::seconds;
  fs::path dir = NewTraversableDir("kbf-");
  fs::path data = dir / "data";
  Chown(dir, user);
  core::WriteFileAtomic(dir / "pw", "floorpassword\n").ok();
  Chown(dir / "pw", user);
  int port = FreePortNumber();
  auto start = BenchClock::now();
  auto init = core::RunProcess(
      {.argv = {(kPgBin / "initdb").string(), "--pgdata", data.string(), "--username", "admin",
                "--pwfile", (dir / "pw").string(), "--auth", "scram-sha-256", "--encoding", "UTF8",
                "--locale", "C.UTF-8", "--no-sync"},
       .user = user},
      seconds(120));
  if (!init.ok() || init->exit_code != 0) {
    std::cerr << "initdb failed: " << (init.ok() ? init->output : init.status().message()) << "\n";
    std::exit(1);
  }
  StartedPostgres server = StartPostgresUntilReady(data, port, user, dir / "log");
  double s = Seconds(start, BenchClock::now());
  if (server.pid.ok()) core::StopProcess(*server.pid, seconds(10), SIGINT);
  fs::remove_all(dir);
  if (!server.up) {
    std::cerr << "postgres did not start\n";
    std::exit(1);
  }
  return s;
}

}  // namespace klutch::testing
