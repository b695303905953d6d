// BrokerMetrics: the broker's Prometheus metrics (GET /metrics): instances by service and
// reported state, server processes by state and their restarts (both read from the
// InstanceRegistry on every scrape), and the durations of operations, binds and unbinds.
// Thread-safe.
#pragma once

#include <string_view>

#include "http/router.h"
#include "serving/metrics.h"

namespace klutch::broker {

class InstanceRegistry;

class BrokerMetrics {
 public:
  BrokerMetrics();
  BrokerMetrics(const BrokerMetrics&) = delete;
  BrokerMetrics& operator=(const BrokerMetrics&) = delete;

  // Fills the instance and node gauges from `registry` on every scrape; it must outlive
  // this.
  void ScrapeFrom(InstanceRegistry& registry);
  // An asynchronous operation ("provision", ...) ended.
  void ObserveOperation(std::string_view kind, bool ok, double seconds);
  // A bind or unbind ("bind", "unbind") succeeded.
  void ObserveBind(std::string_view operation, double seconds);
  // GET /metrics.
  void AddRoute(http::Router& router) const;

 private:
  serving::MetricRegistry metrics_;
  serving::GaugeFamily* instances_gauge_ = nullptr;
  serving::GaugeFamily* nodes_gauge_ = nullptr;
  serving::GaugeFamily* restarts_gauge_ = nullptr;
  serving::HistogramFamily* op_duration_ = nullptr;
  serving::HistogramFamily* bind_duration_ = nullptr;
};

}  // namespace klutch::broker
