// The wire values of the bind backend's HTTP surface (bind-protocol.md §2.2) and the parsing of
// what browsers and CLIs send it: the CLI redirect URL, the cluster name, session and cluster
// IDs, cookies and forms. The documents it answers with (BindingProvider, BindingResponse, the
// export requests, the `response=` payload) are the protocol's, in src/apis/klutch/.
//
// Everything here reads untrusted input without trusting it (the fuzz target
// fuzz_bind_session covers it). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::bind {

// Cookie names: the session of CLI session <sid> (as upstream), and the pre-login cookie that
// binds an OIDC `state` to the browser that started the login.
inline constexpr std::string_view kSessionCookiePrefix = "klutch-bind-";
inline constexpr std::string_view kLoginCookiePrefix = "klutch-bind-login-";

// The cluster name parameter `n`, trimmed: "" when absent; kBadRequest naming `n` when longer
// than 253 bytes or holding control characters (any other text is kept; pages escape it).
core::Result<std::string> ClusterNameParameter(std::optional<std::string_view> n);

// Session IDs (`s`) and cluster IDs (`c`) are what the CLI makes (6 base-62 characters); we
// accept 1 to 64 ASCII letters and digits, which keeps them safe in cookie names and
// identities.
bool IsValidId(std::string_view id);

// The CLI's callback URL from /authorize's `u` or `p` (§2.2.1): `p` (a port, 1-65535) ->
// http://localhost:<p>/callback; else `u`, which must be an http or https URL on a loopback
// host (localhost, 127.0.0.0/8, [::1]) without user info: the BindingResponse carries
// credentials, so it goes to the user's own machine only (upstream took any URL).
// kBadRequest naming the parameter otherwise.
core::Result<std::string> CliRedirectUrl(std::optional<std::string_view> u,
                                         std::optional<std::string_view> p);

// `url` with query parameter key=value added after its existing query (before a fragment),
// both percent-encoded.
std::string AddQueryParameter(std::string_view url, std::string_view key, std::string_view value);

// "a=1; b=2" (a Cookie header) into pairs, in order; malformed parts are skipped.
std::vector<std::pair<std::string, std::string>> ParseCookies(std::string_view header);
// The value of cookie `name` among every Cookie header value in `headers`, nullopt if absent.
std::optional<std::string> FindCookie(const std::vector<std::string_view>& headers,
                                      std::string_view name);

struct CookieOptions {
  int64_t max_age_seconds = 0;  // 0 with `clear` = delete
  bool clear = false;
  bool secure = true;
};
// A Set-Cookie value: name=value; Path=/; Max-Age; Expires (RFC 1123, from `now_unix`);
// HttpOnly; SameSite=Lax; Secure unless told otherwise.
std::string SetCookieValue(std::string_view name, std::string_view value, int64_t now_unix,
                           const CookieOptions& options);

// RFC 1123 date of a unix time ("Thu, 01 Jan 1970 00:00:00 GMT").
std::string HttpDate(int64_t unix_seconds);

// An application/x-www-form-urlencoded body into pairs ('+' is a space); bodies over 64 KiB
// yield nothing.
std::vector<std::pair<std::string, std::string>> ParseForm(std::string_view body);
// The first value of `name` in `pairs`.
std::optional<std::string> FirstValue(const std::vector<std::pair<std::string, std::string>>& pairs,
                                      std::string_view name);

}  // namespace klutch::bind
