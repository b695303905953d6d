#include "bind/web/browser_login.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>

#include "bind/web/web_protocol.h"
#include "bind/web/web_responses.h"
#include "core/log.h"
#include "core/strings.h"

namespace klutch::bind {

using machinery::Json;

namespace {

constexpr std::string_view kStartLoginOver =
    "Start over with kubectl bind <backend>/export; it opens this page with the right "
    "parameters.";
constexpr std::string_view kRunBindAgain =
    "Run kubectl bind again and finish the login in the browser window it opens, within "
    "10 minutes.";

// Where a login without kubectl bind (/login) may return to: pages of this backend only.
bool IsPageLoginTarget(std::string_view next) {
  return next == "/" || next == "/consumer" || next == "/resources";
}

// A session ID for a login without kubectl bind (the CLI makes its own): letters and digits.
std::string PageSessionId() {
  std::string id;
  while (id.size() < 20) {
    for (char c : RandomToken(16)) {
      if (std::isalnum(static_cast<unsigned char>(c)) != 0 && id.size() < 20) id += c;
    }
  }
  return id;
}

// The page for a callback the issuer sent with `error` (the user declined, or it failed).
http::Response IssuerRefusedLogin(const http::Request& request, std::string_view error) {
  std::string description(request.Query("error_description").value_or(""));
  std::string what = "The identity provider did not log you in: " + std::string(error) +
                     (description.empty() ? "" : " (" + description + ")") + ".";
  if (error == "access_denied") {
    return ErrorResponse(403, "Login declined", what,
                         "If you declined by mistake, run kubectl bind again and accept. If you "
                         "may not use this platform, ask the platform team for access.");
  }
  return ErrorResponse(400, "Login failed", what,
                       "Run kubectl bind again; if the same error comes back, tell the platform "
                       "team (the identity provider's client may be misconfigured).");
}

}  // namespace

http::Response BrowserLogin::Authorize(const http::Request& request) {
  auto redirect = CliRedirectUrl(request.Query("u"), request.Query("p"));
  if (!redirect.ok()) {
    return ErrorResponse(400, "Cannot start the login", redirect.status().message(),
                         kStartLoginOver);
  }
  const std::string sid(request.Query("s").value_or(""));
  const std::string cid(request.Query("c").value_or(""));
  if (!IsValidId(sid) || !IsValidId(cid)) {
    return ErrorResponse(400, "Cannot start the login",
                         "The session (s) or cluster (c) parameter is missing or malformed.",
                         kStartLoginOver);
  }
  auto cluster_name = ClusterNameParameter(request.Query("n"));
  if (!cluster_name.ok()) {
    return ErrorResponse(400, "Cannot start the login", cluster_name.status().message(),
                         kStartLoginOver);
  }
  return StartLogin(sid, Json{{"r", *redirect}, {"c", cid}, {"cn", *cluster_name}});
}

// A login without kubectl bind, to see the consumer page or the catalog: back to `next`.
http::Response BrowserLogin::Login(const http::Request& request) {
  const std::string next(request.Query("next").value_or("/consumer"));
  if (!IsPageLoginTarget(next)) {
    return ErrorResponse(400, "Cannot start the login",
                         "Parameter next must be /, /consumer or /resources (the page to return "
                         "to after the login).",
                         "Use the Log in link on this backend's front page.");
  }
  return StartLogin(PageSessionId(), Json{{"next", next}});
}

// The state also holds a random ID the pre-login cookie repeats; the cookie holds the PKCE
// verifier and the nonce.
http::Response BrowserLogin::StartLogin(const std::string& sid, Json fields) {
  const std::string state_id = RandomToken(16);
  const std::string verifier = RandomToken(32);
  const std::string nonce = RandomToken(16);
  const auto expires = ctx_.Now() + ctx_.options.login_ttl;
  fields["s"] = sid;
  fields["i"] = state_id;
  const std::string state = ctx_.sealer.Seal(kStatePurpose, fields, expires);
  const std::string login = ctx_.sealer.Seal(
      kLoginPurpose, Json{{"i", state_id}, {"v", verifier}, {"n", nonce}}, expires);
  auto url = ctx_.idp.AuthorizationUrl(
      {.state = state, .nonce = nonce, .code_challenge = PkceChallengeS256(verifier)});
  if (!url.ok()) {
    KLUTCH_LOG(kWarn, "bind", "/authorize: {}", url.status().message());
    return ErrorResponse(503, "The identity provider is unavailable", url.status().message(),
                         "Try again in a minute; if it keeps failing, tell the platform team.");
  }
  http::Response r = RedirectResponse(302, *url);
  r.headers.Add("Set-Cookie", cookies_.SetCookie(std::string(kLoginCookiePrefix) + sid, login,
                                                 ctx_.options.login_ttl));
  return r;
}

http::Response BrowserLogin::Callback(const http::Request& request) {
  if (auto error = request.Query("error")) {
    ctx_.CountLogin("refused");
    return IssuerRefusedLogin(request, *error);
  }
  auto pending = ReadCallback(request);
  if (auto* page = std::get_if<http::Response>(&pending)) return std::move(*page);
  const PendingLogin& login = std::get<PendingLogin>(pending);
  auto claims = Redeem(login);
  if (auto* page = std::get_if<http::Response>(&claims)) return std::move(*page);
  return StartSession(login, std::get<IdTokenClaims>(claims));
}

// The code, the state (sealed by StartLogin, unexpired) and the pre-login cookie of this
// browser that repeats the state's ID.
std::variant<BrowserLogin::PendingLogin, http::Response> BrowserLogin::ReadCallback(
    const http::Request& request) {
  auto code = request.Query("code");
  auto state_text = request.Query("state");
  if (!code || code->empty() || !state_text || state_text->empty()) {
    return ErrorResponse(400, "Login failed",
                         "The identity provider sent no code or no state back to this page.",
                         kRunBindAgain);
  }
  auto state = ctx_.sealer.Unseal(kStatePurpose, *state_text, ctx_.Now());
  if (!state.ok()) {
    ctx_.CountLogin("bad_state");
    if (state.status().reason() == core::Reason::kExpired) {
      return ErrorResponse(400, "Login expired", "The login took longer than 10 minutes.",
                           kRunBindAgain);
    }
    KLUTCH_LOG(kInfo, "bind", "/callback: state refused: {}", state.status().message());
    return ErrorResponse(400, "Login refused",
                         "The login state is invalid: it was not issued by this backend or was "
                         "altered.",
                         kRunBindAgain);
  }
  const std::string sid = StringMember(*state, "s");
  const std::string state_id = StringMember(*state, "i");
  const std::string login_cookie = std::string(kLoginCookiePrefix) + sid;
  auto login_text = FindCookie(CookieHeaders(request), login_cookie);
  std::optional<Json> login;
  if (login_text) {
    auto unsealed = ctx_.sealer.Unseal(kLoginPurpose, *login_text, ctx_.Now());
    if (unsealed.ok()) login = std::move(*unsealed);
  }
  if (!IsValidId(sid) || !login || StringMember(*login, "i") != state_id || state_id.empty()) {
    ctx_.CountLogin("bad_state");
    return ErrorResponse(400, "Login refused",
                         "This login was not started in this browser, or it was already "
                         "completed (a login link works once, in the browser that opened it).",
                         kRunBindAgain);
  }
  return PendingLogin{.code = std::string(*code),
                      .state = std::move(*state),
                      .login = std::move(*login),
                      .sid = sid,
                      .login_cookie = login_cookie};
}

// The code redeemed with the verifier and checked against the nonce; a failure clears the
// pre-login cookie (the code is used up either way).
std::variant<IdTokenClaims, http::Response> BrowserLogin::Redeem(const PendingLogin& login) {
  auto claims = ctx_.idp.ExchangeCode(login.code, StringMember(login.login, "v"),
                                      StringMember(login.login, "n"));
  if (claims.ok()) return std::move(*claims);
  ctx_.CountLogin("refused");
  KLUTCH_LOG(kInfo, "bind", "/callback: {}", claims.status().message());
  const bool unavailable = claims.status().reason() == core::Reason::kServiceUnavailable;
  http::Response r = ErrorResponse(
      unavailable ? 503 : 401, "Login failed", claims.status().message() + ".",
      unavailable ? "Try again in a minute; if it keeps failing, tell the platform team."
                  : std::string(kRunBindAgain));
  r.headers.Add("Set-Cookie", cookies_.ClearCookie(login.login_cookie));
  return r;
}

// The session cookie, and back to the page a /login came from or to kubectl bind's catalog.
// The session ends with the ID token, and after session_ttl at the latest.
http::Response BrowserLogin::StartSession(const PendingLogin& login, const IdTokenClaims& claims) {
  auto expires = ctx_.Now() + ctx_.options.session_ttl;
  if (claims.expires.time_since_epoch().count() != 0) expires = std::min(expires, claims.expires);
  const auto ttl = std::chrono::duration_cast<std::chrono::seconds>(expires - ctx_.Now());
  if (ttl.count() <= 0) {
    return ErrorResponse(401, "Login failed",
                         "The identity provider issued an ID token that has "
                         "already expired (are the clocks in sync?).",
                         kRunBindAgain);
  }
  const Json& state = login.state;
  Json session = {{"sub", claims.subject},           {"iss", claims.issuer},
                  {"email", claims.email},           {"name", claims.name},
                  {"dn", DisplayNameOf(claims)},     {"s", login.sid},
                  {"c", StringMember(state, "c")},   {"r", StringMember(state, "r")},
                  {"cn", StringMember(state, "cn")}, {"j", RandomToken(16)}};
  ctx_.CountLogin("ok");
  const std::string next = StringMember(state, "next");
  http::Response r = RedirectResponse(
      302, IsPageLoginTarget(next) ? next : "/resources?s=" + core::PercentEncode(login.sid));
  r.headers.Add("Set-Cookie",
                cookies_.SetCookie(std::string(kSessionCookiePrefix) + login.sid,
                                   ctx_.sealer.Seal(kSessionPurpose, session, expires), ttl));
  r.headers.Add("Set-Cookie", cookies_.ClearCookie(login.login_cookie));
  return r;
}

}  // namespace klutch::bind
