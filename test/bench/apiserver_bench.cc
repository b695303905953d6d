// Benchmark of `klutch apiserver` (a real process, TLS, SQLite storage) against the floor
// the storage imposes: raw SQLite single-row durable commits measured in the same run.
// Prints rates, latencies and ratios; asserts nothing about time.
//
//   build/bin/klutch-bench-apiserver [--quick]
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/strings.h"
#include "machinery/json.h"
#include "test/support/kube_client.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

using Clock = std::chrono::steady_clock;
using machinery::Json;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

const std::string kKiB(1024 - 160, 'x');  // data so that the stored object is ~1 KiB

std::string ConfigMap(const std::string& name, int64_t t = 0) {
  return Json{{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", {{"name", name}, {"labels", {{"bench", "yes"}}}}},
              {"data", {{"payload", kKiB}, {"t", std::to_string(t)}}}}
      .dump();
}

// Raw SQLite: one 1 KiB row per durable transaction, WAL + synchronous=FULL.
double RawSqliteCommitsPerSecond(const std::filesystem::path& dir, double seconds) {
  sqlite3* db = nullptr;
  sqlite3_open((dir / "raw.db").c_str(), &db);
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
               "CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)",
               nullptr, nullptr, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?1, ?2)", -1, &st, nullptr);
  int64_t n = 0;
  auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    std::string key = "k" + std::to_string(n);
    sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
    sqlite3_bind_text(st, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    sqlite3_bind_blob(st, 2, kKiB.data(), 1024, SQLITE_STATIC);
    sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    ++n;
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  sqlite3_finalize(st);
  sqlite3_close(db);
  return static_cast<double>(n) / elapsed;
}

long RssKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  }
  return -1;
}

struct RateResult {
  double per_second = 0;
  int64_t ops = 0;
  int64_t errors = 0;
};

