// BindEndpoints: the binding protocol's endpoints for kubectl bind's browser flow
// (bind-protocol.md §2.2, §2.4): GET /export answers the BindingProvider (with the device grant
// URLs when the issuer offers it), GET and POST /bind check the session and its CSRF token,
// bind with ConsumerBinder and send the browser back to the CLI with the BindingResponse.
// The documents are src/apis/klutch's. Thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bind/web/consumer_binder.h"
#include "bind/web/session_cookies.h"
#include "bind/web/web_context.h"
#include "http/message.h"

namespace klutch::bind {

class BindEndpoints {
 public:
  // `ctx`, `cookies` and `binder` must outlive this object.
  BindEndpoints(const WebContext& ctx, const SessionCookies& cookies, const ConsumerBinder& binder)
      : ctx_(ctx), cookies_(cookies), binder_(binder) {}

  http::Response Export(const http::Request& request);  // GET /export
  // GET /bind (`params` the query, redirect 302) and POST /bind (the form, 303).
  http::Response BindFromBrowser(const http::Request& request,
                                 const std::vector<std::pair<std::string, std::string>>& params,
                                 int redirect_status);

 private:
  const WebContext& ctx_;
  const SessionCookies& cookies_;
  const ConsumerBinder& binder_;
};

}  // namespace klutch::bind
