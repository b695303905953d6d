#include "bind/web/session_cookies.h"

#include "bind/web/web_html.h"
#include "bind/web/web_protocol.h"
#include "bind/web/web_responses.h"
#include "core/log.h"
#include "core/strings.h"

namespace klutch::bind {

using machinery::Json;

namespace {

int64_t UnixSeconds(core::SystemTime t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

std::string SessionCookies::SetCookie(std::string_view name, std::string_view value,
                                      std::chrono::seconds ttl) const {
  return SetCookieValue(name, value, UnixSeconds(ctx_.Now()),
                        {.max_age_seconds = ttl.count(), .secure = ctx_.options.secure_cookies});
}

std::string SessionCookies::ClearCookie(std::string_view name) const {
  return SetCookieValue(name, "", UnixSeconds(ctx_.Now()),
                        {.clear = true, .secure = ctx_.options.secure_cookies});
}

std::variant<Session, http::Response> SessionCookies::SessionFor(const http::Request& request,
                                                                 const std::string& sid) const {
  static constexpr std::string_view kLogInAgain =
      "Run kubectl bind again to log in; the catalog page opens by itself after the login.";
  if (!IsValidId(sid)) {
    return ErrorResponse(400, "Not logged in", "The session parameter (s) is missing or malformed.",
                         kLogInAgain);
  }
  auto text = FindCookie(CookieHeaders(request), std::string(kSessionCookiePrefix) + sid);
  if (!text) {
    return ErrorResponse(401, "Not logged in",
                         "This browser has no login for this kubectl bind session.", kLogInAgain);
  }
  auto data = ctx_.sealer.Unseal(kSessionPurpose, *text, ctx_.Now());
  if (!data.ok()) {
    if (data.status().reason() == core::Reason::kExpired) {
      return ErrorResponse(401, "Login expired",
                           "Your login for this kubectl bind session has expired.", kLogInAgain);
    }
    KLUTCH_LOG(kInfo, "bind", "session cookie refused: {}", data.status().message());
    return ErrorResponse(401, "Not logged in",
                         "The login cookie of this session is invalid (altered, or made with "
                         "other keys).",
                         kLogInAgain);
  }
  Session s = ToSession(*data);
  if (s.sid != sid || s.subject.empty()) {
    return ErrorResponse(401, "Not logged in", "The login cookie belongs to another session.",
                         kLogInAgain);
  }
  return s;
}

std::optional<Session> SessionCookies::AnySession(const http::Request& request) const {
  for (auto header : CookieHeaders(request)) {
    for (const auto& [name, value] : ParseCookies(header)) {
      if (!name.starts_with(kSessionCookiePrefix) || name.starts_with(kLoginCookiePrefix)) {
        continue;
      }
      auto data = ctx_.sealer.Unseal(kSessionPurpose, value, ctx_.Now());
      if (data.ok() && !StringMember(*data, "sub").empty()) return ToSession(*data);
    }
  }
  return std::nullopt;
}

std::string SessionCookies::CsrfToken(const Session& session) const {
  return ctx_.sealer.Mac(kCsrfPurpose, session.id);
}

bool SessionCookies::VerifyCsrf(const Session& session, std::string_view csrf) const {
  return !session.id.empty() && ctx_.sealer.VerifyMac(kCsrfPurpose, session.id, csrf);
}

std::string SessionCookies::UserLabel(const Session& s) {
  if (!s.email.empty()) return s.email;
  if (!s.name.empty()) return s.name;
  return s.subject;
}

http::Response SessionCookies::NotLoggedIn(std::string_view path, std::string_view what) {
  const PageAction login{"/login?next=" + core::PercentEncode(path), "Log in"};
  return HtmlResponse(
      401, ErrorPage("Not logged in",
                     "This browser has no valid login; log in to see " + std::string(what) + ".",
                     "Log in with your platform account; you come back to this page. "
                     "To bind a new cluster, run kubectl bind <this backend>/export "
                     "against it.",
                     &login));
}

Session SessionCookies::ToSession(const Json& d) {
  return Session{.subject = StringMember(d, "sub"),
                 .issuer = StringMember(d, "iss"),
                 .email = StringMember(d, "email"),
                 .name = StringMember(d, "name"),
                 .display_name = StringMember(d, "dn"),
                 .sid = StringMember(d, "s"),
                 .cid = StringMember(d, "c"),
                 .redirect = StringMember(d, "r"),
                 .cluster_name = StringMember(d, "cn"),
                 .id = StringMember(d, "j")};
}

}  // namespace klutch::bind
