#include "apiserver/metrics.h"

#include <chrono>
#include <initializer_list>
#include <optional>
#include <set>
#include <unordered_map>

#include "apiserver/watch.h"
#include "core/strings.h"
#include "core/sync.h"

namespace klutch::apiserver {

namespace {

const std::vector<double>& RequestBuckets() {
  // kube-apiserver's, with finer steps below 5 ms where an embedded store answers.
  static const std::vector<double> b = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2,
                                        0.4,    0.6,   0.8,    1.0,   1.25, 1.5,   2,    3,   4,
                                        5,      6,     8,      10,    15,   20,    30,   45,  60};
  return b;
}

// The non-resource paths counted under their own name; the rest is "other".
std::string NonResourceLabel(std::string_view path) {
  for (std::string_view known :
       {"/", "/api", "/apis", "/healthz", "/livez", "/readyz", "/version", "/metrics",
        "/openapi/v2", "/openapi/v3", "/.well-known/openid-configuration", "/openid/v1/jwks"}) {
    if (path == known) return std::string(known);
  }
  if (path.starts_with("/api/") || path.starts_with("/apis/")) return "/apis/*";
  if (path.starts_with("/openapi/v3/")) return "/openapi/v3/*";
  for (std::string_view prefix : {"/healthz/", "/livez/", "/readyz/"}) {
    if (path.starts_with(prefix)) return std::string(prefix) + "*";
  }
  return "other";
}

// kube-apiserver's metric verb: GET of a collection is LIST, watches WATCH, apply patches
// APPLY; methods outside kube's set are "other".
std::string MetricVerb(const RequestInfo& info, const http::Request& req) {
  if (info.resource_request) {
    if (info.verb == "watch") return "WATCH";
    if (info.verb == "list") return "LIST";
    if (info.verb == "deletecollection") return "DELETECOLLECTION";
    if (req.method == "PATCH" &&
        req.headers.Get("Content-Type").starts_with("application/apply-patch")) {
      return "APPLY";
    }
  }
  std::string method = core::ToUpper(req.method);
  for (std::string_view known : {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    if (method == known) return method;
  }
  return "other";
}

// kube-apiserver's CleanScope.
std::string Scope(const RequestInfo& info) {
  if (!info.resource_request) return "";
  if (!info.name.empty() || info.verb == "create") return "resource";
  if (!info.ns.empty()) return "namespace";
  return "cluster";
}

}  // namespace

std::string ResourceOfKey(std::string_view key) {
  if (!key.starts_with("/registry/")) return "";
  key.remove_prefix(10);
  auto slash = key.find('/');
  if (slash == std::string_view::npos) return "";
  std::string_view group = key.substr(0, slash);
  std::string_view rest = key.substr(slash + 1);
  std::string_view resource = rest.substr(0, rest.find('/'));
  if (resource.empty()) return "";
  if (group == "core") return std::string(resource);
  return std::string(resource) + "." + std::string(group);
}

class ApiServerMetrics::Impl {
 public:
  explicit Impl(serving::MetricRegistry& r)
      : requests(r.Counter("apiserver_request_total",
                           "Counter of apiserver requests broken out for each verb, dry run "
                           "value, group, version, resource, scope, component, and HTTP "
                           "response code.")),
        durations(r.Histogram("apiserver_request_duration_seconds",
                              "Response latency distribution in seconds for each verb, dry run "
                              "value, group, version, resource, subresource, scope and component.",
                              RequestBuckets())),
        storage(r.Histogram("etcd_request_duration_seconds",
                            "Storage request latency in seconds for each operation and object "
                            "type.",
                            RequestBuckets())),
        objects(r.Gauge("apiserver_storage_objects",
                        "Number of stored objects at the time of last check split by kind.")),
        longrunning(r.Gauge("apiserver_longrunning_requests",
                            "Gauge of all active long-running apiserver requests broken out by "
                            "verb, group, version, resource, scope and component.")) {}

  serving::CounterFamily& requests;
  serving::HistogramFamily& durations;
  serving::HistogramFamily& storage;
  serving::GaugeFamily& objects;
  serving::GaugeFamily& longrunning;

