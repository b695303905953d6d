// DeviceFlow: kubectl bind --headless's login (the OAuth 2.0 device authorization grant, RFC
// 8628, through this backend): POST /device/authorize starts it at the issuer (rate limited per
// client address) and hands out a sealed device handle; POST /device/token polls the issuer
// with it and, once approved, binds the API it names (ConsumerBinder) or answers a short-lived
// sealed session and the catalog; POST /device/bind binds with that session. Answers are JSON,
// errors as RFC 8628 §3.5 says, each with a description the CLI prints. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "bind/web/consumer_binder.h"
#include "bind/web/keyed_rate_limiter.h"
#include "bind/web/web_context.h"
#include "http/message.h"

namespace klutch::bind {

class DeviceFlow {
 public:
  // `ctx` and `binder` must outlive this object.
  DeviceFlow(const WebContext& ctx, const ConsumerBinder& binder);

  http::Response Authorize(const http::Request& request);  // POST /device/authorize
  http::Response Token(const http::Request& request);      // POST /device/token
  http::Response Bind(const http::Request& request);       // POST /device/bind

 private:
  // The steps of /device/token.
  std::variant<machinery::Json, http::Response> OpenHandle(const std::string& handle) const;
  std::optional<http::Response> CheckOffered(const std::string& group,
                                             const std::string& resource) const;
  std::variant<IdTokenClaims, http::Response> Poll(const machinery::Json& handle);
  http::Response CatalogSession(const IdTokenClaims& claims, const machinery::Json& handle);
  // ConsumerBinder's answer as JSON.
  http::Response BindResponse(const BindRequest& request);

  const WebContext& ctx_;
  const ConsumerBinder& binder_;
  KeyedRateLimiter authorize_limiter_;
};

}  // namespace klutch::bind
