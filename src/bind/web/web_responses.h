// The answers of the bind backend's HTTP handlers: HTML pages, JSON (RFC 6749 / RFC 8628 error
// answers included) and redirects, each with the headers every dynamic answer carries: no
// caching anywhere (bind-protocol.md §2.2), no framing, no sniffing, no referrer (URLs carry
// session IDs). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "http/message.h"
#include "machinery/json.h"

namespace klutch::bind {

// Sets the headers above on `response`.
void SetNoCacheHeaders(http::Response& response);

// An HTML page (`body` is trusted markup): no scripts, inline styles only.
http::Response HtmlResponse(int status, std::string body);
// An error page (web_html.h ErrorPage): what went wrong and what to do, plain text.
http::Response ErrorResponse(int status, std::string_view title, std::string_view what,
                             std::string_view todo);
// serving's JSON answer with the headers above.
http::Response WebJsonResponse(int status, const machinery::Json& body);
// An RFC 6749 §5.2 / RFC 8628 §3.5 error answer: {"error", "error_description"}.
http::Response OAuthErrorResponse(int status, std::string_view error, std::string_view description);
// A redirect to `location` with a link to it as the body.
http::Response RedirectResponse(int status, const std::string& location);

// The values of every Cookie header of `request`.
std::vector<std::string_view> CookieHeaders(const http::Request& request);
// The string member `key` of `object`, "" when it is missing, not a string or `object` is not
// an object (sealed values read back).
std::string StringMember(const machinery::Json& object, std::string_view key);

}  // namespace klutch::bind