  core::Mutex mu;
  std::map<std::string, int64_t> counts GUARDED_BY(mu);
  // Storage histograms by (operation, resource): found without building a label map.
  std::unordered_map<std::string, serving::Histogram> storage_children GUARDED_BY(mu);
  struct RequestSeries {
    serving::Histogram duration;
    serving::Counter count;
  };
  std::unordered_map<std::string, RequestSeries> request_series GUARDED_BY(mu);
  std::set<std::string> watched_labels GUARDED_BY(mu);  // series set by the last scrape
};

ApiServerMetrics::ApiServerMetrics(serving::MetricRegistry& registry)
    : registry_(registry), impl_(std::make_unique<Impl>(registry)) {
  registry_.OnScrape([impl = impl_.get()] {
    core::MutexLock lock(impl->mu);
    for (const auto& [resource, n] : impl->counts) {
      impl->objects.Set({{"resource", resource}}, static_cast<double>(n));
    }
  });
}

ApiServerMetrics::~ApiServerMetrics() = default;

void ApiServerMetrics::OnRequest(const RequestInfo& info, const http::Request& req,
                                 const ResourceInfo* served, int code, double seconds) {
  const std::string verb = MetricVerb(info, req);
  const bool dry_run = req.Query("dryRun").has_value();
  // Only names the server knows become labels: a client inventing paths must not grow the
  // series (nor put bytes that are not UTF-8 into a scrape).
  const std::string empty;
  const bool known = info.resource_request && served != nullptr;
  const std::string& group = known ? info.api_group : empty;
  const std::string& version = known ? info.api_version : empty;
  const std::string& resource = known ? info.resource : empty;
  std::string subresource;
  if (!info.resource_request) {
    subresource = NonResourceLabel(info.path);
  } else if (known && !info.subresource.empty()) {
    for (const auto& sub : served->subresources) {
      if (sub.name == info.subresource) subresource = info.subresource;
    }
  }
  const std::string scope = Scope(info);
  // The series of this request, found by one key instead of building label maps each time.
  std::string key = verb;
  for (const std::string* part : std::initializer_list<const std::string*>{
           &group, &version, &resource, &subresource, &scope}) {
    key += '|';
    key += *part;
  }
  key += dry_run ? "|All|" : "||";
  key += std::to_string(code);
  std::optional<Impl::RequestSeries> series;
  {
    core::MutexLock lock(impl_->mu);
    if (auto it = impl_->request_series.find(key); it != impl_->request_series.end()) {
      series = it->second;
    }
  }
  if (!series) {
    serving::Labels labels = {
        {"verb", verb},         {"dry_run", dry_run ? "All" : ""},
        {"group", group},       {"version", version},
        {"resource", resource}, {"subresource", subresource},
        {"scope", scope},       {"component", "apiserver"},
    };
    serving::Histogram duration = impl_->durations.With(labels);
    labels["code"] = std::to_string(code);
    series = Impl::RequestSeries{duration, impl_->requests.With(labels)};
    core::MutexLock lock(impl_->mu);
    impl_->request_series.emplace(std::move(key), *series);
  }
  series->duration.Observe(seconds);
  series->count.Increment();
}

void ApiServerMetrics::OnStorage(std::string_view operation, std::string_view key, double seconds) {
  std::string id = std::string(operation) + "|" + ResourceOfKey(key);
  std::optional<serving::Histogram> child;
  {
    core::MutexLock lock(impl_->mu);
    if (auto it = impl_->storage_children.find(id); it != impl_->storage_children.end()) {
      child = it->second;
    }
  }
  if (!child) {
    child = impl_->storage.With(
        {{"operation", std::string(operation)}, {"type", id.substr(operation.size() + 1)}});
    core::MutexLock lock(impl_->mu);
    impl_->storage_children.emplace(id, *child);
  }
  child->Observe(seconds);
}

core::Result<std::unique_ptr<storage::WatchHandle>> ApiServerMetrics::CountObjects(
    storage::Store& store) {
  KLUTCH_ASSIGN_OR_RETURN(storage::ListResult list, store.List({.prefix = "/registry/"}));
  {
    core::MutexLock lock(impl_->mu);
    for (const auto& kv : list.items) ++impl_->counts[ResourceOfKey(kv.key)];
  }
  Impl* impl = impl_.get();
  return store.Watch("/registry/", list.revision,
                     [impl](const std::vector<storage::EventPtr>& events) {
                       core::MutexLock lock(impl->mu);
                       for (const auto& e : events) {
                         if (e->IsCreate()) {
                           ++impl->counts[ResourceOfKey(e->key)];
                         } else if (e->type == storage::Event::Type::kDelete) {
                           --impl->counts[ResourceOfKey(e->key)];
                         }
                       }
                     });
}

void ApiServerMetrics::ReportWatches(const WatchManager& watches) {
  registry_.OnScrape([impl = impl_.get(), &watches] {
    std::map<std::string, size_t> active = watches.ActiveByResource();
    core::MutexLock lock(impl->mu);
    auto labels = [](const std::string& group_resource) {
      auto dot = group_resource.find('.');
      return serving::Labels{
          {"verb", "WATCH"},
          {"group", dot == std::string::npos ? "" : group_resource.substr(dot + 1)},
          {"resource", group_resource.substr(0, dot)},
          {"component", "apiserver"}};
    };
    // Series of watches that ended since the last scrape go away.
    for (const auto& resource : impl->watched_labels) {
      if (!active.count(resource)) impl->longrunning.Remove(labels(resource));
    }
    impl->watched_labels.clear();
    for (const auto& [resource, n] : active) {
      impl->longrunning.Set(labels(resource), static_cast<double>(n));
      impl->watched_labels.insert(resource);
    }
  });
}

namespace {

class MeteredStore final : public storage::Store {
 public:
  MeteredStore(std::unique_ptr<storage::Store> inner, ApiServerMetrics& metrics)
      : inner_(std::move(inner)), metrics_(metrics) {}

