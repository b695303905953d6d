// Benchmark of `klutch konnector` (issue #11) as processes: two `klutch apiserver`s (Control
// Plane and App Cluster, SQLite storage), the provider set up as the bind backend does
// (test/support/bind_provider.h) for a namespaced claim CRD with a status subresource, the
// binding in the App Cluster, and `klutch konnector` as a child process. Baselines come from
// the same run:
//   A: the same claims created directly on the Control Plane (same N, same concurrency);
//   B: a bare watch on the Control Plane receiving writes made on the Control Plane;
//   C: the memory of the two informer caches a konnector needs (the App Cluster's claims and
//      their Control Plane copies), built in this process.
// Measured: time until N claims created in the App Cluster exist upstream; per-object latency
// of a spec update up (App write response -> Control Plane watch event) and of a status patch
// down (Control Plane /status response -> App watch event) at a fixed rate; the konnector's
// RSS at ~1,000 and ~10,000 bound objects; the requests it sends per synced object (its
// /metrics before and after the burst), and where its time goes (reconcile, queue and request
// histograms). Prints numbers, ratios and met/missed against the issue's targets; asserts
// nothing about time. `--quick` (the slow-tier smoke test) uses small N and fails only when an
// operation fails or objects never arrive.
//
//   build/bin/klutch-bench-konnector [--quick] [--skip-10k] [-- extra konnector flags...]
//
// e.g. `-- --kube-api-qps 0` to run the konnector without its client-side rate limit.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/dynamic.h"
#include "client/informer.h"
#include "client/kubeconfig.h"
#include "core/strings.h"
#include "http/client.h"
#include "test/bench/bench_util.h"
#include "test/support/bind_provider.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using Clock = BenchClock;
using machinery::Json;

const client::GroupVersionResource kClaims{"anynines.com", "v1", "postgresqlinstances"};
const std::string kCrdName = "postgresqlinstances.anynines.com";
const std::string kBindNs = "klutch-bind";
const std::string kAppNs = "bench";          // the App Cluster namespace of the claims
const std::string kBaselineNs = "baseline";  // a plain Control Plane namespace (baselines)
constexpr int kWriters = 4;                  // concurrent clients for every burst of creates

// JSON values in `j` (objects, arrays and scalars, each counted once).
size_t Nodes(const Json& j) {
  size_t n = 1;
  if (j.is_structured()) {
    for (const auto& v : j) n += Nodes(v);
  }
  return n;
}

Json Claim(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "anynines.com/v1"},
          {"kind", "PostgresqlInstance"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"version", "14"}, {"plan", "small"}, {"t", "0"}}}};
}

