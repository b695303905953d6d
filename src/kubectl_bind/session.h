// The login session of kubectl bind (bind-protocol.md §3.1): which App Cluster logs in (its
// klutch-bind namespace, the cluster ID derived from it, the name its user knows it by), and the
// BindingResponse the login ends with, checked against the session that asked for it. Both
// logins (browser_login.h, device_login.h) use these. Thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "apis/klutch/binding_response.h"
#include "client/rest_client.h"
#include "core/status.h"

namespace klutch::kubectl_bind {

using apis::klutch::BindingResponse;

// Parses a BindingResponse (apis::klutch::DecodeBindingResponse: kind, apiVersion, a
// kubeconfig, at least one request, each an APIServiceExportRequest of
// klutch.anynines.com/v1alpha1) and checks that oauth2CodeGrant.sid is `session_id`.
core::Result<BindingResponse> ParseBindingResponse(std::string_view json,
                                                   const std::string& session_id);
// Whom the login was for, as `kubectl bind` prints it: the display name, else the subject part
// of the id ("" when the response has neither).
std::string DisplayName(const BindingResponse& response);

// The App Cluster's name as its user knows it, sent to the backend as `n` (/authorize and
// /device/authorize), which titles the cluster with it on its /consumer page. `flag` is
// --cluster-name when given: trimmed, "" = send no name, kBadRequest naming --cluster-name when
// longer than 253 bytes or holding control characters (the backend's limits). Without the
// flag, `context_name` (the kubeconfig context in use, what `kubectl config current-context`
// prints) when it fits those limits, else "" (no name sent: the backend shows the cluster ID).
core::Result<std::string> ClusterNameToSend(const std::optional<std::string>& flag,
                                            const std::string& context_name);

// Namespace klutch-bind in the App Cluster (created when missing); returns its UID, from which
// the cluster ID is derived (apis::klutch::ClusterIdFromNamespaceUid).
core::Result<std::string> EnsureBindNamespace(client::RestClient& app);

// The App Cluster's ID for the backend. With `dry_run` nothing is created: kBadRequest when
// namespace klutch-bind does not exist yet.
core::Result<std::string> ClusterId(client::RestClient& app, bool dry_run);

}  // namespace klutch::kubectl_bind