// `threads` clients, each doing `op(client, thread, i)` until `seconds` pass or `max_ops`
// operations are done in total.
template <typename Op>
RateResult Rate(const ServerCredentials& creds, int threads, double seconds, int64_t max_ops,
                Op op) {
  std::atomic<int64_t> next{0}, done{0}, errors{0};
  std::vector<std::thread> pool;
  auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto client = NewClient(creds);
      while (true) {
        int64_t i = next++;
        if (i >= max_ops ||
            std::chrono::duration<double>(Clock::now() - start).count() >= seconds) {
          break;
        }
        if (op(*client, t, i)) {
          ++done;
        } else {
          ++errors;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  RateResult r;
  r.ops = done.load();
  r.errors = errors.load();
  r.per_second = static_cast<double>(r.ops) / elapsed;
  return r;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

int Run(bool quick) {
  const double secs = quick ? 0.5 : 3.0;
  const int64_t objects = quick ? 3000 : 10000;
  const int watchers = quick ? 10 : 100;
  const int watch_events = quick ? 20 : 200;

  TempDir dir("klutch-bench");
  std::printf("klutch apiserver benchmark (%s run)\n\n", quick ? "quick" : "full");

  double raw = RawSqliteCommitsPerSecond(dir.path(), secs);
  std::printf("baseline  raw SQLite single-row durable commits: %.0f/s\n", raw);

  std::string error;
  auto server = ApiServerProcess::Start(dir.path() / "server", {}, &error);
  if (!server) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  auto creds_r = ReadKubeconfig(server->kubeconfig());
  if (!creds_r.ok()) return 1;
  const ServerCredentials creds = *creds_r;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // controllers settle
  const long rss_start = RssKiB(server->process().pid());

  auto create = [](const char* prefix) {
    return [prefix](http::Client& c, int t, int64_t i) {
      auto r = Call(c, "POST", "/api/v1/namespaces/default/configmaps",
                    ConfigMap(std::string(prefix) + std::to_string(i)));
      return r.ok() && r->status == 201;
    };
  };
  RateResult c1 = Rate(creds, 1, secs, objects, create("one-"));
  RateResult c32 = Rate(creds, 32, secs, objects - c1.ops, create("many-"));
  std::printf("creates   1 client : %8.0f/s  (%.2fx raw SQLite commit rate)%s\n", c1.per_second,
              c1.per_second / raw, c1.errors ? "  ERRORS" : "");
  std::printf("creates  32 clients: %8.0f/s  (%.2fx raw SQLite commit rate)%s\n", c32.per_second,
              c32.per_second / raw, c32.errors ? "  ERRORS" : "");

  // Fill up to `objects` ConfigMaps for the list and memory measurements.
  int64_t have = c1.ops + c32.ops;
  if (have < objects) Rate(creds, 32, 600, objects - have, create("fill-"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const long rss_full = RssKiB(server->process().pid());
  const int64_t stored_for_rss = std::max(have, objects);

  // Gets read 200 objects made for them (the fill above may have made others).
  Rate(creds, 8, 600, 200, create("get-"));
  RateResult gets = Rate(creds, 8, secs, 1ll << 40, [](http::Client& c, int t, int64_t i) {
    auto r = Call(c, "GET", "/api/v1/namespaces/default/configmaps/get-" + std::to_string(i % 200));
    return r.ok() && r->status == 200;
  });
  std::printf("gets      8 clients: %8.0f/s%s\n", gets.per_second, gets.errors ? "  ERRORS" : "");

  auto lister = NewClient(creds);
  std::vector<double> list_ms;
  size_t listed = 0;
  for (int k = 0; k < (quick ? 2 : 5); ++k) {
    auto t0 = Clock::now();
    auto r = Call(*lister, "GET", "/api/v1/namespaces/default/configmaps");
    list_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (r.ok()) listed = Json::parse(r->body)["items"].size();
  }
  std::printf("list of %zu objects: %.1f ms median (%.0f objects/s)\n", listed,
              Percentile(list_ms, 0.5),
              static_cast<double>(listed) / Percentile(list_ms, 0.5) * 1000);

  // Watch delivery: `watchers` streams; each event carries its send time.
  std::mutex mu;
  std::vector<double> latencies_ms;
  std::vector<std::unique_ptr<http::Client>> watch_clients;
  std::vector<std::thread> watch_threads;
  std::atomic<int> started{0};
  for (int w = 0; w < watchers; ++w) {
    watch_clients.push_back(NewClient(creds));
  }
  // The watch starts at the current revision so only the timed updates arrive.
  auto probe = Call(*lister, "GET", "/api/v1/namespaces/default/configmaps?limit=1");
  std::string rv = Json::parse(probe->body)["metadata"]["resourceVersion"].get<std::string>();
  for (int w = 0; w < watchers; ++w) {
    watch_threads.emplace_back([&, w] {
      std::string buffer;
      http::Headers h;
      h.Set("Accept", "application/json");
      ++started;
      int got = 0;
      (void)watch_clients[w]->Stream(
          "GET",
          "/api/v1/namespaces/default/configmaps?watch=true&fieldSelector=metadata.name%3Dwatched"
          "&resourceVersion=" +
              rv,
          h, [&](std::string_view data) {
            buffer += data;
            size_t nl;
            while ((nl = buffer.find('\n')) != std::string::npos) {
              // The receive time is taken first; finding the send time needs no full parse.
              const int64_t now = NowNs();
              auto pos = buffer.find("\"t\":\"");
              int64_t t = pos < nl ? std::atoll(buffer.c_str() + pos + 5) : 0;
              buffer.erase(0, nl + 1);
              if (t == 0) continue;
              double ms = static_cast<double>(now - t) / 1e6;
              std::lock_guard<std::mutex> lock(mu);
              latencies_ms.push_back(ms);
              ++got;
            }
            return got < watch_events;
          });
    });
  }
  while (started < watchers) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // streams established
  auto writer = NewClient(creds);
  (void)Call(*writer, "POST", "/api/v1/namespaces/default/configmaps",
             ConfigMap("watched", NowNs()));
  for (int k = 1; k < watch_events; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    Json patch = {{"data", {{"t", std::to_string(NowNs())}, {"k", std::to_string(k)}}}};
    http::Headers h;
    h.Set("Content-Type", "application/merge-patch+json");
    (void)writer->Do("PATCH", "/api/v1/namespaces/default/configmaps/watched", h, patch.dump());
  }
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (latencies_ms.size() >= static_cast<size_t>(watchers * watch_events)) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& c : watch_clients) c->Disconnect();
  for (auto& t : watch_threads) t.join();
  std::printf(
      "watch delivery to %d watchers: %zu events, p50 %.2f ms, p99 %.2f ms (send -> receive)\n",
      watchers, latencies_ms.size(), Percentile(latencies_ms, 0.5), Percentile(latencies_ms, 0.99));

  double per_object =
      static_cast<double>(rss_full - rss_start) * 1024.0 / static_cast<double>(stored_for_rss);
  std::printf(
      "server RSS: %ld KiB at start, %ld KiB with %lld objects: %.0f bytes/object "
      "(%.0f beyond the ~1 KiB object)\n",
      rss_start, rss_full, static_cast<long long>(stored_for_rss), per_object, per_object - 1024.0);

  std::printf("\n| metric | value | target |\n|---|---|---|\n");
  std::printf("| raw SQLite durable commits/s (baseline) | %.0f | - |\n", raw);
  std::printf("| creates/s, 1 client | %.0f (%.2fx raw) | - |\n", c1.per_second,
              c1.per_second / raw);
  std::printf("| creates/s, 32 clients | %.0f (%.2fx raw) | >= 1x raw and >= 5000 |\n",
              c32.per_second, c32.per_second / raw);
  std::printf("| gets/s, 8 clients | %.0f | >= 20000 |\n", gets.per_second);
  std::printf("| list %zu objects | %.1f ms | - |\n", listed, Percentile(list_ms, 0.5));
  std::printf("| watch p50 / p99, %d watchers | %.2f / %.2f ms | p99 < 5 ms |\n", watchers,
              Percentile(latencies_ms, 0.5), Percentile(latencies_ms, 0.99));
  std::printf("| RSS per stored object beyond its 1 KiB | %.0f B | < 2048 B |\n",
              per_object - 1024.0);
  return (c1.errors + c32.errors + gets.errors) == 0 ? 0 : 2;
}

}  // namespace
}  // namespace klutch::testing

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  return klutch::testing::Run(quick);
}