// Creates claims `prefix<from>`..`prefix<to-1>` in `ns` with kWriters concurrent clients;
// returns the seconds taken and counts failures in `errors`.
double CreateClaims(client::RestClient& rest, const std::string& ns, const std::string& prefix,
                    int from, int to, std::atomic<int>& errors) {
  client::ResourceClient rc(rest, kClaims, ns);
  std::atomic<int> next{from};
  std::vector<std::thread> pool;
  auto start = Clock::now();
  for (int w = 0; w < kWriters; ++w) {
    pool.emplace_back([&] {
      for (int i = next++; i < to; i = next++) {
        auto r = rc.Create(Claim(ns, prefix + std::to_string(i)));
        if (!r.ok()) {
          if (errors++ < 5) std::fprintf(stderr, "create: %s\n", r.status().ToString().c_str());
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return Seconds(start, Clock::now());
}

// Counts distinct names seen ADDED; remembers when the n-th arrived.
class ArrivalCounter {
 public:
  void Saw(const std::string& name, int64_t now) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!names_.insert(name).second) return;
    arrivals_.push_back(now);
    cv_.notify_all();
  }
  // Waits until `n` names arrived or `deadline` passes (or `alive` says the konnector died);
  // returns the arrival time of the n-th, or 0.
  int64_t WaitFor(size_t n, Clock::time_point deadline, const std::function<bool()>& alive) {
    std::unique_lock<std::mutex> lock(mu_);
    while (names_.size() < n && Clock::now() < deadline) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
      if (!alive()) break;
    }
    return names_.size() >= n ? arrivals_[n - 1] : 0;
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return names_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> names_;
  std::vector<int64_t> arrivals_;
};

// Write and observation times of unique marker values ("<prefix><k>").
class Stamps {
 public:
  void Sent(const std::string& v, int64_t sent, int64_t answered) {
    std::lock_guard<std::mutex> lock(mu_);
    sent_[v] = sent;
    answered_[v] = answered;
  }
  void Seen(const std::string& v, int64_t now) {
    if (v.empty()) return;
    std::lock_guard<std::mutex> lock(mu_);
    seen_.emplace(v, now);  // the first sighting counts
  }
  size_t seen(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [v, t] : seen_) n += v.starts_with(prefix) && answered_.count(v);
    return n;
  }
  // Latencies in ms from the write's response (or, with from_send, from the moment it was
  // sent) to the first watch event carrying the value.
  std::vector<double> Latencies(const std::string& prefix, bool from_send) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<double> out;
    for (const auto& [v, t] : answered_) {
      if (!v.starts_with(prefix)) continue;
      auto s = seen_.find(v);
      if (s == seen_.end()) continue;
      int64_t from = from_send ? sent_[v] : t;
      out.push_back(static_cast<double>(s->second - from) / 1e6);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, int64_t> sent_, answered_, seen_;
};

// Sends `count` merge patches at `rate`/s to objects `<object_prefix><k % objects>`, each
// carrying marker `<marker_prefix><k>` at `field` (spec.t, or status.t through /status).
int PatchStream(client::RestClient& rest, const std::string& ns, const std::string& object_prefix,
                int objects, const std::string& marker_prefix, bool status, int count, int rate,
                Stamps& stamps) {
  client::ResourceClient rc(rest, kClaims, ns);
  int errors = 0;
  auto start = Clock::now();
  for (int k = 0; k < count; ++k) {
    std::this_thread::sleep_until(start + std::chrono::microseconds(int64_t{k} * 1000000 / rate));
    std::string marker = marker_prefix + std::to_string(k);
    Json patch = {{status ? "status" : "spec", {{"t", marker}}}};
    int64_t sent = NowNs();
    auto r = rc.Patch(object_prefix + std::to_string(k % objects), client::PatchType::kMerge,
                      patch.dump(), {}, status ? "status" : "");
    int64_t answered = NowNs();
    if (!r.ok()) {
      if (errors++ < 5) std::fprintf(stderr, "patch: %s\n", r.status().ToString().c_str());
      continue;
    }
    stamps.Sent(marker, sent, answered);
  }
  return errors;
}

// ---- the konnector's /metrics ----

// Values of family `name` grouped by label `by`.
std::map<std::string, double> By(const Scrape& s, const std::string& name, const std::string& by,
                                 const std::map<std::string, std::string>& match = {}) {
  std::map<std::string, double> out;
  for (const auto& [k, v] : s) {
    if (!k.starts_with(name)) continue;
    Series series = ParseSeries(k);
    if (series.name != name) continue;
    bool ok = true;
    for (const auto& [lk, lv] : match) ok = ok && series.labels[lk] == lv;
    if (ok) out[series.labels[by]] += v;
  }
  return out;
}

// A quantile of a histogram (delta) as the upper bound of the bucket holding it.
double HistogramQuantile(const Scrape& s, const std::string& family, double q,
                         const std::map<std::string, std::string>& match = {}) {
  std::map<double, double> buckets;  // le -> cumulative count
  for (const auto& [k, v] : s) {
    if (!k.starts_with(family + "_bucket")) continue;
    Series series = ParseSeries(k);
    bool ok = true;
    for (const auto& [lk, lv] : match) ok = ok && series.labels[lk] == lv;
    if (!ok) continue;
    const std::string& le = series.labels["le"];
    double bound = le == "+Inf" ? 1e300 : std::strtod(le.c_str(), nullptr);
    buckets[bound] += v;
  }
  if (buckets.empty()) return 0;
  double total = buckets.rbegin()->second;
  for (const auto& [bound, count] : buckets) {
    if (count >= q * total) return bound;
  }
  return buckets.rbegin()->first;
}

std::string Short(const std::string& controller) {
  const std::string p = "klutch-konnector-";
  return controller.starts_with(p) ? controller.substr(p.size()) : controller;
}

// ---- the run ----

class Bench {
 public:
  Bench(bool quick, bool skip_10k, std::vector<std::string> konnector_args)
      : quick_(quick), skip_10k_(skip_10k), konnector_args_(std::move(konnector_args)) {}

  int Run();

 private:
  bool Setup();
  bool StartKonnector();
  bool Alive() {
    if (konnector_->running()) return true;
    if (!reported_death_) {
      reported_death_ = true;
      std::fprintf(stderr, "the konnector exited; log:\n%s\n", Tail().c_str());
    }
    return false;
  }
  std::string Tail() {
    std::string log = ReadFileOrEmpty(konnector_log_);
    return log.size() <= 6000 ? log : "...\n" + log.substr(log.size() - 6000);
  }
  // Waits until the konnector has queued, reconciled and written nothing for 4 scrapes in a
  // row, 500 ms apart (100 ms in the quick run); returns the last scrape.
  std::optional<Scrape> Quiesce(std::chrono::seconds deadline);
  std::optional<Scrape> Metrics() { return ScrapeMetrics(metrics_port_); }

  const bool quick_, skip_10k_;
  const std::vector<std::string> konnector_args_;
  TempDir dir_{"klutch-bench-konnector"};
  std::unique_ptr<ApiServerProcess> cp_, app_;
  std::unique_ptr<client::RestClient> cp_rest_, app_rest_;
  bind::ProviderBinding provider_;
  std::unique_ptr<bind::NamespaceMapper> mapper_;
  std::unique_ptr<ChildProcess> konnector_;
  fs::path konnector_log_;
  uint16_t metrics_port_ = 0;
  bool reported_death_ = false;
};

bool Bench::Setup() {
  std::string error;
  cp_ = ApiServerProcess::Start(dir_.path() / "cp", {}, &error);
  if (!cp_) {
    std::fprintf(stderr, "control plane: %s\n", error.c_str());
    return false;
  }
  app_ = ApiServerProcess::Start(dir_.path() / "app", {}, &error);
  if (!app_) {
    std::fprintf(stderr, "app cluster: %s\n", error.c_str());
    return false;
  }
  cp_rest_ = AdminClient(cp_->kubeconfig());
  app_rest_ = AdminClient(app_->kubeconfig());
  if (!cp_rest_ || !app_rest_) return false;
  auto check = [](const core::Status& s, const char* what) {
    if (!s.ok()) std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    return s.ok();
  };

  // The provider, as the bind backend sets it up.
  if (!check(bind::InstallBindCrds(*cp_rest_), "installing the bind CRDs")) return false;
  if (!check(client::ResourceClient(*cp_rest_, client::resources::kCustomResourceDefinitions)
                 .Create(bind::ExampleClaimCrd())
                 .status(),
             "creating the claim CRD") ||
      !check(bind::WaitForCrdEstablished(*cp_rest_, kCrdName), "claim CRD")) {
    return false;
  }
  auto provider = bind::SetupProvider(*cp_rest_);
  if (!check(provider.status(), "SetupProvider")) return false;
  provider_ = *provider;
  Json claims = Json::array(
      {bind::PermissionClaim("secrets", "Provider"), bind::PermissionClaim("secrets", "Consumer")});
  if (!check(bind::CreateExport(*cp_rest_, provider_.cluster_namespace,
                                bind::ExportFromCrd(bind::ExampleClaimCrd(), claims))
                 .status(),
             "CreateExport")) {
    return false;
  }
  mapper_ = std::make_unique<bind::NamespaceMapper>(*cp_rest_, provider_.cluster_namespace);
  mapper_->Start();

  if (!StartKonnector()) return false;

  // The consumer's part of `kubectl bind`, once the konnector installed the binding CRD.
  if (!check(bind::WaitForCrdEstablished(*app_rest_, "apiservicebindings.klutch.anynines.com",
                                         std::chrono::seconds(60)),
             "apiservicebindings CRD in the App Cluster")) {
    return false;
  }
  auto ns = [](const std::string& name) {
    return Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
  };
  client::ResourceClient app_ns(*app_rest_, client::resources::kNamespaces);
  for (const auto& n : {kBindNs, kAppNs}) {
    if (!check(app_ns.Create(ns(n)).status(), "App Cluster namespace")) return false;
  }
  if (!check(client::ResourceClient(*cp_rest_, client::resources::kNamespaces)
                 .Create(ns(kBaselineNs))
                 .status(),
             "Control Plane namespace")) {
    return false;
  }
  Json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", "kubeconfig-provider"}, {"namespace", kBindNs}}},
                 {"data", {{"kubeconfig", core::Base64Encode(provider_.kubeconfig)}}}};
  if (!check(client::ResourceClient(*app_rest_, client::resources::kSecrets, kBindNs)
                 .Create(secret)
                 .status(),
             "kubeconfig Secret")) {
    return false;
  }
  for (auto& c : claims) c["state"] = "Accepted";
  Json binding = {
      {"apiVersion", bind::kBindApiVersion},
      {"kind", "APIServiceBinding"},
      {"metadata", {{"name", kCrdName}, {"namespace", kBindNs}}},
      {"spec",
       {{"kubeconfigSecretRef",
         {{"name", "kubeconfig-provider"}, {"namespace", kBindNs}, {"key", "kubeconfig"}}},
        {"permissionClaims", claims}}}};
  if (!check(client::ResourceClient(*app_rest_, bind::kApiServiceBindings, kBindNs)
                 .Create(binding)
                 .status(),
             "APIServiceBinding")) {
    return false;
  }
  // The bound CRD is served in the App Cluster.
  if (!check(bind::WaitForCrdEstablished(*app_rest_, kCrdName, std::chrono::seconds(60)),
             "bound CRD in the App Cluster")) {
    std::fprintf(stderr, "konnector log:\n%s\n", Tail().c_str());
    return false;
  }
  return true;
}

bool Bench::StartKonnector() {
  konnector_log_ = dir_.path() / "konnector.log";
  std::vector<std::string> argv = {std::string(KLUTCH_BIN_DIR) + "/klutch",
                                   "konnector",
                                   "--kubeconfig",
                                   app_->kubeconfig().string(),
                                   "--lease-namespace",
                                   "kube-system",
                                   "--health-probe-bind-address",
                                   "127.0.0.1:0",
                                   "--metrics-bind-address",
                                   "127.0.0.1:0"};
  argv.insert(argv.end(), konnector_args_.begin(), konnector_args_.end());
  konnector_ = std::make_unique<ChildProcess>(
      argv, konnector_log_, std::map<std::string, std::string>{{"HOME", dir_.path().string()}});
  const std::regex serving(
      R"(konnector: health on 127\.0\.0\.1:(\d+), metrics on 127\.0\.0\.1:(\d+))");
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    std::string log = ReadFileOrEmpty(konnector_log_);
    std::smatch m;
    if (std::regex_search(log, m, serving)) {
      metrics_port_ = static_cast<uint16_t>(std::stoi(m[2].str()));
      return true;
    }
    if (!Alive()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "the konnector did not print its serving line; log:\n%s\n", Tail().c_str());
  return false;
}

std::optional<Scrape> Bench::Quiesce(std::chrono::seconds deadline) {
  auto until = Clock::now() + deadline;
  double last_activity = -1;
  int stable = 0;
  std::optional<Scrape> s;
  while (Clock::now() < until && Alive()) {
    s = Metrics();
    if (!s) return std::nullopt;
    // Not workqueue_depth: the gauge is set outside the queue's lock, so a late Add event
    // can leave it at 1 on an empty queue.
    double activity = Sum(*s, "klutch_konnector_writes_total") +
                      Sum(*s, "controller_runtime_reconcile_total") +
                      Sum(*s, "workqueue_adds_total");
    if (activity == last_activity) {
      if (++stable >= 4) return s;  // 4 x 500 ms without a write, reconcile or queue add
    } else {
      stable = 0;
    }
    last_activity = activity;
    std::this_thread::sleep_for(std::chrono::milliseconds(quick_ ? 100 : 500));
  }
  std::fprintf(stderr, "the konnector did not become idle within %lld s:\n",
               static_cast<long long>(deadline.count()));
  if (s) {
    for (const auto& [k, v] : *s) {
      if ((k.starts_with("workqueue_depth") && v != 0) ||
          k.starts_with("klutch_konnector_writes_total")) {
        std::fprintf(stderr, "  %s %g\n", k.c_str(), v);
      }
    }
  }
  return std::nullopt;
}

int Bench::Run() {
  // The quick run (the slow-tier smoke test) only shows that every phase still works.
  const int n = quick_ ? 20 : 1000;         // the burst (and baseline A)
  const int n_large = quick_ ? 60 : 10000;  // bound objects for the second RSS reading
  const int updates = quick_ ? 10 : 200;
  // Before an RSS reading: the allocator returns what the last phase freed.
  const auto settle = quick_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(2000);
  const int rate = 50;
  const auto arrive_deadline = std::chrono::seconds(quick_ ? 120 : 300);
  auto alive = [this] { return Alive(); };

  std::printf("klutch konnector benchmark (%s run)\n", quick_ ? "quick" : "full");
  if (!konnector_args_.empty()) {
    std::printf("extra konnector flags:");
    for (const auto& a : konnector_args_) std::printf(" %s", a.c_str());
    std::printf("\n");
  }
  std::printf("\n");
  std::fflush(stdout);
  if (!Setup()) return 1;
  const std::string mapped = mapper_->TargetNamespace(kAppNs);

  // Baseline A: the same claims created directly on the Control Plane.
  std::atomic<int> errors{0};
  const double baseline_a = CreateClaims(*cp_rest_, kBaselineNs, "b-", 0, n, errors);
  if (errors) return 1;

  // A first claim maps the namespace (APIServiceNamespace, provider namespace).
  ArrivalCounter arrived;
  Stamps stamps;
  Watcher cp_watch(*cp_rest_, kClaims, mapped, [&](const client::WatchEvent& e, int64_t now) {
    const std::string name = machinery::Name(*e.object);
    if (e.type == client::EventType::kAdded) arrived.Saw(name, now);
    stamps.Seen(machinery::GetString(*e.object, {"spec", "t"}), now);
  });
  Watcher app_watch(*app_rest_, kClaims, kAppNs, [&](const client::WatchEvent& e, int64_t now) {
    stamps.Seen(machinery::GetString(*e.object, {"status", "t"}), now);
  });
  Watcher baseline_watch(*cp_rest_, kClaims, kBaselineNs,
                         [&](const client::WatchEvent& e, int64_t now) {
                           stamps.Seen(machinery::GetString(*e.object, {"spec", "t"}), now);
                         });
  if (!app_watch.Start() || !baseline_watch.Start()) return 1;
  if (!client::ResourceClient(*app_rest_, kClaims, kAppNs).Create(Claim(kAppNs, "seed")).ok()) {
    return 1;
  }
  // The mapped namespace exists once the seed's copy does; watch it from then on.
  bool seeded = false;
  for (auto until = Clock::now() + arrive_deadline; Clock::now() < until && Alive();) {
    if (client::ResourceClient(*cp_rest_, kClaims, mapped).Get("seed").ok()) {
      seeded = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!seeded) {
    std::fprintf(stderr, "FAILED: the seed claim never reached %s (mapper: %s)\n%s\n",
                 mapped.c_str(), mapper_->LastError().c_str(), Tail().c_str());
    return 1;
  }
  if (!cp_watch.Start()) return 1;
  auto before = Quiesce(std::chrono::seconds(60));
  if (!before) return 1;

  // The burst: N claims in the App Cluster, until all exist upstream.
  const int64_t t0_ns = NowNs();
  const double app_creates = CreateClaims(*app_rest_, kAppNs, "c-", 0, n, errors);
  if (errors) return 1;
  const int64_t all_up = arrived.WaitFor(n, Clock::now() + arrive_deadline, alive);
  if (all_up == 0) {
    std::fprintf(stderr, "FAILED: only %zu of %d claims reached the Control Plane\n%s\n",
                 arrived.count(), n, Tail().c_str());
    return 1;
  }
  const double burst = static_cast<double>(all_up - t0_ns) / 1e9;
  auto after = Quiesce(std::chrono::seconds(120));
  if (!after) return 1;
  const Scrape d = Delta(*before, *after);

  // RSS idle at ~N bound objects.
  std::this_thread::sleep_for(settle);
  const long rss_small = RssKiB(konnector_->pid());

  // Latency at steady state: baseline B (a bare watch on the Control Plane), spec up,
  // status down; each `updates` patches at `rate`/s.
  bool latency_ok = true;
  auto stream = [&](client::RestClient& rest, const std::string& ns, const std::string& objects,
                    const std::string& marker, bool status) {
    if (PatchStream(rest, ns, objects, std::min(n, updates), marker, status, updates, rate,
                    stamps) != 0) {
      latency_ok = false;
    }
    for (auto until = Clock::now() + std::chrono::seconds(60);
         stamps.seen(marker) < static_cast<size_t>(updates) && Clock::now() < until && Alive();) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (stamps.seen(marker) < static_cast<size_t>(updates)) {
      std::fprintf(stderr, "FAILED: %zu of %d %s updates observed\n", stamps.seen(marker), updates,
                   marker.c_str());
      latency_ok = false;
    }
  };
  stream(*cp_rest_, kBaselineNs, "b-", "base-", false);
  stream(*app_rest_, kAppNs, "c-", "up-", false);
  stream(*cp_rest_, mapped, "c-", "down-", true);
  if (!latency_ok) return 1;
  auto base = stamps.Latencies("base-", false), up = stamps.Latencies("up-", false),
       down = stamps.Latencies("down-", false);
  auto base_s = stamps.Latencies("base-", true), up_s = stamps.Latencies("up-", true),
       down_s = stamps.Latencies("down-", true);
  auto lat_metrics = Quiesce(std::chrono::seconds(60));
  if (!lat_metrics) return 1;
  const Scrape dl = Delta(*after, *lat_metrics);
  std::this_thread::sleep_for(settle);
  const long rss_after_updates = RssKiB(konnector_->pid());

  // What the konnector caches per bound claim: both copies, as its informers hold them
  // (managedFields dropped).
  size_t app_bytes = 0, cp_bytes = 0, app_nodes = 0, cp_nodes = 0;
  {
    auto a = client::ResourceClient(*app_rest_, kClaims, kAppNs).Get("c-" + std::to_string(n - 1));
    auto c = client::ResourceClient(*cp_rest_, kClaims, mapped).Get("c-" + std::to_string(n - 1));
    if (!a.ok() || !c.ok()) return 1;
    for (auto* o : {&*a, &*c}) {
      if (o->contains("metadata")) (*o)["metadata"].erase("managedFields");
    }
    app_bytes = a->dump().size();
    cp_bytes = c->dump().size();
    app_nodes = Nodes(*a);
    cp_nodes = Nodes(*c);
  }

  // RSS at n_large bound objects.
  long rss_large = -1;
  double large_seconds = 0;
  if (!skip_10k_) {
    auto t1 = Clock::now();
    const double creates = CreateClaims(*app_rest_, kAppNs, "c-", n, n_large, errors);
    (void)creates;
    if (errors) return 1;
    if (arrived.WaitFor(n_large, Clock::now() + std::chrono::seconds(quick_ ? 120 : 1200), alive) ==
        0) {
      std::fprintf(stderr, "FAILED: only %zu of %d claims reached the Control Plane\n%s\n",
                   arrived.count(), n_large, Tail().c_str());
      return 1;
    }
    large_seconds = Seconds(t1, Clock::now());
    if (!Quiesce(std::chrono::seconds(300))) return 1;
    std::this_thread::sleep_for(settle);
    rss_large = RssKiB(konnector_->pid());
  }
  cp_watch.Stop();
  app_watch.Stop();
  baseline_watch.Stop();

  // Baseline C: the two caches the konnector holds, as plain informers in this process.
  double informer_kib = 0;
  size_t informer_objects = 0;
  if (!skip_10k_) {
    malloc_trim(0);
    const long self_before = RssKiB();
    client::Informer app_cache(*app_rest_, kClaims, {.page_size = 500});
    client::Informer cp_cache(*cp_rest_, kClaims, {.ns = mapped, .page_size = 500});
    app_cache.Start();
    cp_cache.Start();
    if (!app_cache.WaitForSync(std::chrono::minutes(5)) ||
        !cp_cache.WaitForSync(std::chrono::minutes(5))) {
      std::fprintf(stderr, "FAILED: the baseline informers did not sync\n");
      return 1;
    }
    malloc_trim(0);
    const long self_after = RssKiB();
    informer_objects = cp_cache.indexer().Size();
    informer_kib = static_cast<double>(self_after - self_before) /
                   static_cast<double>(std::max<size_t>(1, informer_objects));
    app_cache.Stop();
    cp_cache.Stop();
  }

  // ---- report ----
  const double writes = Sum(d, "klutch_konnector_writes_total");
  const double per_object = writes / n;
  std::printf(
      "baseline A: %d claims created directly on the Control Plane (%d clients): %.2f s "
      "(%.0f/s)\n",
      n, kWriters, baseline_a, n / baseline_a);
  std::printf(
      "burst: %d claims created in the App Cluster in %.2f s (%.0f/s); all %d upstream "
      "after %.2f s (%.0f/s) = %.2fx baseline A\n",
      n, app_creates, n / app_creates, n, burst, n / burst, burst / baseline_a);
  std::printf("konnector writes during the burst: %.0f = %.3f per object (", writes, per_object);
  {
    const char* sep = "";
    for (const auto& [k, v] : d) {
      Series s = ParseSeries(k);
      if (s.name != "klutch_konnector_writes_total" || v == 0) continue;
      std::printf("%s%s %s %.0f", sep, s.labels["cluster"].c_str(), s.labels["verb"].c_str(), v);
      sep = ", ";
    }
  }
  std::printf(")\n");
  {
    auto by_method = By(d, "rest_client_requests_total", "method");
    double total = 0;
    // Whichever clients report to it: the App Cluster's, and the providers' where the
    // konnector observes them too; lease renewals and heartbeats included.
    std::printf("requests in rest_client_requests_total: ");
    for (const auto& [m, v] : by_method) {
      if (v == 0) continue;
      std::printf("%s %.0f  ", m.c_str(), v);
      total += v;
    }
    std::printf("= %.2f per object\n", total / n);
    auto codes = By(d, "rest_client_requests_total", "code");
    std::printf("  by code: ");
    for (const auto& [c, v] : codes) {
      if (v != 0) std::printf("%s %.0f  ", c.c_str(), v);
    }
    std::printf("\n");
  }
  const double app_writes = Sum(d, "klutch_konnector_writes_total", {{"cluster", "app"}});
  const double provider_writes = writes - app_writes;
  std::printf(
      "at upstream's 10 qps: %d objects x %.2f writes = %.0f s through one limiter "
      "(%.1fx the measured %.2f s); with one 10 qps limiter per cluster the App "
      "side's %.0f writes alone take %.0f s, the provider's %.0f take %.0f s\n",
      n, per_object, n * per_object / 10.0, n * per_object / 10.0 / burst, burst, app_writes,
      app_writes / 10.0, provider_writes, provider_writes / 10.0);

  // Where the time went during the burst.
  std::printf("\nwhere the burst's time went (konnector /metrics, deltas over the burst):\n");
  {
    auto count = By(d, "controller_runtime_reconcile_time_seconds_count", "controller");
    auto sum = By(d, "controller_runtime_reconcile_time_seconds_sum", "controller");
    auto qcount = By(d, "workqueue_queue_duration_seconds_count", "name");
    auto qsum = By(d, "workqueue_queue_duration_seconds_sum", "name");
    auto retries = By(d, "workqueue_retries_total", "name");
    auto errs = By(d, "controller_runtime_reconcile_errors_total", "controller");
    std::printf("  %-40s %8s %10s %10s %11s %8s %7s\n", "controller", "reconc.", "mean ms",
                "busy s", "queue ms", "retries", "errors");
    for (const auto& [c, cnt] : count) {
      if (cnt == 0) continue;
      double q = qcount[c] > 0 ? qsum[c] / qcount[c] * 1e3 : 0;
      std::printf("  %-40s %8.0f %10.2f %10.2f %11.1f %8.0f %7.0f\n", Short(c).c_str(), cnt,
                  sum[c] / cnt * 1e3, sum[c], q, retries[c], errs[c]);
    }
    auto rcount = By(d, "rest_client_request_duration_seconds_count", "verb");
    auto rsum = By(d, "rest_client_request_duration_seconds_sum", "verb");
    std::printf("  rest_client_request_duration_seconds (excludes client-side throttling):");
    for (const auto& [v, cnt] : rcount) {
      if (cnt == 0) continue;
      std::printf("  %s %.0f x %.2f ms = %.2f s", v.c_str(), cnt, rsum[v] / cnt * 1e3, rsum[v]);
    }
    std::printf("\n");
    for (const char* dir : {"up", "down"}) {
      double c = Sum(d, "klutch_konnector_sync_duration_seconds_count", {{"direction", dir}});
      double s = Sum(d, "klutch_konnector_sync_duration_seconds_sum", {{"direction", dir}});
      if (c == 0) continue;
      std::printf(
          "  sync %-4s (event -> agreeing write): %.0f, mean %.1f ms, p50 <= %g s, "
          "p99 <= %g s\n",
          dir, c, s / c * 1e3,
          HistogramQuantile(d, "klutch_konnector_sync_duration_seconds", 0.5, {{"direction", dir}}),
          HistogramQuantile(d, "klutch_konnector_sync_duration_seconds", 0.99,
                            {{"direction", dir}}));
    }
  }
  std::printf("\nwhere the latency phase's time went (%d updates each way at %d/s):\n", updates,
              rate);
  {
    auto count = By(dl, "controller_runtime_reconcile_time_seconds_count", "controller");
    auto sum = By(dl, "controller_runtime_reconcile_time_seconds_sum", "controller");
    auto qcount = By(dl, "workqueue_queue_duration_seconds_count", "name");
    auto qsum = By(dl, "workqueue_queue_duration_seconds_sum", "name");
    for (const auto& [c, cnt] : count) {
      if (cnt == 0) continue;
      double q = qcount[c] > 0 ? qsum[c] / qcount[c] * 1e3 : 0;
      std::printf("  %-40s %6.0f reconciles, mean %.2f ms, queue wait mean %.2f ms\n",
                  Short(c).c_str(), cnt, sum[c] / cnt * 1e3, q);
    }
    std::printf("  writes:");
    for (const auto& [k, v] : dl) {
      Series s = ParseSeries(k);
      if (s.name != "klutch_konnector_writes_total" || v == 0) continue;
      std::printf(" %s %s %.0f", s.labels["cluster"].c_str(), s.labels["verb"].c_str(), v);
    }
    std::printf("\n");
  }

  std::printf("\nlatency, write response -> watch event (from the write's send in brackets):\n");
  auto line = [](const char* what, const std::vector<double>& v, const std::vector<double>& s) {
    std::printf("  %-36s %3zu samples: p50 %6.2f ms, p99 %6.2f ms  [p50 %6.2f, p99 %6.2f]\n", what,
                v.size(), Percentile(v, 0.5), Percentile(v, 0.99), Percentile(s, 0.5),
                Percentile(s, 0.99));
  };
  line("baseline B (CP write, CP watch)", base, base_s);
  line("spec up (App write, CP watch)", up, up_s);
  line("status down (CP /status, App watch)", down, down_s);
  const double b99 = Percentile(base, 0.99), b99s = Percentile(base_s, 0.99);
  std::printf("  p99 ratio vs. baseline B: up %.1fx, down %.1fx (from send: %.1fx, %.1fx)\n",
              Percentile(up, 0.99) / std::max(1e-3, b99),
              Percentile(down, 0.99) / std::max(1e-3, b99),
              Percentile(up_s, 0.99) / std::max(1e-3, b99s),
              Percentile(down_s, 0.99) / std::max(1e-3, b99s));

  const long rss_delta = rss_large - rss_small;
  const int added = n_large - n;
  const double kib_per_object = static_cast<double>(rss_delta) / added;
  std::printf(
      "\ncached per bound claim: App copy %zu B of JSON (%zu values), Control Plane copy "
      "%zu B (%zu values)\n",
      app_bytes, app_nodes, cp_bytes, cp_nodes);
  std::printf(
      "konnector RSS idle: %ld KiB at %d bound objects (%ld KiB after the latency "
      "phase)",
      rss_small, n + 1, rss_after_updates);
  if (!skip_10k_) {
    std::printf(", %ld KiB at %d (%d more created in %.1f s, %.0f/s): %.2f KiB per object\n",
                rss_large, n_large + 1, added, large_seconds, added / large_seconds,
                kib_per_object);
    std::printf(
        "baseline C: the same two caches as plain informers in this process: %.2f KiB "
        "per bound object (%zu objects); the konnector holds %.2fx that\n",
        informer_kib, informer_objects, kib_per_object / std::max(1e-9, informer_kib));
  } else {
    std::printf(" (--skip-10k: no second reading)\n");
  }

  std::printf("\n| measure | result | target | |\n|---|---|---|---|\n");
  std::printf("| %d claims App -> all upstream | %.2f s (%.2fx baseline A %.2f s) | < 5 s | %s |\n",
              n, burst, burst / baseline_a, baseline_a, Verdict(burst < 5.0));
  std::printf(
      "| spec up p50 / p99 | %.1f / %.1f ms (p99 %.1fx baseline B %.1f ms) | p99 < 50 ms "
      "| %s |\n",
      Percentile(up, 0.5), Percentile(up, 0.99), Percentile(up, 0.99) / std::max(1e-3, b99), b99,
      Verdict(Percentile(up, 0.99) < 50));
  std::printf(
      "| status down p50 / p99 | %.1f / %.1f ms (p99 %.1fx baseline B) | p99 < 50 ms | "
      "%s |\n",
      Percentile(down, 0.5), Percentile(down, 0.99), Percentile(down, 0.99) / std::max(1e-3, b99),
      Verdict(Percentile(down, 0.99) < 50));
  if (!skip_10k_) {
    std::printf(
        "| RSS per bound object | %.2f KiB (%ld -> %ld KiB; %.2fx baseline C %.2f KiB) | "
        "< 4 KiB | %s |\n",
        kib_per_object, rss_small, rss_large, kib_per_object / std::max(1e-9, informer_kib),
        informer_kib, Verdict(kib_per_object < 4.0));
  }
  std::printf("| konnector writes per object created | %.3f | <= 3 | %s |\n", per_object,
              Verdict(per_object <= 3.0));
  std::printf("| the same writes at upstream's 10 qps | %.0f s | - | |\n", n * per_object / 10.0);
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace klutch::testing

int main(int argc, char** argv) {
  bool quick = false, skip_10k = false;
  std::vector<std::string> konnector_args;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--skip-10k") == 0) {
      skip_10k = true;
    } else if (std::strcmp(argv[i], "--") == 0) {
      konnector_args.assign(argv + i + 1, argv + argc);
      break;
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--skip-10k] [-- konnector flags...]\n", argv[0]);
      return 2;
    }
  }
  return klutch::testing::Bench(quick, skip_10k, std::move(konnector_args)).Run();
}
