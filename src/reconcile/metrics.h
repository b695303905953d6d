// Metrics: the Prometheus metrics every controller process exposes on /metrics, named as
// controller-runtime and client-go name theirs so existing dashboards apply:
// workqueue_{depth,adds_total,retries_total,queue_duration_seconds,work_duration_seconds},
// controller_runtime_reconcile_{total,errors_total,time_seconds},
// rest_client_requests_total / rest_client_request_duration_seconds, and
// klutch_informer_restarts_total (relist | rewatch). prometheus-cpp stays in metrics.cc.
// Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "client/rest_client.h"
#include "client/workqueue.h"

namespace klutch::reconcile {

class Metrics {
 public:
  Metrics();
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

  // The Prometheus text exposition format (version 0.0.4).
  std::string Render() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::reconcile
