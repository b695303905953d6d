// Small socket helpers the servers and the sandbox share. Thread-safe.
#pragma once

#include <string>

#include "core/status.h"

namespace klutch::core {

// A TCP port that was free on IPv4 address `host` a moment ago (bound to port 0 and
// released); the caller binds it soon and keeps it. kInvalid for a host that is not an IPv4
// address; kInternal when the socket calls fail.
Result<int> FreeTcpPort(const std::string& host = "127.0.0.1");

}  // namespace klutch::core
