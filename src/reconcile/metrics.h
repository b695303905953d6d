// Metrics: the Prometheus metrics every controller process exposes on /metrics, named as
// controller-runtime and client-go name theirs so existing dashboards apply:
// workqueue_{depth,adds_total,retries_total,queue_duration_seconds,work_duration_seconds},
// controller_runtime_reconcile_{total,errors_total,time_seconds},
// rest_client_requests_total / rest_client_request_duration_seconds, and
// klutch_informer_restarts_total (relist | rewatch), leader_election_master_status. They live
// in a serving::MetricRegistry the process shares with its own metrics. Thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "client/rest_client.h"
#include "client/workqueue.h"
#include "core/sync.h"
#include "serving/metrics.h"

namespace klutch::reconcile {

class Metrics {
 public:
  // Registers the families in `registry`, which must outlive this.
  explicit Metrics(serving::MetricRegistry& registry);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Hooks to plug into WorkQueueOptions::on_event, RestClientOptions::on_request and
  // InformerOptions::on_restart.
  void OnQueueEvent(const client::WorkQueueEvent& event);
  void OnRequest(std::string_view verb, int code, double seconds);
  void OnInformerRestart(std::string_view resource, std::string_view what);
  // One reconcile of `controller`: result is "success", "error", "requeue" or
  // "requeue_after".
  void OnReconcile(std::string_view controller, std::string_view result, double seconds);
  void SetLeader(std::string_view lease, bool leading);

  // The registry's Prometheus text exposition (version 0.0.4).
  std::string Render() const { return registry_.Render(); }

 private:
  serving::MetricRegistry& registry_;
  serving::GaugeFamily& depth_;
  serving::CounterFamily& adds_;
  serving::CounterFamily& retries_;
  serving::HistogramFamily& queue_duration_;
  serving::HistogramFamily& work_duration_;
  serving::CounterFamily& reconcile_total_;
  serving::CounterFamily& reconcile_errors_;
  serving::HistogramFamily& reconcile_time_;
  serving::CounterFamily& requests_;
  serving::HistogramFamily& request_duration_;
  serving::CounterFamily& restarts_;
  serving::GaugeFamily& leader_;
  // The newest event's sequence per queue, so a late report cannot set an older depth.
  core::Mutex depth_mu_;
  std::map<std::string, uint64_t> depth_sequence_ GUARDED_BY(depth_mu_);
};

}  // namespace klutch::reconcile
