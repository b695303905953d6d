// The last step of kubectl bind: the bound APIServiceBindings as a table, the server's Table
// rendering with the columns kubectl get shows. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "client/rest_client.h"
#include "core/status.h"

namespace klutch::kubectl_bind {

// The bindings `names` of klutch-bind (all when empty) as a table (the server's Table rendering,
// columns of priority 0), as kubectl get prints it.
core::Result<std::string> BindingsTable(client::RestClient& app,
                                        const std::vector<std::string>& names);

}  // namespace klutch::kubectl_bind
