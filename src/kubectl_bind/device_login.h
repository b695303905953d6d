// The device login of `kubectl bind <URL> --headless` (docs/bind-backend.md, ADR 0013): the user
// opens the printed URL on any device and enters the code; kubectl bind polls the backend until
// it answers with a BindingResponse (one API named up front) or a DeviceSession, with which it
// binds the chosen APIs one by one. Thread-compatible (one login at a time).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "client/rest_client.h"
#include "core/status.h"
#include "kubectl_bind/bindings.h"
#include "kubectl_bind/output.h"
#include "kubectl_bind/provider_discovery.h"
#include "kubectl_bind/session.h"

namespace klutch::kubectl_bind {

// The form that starts a device login at the backend's deviceAuthorizationURL: s=<sid>,
// c=<cid> and n=<cluster_name> when not empty.
std::vector<std::pair<std::string, std::string>> DeviceAuthorizeForm(
    const std::string& session_id, const std::string& cluster_id, const std::string& cluster_name);

struct DeviceLoginOptions {
  std::string session_id, cluster_id, cluster_name;
  std::vector<std::string> apis;  // --api values, <resource>.<group>
  bool accept_claims = false;     // --accept-permission-claims
  std::string ca_pem;             // the backend's CA ("" = the system's)
  std::chrono::milliseconds timeout{};
  std::string timeout_text;  // --timeout as given, for messages
};
// The device authorization grant through the backend. One --api (or a backend without
// bindURL): the token answer is that API's BindingResponse. Otherwise the answer is a
// DeviceSession: the user's APIs (the --api values, or chosen from its offer on a terminal) are
// bound with it one by one, all with this one login. The permission claims of the chosen APIs
// are decided (into `answers`, asking through `out`) from the offer, before the first of them
// is bound on the provider. Progress goes to stderr.
core::Result<std::vector<BindingResponse>> DeviceLogin(client::RestClient& app,
                                                       const BindingProvider& provider,
                                                       const DeviceLoginOptions& options,
                                                       ClaimAnswers& answers,
                                                       const BindOutput& out);

}  // namespace klutch::kubectl_bind