  core::Result<std::optional<storage::KeyValue>> Get(std::string_view key) override {
    auto started = Now();
    auto r = inner_->Get(key);
    metrics_.OnStorage("get", key, Since(started));
    return r;
  }
  core::Result<storage::ListResult> List(const storage::ListRequest& request) override {
    auto started = Now();
    auto r = inner_->List(request);
    metrics_.OnStorage("list", request.prefix, Since(started));
    return r;
  }
  core::Result<storage::WriteResult> Write(storage::WriteRequest request) override {
    const char* op = request.op == storage::WriteRequest::Op::kDelete          ? "delete"
                     : request.expected_mod_revision == storage::kMustNotExist ? "create"
                                                                               : "update";
    std::string key = request.key;
    auto started = Now();
    auto r = inner_->Write(std::move(request));
    metrics_.OnStorage(op, key, Since(started));
    return r;
  }
  core::Result<std::unique_ptr<storage::WatchHandle>> Watch(
      std::string prefix, int64_t after_revision, storage::WatchCallback callback) override {
    auto started = Now();
    std::string label = prefix;
    auto r = inner_->Watch(std::move(prefix), after_revision, std::move(callback));
    metrics_.OnStorage("watch", label, Since(started));
    return r;
  }
  int64_t Revision() const override { return inner_->Revision(); }
  bool WaitForRevision(int64_t revision, std::chrono::milliseconds timeout) override {
    return inner_->WaitForRevision(revision, timeout);
  }
  int64_t CompactedRevision() const override { return inner_->CompactedRevision(); }
  core::Status Compact(int64_t revision) override { return inner_->Compact(revision); }

 private:
  static std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }
  static double Since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(Now() - t).count();
  }
  std::unique_ptr<storage::Store> inner_;
  ApiServerMetrics& metrics_;
};

}  // namespace

std::unique_ptr<storage::Store> NewMeteredStore(std::unique_ptr<storage::Store> inner,
                                                ApiServerMetrics& metrics) {
  return std::make_unique<MeteredStore>(std::move(inner), metrics);
}

}  // namespace klutch::apiserver
