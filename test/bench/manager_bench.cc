// Benchmark of `klutch manager`'s composition engine (issue #12) as processes: a `klutch
// apiserver` (SQLite storage) with Klutch's PostgreSQL XRD and a8s-postgresql Composition,
// and `klutch manager` as a child process with the Object provider off, so the benchmark
// plays the provider: it marks composed Objects Ready itself. Baseline from the same run:
// the same Objects created directly (same N, same concurrency).
// Measured: time until N claims created at once have their composed resource; time from a
// composed resource turning Ready (the /status write's response) to its claim turning Ready
// (p50/p99); the manager's API writes per claim over create, become Ready and delete (its
// /metrics before and after); the manager's RSS per claim. Prints numbers, ratios and
// met/missed against the issue's targets; asserts nothing about time. `--quick` (the slow-tier
// smoke test) uses a small N and fails only when an operation fails or objects never arrive.
//
//   build/bin/klutch-bench-manager [--quick] [-- extra manager flags...]
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/dynamic.h"
#include "machinery/object.h"
#include "test/bench/bench_util.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

const client::GroupVersionResource kClaims{"anynines.com", "v1", "postgresqlinstances"};
const client::GroupVersionResource kObjects{"kubernetes.crossplane.io", "v1alpha1", "objects"};
const client::GroupVersionResource kXrds{"apiextensions.crossplane.io", "v1",
                                         "compositeresourcedefinitions"};
const client::GroupVersionResource kCompositions{"apiextensions.crossplane.io", "v1",
                                                 "compositions"};
const fs::path kApi = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/crossplane-api/api";
const std::string kNs = "bench";
constexpr int kWriters = 4;

Json Claim(int i) {
  return {{"apiVersion", "anynines.com/v1"},
          {"kind", "PostgresqlInstance"},
          {"metadata", {{"name", "pg-" + std::to_string(i)}, {"namespace", kNs}}},
          {"spec",
           {{"service", "a9s-postgresql13"},
            {"plan", "postgresql-single-small"},
            {"expose", "Internal"},
            {"compositionRef", {{"name", "a8s-postgresql"}}}}}};
}

// The Object the composition makes of Claim(i), created directly for the baseline.
Json RawObject(int i) {
  return {{"apiVersion", "kubernetes.crossplane.io/v1alpha1"},
          {"kind", "Object"},
          {"metadata", {{"name", "raw-" + std::to_string(i)}, {"labels", {{"bench", "raw"}}}}},
          {"spec",
           {{"forProvider",
             {{"manifest",
               {{"apiVersion", "postgresql.anynines.com/v1beta3"},
                {"kind", "Postgresql"},
                {"metadata", {{"name", "pg-" + std::to_string(i)}, {"namespace", kNs}}},
                {"spec",
                 {{"expose", "Internal"},
                  {"version", 13},
                  {"replicas", 1},
                  {"volumeSize", "10Gi"},
                  {"resources",
                   {{"requests", {{"cpu", "2"}, {"memory", "2Gi"}}},
                    {"limits", {{"cpu", "2"}, {"memory", "2Gi"}}}}}}}}}}},
            {"providerConfigRef", {{"name", "kubernetes-provider"}}}}}};
}

// Runs `op(i)` for i in [0, n) on kWriters threads; returns seconds, counts failures.
double Parallel(int n, const std::function<core::Status(int)>& op, std::atomic<int>& errors) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  auto start = BenchClock::now();
  for (int w = 0; w < kWriters; ++w) {
    pool.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        core::Status s = op(i);
        if (!s.ok() && errors++ < 5) std::fprintf(stderr, "op %d: %s\n", i, s.ToString().c_str());
      }
    });
  }
  for (auto& t : pool) t.join();
  return Seconds(start, BenchClock::now());
}

