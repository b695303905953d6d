// WebBackend: the HTTP surface of `klutch backend` in OIDC mode (bind-protocol.md §2.2-2.5,
// docs/bind-backend.md): GET /export, /authorize, /callback, /resources, /consumer, GET and
// POST /bind, and the device grant's POST /device/authorize (rate limited per client address),
// /device/token and /device/bind.
//
// Stateless: the login state, the pre-login cookie that binds it to the browser, the session
// cookie and device handles are sealed (Sealer) with the operator's keys, so any replica with
// the same keys serves any request. A session expires on the server side (sealed expiry, at
// most `session_ttl` and never after the ID token). /bind requires the session and a CSRF
// token derived from it; the Control Plane is written only after every check has passed
// (consumer provisioning through bind/provision.h, the catalog through bind/catalog.h).
// Every page sends no-cache and anti-framing headers; error pages say what went wrong and
// what to do.
//
// Routes are added to a caller's http::Router (AddRoutes); the handlers are thread-safe. The
// parts behind them, each a file of this folder: browser_login.h (/authorize, /login,
// /callback), device_flow.h (/device/*), bind_endpoints.h (/export, /bind), consumer_pages.h
// (/, /resources, /consumer), over session_cookies.h and the bind operation consumer_binder.h.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "bind/provision.h"
#include "bind/web/identity_provider.h"
#include "bind/web/sealer.h"
#include "client/rest_client.h"
#include "core/clock.h"
#include "http/router.h"
#include "serving/metrics.h"

namespace klutch::bind {

// The version /export reports: upstream Klutch CLIs accept "v0.0.0" (a development build)
// whatever their own version.
inline constexpr std::string_view kBackendVersion = "v0.0.0";

struct WebOptions {
  std::string pretty_name = "anynines";       // BindingProvider.providerPrettyName
  std::string consumer_scope = "Namespaced";  // which CRDs the catalog shows
  // The URL /export advertises for the browser flow (--oidc-authorize-url); "" =
  // https://<request Host>/authorize. The device grant URLs sit beside it.
  std::string authorize_url;
  ProvisionOptions provision;
  std::chrono::seconds session_ttl{std::chrono::hours(1)};
  std::chrono::seconds login_ttl{std::chrono::minutes(10)};
  // POST /device/authorize per client address (the connection's peer, so behind a proxy all
  // its clients share one bucket): a token bucket of `device_authorize_burst` requests,
  // refilled at `device_authorize_qps` per second; beyond it 429 with Retry-After. qps 0:
  // unlimited.
  double device_authorize_qps = 0.2;
  int device_authorize_burst = 20;
  // Said in the answer to a user at provision.max_clusters_per_user: clusters no konnector
  // connected to are removed this long after their last bind (0: they are not).
  std::chrono::seconds unconnected_cluster_grace{0};
  // Cookies carry the Secure attribute (off only for tests over plain HTTP).
  bool secure_cookies = true;
  const core::Clock* clock = nullptr;          // nullptr: real time
  serving::MetricRegistry* metrics = nullptr;  // optional: bind outcomes are counted there
};

class WebBackend {
 public:
  // `admin` (the backend's Control Plane client) and `idp` must outlive the backend.
  WebBackend(client::RestClient& admin, IdentityProvider& idp, Sealer sealer, WebOptions options);
  ~WebBackend();
  WebBackend(const WebBackend&) = delete;
  WebBackend& operator=(const WebBackend&) = delete;

  // Adds the routes listed above to `router`, which must not outlive the backend.
  void AddRoutes(http::Router& router);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::bind
