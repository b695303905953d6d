#include "reconcile/metrics.h"

namespace klutch::reconcile {

namespace {
const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> b = serving::ExponentialBuckets(1e-5, 10, 10);
  return b;
}
}  // namespace

Metrics::Metrics(serving::MetricRegistry& r)
    : registry_(r),
      depth_(r.Gauge("workqueue_depth", "Current depth of the workqueue")),
      adds_(r.Counter("workqueue_adds_total", "Total number of adds handled by the workqueue")),
      retries_(
          r.Counter("workqueue_retries_total", "Total number of retries handled by the workqueue")),
      queue_duration_(r.Histogram("workqueue_queue_duration_seconds",
                                  "How long an item stays in the workqueue before being requested",
                                  LatencyBuckets())),
      work_duration_(r.Histogram("workqueue_work_duration_seconds",
                                 "How long processing an item from the workqueue takes",
                                 LatencyBuckets())),
      reconcile_total_(r.Counter("controller_runtime_reconcile_total",
                                 "Total number of reconciliations per controller")),
      reconcile_errors_(r.Counter("controller_runtime_reconcile_errors_total",
                                  "Total number of reconciliation errors per controller")),
      reconcile_time_(r.Histogram("controller_runtime_reconcile_time_seconds",
                                  "Length of time per reconciliation per controller",
                                  serving::ExponentialBuckets(0.005, 2, 14))),
      requests_(r.Counter("rest_client_requests_total",
                          "Number of HTTP requests, partitioned by status code and method")),
      request_duration_(r.Histogram("rest_client_request_duration_seconds",
                                    "Request latency in seconds, partitioned by verb",
                                    LatencyBuckets())),
      restarts_(r.Counter("klutch_informer_restarts_total",
                          "Informer watch restarts, partitioned by resource and kind of restart")),
      leader_(r.Gauge("leader_election_master_status", "1 while this process holds the lease")) {}

Metrics::~Metrics() = default;

void Metrics::OnQueueEvent(const client::WorkQueueEvent& e) {
  using T = client::WorkQueueEvent::Type;
  const serving::Labels labels = {{"name", e.queue}};
  {
    core::MutexLock lock(depth_mu_);
    uint64_t& last = depth_sequence_[e.queue];
    if (e.sequence > last) {
      last = e.sequence;
      depth_.Set(labels, static_cast<double>(e.depth));
    }
  }
  switch (e.type) {
    case T::kAdd:
      adds_.Increment(labels);
      break;
    case T::kRetry:
      retries_.Increment(labels);
      break;
    case T::kGet:
      queue_duration_.Observe(labels, std::chrono::duration<double>(e.queue_latency).count());
      break;
    case T::kDone:
      work_duration_.Observe(labels, std::chrono::duration<double>(e.work_duration).count());
      break;
  }
}

void Metrics::OnRequest(std::string_view verb, int code, double seconds) {
  std::string c = code == 0 ? "<error>" : std::to_string(code);
  requests_.Increment({{"code", c}, {"method", std::string(verb)}});
  request_duration_.Observe({{"verb", std::string(verb)}}, seconds);
}

void Metrics::OnInformerRestart(std::string_view resource, std::string_view what) {
  restarts_.Increment({{"resource", std::string(resource)}, {"kind", std::string(what)}});
}

void Metrics::OnReconcile(std::string_view controller, std::string_view result, double seconds) {
  std::string name(controller);
  reconcile_total_.Increment({{"controller", name}, {"result", std::string(result)}});
  if (result == "error") reconcile_errors_.Increment({{"controller", name}});
  reconcile_time_.Observe({{"controller", name}}, seconds);
}

void Metrics::SetLeader(std::string_view lease, bool leading) {
  leader_.Set({{"name", std::string(lease)}}, leading ? 1 : 0);
}

}  // namespace klutch::reconcile
