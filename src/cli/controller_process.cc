#include "cli/controller_process.h"

#include <iostream>

#include "client/in_cluster.h"

namespace klutch::cli {

core::Result<client::RestConfig> ControllerClusterConfig(const std::string& kubeconfig) {
  if (!kubeconfig.empty()) return client::LoadKubeconfig({.paths = {kubeconfig}});
  auto in_cluster = client::InClusterConfig();
  if (in_cluster.ok() || !core::IsNotFound(in_cluster.status())) return in_cluster;
  return client::LoadKubeconfig();
}

core::Result<ProbeAddresses> ParseProbeAddresses(const std::string& health,
                                                 const std::string& metrics) {
  ProbeAddresses out;
  auto h = serving::ParseBindAddress(health);
  if (!h.ok()) return core::Invalid("--health-probe-bind-address " + h.status().message());
  out.health = *h;
  if (metrics != "0") {
    auto m = serving::ParseBindAddress(metrics);
    if (!m.ok()) return core::Invalid("--metrics-bind-address " + m.status().message());
    out.metrics = *m;
  }
  return out;
}

core::Status StartControllerProcess(reconcile::Manager& manager, const ServingInfo& info,
                                    std::unique_ptr<serving::Endpoints>& metrics_endpoint) {
  if (auto s = manager.Start(); !s.ok()) return s;
  if (info.metrics) {
    auto e = serving::Endpoints::Start(info.metrics->first, info.metrics->second, manager.health(),
                                       manager.metric_registry());
    if (!e.ok()) {
      return core::Status(e.status().reason(), "--metrics-bind-address: " + e.status().message());
    }
    metrics_endpoint = std::move(*e);
  }
  std::cout << info.component << ": health on " << info.health_host << ":" << manager.health_port()
            << ", metrics on "
            << (info.metrics ? info.metrics->first + ":" + std::to_string(metrics_endpoint->port())
                             : info.health_host + ":" + std::to_string(manager.health_port()))
            << " (lease " << info.lease << ", identity " << info.identity << ")\n"
            << std::flush;
  return core::Status::Ok();
}

}  // namespace klutch::cli
