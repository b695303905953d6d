#include "broker/broker_metrics.h"

#include <string>

#include "broker/instance_registry.h"
#include "serving/endpoints.h"

namespace klutch::broker {

BrokerMetrics::BrokerMetrics() {
  instances_gauge_ = &metrics_.Gauge("klutch_broker_instances",
                                     "Instances by service and state (failed includes "
                                     "instances with a node being restarted)");
  op_duration_ = &metrics_.Histogram("klutch_broker_operation_duration_seconds",
                                     "Duration of asynchronous operations by kind and result",
                                     serving::ExponentialBuckets(0.05, 2, 14));
  bind_duration_ =
      &metrics_.Histogram("klutch_broker_bind_duration_seconds", "Duration of binds and unbinds",
                          serving::ExponentialBuckets(0.005, 2, 12));
  nodes_gauge_ = &metrics_.Gauge("klutch_broker_nodes", "Server processes by state");
  restarts_gauge_ =
      &metrics_.Gauge("klutch_broker_node_restarts",
                      "Restarts of crashed server processes since the broker started");
}

void BrokerMetrics::ScrapeFrom(InstanceRegistry& registry) {
  metrics_.OnScrape([this, &registry] {
    for (const auto& [key, n] : registry.CountByServiceAndState()) {
      instances_gauge_->Set({{"service", key.first}, {"state", key.second}}, n);
    }
    engines::NodeCounts nc = registry.Nodes();
    nodes_gauge_->Set({{"state", "up"}}, nc.up);
    nodes_gauge_->Set({{"state", "starting"}}, nc.starting);
    nodes_gauge_->Set({{"state", "down"}}, nc.down);
    restarts_gauge_->Set({}, static_cast<double>(nc.restarts));
  });
}

void BrokerMetrics::ObserveOperation(std::string_view kind, bool ok, double seconds) {
  op_duration_->Observe({{"operation", std::string(kind)}, {"result", ok ? "success" : "failure"}},
                        seconds);
}

void BrokerMetrics::ObserveBind(std::string_view operation, double seconds) {
  bind_duration_->Observe({{"operation", std::string(operation)}}, seconds);
}

void BrokerMetrics::AddRoute(http::Router& router) const {
  serving::AddMetricsRoute(router, metrics_);
}

}  // namespace klutch::broker
