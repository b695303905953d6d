// WebContext: what every part of the bind backend's HTTP surface shares: the Control Plane
// client, the identity provider, the sealer, the options, the clock and the login and bind
// counters; and the purposes values are sealed for. WebBackend owns it and its parts
// (session_cookies.h, browser_login.h, device_flow.h, consumer_binder.h, bind_endpoints.h,
// consumer_pages.h) keep a reference. Read-only after construction; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "bind/web/identity_provider.h"
#include "bind/web/sealer.h"
#include "bind/web/web_backend.h"
#include "client/rest_client.h"
#include "core/clock.h"
#include "http/message.h"
#include "serving/metrics.h"

namespace klutch::bind {

// What a sealed value is for (Sealer: a value sealed for one never opens for another).
inline constexpr std::string_view kStatePurpose = "state";      // the OIDC state
inline constexpr std::string_view kLoginPurpose = "login";      // the pre-login cookie
inline constexpr std::string_view kSessionPurpose = "session";  // the session cookie
inline constexpr std::string_view kDevicePurpose = "device";    // a device handle
inline constexpr std::string_view kDeviceSessionPurpose = "device-session";
inline constexpr std::string_view kCsrfPurpose = "csrf";  // Sealer::Mac

struct WebContext {
  client::RestClient& admin;
  IdentityProvider& idp;
  const Sealer& sealer;
  const WebOptions& options;
  const core::Clock& clock;
  serving::CounterFamily* logins = nullptr;  // by result; nullptr: not counted
  serving::CounterFamily* binds = nullptr;

  core::SystemTime Now() const { return clock.Now(); }
  // https://<Host> from the request, or the base of --oidc-authorize-url.
  std::string BaseUrl(const http::Request& request) const;
  void CountLogin(const std::string& result) const;
  void CountBind(const std::string& result) const;
};

}  // namespace klutch::bind
