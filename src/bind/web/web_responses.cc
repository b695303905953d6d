#include "bind/web/web_responses.h"

#include <utility>

#include "bind/web/web_html.h"
#include "bind/web/web_protocol.h"
#include "core/strings.h"
#include "http/html.h"
#include "machinery/object.h"
#include "serving/json_response.h"

namespace klutch::bind {

using machinery::Json;

void SetNoCacheHeaders(http::Response& r) {
  r.headers.Set("Cache-Control", "no-cache, no-store, must-revalidate, max-age=0");
  r.headers.Set("Expires", HttpDate(0));
  r.headers.Set("X-Accel-Expires", "0");
  r.headers.Set("Pragma", "no-cache");
  r.headers.Set("X-Content-Type-Options", "nosniff");
  r.headers.Set("X-Frame-Options", "DENY");
  r.headers.Set("Referrer-Policy", "no-referrer");
}

http::Response HtmlResponse(int status, std::string body) {
  http::Response r;
  r.status = status;
  r.body = std::move(body);
  r.headers.Set("Content-Type", "text/html; charset=utf-8");
  // No scripts at all; styles are inline in the page.
  r.headers.Set("Content-Security-Policy",
                "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
                "frame-ancestors 'none'; base-uri 'none'");
  SetNoCacheHeaders(r);
  return r;
}

http::Response ErrorResponse(int status, std::string_view title, std::string_view what,
                             std::string_view todo) {
  return HtmlResponse(status, ErrorPage(title, what, todo));
}

http::Response WebJsonResponse(int status, const Json& body) {
  http::Response r = serving::JsonResponse(status, body);
  SetNoCacheHeaders(r);
  return r;
}

http::Response OAuthErrorResponse(int status, std::string_view error,
                                  std::string_view description) {
  return WebJsonResponse(status, Json{{"error", error}, {"error_description", description}});
}

http::Response RedirectResponse(int status, const std::string& location) {
  http::Response r;
  r.status = status;
  r.headers.Set("Location", location);
  r.headers.Set("Content-Type", "text/html; charset=utf-8");
  r.body = "<a href=\"" + http::HtmlEscape(location) + "\">Continue</a>\n";
  SetNoCacheHeaders(r);
  return r;
}

std::vector<std::string_view> CookieHeaders(const http::Request& request) {
  std::vector<std::string_view> out;
  for (const auto& [k, v] : request.headers.items()) {
    if (core::ToLower(k) == "cookie") out.push_back(v);
  }
  return out;
}

std::string StringMember(const Json& j, std::string_view key) {
  if (!j.is_object()) return "";
  return machinery::GetString(j, {key});
}

}  // namespace klutch::bind
