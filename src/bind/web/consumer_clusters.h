// The consumer page's data (GET /consumer): a user's App Clusters as the Control Plane knows
// them, read with the backend's client: per cluster namespace made for the user (its identity
// annotation; an issuer annotation, when present, must match) its name, ClusterBinding
// heartbeat and Ready, namespaces (APIServiceNamespaces), exports and the claims of each
// export. No HTTP. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "bind/web/web_html.h"
#include "client/rest_client.h"
#include "core/clock.h"
#include "core/status.h"

namespace klutch::bind {

// The clusters of the user `subject` of `issuer`, sorted by their names (clusters without one
// after, by ID); heartbeat ages are relative to `clock`'s now. An error only when the namespaces
// cannot be listed; what cannot be read of one cluster is left out.
core::Result<std::vector<ClusterView>> ConsumerClusters(client::RestClient& admin,
                                                        const std::string& subject,
                                                        const std::string& issuer,
                                                        const core::Clock& clock);

}  // namespace klutch::bind
