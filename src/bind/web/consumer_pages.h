// ConsumerPages: the pages a logged-in browser reads (web_html.h renders them): GET / (what
// this backend is, how to bind), GET /resources (the catalog; with bind buttons for a kubectl
// bind session, read-only for a /login one) and GET /consumer (the user's clusters, from
// consumer_clusters.h). Thread-safe.
#pragma once

#include "bind/web/session_cookies.h"
#include "bind/web/web_context.h"
#include "http/message.h"

namespace klutch::bind {

class ConsumerPages {
 public:
  // `ctx` and `cookies` must outlive this object.
  ConsumerPages(const WebContext& ctx, const SessionCookies& cookies)
      : ctx_(ctx), cookies_(cookies) {}

  http::Response Landing(const http::Request& request);    // GET /
  http::Response Resources(const http::Request& request);  // GET /resources
  http::Response Consumer(const http::Request& request);   // GET /consumer

 private:
  const WebContext& ctx_;
  const SessionCookies& cookies_;
};

}  // namespace klutch::bind
