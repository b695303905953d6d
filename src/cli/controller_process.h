// What `klutch konnector` and `klutch manager` share as controller processes: starting the
// reconcile::Manager with its metrics endpoint and printing the line tests and operators read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "client/kubeconfig.h"
#include "core/status.h"
#include "reconcile/manager.h"
#include "serving/endpoints.h"

namespace klutch::cli {

struct ServingInfo {
  std::string component;  // "konnector", "manager"
  std::string health_host;
  std::optional<std::pair<std::string, uint16_t>> metrics;  // nullopt: on the health port
  std::string lease;                                        // "namespace/name"
  std::string identity;
};

// The cluster a controller process talks to: `kubeconfig` when given, else in-cluster config,
// else $KUBECONFIG or ~/.kube/config (controller-runtime's order).
core::Result<client::RestConfig> ControllerClusterConfig(const std::string& kubeconfig);

// --health-probe-bind-address and --metrics-bind-address ("0": metrics on the health address)
// as host and port; kInvalid naming the flag.
struct ProbeAddresses {
  std::pair<std::string, uint16_t> health;
  std::optional<std::pair<std::string, uint16_t>> metrics;
};
core::Result<ProbeAddresses> ParseProbeAddresses(const std::string& health,
                                                 const std::string& metrics);

// Starts `manager` (caches, then controllers or the election) and, when asked, the separate
// metrics endpoint (kept in `metrics_endpoint`), then prints
// `<component>: health on HOST:PORT, metrics on HOST:PORT (lease NS/NAME, identity ID)`.
// Errors name the failing flag or step.
core::Status StartControllerProcess(reconcile::Manager& manager, const ServingInfo& info,
                                    std::unique_ptr<serving::Endpoints>& metrics_endpoint);

}  // namespace klutch::cli