// Distinct names seen, and when each first matched.
class Seen {
 public:
  void Mark(const std::string& name, int64_t now) {
    std::lock_guard<std::mutex> lock(mu_);
    if (times_.emplace(name, now).second) last_ = std::max(last_, now);
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return times_.size();
  }
  int64_t At(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = times_.find(name);
    return it == times_.end() ? 0 : it->second;
  }
  int64_t last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }
  // Waits until `n` names were seen or `deadline` passes (or `alive` turns false).
  bool WaitFor(size_t n, std::chrono::seconds deadline, const std::function<bool()>& alive) {
    auto until = BenchClock::now() + deadline;
    while (size() < n && BenchClock::now() < until && alive()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return size() >= n;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, int64_t> times_;
  int64_t last_ = 0;
};

bool ReadyTrue(const Json& o) {
  const Json* conditions = machinery::Find(o, {"status", "conditions"});
  if (!conditions || !conditions->is_array()) return false;
  for (const Json& c : *conditions) {
    if (machinery::GetString(c, {"type"}) == "Ready" &&
        machinery::GetString(c, {"status"}) == "True") {
      return true;
    }
  }
  return false;
}

int Run(bool quick, const std::vector<std::string>& extra) {
  const int n = quick ? 10 : 1000;  // quick: the slow-tier smoke test, every step at small N
  TempDir dir("klutch-bench-manager");
  std::string error;
  auto server = ApiServerProcess::Start(dir.path() / "data", {}, &error);
  if (!server) {
    std::fprintf(stderr, "apiserver: %s\n", error.c_str());
    return 1;
  }
  auto rest = AdminClient(server->kubeconfig());
  if (!rest) return 1;

  std::vector<std::string> args = {std::string(KLUTCH_BIN_DIR) + "/klutch",
                                   "manager",
                                   "--kubeconfig",
                                   server->kubeconfig().string(),
                                   "--health-probe-bind-address",
                                   "127.0.0.1:0",
                                   "--metrics-bind-address",
                                   "0",
                                   "--disable-provider-kubernetes"};
  for (const auto& e : extra) args.push_back(e);
  fs::path log = dir.path() / "manager.log";
  ChildProcess manager(args, log);
  uint16_t port = 0;
  {
    const std::regex serving(R"(manager: health on 127\.0\.0\.1:(\d+))");
    auto until = BenchClock::now() + std::chrono::seconds(60);
    std::smatch m;
    while (BenchClock::now() < until && manager.running()) {
      std::string text = ReadFileOrEmpty(log);
      if (std::regex_search(text, m, serving)) {
        port = static_cast<uint16_t>(std::stoi(m[1].str()));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (port == 0) {
      std::fprintf(stderr, "the manager did not come up:\n%s\n", ReadFileOrEmpty(log).c_str());
      return 1;
    }
  }
  auto alive = [&] { return manager.running(); };
  for (const fs::path& file :
       {kApi / "common/postgresql_definition.yaml", kApi / "a8s/postgresql/composition.yaml"}) {
    auto object = machinery::ParseYaml(ReadFileOrEmpty(file));
    if (!object.ok()) return 1;
    const auto& gvr = machinery::Kind(*object) == "Composition" ? kCompositions : kXrds;
    auto r = client::ResourceClient(*rest, gvr).Create(*object);
    if (!r.ok()) {
      std::fprintf(stderr, "create %s: %s\n", file.c_str(), r.status().ToString().c_str());
      return 1;
    }
  }
  (void)client::ResourceClient(*rest, client::resources::kNamespaces)
      .Create({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}});
  {
    auto until = BenchClock::now() + std::chrono::seconds(60);
    bool offered = false;
    while (!offered && BenchClock::now() < until) {
      auto xrd = client::ResourceClient(*rest, kXrds).Get("xpostgresqlinstances.anynines.com");
      offered = xrd.ok() && client::ResourceClient(*rest, kClaims, kNs).List({.limit = 1}).ok();
      if (offered) {
        const Json* c = machinery::Find(*xrd, {"status", "conditions"});
        offered = c && machinery::Dump(*c).find("\"Offered\"") != std::string::npos;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!offered) {
      std::fprintf(stderr, "the XRD was not offered:\n%s\n", ReadFileOrEmpty(log).c_str());
      return 1;
    }
  }
  // Pauses for the manager to settle between phases (short in the quick run, which asserts
  // nothing about the numbers).
  const auto pause = quick ? std::chrono::milliseconds(300) : std::chrono::milliseconds(1000);
  std::this_thread::sleep_for(pause);
  std::atomic<int> errors{0};

  // Baseline A: the composed Objects created directly.
  client::ResourceClient objects(*rest, kObjects);
  double raw = Parallel(
      n, [&](int i) { return objects.Create(RawObject(i)).status(); }, errors);
  (void)objects.DeleteCollection({.label_selector = "bench=raw"});
  std::this_thread::sleep_for(pause);

  // Watches: composed Objects appearing, claims turning Ready, claims going away.
  Seen composed, claim_ready, claim_gone;
  std::mutex owner_mu;
  std::unordered_map<std::string, std::string> claim_of;  // Object -> claim
  Watcher object_watch(
      *rest, kObjects, "",
      [&](const client::WatchEvent& e, int64_t now) {
        if (e.type != client::EventType::kAdded || !e.object) return;
        std::string name = machinery::Name(*e.object);
        {
          std::lock_guard<std::mutex> lock(owner_mu);
          claim_of[name] =
              machinery::GetString(*e.object, {"metadata", "labels", "crossplane.io/claim-name"});
        }
        composed.Mark(name, now);
      },
      "crossplane.io/composite");
  Watcher claim_watch(*rest, kClaims, kNs, [&](const client::WatchEvent& e, int64_t now) {
    if (!e.object) return;
    std::string name = machinery::Name(*e.object);
    if (e.type == client::EventType::kDeleted) claim_gone.Mark(name, now);
    if (ReadyTrue(*e.object)) claim_ready.Mark(name, now);
  });
  if (!object_watch.Start() || !claim_watch.Start()) return 1;

  const long rss_idle = RssKiB(manager.pid());
  auto before = ScrapeMetrics(port);
  if (!before) return 1;

  // 1. N claims at once.
  int64_t t0 = NowNs();
  double create = Parallel(
      n,
      [&](int i) { return client::ResourceClient(*rest, kClaims, kNs).Create(Claim(i)).status(); },
      errors);
  if (!composed.WaitFor(n, std::chrono::seconds(quick ? 60 : 300), alive)) {
    std::fprintf(stderr, "only %zu of %d composed resources appeared\n%s\n", composed.size(), n,
                 ReadFileOrEmpty(log).c_str());
    return 1;
  }
  double all_composed = static_cast<double>(composed.last() - t0) / 1e9;
  // Let the claims settle (Synced, Ready=False) before measuring memory.
  std::this_thread::sleep_for(quick ? std::chrono::milliseconds(500) : std::chrono::seconds(5));
  const long rss_loaded = RssKiB(manager.pid());

  // 2. Composed resources turn Ready at 200/s; the claim follows.
  std::unordered_map<std::string, int64_t> answered;  // claim -> /status response
  {
    std::vector<std::pair<std::string, std::string>> pairs;
    {
      std::lock_guard<std::mutex> lock(owner_mu);
      for (const auto& [object, claim] : claim_of) pairs.emplace_back(object, claim);
    }
    const int rate = 200;
    auto start = BenchClock::now();
    int k = 0;
    for (const auto& [object, claim] : pairs) {
      std::this_thread::sleep_until(start +
                                    std::chrono::microseconds(int64_t{k++} * 1000000 / rate));
      Json patch = {
          {"status",
           {{"conditions", Json::array({{{"type", "Ready"},
                                         {"status", "True"},
                                         {"reason", "Available"},
                                         {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}};
      auto r = objects.Patch(object, client::PatchType::kMerge, patch.dump(), {}, "status");
      if (!r.ok()) {
        if (errors++ < 5) std::fprintf(stderr, "status: %s\n", r.status().ToString().c_str());
        continue;
      }
      answered[claim] = NowNs();
    }
  }
  if (!claim_ready.WaitFor(answered.size(), std::chrono::seconds(120), alive)) {
    std::fprintf(stderr, "only %zu of %zu claims turned Ready\n", claim_ready.size(),
                 answered.size());
    return 1;
  }
  std::vector<double> propagation;
  for (const auto& [claim, at] : answered) {
    int64_t ready = claim_ready.At(claim);
    if (ready) propagation.push_back(static_cast<double>(ready - at) / 1e6);
  }

  // 3. Delete every claim; Foreground, so each waits for its XR and Object.
  int64_t d0 = NowNs();
  Parallel(
      n,
      [&](int i) {
        return client::ResourceClient(*rest, kClaims, kNs)
            .Delete("pg-" + std::to_string(i))
            .status();
      },
      errors);
  if (!claim_gone.WaitFor(n, std::chrono::seconds(quick ? 60 : 300), alive)) {
    std::fprintf(stderr, "only %zu of %d claims were deleted\n", claim_gone.size(), n);
    return 1;
  }
  double deleted = static_cast<double>(claim_gone.last() - d0) / 1e9;
  std::this_thread::sleep_for(2 * pause);
  auto after = ScrapeMetrics(port);
  if (!after) return 1;
  object_watch.Stop();
  claim_watch.Stop();
  const Scrape d = Delta(*before, *after);
  double writes = 0;
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE"}) {
    writes += Sum(d, "rest_client_requests_total", {{"method", method}});
  }
  double reads = Sum(d, "rest_client_requests_total", {{"method", "GET"}});

  const double per_claim_kib = static_cast<double>(rss_loaded - rss_idle) / n;
  std::printf("klutch manager, %d PostgreSQL claims (a8s-postgresql, Foreground deletion)\n", n);
  std::printf("  baseline: %d Objects created directly          %7.2f s (%.0f/s)\n", n, raw,
              n / raw);
  std::printf("  claims created (%d writers)                      %7.2f s\n", kWriters, create);
  std::printf(
      "  every composed resource exists after            %7.2f s  = %.2fx the raw creates"
      "   target < 5 s: %s\n",
      all_composed, all_composed / raw, Verdict(all_composed < 5));
  std::printf(
      "  composed Ready -> claim Ready  p50 %6.1f ms  p99 %6.1f ms  (n=%zu)"
      "   target p99 < 50 ms: %s\n",
      Percentile(propagation, 0.5), Percentile(propagation, 0.99), propagation.size(),
      Verdict(Percentile(propagation, 0.99) < 50));
  std::printf("  all claims deleted after                        %7.2f s\n", deleted);
  std::printf(
      "  manager writes per claim lifecycle              %7.2f   (reads %.2f)"
      "   target <= 6: %s\n",
      writes / n, reads / n, Verdict(writes / n <= 6));
  std::printf(
      "  manager RSS: idle %ld KiB, with %d claims %ld KiB = %.2f KiB/claim"
      "   target < 8 KiB: %s\n",
      rss_idle, n, rss_loaded, per_claim_kib, Verdict(per_claim_kib < 8));
  std::printf("  errors: %d\n", errors.load());
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace klutch::testing

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<std::string> extra;
  bool rest = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (rest) {
      extra.push_back(a);
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--") {
      rest = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [-- extra manager flags...]\n", argv[0]);
      return 2;
    }
  }
  return klutch::testing::Run(quick, extra);
}
