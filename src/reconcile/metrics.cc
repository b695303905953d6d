#include "reconcile/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <mutex>

namespace klutch::reconcile {

namespace {
prometheus::Histogram::BucketBoundaries Exponential(double start, double factor, int count) {
  prometheus::Histogram::BucketBoundaries b;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) b.push_back(v);
  return b;
}
}  // namespace

class Metrics::Impl {
 public:
  Impl()
      : registry_(std::make_shared<prometheus::Registry>()),
        depth_(prometheus::BuildGauge()
                   .Name("workqueue_depth")
                   .Help("Current depth of the workqueue")
                   .Register(*registry_)),
        adds_(prometheus::BuildCounter()
                  .Name("workqueue_adds_total")
                  .Help("Total number of adds handled by the workqueue")
                  .Register(*registry_)),
        retries_(prometheus::BuildCounter()
                     .Name("workqueue_retries_total")
                     .Help("Total number of retries handled by the workqueue")
                     .Register(*registry_)),
        queue_duration_(prometheus::BuildHistogram()
                            .Name("workqueue_queue_duration_seconds")
                            .Help("How long an item stays in the workqueue before being requested")
                            .Register(*registry_)),
        work_duration_(prometheus::BuildHistogram()
                           .Name("workqueue_work_duration_seconds")
                           .Help("How long processing an item from the workqueue takes")
                           .Register(*registry_)),
        reconcile_total_(prometheus::BuildCounter()
                             .Name("controller_runtime_reconcile_total")
                             .Help("Total number of reconciliations per controller")
                             .Register(*registry_)),
        reconcile_errors_(prometheus::BuildCounter()
                              .Name("controller_runtime_reconcile_errors_total")
                              .Help("Total number of reconciliation errors per controller")
                              .Register(*registry_)),
        reconcile_time_(prometheus::BuildHistogram()
                            .Name("controller_runtime_reconcile_time_seconds")
                            .Help("Length of time per reconciliation per controller")
                            .Register(*registry_)),
        requests_(prometheus::BuildCounter()
                      .Name("rest_client_requests_total")
                      .Help("Number of HTTP requests, partitioned by status code and method")
                      .Register(*registry_)),
        request_duration_(prometheus::BuildHistogram()
                              .Name("rest_client_request_duration_seconds")
                              .Help("Request latency in seconds, partitioned by verb")
                              .Register(*registry_)),
        restarts_(prometheus::BuildCounter()
                      .Name("klutch_informer_restarts_total")
                      .Help("Informer watch restarts, partitioned by resource and kind of restart")
                      .Register(*registry_)),
        leader_(prometheus::BuildGauge()
                    .Name("leader_election_master_status")
                    .Help("1 while this process holds the lease")
                    .Register(*registry_)) {}

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& depth_;
  prometheus::Family<prometheus::Counter>& adds_;
  prometheus::Family<prometheus::Counter>& retries_;
  prometheus::Family<prometheus::Histogram>& queue_duration_;
  prometheus::Family<prometheus::Histogram>& work_duration_;
  prometheus::Family<prometheus::Counter>& reconcile_total_;
  prometheus::Family<prometheus::Counter>& reconcile_errors_;
  prometheus::Family<prometheus::Histogram>& reconcile_time_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Counter>& restarts_;
  prometheus::Family<prometheus::Gauge>& leader_;
  const prometheus::Histogram::BucketBoundaries latency_buckets_ = Exponential(1e-5, 10, 10);
  const prometheus::Histogram::BucketBoundaries reconcile_buckets_ = Exponential(0.005, 2, 14);
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

void Metrics::OnQueueEvent(const client::WorkQueueEvent& e) {
  using T = client::WorkQueueEvent::Type;
  const prometheus::Labels labels = {{"name", e.queue}};
  impl_->depth_.Add(labels).Set(static_cast<double>(e.depth));
  switch (e.type) {
    case T::kAdd:
      impl_->adds_.Add(labels).Increment();
      break;
    case T::kRetry:
      impl_->retries_.Add(labels).Increment();
      break;
    case T::kGet:
      impl_->queue_duration_.Add(labels, impl_->latency_buckets_)
          .Observe(std::chrono::duration<double>(e.queue_latency).count());
      break;
    case T::kDone:
      impl_->work_duration_.Add(labels, impl_->latency_buckets_)
          .Observe(std::chrono::duration<double>(e.work_duration).count());
      break;
  }
}

void Metrics::OnRequest(std::string_view verb, int code, double seconds) {
  std::string c = code == 0 ? "<error>" : std::to_string(code);
  impl_->requests_.Add({{"code", c}, {"method", std::string(verb)}}).Increment();
  impl_->request_duration_.Add({{"verb", std::string(verb)}}, impl_->latency_buckets_)
      .Observe(seconds);
}

void Metrics::OnInformerRestart(std::string_view resource, std::string_view what) {
  impl_->restarts_.Add({{"resource", std::string(resource)}, {"kind", std::string(what)}})
      .Increment();
}

void Metrics::OnReconcile(std::string_view controller, std::string_view result, double seconds) {
  std::string name(controller);
  impl_->reconcile_total_.Add({{"controller", name}, {"result", std::string(result)}}).Increment();
  if (result == "error") impl_->reconcile_errors_.Add({{"controller", name}}).Increment();
  impl_->reconcile_time_.Add({{"controller", name}}, impl_->reconcile_buckets_).Observe(seconds);
}

void Metrics::SetLeader(std::string_view lease, bool leading) {
  impl_->leader_.Add({{"name", std::string(lease)}}).Set(leading ? 1 : 0);
}

std::string Metrics::Render() const {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(impl_->registry_->Collect());
}

}  // namespace klutch::reconcile
