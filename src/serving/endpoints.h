// Endpoints: the small HTTP server every controller process runs beside its work, serving
// /healthz, /livez, /readyz (HealthChecks) and /metrics (MetricRegistry), as
// controller-runtime's health-probe and metrics listeners do. Plain HTTP on the given address
// (loopback by default; in a Pod, the probe address). Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "http/router.h"
#include "serving/health.h"
#include "serving/metrics.h"

namespace klutch::http {
class Server;
}

namespace klutch::serving {

// Routes GET /metrics to `metrics` (text format 0.0.4).
void AddMetricsRoute(http::Router& router, const MetricRegistry& metrics);

class Endpoints {
 public:
  // Listens on `address`:`port` (port 0: any free port). kInternal naming the address when
  // it cannot bind. `health` and `metrics` must outlive the endpoints.
  static core::Result<std::unique_ptr<Endpoints>> Start(const std::string& address, uint16_t port,
                                                        const HealthChecks& health,
                                                        const MetricRegistry& metrics);
  ~Endpoints();
  uint16_t port() const;

 private:
  Endpoints() = default;
  http::Router router_;
  std::unique_ptr<http::Server> server_;
};

// "host:port" (as --metrics-bind-address takes it; ":8080" means all interfaces) into its
// parts. kInvalid naming the flag value when it does not parse.
core::Result<std::pair<std::string, uint16_t>> ParseBindAddress(std::string_view value);

}  // namespace klutch::serving
