// Benchmark of the client library's informer against a real `klutch apiserver`, with the
// baselines measured in the same run:
//   - initial sync of N 1-KiB ConfigMaps vs. a plain chunked list of the same objects;
//   - event-to-handler latency (p50/p99) under a stream of updates at a fixed rate vs. a
//     bare watch stream (ResourceClient::Watch) receiving the same updates;
//   - resident memory per cached object beyond its JSON size.
// Prints numbers and ratios; asserts nothing about time.
//
//   build/bin/klutch-bench-informer [--quick]
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "client/informer.h"
#include "client/kubeconfig.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

using Clock = std::chrono::steady_clock;
using client::Json;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

long SelfRssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmRSS:")) return std::stol(line.substr(6));
  }
  return 0;
}

const std::string kPayload(1024 - 200, 'x');  // the stored object is ~1 KiB of JSON

Json ConfigMap(const std::string& name, int64_t t) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"labels", {{"bench", "yes"}}}}},
          {"data", {{"payload", kPayload}, {"t", std::to_string(t)}}}};
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Collects handler latencies: now - the send time written into each update.
class LatencySink {
 public:
  void Saw(const Json& obj) {
    std::string t = machinery::GetString(obj, {"data", "t"});
    if (t.empty() || t == "0") return;
    double ms = static_cast<double>(NowNs() - std::stoll(t)) / 1e6;
    std::lock_guard<std::mutex> lock(mu_);
    if (recording_) ms_.push_back(ms);
  }
  void Record(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    recording_ = on;
  }
  std::vector<double> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(ms_);
  }

 private:
  std::mutex mu_;
  bool recording_ = false;
  std::vector<double> ms_;
};

// Sends `count` updates at `rate` per second (round-robin over `objects`), stamping each.
void UpdateStream(client::ResourceClient cms, int objects, int count, int rate) {
  auto start = Clock::now();
  for (int i = 0; i < count; ++i) {
    auto due = start + std::chrono::microseconds(static_cast<int64_t>(i) * 1000000 / rate);
    std::this_thread::sleep_until(due);
    std::string name = "cm-" + std::to_string(i % objects);
    Json patch = {{"data", {{"t", std::to_string(NowNs())}}}};
    auto r = cms.Patch(name, client::PatchType::kMerge, patch.dump());
    if (!r.ok()) std::fprintf(stderr, "update failed: %s\n", r.status().ToString().c_str());
  }
}

