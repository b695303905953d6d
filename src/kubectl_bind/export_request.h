// The export request step of kubectl bind (bind-protocol.md §3.2): reading an
// APIServiceExportRequest manifest (`kubectl bind apiservice`) and creating one on the provider,
// then waiting until the backend accepts or refuses it. Thread-compatible.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "client/rest_client.h"
#include "core/status.h"
#include "kubectl_bind/output.h"
#include "machinery/json.h"

namespace klutch::kubectl_bind {

// Reads an APIServiceExportRequest manifest (YAML or JSON) and checks it with
// apis::klutch::DecodeExportRequest (apiVersion, kind, at least one resource, each named);
// errors start with `source`. Returns the manifest as written.
core::Result<machinery::Json> ParseExportRequest(std::string_view text, const std::string& source);

// Creates `request` in `cluster_namespace` on the provider (generateName export- when it has
// no name; on AlreadyExists with a name, once more with generateName <name>-) and waits, by
// watching it, until its phase is Succeeded (returns it as stored) or Failed (kInvalid with the
// terminalMessage), it is deleted, or `timeout` passes (kTimeout).
core::Result<machinery::Json> CreateExportRequest(client::RestClient& provider,
                                                  const std::string& cluster_namespace,
                                                  machinery::Json request,
                                                  std::chrono::milliseconds timeout,
                                                  const BindOutput& out);

}  // namespace klutch::kubectl_bind
