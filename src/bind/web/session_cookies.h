// SessionCookies: the browser side of a login: the session cookie of each CLI session (sealed
// for kSessionPurpose, named kSessionCookiePrefix + the session ID), the pre-login cookie's
// Set-Cookie values, and the CSRF token derived from a session. A session expires on the server
// side (the sealed expiry), whatever the cookie's own attributes say. Thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "bind/web/web_context.h"
#include "http/message.h"

namespace klutch::bind {

// The logged-in user of one CLI session, as sealed into the session cookie.
// A login through /login (no kubectl bind) has no cid and no redirect.
struct Session {
  std::string subject, issuer, email, name;
  std::string display_name;  // DisplayNameOf the ID token's claims, for the BindingResponse
  std::string sid, cid, redirect;
  std::string cluster_name;  // kubectl bind's `n`, "" if it sent none
  std::string id;            // random, per login: the CSRF token is derived from it
};

class SessionCookies {
 public:
  // `ctx` must outlive this object.
  explicit SessionCookies(const WebContext& ctx) : ctx_(ctx) {}

  // Set-Cookie values: `name`=`value` for `ttl`, and one that deletes cookie `name`.
  std::string SetCookie(std::string_view name, std::string_view value,
                        std::chrono::seconds ttl) const;
  std::string ClearCookie(std::string_view name) const;

  // The session of CLI session `sid` from its cookie; an error page (400, 401) when there is
  // none, it expired, it does not open or it belongs to another session.
  std::variant<Session, http::Response> SessionFor(const http::Request& request,
                                                   const std::string& sid) const;
  // Any valid session of this browser (a kubectl bind one or a /login one).
  std::optional<Session> AnySession(const http::Request& request) const;

  // The CSRF token of `session` (its pages post it back), and whether `csrf` is it.
  std::string CsrfToken(const Session& session) const;
  bool VerifyCsrf(const Session& session, std::string_view csrf) const;

  // Who the pages say is logged in: email, else name, else subject.
  static std::string UserLabel(const Session& session);
  // 401 for a page that needs a login, with the link that logs in and comes back to `path`.
  static http::Response NotLoggedIn(std::string_view path, std::string_view what);

 private:
  static Session ToSession(const machinery::Json& sealed);

  const WebContext& ctx_;
};

}  // namespace klutch::bind