int Main(bool quick) {
  const int objects = quick ? 500 : 10000;
  const int updates = quick ? 300 : 5000;
  const int rate = 1000;
  TempDir dir("klutch-bench-informer");
  std::string error;
  auto server = ApiServerProcess::Start(dir.path() / "data", {}, &error);
  if (!server) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  auto config = client::LoadKubeconfig({.paths = {server->kubeconfig()}});
  if (!config.ok()) return 1;
  config->qps = 0;
  auto rest = client::RestClient::New(*config);
  if (!rest.ok()) return 1;
  client::ResourceClient cms(**rest, client::resources::kConfigMaps, "default");

  // Load the objects with a few parallel writers.
  {
    std::vector<std::thread> writers;
    std::atomic<int> next{0};
    for (int w = 0; w < 8; ++w) {
      writers.emplace_back([&] {
        for (int i = next++; i < objects; i = next++) {
          auto r = cms.Create(ConfigMap("cm-" + std::to_string(i), 0));
          if (!r.ok()) std::fprintf(stderr, "create: %s\n", r.status().ToString().c_str());
        }
      });
    }
    for (auto& t : writers) t.join();
  }
  size_t json_bytes = 0;
  // Baseline 1: a plain chunked list of everything.
  auto t0 = Clock::now();
  auto listed = cms.ListAll({.label_selector = "bench=yes", .limit = 500});
  double list_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!listed.ok()) return 1;
  for (const auto& item : (*listed)["items"]) json_bytes += item.dump().size();
  const size_t listed_count = (*listed)["items"].size();
  listed = Json();  // free it before measuring memory

  // Baseline 2: a bare watch receiving the update stream.
  LatencySink raw_sink;
  std::vector<double> raw;
  {
    client::StreamCanceller canceller;
    std::thread watcher([&] {
      (void)cms.Watch(
          {.resource_version = "0"},
          [&](const client::WatchEvent& e) {
            raw_sink.Saw(*e.object);
            return true;
          },
          &canceller);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    raw_sink.Record(true);
    UpdateStream(cms, objects, updates, rate);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    raw_sink.Record(false);
    canceller.Cancel();
    watcher.join();
    raw = raw_sink.Take();
  }

  // The informer: initial sync, memory, then latency under the same stream.
  malloc_trim(0);
  long rss_before = SelfRssKiB();
  size_t heap_before = mallinfo2().uordblks;
  LatencySink sink;
  client::Informer informer(**rest, client::resources::kConfigMaps,
                            {.ns = "default", .label_selector = "bench=yes", .page_size = 500});
  informer.AddEventHandler(
      {.on_update = [&](const client::ObjectPtr&, const client::ObjectPtr& o) { sink.Saw(*o); }});
  t0 = Clock::now();
  informer.Start();
  informer.WaitForSync(std::chrono::minutes(5));
  double sync_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  malloc_trim(0);
  long rss_after = SelfRssKiB();
  size_t heap_after = mallinfo2().uordblks;
  const size_t cached = informer.indexer().Size();
  size_t cached_json_bytes = 0;
  for (const auto& o : informer.indexer().List()) cached_json_bytes += o->dump().size();
  sink.Record(true);
  UpdateStream(cms, objects, updates, rate);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  sink.Record(false);
  auto lat = sink.Take();
  informer.Stop();

  const double per_object =
      static_cast<double>(rss_after - rss_before) * 1024.0 / static_cast<double>(cached);
  // "Beyond its JSON": against the JSON of what the cache holds.
  const double avg_json =
      static_cast<double>(cached_json_bytes) / static_cast<double>(std::max<size_t>(1, cached));
  (void)json_bytes;
  std::printf("objects: %zu cached (%zu listed), average JSON %.0f bytes\n", cached, listed_count,
              avg_json);
  std::printf("initial sync: %.0f ms; plain chunked list: %.0f ms; ratio %.2fx\n", sync_ms, list_ms,
              sync_ms / list_ms);
  const double heap_per_object =
      static_cast<double>(heap_after - heap_before) / static_cast<double>(cached);
  std::printf(
      "memory: RSS +%ld KiB: %.0f bytes/object, %.0f beyond its JSON; heap in use "
      "%.0f bytes/object, %.0f beyond its JSON\n",
      rss_after - rss_before, per_object, per_object - avg_json, heap_per_object,
      heap_per_object - avg_json);
  std::printf(
      "event-to-handler at %d updates/s (%zu samples): p50 %.2f ms, p99 %.2f ms; bare watch "
      "(%zu samples): p50 %.2f ms, p99 %.2f ms; p99 ratio %.2fx\n",
      rate, lat.size(), Percentile(lat, 0.5), Percentile(lat, 0.99), raw.size(),
      Percentile(raw, 0.5), Percentile(raw, 0.99),
      Percentile(lat, 0.99) / std::max(1e-9, Percentile(raw, 0.99)));
  std::printf("\n| measure | value | target |\n|---|---|---|\n");
  std::printf("| initial sync of %zu objects | %.0f ms (%.2fx a plain list) | < 1 s |\n", cached,
              sync_ms, sync_ms / list_ms);
  std::printf("| memory per object beyond its JSON | %.0f B | < 3 KiB |\n", per_object - avg_json);
  std::printf("| event-to-handler p50 / p99 | %.2f / %.2f ms | p99 < 2 ms |\n",
              Percentile(lat, 0.5), Percentile(lat, 0.99));
  // The smoke run checks that everything arrived, never how fast.
  bool ok = cached == static_cast<size_t>(objects) && listed_count == cached && !lat.empty();
  if (!ok) std::fprintf(stderr, "FAILED: not every object or update arrived\n");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace klutch::testing

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  return klutch::testing::Main(quick);
}
