// HealthChecks: /healthz, /livez and /readyz with named checks, answered as kube-apiserver
// answers them, for every server binary.
//
// Liveness checks are in /livez, readiness checks in /readyz, both in /healthz. Each endpoint
// answers 200 "ok" when all its checks pass, else 500 listing every check ("[+]name ok",
// "[-]name failed: reason withheld") and "<endpoint> check failed"; `?verbose` lists them on
// success too ("<endpoint> check passed"); `?exclude=name` skips a check ("[+]name excluded:
// ok"); `/<endpoint>/<name>` runs one check ("ok", or 500 "internal server error: <reason>").
// Once SetShuttingDown() is called, /readyz (only) fails its "shutdown" check, so load balancers
// stop sending traffic while the process drains. Checks are added before serving; thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "http/router.h"

namespace klutch::serving {

class HealthChecks {
 public:
  using Check = std::function<core::Status()>;

  HealthChecks();
  HealthChecks(const HealthChecks&) = delete;
  HealthChecks& operator=(const HealthChecks&) = delete;
  // A check of the process itself (in /livez, /readyz and /healthz).
  void AddLiveness(std::string name, Check check);
  // A check of whether the process should get traffic (in /readyz and /healthz).
  void AddReadiness(std::string name, Check check);
  void SetShuttingDown() { shutting_down_ = true; }

  // Routes GET /healthz, /livez, /readyz and /<endpoint>/<check> to these checks.
  void AddRoutes(http::Router& router) const;

 private:
  struct Named {
    std::string name;
    Check check;
    bool liveness;
  };
  http::Response Serve(const http::Request& request, const std::string& endpoint,
                       std::string_view only) const;
  std::vector<const Named*> For(std::string_view endpoint) const;

  std::vector<Named> checks_;
  std::atomic<bool> shutting_down_{false};
  const Named shutdown_{"shutdown",
                        [this]() -> core::Status {
                          if (shutting_down_) return core::Unavailable("process is shutting down");
                          return core::Status::Ok();
                        },
                        false};
};

}  // namespace klutch::serving
