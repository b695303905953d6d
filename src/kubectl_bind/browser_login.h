// The browser login of `kubectl bind <URL>` (bind-protocol.md §3.1, upstream's flow): a local
// callback server on 127.0.0.1, the authorize URL the user opens, and the BindingResponse the
// backend redirects the browser to the callback with. Thread-compatible (one login at a time).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/status.h"
#include "kubectl_bind/provider_discovery.h"
#include "kubectl_bind/session.h"

namespace klutch::kubectl_bind {

// The authorize URL the user opens: `authenticated_url` with c=<cid>, n=<cluster_name> (when
// not empty), s=<sid> and u=http://127.0.0.1:<port>/callback (keys sorted, existing parameters
// kept). Upstream's CLI sends p=<port>, which backends turn into
// http://localhost:<port>/callback; the explicit IPv4 loopback keeps the credentials off any
// listener on [::1].
core::Result<std::string> AuthorizeUrl(const std::string& authenticated_url, int port,
                                       const std::string& session_id, const std::string& cluster_id,
                                       const std::string& cluster_name = "");

// The `response` query parameter of the CLI callback: base64 in the URL or the standard
// alphabet, padded or not, of a BindingResponse (ParseBindingResponse).
core::Result<BindingResponse> DecodeCallbackResponse(std::string_view response,
                                                     const std::string& session_id);

struct BrowserLoginOptions {
  std::string session_id, cluster_id, cluster_name;
  std::chrono::milliseconds timeout{};
  std::string timeout_text;  // --timeout as given, for messages
  bool open_browser = true;  // false: only print the URL (--skip-browser)
};
// Serves the callback on an ephemeral port of 127.0.0.1, prints the authorize URL on stderr
// (and opens it with xdg-open when a display is there), and waits for this session's
// BindingResponse: requests that do not carry it are answered 400 and ignored. kTimeout after
// options.timeout; kBadRequest when the backend offers no browser login.
core::Result<BindingResponse> BrowserLogin(const BindingProvider& provider,
                                           const BrowserLoginOptions& options);

}  // namespace klutch::kubectl_bind
