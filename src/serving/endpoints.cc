#include "serving/endpoints.h"

#include <fmt/format.h>

#include "core/strings.h"
#include "http/server.h"

namespace klutch::serving {

void AddMetricsRoute(http::Router& router, const MetricRegistry& metrics) {
  router.Get("/metrics", [&metrics](http::Request&, const http::PathParams&) {
    http::Response r;
    r.headers.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    r.body = metrics.Render();
    return r;
  });
}

core::Result<std::unique_ptr<Endpoints>> Endpoints::Start(const std::string& address, uint16_t port,
                                                          const HealthChecks& health,
                                                          const MetricRegistry& metrics) {
  std::unique_ptr<Endpoints> e(new Endpoints());
  health.AddRoutes(e->router_);
  AddMetricsRoute(e->router_, metrics);
  http::ServerOptions so;
  so.address = address;
  so.port = port;
  so.threads = 2;
  so.io_threads = 1;
  KLUTCH_ASSIGN_OR_RETURN(e->server_, http::Server::Start(so, e->router_.AsHandler()));
  return e;
}

Endpoints::~Endpoints() {
  if (server_) server_->Stop();
}

uint16_t Endpoints::port() const { return server_->port(); }

core::Result<std::pair<std::string, uint16_t>> ParseBindAddress(std::string_view value) {
  auto colon = value.rfind(':');
  if (colon == std::string_view::npos) {
    return core::Invalid(fmt::format("\"{}\": must be host:port", value));
  }
  std::string host(value.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  auto port = core::ParseInt64(value.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) {
    return core::Invalid(fmt::format("\"{}\": bad port", value));
  }
  return std::make_pair(host, static_cast<uint16_t>(*port));
}

}  // namespace klutch::serving
