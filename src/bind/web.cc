#include "bind/web.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/binding_provider.h"
#include "apis/klutch/binding_response.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/export_request.h"
#include "apis/klutch/register.h"
#include "bind/catalog.h"
#include "bind/web_html.h"
#include "bind/web_protocol.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "core/strings.h"
#include "core/sync.h"
#include "http/html.h"
#include "machinery/object.h"
#include "machinery/validation.h"
#include "serving/json_response.h"

namespace klutch::bind {

using machinery::Json;

namespace {

constexpr std::string_view kStatePurpose = "state";
constexpr std::string_view kLoginPurpose = "login";
constexpr std::string_view kSessionPurpose = "session";
constexpr std::string_view kDevicePurpose = "device";
constexpr std::string_view kDeviceSessionPurpose = "device-session";
constexpr std::string_view kCsrfPurpose = "csrf";

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

int64_t UnixSeconds(core::SystemTime t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// What every dynamic answer carries: no caching anywhere (§2.2), no framing, no sniffing, no
// referrer (URLs carry session IDs).
void CommonHeaders(http::Response& r) {
  r.headers.Set("Cache-Control", "no-cache, no-store, must-revalidate, max-age=0");
  r.headers.Set("Expires", HttpDate(0));
  r.headers.Set("X-Accel-Expires", "0");
  r.headers.Set("Pragma", "no-cache");
  r.headers.Set("X-Content-Type-Options", "nosniff");
  r.headers.Set("X-Frame-Options", "DENY");
  r.headers.Set("Referrer-Policy", "no-referrer");
}

http::Response Html(int status, std::string body) {
  http::Response r;
  r.status = status;
  r.body = std::move(body);
  r.headers.Set("Content-Type", "text/html; charset=utf-8");
  // No scripts at all; styles are inline in the page.
  r.headers.Set("Content-Security-Policy",
                "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
                "frame-ancestors 'none'; base-uri 'none'");
  CommonHeaders(r);
  return r;
}

http::Response Error(int status, std::string_view title, std::string_view what,
                     std::string_view todo) {
  return Html(status, ErrorPage(title, what, todo));
}

// serving's JSON answer with the backend's security headers.
http::Response JsonResponse(int status, const Json& body) {
  http::Response r = serving::JsonResponse(status, body);
  CommonHeaders(r);
  return r;
}

// An RFC 6749 §5.2 / RFC 8628 §3.5 error answer.
http::Response OAuthError(int status, std::string_view error, std::string_view description) {
  return JsonResponse(status, Json{{"error", error}, {"error_description", description}});
}

http::Response Redirect(int status, const std::string& location) {
  http::Response r;
  r.status = status;
  r.headers.Set("Location", location);
  r.headers.Set("Content-Type", "text/html; charset=utf-8");
  r.body = "<a href=\"" + http::HtmlEscape(location) + "\">Continue</a>\n";
  CommonHeaders(r);
  return r;
}

std::vector<std::string_view> CookieHeaders(const http::Request& request) {
  std::vector<std::string_view> out;
  for (const auto& [k, v] : request.headers.items()) {
    if (core::ToLower(k) == "cookie") out.push_back(v);
  }
  return out;
}

std::string Str(const Json& j, std::string_view key) {
  if (!j.is_object()) return "";
  return machinery::GetString(j, {key});
}

// The condition of `type` in obj.status.conditions: {status, reason, message}.
struct Condition {
  std::string status, reason, message;
};
Condition ConditionOf(const Json& obj, std::string_view type) {
  const Json* conditions = machinery::Find(obj, {"status", "conditions"});
  if (conditions == nullptr || !conditions->is_array()) return {};
  for (const auto& c : *conditions) {
    if (Str(c, "type") == type) return {Str(c, "status"), Str(c, "reason"), Str(c, "message")};
  }
  return {};
}

// "host:port" of an http(s) URL.
std::string Authority(std::string_view url) {
  size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return "";
  url = url.substr(scheme + 3);
  return std::string(url.substr(0, url.find_first_of("/?#")));
}

std::string Age(core::SystemTime now, const std::string& rfc3339) {
  auto t = core::ParseTime(rfc3339);
  if (!t) return "";
  auto s = std::chrono::duration_cast<std::chrono::seconds>(now - *t).count();
  if (s < 0) s = 0;
  if (s < 120) return std::to_string(s) + "s ago";
  if (s < 7200) return std::to_string(s / 60) + "m ago";
  if (s < 172800) return std::to_string(s / 3600) + "h ago";
  return std::to_string(s / 86400) + "d ago";
}

// The client address of http::Request::remote_address ("host:port"; IPv6 hosts unbracketed).
std::string ClientAddress(std::string_view remote) {
  const size_t colon = remote.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == remote.size()) return std::string(remote);
  const std::string_view port = remote.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string_view::npos) return std::string(remote);
  std::string_view host = remote.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::string(host);
}

// A token bucket per key: `burst` tokens, refilled at `rate` per second. Buckets that are
// full again are forgotten once many keys are known; beyond kMaxKeys busy keys, new keys share
// one bucket, so memory stays bounded whatever the number of addresses. Thread-safe.
class KeyedRateLimiter {
 public:
  KeyedRateLimiter(double rate, int burst, const core::Clock& clock)
      : rate_(rate), burst_(std::max(1, burst)), clock_(clock) {}

  // 0 when a request of `key` may go now (and takes a token); otherwise how long until the
  // next token (whole seconds, at least 1).
  std::chrono::seconds Take(const std::string& key) {
    if (rate_ <= 0) return std::chrono::seconds(0);
    core::MutexLock lock(mu_);
    const core::SystemTime now = clock_.Now();
    if (buckets_.size() >= kMaxKeys && !buckets_.contains(key)) Prune(now);
    auto it = buckets_.find(key);
    if (it == buckets_.end()) {
      const std::string& k = buckets_.size() >= kMaxKeys ? kOverflowKey : key;
      it = buckets_.try_emplace(k, Bucket{static_cast<double>(burst_), now}).first;
    }
    Bucket& b = it->second;
    b.tokens = Refilled(b, now);
    b.at = now;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return std::chrono::seconds(0);
    }
    return std::chrono::seconds(
        std::max<int64_t>(1, static_cast<int64_t>(std::ceil((1 - b.tokens) / rate_))));
  }

 private:
  struct Bucket {
    double tokens;
    core::SystemTime at;
  };
  static constexpr size_t kMaxKeys = 65536;
  static inline const std::string kOverflowKey = "*";  // no address

  double Refilled(const Bucket& b, core::SystemTime now) const {
    const double elapsed = std::max(0.0, std::chrono::duration<double>(now - b.at).count());
    return std::min(static_cast<double>(burst_), b.tokens + elapsed * rate_);
  }
  void Prune(core::SystemTime now) REQUIRES(mu_) {
    std::erase_if(buckets_, [&](const auto& kv) { return Refilled(kv.second, now) >= burst_; });
  }

  const double rate_;
  const int burst_;
  const core::Clock& clock_;
  core::Mutex mu_;
  std::map<std::string, Bucket> buckets_ GUARDED_BY(mu_);
};

// "1h", "90m", "45s".
std::string ShortDuration(std::chrono::seconds d) {
  const int64_t s = d.count();
  if (s > 0 && s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s > 0 && s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

// The description of an RFC 8628 §3.5 error the issuer sent without one: what it means for
// the user of kubectl bind --headless.
std::string DeviceErrorDescription(std::string_view error) {
  if (error == "authorization_pending") {
    return "the login is not approved yet; keep polling";
  }
  if (error == "slow_down") return "polling too fast; add 5 seconds to the interval";
  if (error == "access_denied") {
    return "the login was declined at the identity provider; run kubectl bind --headless again "
           "and approve it";
  }
  if (error == "expired_token") {
    return "the device code expired before the login was approved; run kubectl bind "
           "--headless again";
  }
  if (error == "invalid_grant") {
    return "the identity provider does not accept this device code any more: it was already "
           "used for a login (each code logs in once) or is unknown; run kubectl bind "
           "--headless again";
  }
  return "the identity provider refused the device login (" + std::string(error) +
         "); run kubectl bind --headless again";
}

}  // namespace

// The logged-in user of one CLI session, as sealed into the session cookie.
// A login through /login (no kubectl bind) has no cid and no redirect.
struct Session {
  std::string subject, issuer, email, name;
  std::string display_name;  // DisplayNameOf the ID token's claims, for the BindingResponse
  std::string sid, cid, redirect;
  std::string cluster_name;  // kubectl bind's `n`, "" if it sent none
  std::string id;            // random, per login: the CSRF token is derived from it
};

class WebBackend::Impl {
 public:
  Impl(client::RestClient& admin, IdentityProvider& idp, Sealer sealer, WebOptions options)
      : admin_(admin),
        idp_(idp),
        sealer_(std::move(sealer)),
        options_(std::move(options)),
        clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
        device_authorize_limiter_(options_.device_authorize_qps, options_.device_authorize_burst,
                                  clock_) {
    if (options_.metrics) {
      logins_ = &options_.metrics->Counter("klutch_backend_logins_total",
                                           "OIDC logins at /callback and /device/token by result");
      binds_ = &options_.metrics->Counter("klutch_backend_binds_total",
                                          "Bind requests (/bind, /device/token) by result");
    }
  }

  void AddRoutes(http::Router& router) {
    router.Get("/", [this](http::Request& r, const http::PathParams&) { return Landing(r); });
    router.Get("/login", [this](http::Request& r, const http::PathParams&) { return Login(r); });
    router.Get("/export", [this](http::Request& r, const http::PathParams&) { return Export(r); });
    router.Get("/authorize",
               [this](http::Request& r, const http::PathParams&) { return Authorize(r); });
    router.Get("/callback",
               [this](http::Request& r, const http::PathParams&) { return Callback(r); });
    router.Get("/resources",
               [this](http::Request& r, const http::PathParams&) { return Resources(r); });
    router.Get("/bind", [this](http::Request& r, const http::PathParams&) {
      // The router answers HEAD with GET routes; a HEAD must not bind.
      if (r.method == "HEAD") return Html(405, "");
      return BindFromBrowser(r, r.query, 302);
    });
    router.Post("/bind", [this](http::Request& r, const http::PathParams&) {
      return BindFromBrowser(r, ParseForm(r.body), 303);
    });
    router.Get("/consumer",
               [this](http::Request& r, const http::PathParams&) { return Consumer(r); });
    router.Post("/device/authorize",
                [this](http::Request& r, const http::PathParams&) { return DeviceAuthorize(r); });
    router.Post("/device/token",
                [this](http::Request& r, const http::PathParams&) { return DeviceToken(r); });
    router.Post("/device/bind",
                [this](http::Request& r, const http::PathParams&) { return DeviceBind(r); });
  }

 private:
  core::SystemTime Now() const { return clock_.Now(); }

  void Count(serving::CounterFamily* family, const std::string& result) {
    if (family) family->Increment({{"result", result}});
  }

  // https://<Host> from the request, or the base of --oidc-authorize-url.
  std::string BaseUrl(const http::Request& request) const {
    if (!options_.authorize_url.empty()) {
      std::string base = options_.authorize_url;
      if (base.ends_with("/authorize")) base.resize(base.size() - std::string("/authorize").size());
      return base;
    }
    std::string host(request.headers.Get("Host"));
    if (host.empty()) host = "localhost";
    return "https://" + host;
  }

  http::Response Export(const http::Request& request) {
    const std::string base = BaseUrl(request);
    const std::string authorize =
        options_.authorize_url.empty() ? base + "/authorize" : options_.authorize_url;
    apis::klutch::BindingProvider provider{.pretty_name = options_.pretty_name,
                                           .version = std::string(kBackendVersion),
                                           .authenticated_url = authorize};
    if (idp_.SupportsDeviceGrant()) {
      provider.device_authorization_url = base + "/device/authorize";
      provider.device_token_url = base + "/device/token";
      provider.device_bind_url = base + "/device/bind";
    }
    return JsonResponse(200, apis::klutch::EncodeBindingProvider(provider));
  }

  std::string SetCookie(std::string_view name, std::string_view value,
                        std::chrono::seconds ttl) const {
    return SetCookieValue(name, value, UnixSeconds(Now()),
                          {.max_age_seconds = ttl.count(), .secure = options_.secure_cookies});
  }
  std::string ClearCookie(std::string_view name) const {
    return SetCookieValue(name, "", UnixSeconds(Now()),
                          {.clear = true, .secure = options_.secure_cookies});
  }

  http::Response Authorize(const http::Request& request) {
    auto redirect = CliRedirectUrl(request.Query("u"), request.Query("p"));
    if (!redirect.ok()) {
      return Error(400, "Cannot start the login", redirect.status().message(),
                   "Start over with kubectl bind <backend>/export; it opens this page with the "
                   "right parameters.");
    }
    const std::string sid(request.Query("s").value_or(""));
    const std::string cid(request.Query("c").value_or(""));
    if (!IsValidId(sid) || !IsValidId(cid)) {
      return Error(400, "Cannot start the login",
                   "The session (s) or cluster (c) parameter is missing or malformed.",
                   "Start over with kubectl bind <backend>/export; it opens this page with the "
                   "right parameters.");
    }
    auto cluster_name = ClusterNameParameter(request.Query("n"));
    if (!cluster_name.ok()) {
      return Error(400, "Cannot start the login", cluster_name.status().message(),
                   "Start over with kubectl bind <backend>/export; it opens this page with the "
                   "right parameters.");
    }
    return StartLogin(sid, Json{{"r", *redirect}, {"c", cid}, {"cn", *cluster_name}});
  }

  // A login without kubectl bind, to see the consumer page or the catalog: back to `next`.
  http::Response Login(const http::Request& request) {
    const std::string next(request.Query("next").value_or("/consumer"));
    if (!IsPageLoginTarget(next)) {
      return Error(400, "Cannot start the login",
                   "Parameter next must be /, /consumer or /resources (the page to return to "
                   "after the login).",
                   "Use the Log in link on this backend's front page.");
    }
    return StartLogin(PageSessionId(), Json{{"next", next}});
  }

  // To the issuer with a sealed state holding `sid` and `fields` (plus a random ID the
  // pre-login cookie repeats, PKCE and a nonce).
  http::Response StartLogin(const std::string& sid, Json fields) {
    const std::string state_id = RandomToken(16);
    const std::string verifier = RandomToken(32);
    const std::string nonce = RandomToken(16);
    const auto expires = Now() + options_.login_ttl;
    fields["s"] = sid;
    fields["i"] = state_id;
    const std::string state = sealer_.Seal(kStatePurpose, fields, expires);
    const std::string login =
        sealer_.Seal(kLoginPurpose, Json{{"i", state_id}, {"v", verifier}, {"n", nonce}}, expires);
    auto url = idp_.AuthorizationUrl(
        {.state = state, .nonce = nonce, .code_challenge = PkceChallengeS256(verifier)});
    if (!url.ok()) {
      KLUTCH_LOG(kWarn, "bind", "/authorize: {}", url.status().message());
      return Error(503, "The identity provider is unavailable", url.status().message(),
                   "Try again in a minute; if it keeps failing, tell the platform team.");
    }
    http::Response r = Redirect(302, *url);
    r.headers.Add("Set-Cookie",
                  SetCookie(std::string(kLoginCookiePrefix) + sid, login, options_.login_ttl));
    return r;
  }

  http::Response Callback(const http::Request& request) {
    static constexpr std::string_view kStartOver =
        "Run kubectl bind again and finish the login in the browser window it opens, within "
        "10 minutes.";
    if (auto error = request.Query("error")) {
      Count(logins_, "refused");
      std::string description(request.Query("error_description").value_or(""));
      std::string what = "The identity provider did not log you in: " + std::string(*error) +
                         (description.empty() ? "" : " (" + description + ")") + ".";
      if (*error == "access_denied") {
        return Error(403, "Login declined", what,
                     "If you declined by mistake, run kubectl bind again and accept. If you "
                     "may not use this platform, ask the platform team for access.");
      }
      return Error(400, "Login failed", what,
                   "Run kubectl bind again; if the same error comes back, tell the platform "
                   "team (the identity provider's client may be misconfigured).");
    }
    auto code = request.Query("code");
    auto state_text = request.Query("state");
    if (!code || code->empty() || !state_text || state_text->empty()) {
      return Error(400, "Login failed",
                   "The identity provider sent no code or no state back to this page.",
                   std::string(kStartOver));
    }
    auto state = sealer_.Unseal(kStatePurpose, *state_text, Now());
    if (!state.ok()) {
      Count(logins_, "bad_state");
      if (state.status().reason() == core::Reason::kExpired) {
        return Error(400, "Login expired", "The login took longer than 10 minutes.",
                     std::string(kStartOver));
      }
      KLUTCH_LOG(kInfo, "bind", "/callback: state refused: {}", state.status().message());
      return Error(400, "Login refused",
                   "The login state is invalid: it was not issued by this backend or was "
                   "altered.",
                   std::string(kStartOver));
    }
    const std::string sid = Str(*state, "s");
    const std::string state_id = Str(*state, "i");
    const std::string login_cookie = std::string(kLoginCookiePrefix) + sid;
    auto login_text = FindCookie(CookieHeaders(request), login_cookie);
    std::optional<Json> login;
    if (login_text) {
      auto unsealed = sealer_.Unseal(kLoginPurpose, *login_text, Now());
      if (unsealed.ok()) login = std::move(*unsealed);
    }
    if (!IsValidId(sid) || !login || Str(*login, "i") != state_id || state_id.empty()) {
      Count(logins_, "bad_state");
      return Error(400, "Login refused",
                   "This login was not started in this browser, or it was already completed "
                   "(a login link works once, in the browser that opened it).",
                   std::string(kStartOver));
    }
    auto claims = idp_.ExchangeCode(std::string(*code), Str(*login, "v"), Str(*login, "n"));
    if (!claims.ok()) {
      Count(logins_, "refused");
      KLUTCH_LOG(kInfo, "bind", "/callback: {}", claims.status().message());
      const bool unavailable = claims.status().reason() == core::Reason::kServiceUnavailable;
      http::Response r =
          Error(unavailable ? 503 : 401, "Login failed", claims.status().message() + ".",
                unavailable ? "Try again in a minute; if it keeps failing, tell the platform team."
                            : std::string(kStartOver));
      r.headers.Add("Set-Cookie", ClearCookie(login_cookie));
      return r;
    }
    // The session ends with the ID token, and after session_ttl at the latest.
    auto expires = Now() + options_.session_ttl;
    if (claims->expires.time_since_epoch().count() != 0)
      expires = std::min(expires, claims->expires);
    const auto ttl = std::chrono::duration_cast<std::chrono::seconds>(expires - Now());
    if (ttl.count() <= 0) {
      return Error(401, "Login failed",
                   "The identity provider issued an ID token that has "
                   "already expired (are the clocks in sync?).",
                   std::string(kStartOver));
    }
    Json session = {{"sub", claims->subject},       {"iss", claims->issuer},
                    {"email", claims->email},       {"name", claims->name},
                    {"dn", DisplayNameOf(*claims)}, {"s", sid},
                    {"c", Str(*state, "c")},        {"r", Str(*state, "r")},
                    {"cn", Str(*state, "cn")},      {"j", RandomToken(16)}};
    Count(logins_, "ok");
    // A login from /login goes back to its page; kubectl bind's to the catalog.
    const std::string next = Str(*state, "next");
    http::Response r =
        Redirect(302, IsPageLoginTarget(next) ? next : "/resources?s=" + core::PercentEncode(sid));
    r.headers.Add("Set-Cookie", SetCookie(std::string(kSessionCookiePrefix) + sid,
                                          sealer_.Seal(kSessionPurpose, session, expires), ttl));
    r.headers.Add("Set-Cookie", ClearCookie(login_cookie));
    return r;
  }

  // The session of CLI session `sid` from its cookie; an error page when there is none.
  std::variant<Session, http::Response> SessionFor(const http::Request& request,
                                                   const std::string& sid) {
    static constexpr std::string_view kLogInAgain =
        "Run kubectl bind again to log in; the catalog page opens by itself after the login.";
    if (!IsValidId(sid)) {
      return Error(400, "Not logged in", "The session parameter (s) is missing or malformed.",
                   kLogInAgain);
    }
    auto text = FindCookie(CookieHeaders(request), std::string(kSessionCookiePrefix) + sid);
    if (!text) {
      return Error(401, "Not logged in", "This browser has no login for this kubectl bind session.",
                   kLogInAgain);
    }
    auto data = sealer_.Unseal(kSessionPurpose, *text, Now());
    if (!data.ok()) {
      if (data.status().reason() == core::Reason::kExpired) {
        return Error(401, "Login expired", "Your login for this kubectl bind session has expired.",
                     kLogInAgain);
      }
      KLUTCH_LOG(kInfo, "bind", "session cookie refused: {}", data.status().message());
      return Error(401, "Not logged in",
                   "The login cookie of this session is invalid (altered, or made with other "
                   "keys).",
                   kLogInAgain);
    }
    Session s = ToSession(*data);
    if (s.sid != sid || s.subject.empty()) {
      return Error(401, "Not logged in", "The login cookie belongs to another session.",
                   kLogInAgain);
    }
    return s;
  }

  static Session ToSession(const Json& d) {
    return Session{.subject = Str(d, "sub"),
                   .issuer = Str(d, "iss"),
                   .email = Str(d, "email"),
                   .name = Str(d, "name"),
                   .display_name = Str(d, "dn"),
                   .sid = Str(d, "s"),
                   .cid = Str(d, "c"),
                   .redirect = Str(d, "r"),
                   .cluster_name = Str(d, "cn"),
                   .id = Str(d, "j")};
  }

  static std::string UserLabel(const Session& s) {
    if (!s.email.empty()) return s.email;
    if (!s.name.empty()) return s.name;
    return s.subject;
  }

  http::Response Resources(const http::Request& request) {
    std::optional<Session> any;
    if (!request.Query("s").has_value()) {
      // Not from kubectl bind: the catalog to read, for any login of this browser.
      any = AnySession(request);
      if (!any) return NotLoggedIn("/resources", "the services this Control Plane offers");
    }
    auto found = any ? std::variant<Session, http::Response>(*any)
                     : SessionFor(request, std::string(request.Query("s").value_or("")));
    if (auto* page = std::get_if<http::Response>(&found)) return std::move(*page);
    const Session& s = std::get<Session>(found);
    auto apis = ListOfferedApis(admin_, options_.consumer_scope);
    if (!apis.ok()) {
      KLUTCH_LOG(kWarn, "bind", "/resources: {}", apis.status().message());
      return Error(
          500, "Catalog unavailable",
          "The catalog could not be read from the Control Plane: " + apis.status().message(),
          "Reload the page in a minute; if it keeps failing, tell the platform team.");
    }
    // Bind buttons only for a kubectl bind session: it alone has a cluster and a CLI waiting.
    const bool can_bind = !s.cid.empty() && !s.redirect.empty();
    CatalogView view{.sid = can_bind ? s.sid : "",
                     .csrf = can_bind ? sealer_.Mac(kCsrfPurpose, s.id) : "",
                     .user = UserLabel(s),
                     .cluster_id = s.cid,
                     .destination = Authority(s.redirect),
                     .apis = std::move(*apis),
                     .export_url = BaseUrl(request) + "/export"};
    return Html(200, CatalogPage(view));
  }

  // The outcome of a bind: the BindingResponse, or an error with an HTTP status.
  struct BindError {
    int status;
    std::string title, what, todo;
    std::string oauth_error;  // for the device grant's JSON answers
    // The device grant's error_description says what to do too (the CLI prints it).
    bool todo_in_description = false;
  };

  // `display_name` goes into the response as authentication.oauth2CodeGrant.displayName.
  std::variant<Json, BindError> Bind(const std::string& subject, const std::string& issuer,
                                     const std::string& display_name, const std::string& sid,
                                     const std::string& cid, const std::string& cluster_name,
                                     const std::string& group, const std::string& resource) {
    if (resource.empty()) {
      return BindError{400, "Nothing to bind", "The request names no API (resource is empty).",
                       "Choose an API on the catalog page.", "invalid_request"};
    }
    if (!IsValidId(cid)) {
      return BindError{400, "Cannot bind", "The cluster ID of this session is malformed.",
                       "Run kubectl bind again.", "invalid_request"};
    }
    // Everything is checked before the Control Plane is written.
    auto api = FindOfferedApi(admin_, options_.consumer_scope, group, resource);
    if (!api.ok()) {
      if (core::IsNotFound(api.status())) {
        return BindError{404, "Not offered",
                         resource + "." + group + " is not offered by this Control Plane.",
                         "Choose an API from the catalog page.", "invalid_request"};
      }
      return BindError{
          500, "Catalog unavailable",
          "The catalog could not be read from the Control Plane: " + api.status().message(),
          "Try again in a minute; if it keeps failing, tell the platform team.", "server_error"};
    }
    auto access = ProvisionConsumer(admin_, options_.provision, subject + "#" + cid, issuer);
    if (!access.ok() && IsClusterLimitReached(access.status())) {
      Count(binds_, "cluster_limit");
      KLUTCH_LOG(kInfo, "bind", "refused a new cluster {} of {}: {}", cid, core::GoQuote(subject),
                 access.status().message());
      std::string what =
          access.status().message() + ". This cluster (" + cid + ") would be one more.";
      what[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(what[0])));
      std::string todo =
          "Remove a cluster you no longer use: ask the platform team to delete its namespace "
          "on the Control Plane";
      if (options_.unconnected_cluster_grace.count() > 0) {
        todo += " (a cluster whose konnector never connected is removed by itself " +
                ShortDuration(options_.unconnected_cluster_grace) + " after its last bind)";
      }
      todo +=
          ". Or ask the platform team to raise the limit (klutch backend "
          "--max-clusters-per-user).";
      return BindError{403,
                       "Too many clusters",
                       what,
                       todo,
                       "too_many_clusters",
                       /*todo_in_description=*/true};
    }
    if (!access.ok()) {
      KLUTCH_LOG(kWarn, "bind", "provisioning {}#{}: {}", core::GoQuote(subject), cid,
                 access.status().message());
      Count(binds_, "error");
      return BindError{
          500, "Binding failed",
          "Your space on the Control Plane could not be prepared: " + access.status().message(),
          "Try again in a minute; if it keeps failing, tell the platform team.", "server_error"};
    }
    Count(binds_, "ok");
    KLUTCH_LOG(kInfo, "bind", "bound {}.{} for {} in {}", resource, group, core::GoQuote(subject),
               access->cluster_namespace);
    RecordClusterName(access->cluster_namespace, cluster_name);
    return apis::klutch::EncodeBindingResponse(
        {.session_id = sid,
         .id = issuer + "/" + subject,
         .display_name = display_name,
         .kubeconfig = access->kubeconfig,
         .requests = {apis::klutch::EncodeExportRequest(
             apis::klutch::ExportRequestFor(api->group, api->resource, api->permission_claims))}});
  }

  // The cluster's name for the consumer page, on its namespace; a failure only costs the name.
  void RecordClusterName(const std::string& cluster_namespace, const std::string& name) {
    if (name.empty()) return;
    client::ResourceClient namespaces(admin_, client::resources::kNamespaces);
    if (auto ns = namespaces.Get(cluster_namespace);
        ns.ok() && machinery::Annotation(*ns, apis::klutch::kClusterNameAnnotation) == name) {
      return;
    }
    Json patch = {{"metadata",
                   {{"annotations", {{std::string(apis::klutch::kClusterNameAnnotation), name}}}}}};
    if (auto r =
            namespaces.Patch(cluster_namespace, client::PatchType::kMerge, machinery::Dump(patch));
        !r.ok()) {
      KLUTCH_LOG(kWarn, "bind", "recording the name of cluster namespace {}: {}", cluster_namespace,
                 r.status().message());
    }
  }

  http::Response BindFromBrowser(const http::Request& request,
                                 const std::vector<std::pair<std::string, std::string>>& params,
                                 int redirect_status) {
    auto found = SessionFor(request, FirstValue(params, "s").value_or(""));
    if (auto* page = std::get_if<http::Response>(&found)) {
      Count(binds_, "unauthenticated");
      return std::move(*page);
    }
    const Session& s = std::get<Session>(found);
    const std::string csrf = FirstValue(params, "csrf").value_or("");
    if (s.id.empty() || !sealer_.VerifyMac(kCsrfPurpose, s.id, csrf)) {
      Count(binds_, "csrf");
      return Error(
          403, "Request refused",
          "This bind request did not come from your catalog page (the CSRF check "
          "failed), so nothing was changed.",
          "Open the catalog page again (/resources?s=" + s.sid + ") and choose the API there.");
    }
    auto result =
        Bind(s.subject, s.issuer, s.display_name, s.sid, s.cid, s.cluster_name,
             FirstValue(params, "group").value_or(""), FirstValue(params, "resource").value_or(""));
    if (auto* e = std::get_if<BindError>(&result))
      return Error(e->status, e->title, e->what, e->todo);
    const Json& response = std::get<Json>(result);
    return Redirect(
        redirect_status,
        AddQueryParameter(s.redirect, "response", apis::klutch::EncodeResponsePayload(response)));
  }

  http::Response Consumer(const http::Request& request) {
    std::optional<Session> session;
    std::string sid(request.Query("s").value_or(""));
    if (!sid.empty()) {
      auto found = SessionFor(request, sid);
      if (auto* page = std::get_if<http::Response>(&found)) return std::move(*page);
      session = std::get<Session>(found);
    } else {
      session = AnySession(request);
      if (!session) return NotLoggedIn("/consumer", "your clusters and claims");
    }
    ConsumerView view{
        .user = UserLabel(*session), .sid = sid, .export_url = BaseUrl(request) + "/export"};
    if (auto s = GatherClusters(*session, view); !s.ok()) {
      KLUTCH_LOG(kWarn, "bind", "/consumer: {}", s.message());
      view.error = "Your clusters could not be read from the Control Plane: " + s.message();
    }
    return Html(200, ConsumerPage(view));
  }

  // Any valid session of this browser (a kubectl bind one or a /login one).
  std::optional<Session> AnySession(const http::Request& request) {
    for (auto header : CookieHeaders(request)) {
      for (const auto& [name, value] : ParseCookies(header)) {
        if (!name.starts_with(kSessionCookiePrefix) || name.starts_with(kLoginCookiePrefix)) {
          continue;
        }
        auto data = sealer_.Unseal(kSessionPurpose, value, Now());
        if (data.ok() && !Str(*data, "sub").empty()) return ToSession(*data);
      }
    }
    return std::nullopt;
  }

  // 401 for a page that needs a login, with the link that logs in and comes back to `path`.
  http::Response NotLoggedIn(std::string_view path, std::string_view what) {
    const PageAction login{"/login?next=" + core::PercentEncode(path), "Log in"};
    return Html(
        401, ErrorPage("Not logged in",
                       "This browser has no valid login; log in to see " + std::string(what) + ".",
                       "Log in with your platform account; you come back to this page. "
                       "To bind a new cluster, run kubectl bind <this backend>/export "
                       "against it.",
                       &login));
  }

  http::Response Landing(const http::Request& request) {
    // The router answers only "/" here; any other unknown path stays a 404.
    std::optional<Session> s = AnySession(request);
    return Html(200, LandingPage({.pretty_name = options_.pretty_name,
                                  .export_url = BaseUrl(request) + "/export",
                                  .user = s ? UserLabel(*s) : "",
                                  .device_grant = idp_.SupportsDeviceGrant()}));
  }

  core::Status GatherClusters(const Session& s, ConsumerView& view) {
    client::ResourceClient namespaces(admin_, client::resources::kNamespaces);
    KLUTCH_ASSIGN_OR_RETURN(Json list, namespaces.ListAll());
    const Json* items = machinery::Find(list, {"items"});
    if (items == nullptr || !items->is_array()) return core::Status::Ok();
    for (const auto& ns : *items) {
      const std::string identity = machinery::Annotation(ns, apis::klutch::kIdentityAnnotation);
      const size_t hash = identity.rfind('#');
      if (hash == std::string::npos || identity.substr(0, hash) != s.subject) continue;
      const std::string issuer = machinery::Annotation(ns, apis::klutch::kIssuerAnnotation);
      if (!issuer.empty() && issuer != s.issuer) continue;
      ClusterView c;
      c.name = machinery::Annotation(ns, apis::klutch::kClusterNameAnnotation);
      c.cluster_namespace = machinery::Name(ns);
      c.cluster_id = identity.substr(hash + 1);
      GatherCluster(c);
      view.clusters.push_back(std::move(c));
    }
    std::sort(view.clusters.begin(), view.clusters.end(),
              [](const ClusterView& a, const ClusterView& b) {
                // By the user's names; clusters without one after, by ID.
                return std::make_tuple(a.name.empty(), a.name, a.cluster_id) <
                       std::make_tuple(b.name.empty(), b.name, b.cluster_id);
              });
    return core::Status::Ok();
  }

  void GatherCluster(ClusterView& c) {
    const std::string& ns = c.cluster_namespace;
    if (auto cb = client::ResourceClient(admin_, apis::klutch::kClusterBindings, ns)
                      .Get(apis::klutch::kClusterBindingName);
        cb.ok()) {
      c.last_heartbeat = machinery::GetString(*cb, {"status", "lastHeartbeatTime"});
      c.heartbeat_age = Age(Now(), c.last_heartbeat);
      c.konnector_version = machinery::GetString(*cb, {"status", "konnectorVersion"});
      Condition ready = ConditionOf(*cb, "Ready");
      c.ready = ready.status;
      c.ready_message = ready.message;
    }
    // APIServiceNamespaces are named after the App Cluster namespace; their status names the
    // Control Plane namespace made for it.
    if (auto l = client::ResourceClient(admin_, apis::klutch::kApiServiceNamespaces, ns).ListAll();
        l.ok()) {
      if (const Json* items = machinery::Find(*l, {"items"}); items && items->is_array()) {
        for (const auto& asn : *items) {
          std::string provider = machinery::GetString(asn, {"status", "namespace"});
          if (provider.empty()) continue;
          c.namespaces.push_back({machinery::Name(asn), provider});
        }
      }
    }
    std::sort(c.namespaces.begin(), c.namespaces.end(),
              [](const NamespaceView& a, const NamespaceView& b) { return a.app < b.app; });
    auto exports = client::ResourceClient(admin_, apis::klutch::kApiServiceExports, ns).ListAll();
    if (!exports.ok()) return;
    const Json* items = machinery::Find(*exports, {"items"});
    if (items == nullptr || !items->is_array()) return;
    for (const auto& ex : *items) {
      ExportView e;
      e.name = machinery::Name(ex);
      // Served to the consumer once its konnector is connected and the CRD established;
      // the export's Ready summary also waits for a schema-conformance report no konnector
      // sends (an upstream quirk), so it would read "Not ready" for a working binding.
      Condition connected = ConditionOf(ex, "Connected");
      Condition established = ConditionOf(ex, "Established");
      const Condition& worse = connected.status != "True" ? connected : established;
      e.ready = worse.status;
      e.message = worse.status == "True" ? "" : worse.message;
      GatherClaims(ex, ns, c.namespaces, e);
      c.exports.push_back(std::move(e));
    }
  }

  void GatherClaims(const Json& ex, const std::string& cluster_ns,
                    const std::vector<NamespaceView>& namespaces, ExportView& e) {
    const std::string group = machinery::GetString(ex, {"spec", "group"});
    const std::string plural = machinery::GetString(ex, {"spec", "names", "plural"});
    const std::string kind = machinery::GetString(ex, {"spec", "names", "kind"});
    std::string version;
    if (const Json* versions = machinery::Find(ex, {"spec", "versions"});
        versions && versions->is_array()) {
      for (const auto& v : *versions) {
        const Json* storage = v.is_object() ? machinery::Find(v, {"storage"}) : nullptr;
        if (version.empty() || (storage && storage->is_boolean() && *storage == true)) {
          version = Str(v, "name");
        }
      }
    }
    if (plural.empty() || version.empty()) return;
    const machinery::GroupVersionResource gvr{group, version, plural};
    auto add = [&](const Json& obj, const std::string& app_ns) {
      Condition ready = ConditionOf(obj, "Ready");
      // The reason in the developer's names, as the konnector copies it to their cluster.
      const std::string provider_ns = machinery::Namespace(obj);
      std::string message = ready.message;
      if (!app_ns.empty() && !provider_ns.empty()) {
        message = machinery::ReplaceWholeName(message, provider_ns, app_ns);
      }
      e.claims.push_back(ClaimView{.kind = kind,
                                   .ns = app_ns,
                                   .provider_ns = provider_ns,
                                   .name = machinery::Name(obj),
                                   .ready = ready.status,
                                   .reason = ready.reason,
                                   .message = std::move(message)});
    };
    const bool cluster_scoped = machinery::GetString(ex, {"spec", "scope"}) == "Cluster";
    if (cluster_scoped) {
      auto l = client::ResourceClient(admin_, gvr).ListAll();
      if (!l.ok()) return;
      if (const Json* items = machinery::Find(*l, {"items"}); items && items->is_array()) {
        for (const auto& obj : *items) {
          if (machinery::Annotation(obj, apis::klutch::kClusterNamespaceAnnotation) == cluster_ns) {
            add(obj, "");
          }
        }
      }
      return;
    }
    for (const auto& n : namespaces) {
      auto l = client::ResourceClient(admin_, gvr, n.provider).ListAll();
      if (!l.ok()) continue;
      if (const Json* items = machinery::Find(*l, {"items"}); items && items->is_array()) {
        for (const auto& obj : *items) add(obj, n.app);
      }
    }
  }

  http::Response DeviceAuthorize(const http::Request& request) {
    // Each start asks the issuer for a device code: bounded per client address.
    const std::string address = ClientAddress(request.remote_address);
    if (auto wait = device_authorize_limiter_.Take(address); wait.count() > 0) {
      Count(logins_, "rate_limited");
      http::Response r =
          OAuthError(429, "temporarily_unavailable",
                     fmt::format("too many device logins started from {}; try again in {} s",
                                 address.empty() ? "this address" : address, wait.count()));
      r.headers.Set("Retry-After", std::to_string(wait.count()));
      return r;
    }
    auto form = ParseForm(request.body);
    const std::string sid = FirstValue(form, "s").value_or("");
    const std::string cid = FirstValue(form, "c").value_or("");
    if (!IsValidId(sid) || !IsValidId(cid)) {
      return OAuthError(400, "invalid_request",
                        "s (the CLI session ID) and c (the cluster ID) are required: 1-64 "
                        "letters and digits each");
    }
    auto cluster_name = ClusterNameParameter(FirstValue(form, "n"));
    if (!cluster_name.ok()) {
      return OAuthError(400, "invalid_request", cluster_name.status().message());
    }
    if (!idp_.SupportsDeviceGrant()) {
      return OAuthError(400, "unsupported_grant_type",
                        "the identity provider of this backend does not offer the device "
                        "authorization grant; use the browser login");
    }
    auto started = idp_.StartDeviceAuthorization();
    if (!started.ok()) {
      KLUTCH_LOG(kWarn, "bind", "/device/authorize: {}", started.status().message());
      return OAuthError(502, "server_error", started.status().message());
    }
    const auto ttl = std::chrono::seconds(std::clamp<int64_t>(started->expires_in, 1, 3600));
    const std::string handle = sealer_.Seal(
        kDevicePurpose,
        Json{{"d", started->device_code}, {"s", sid}, {"c", cid}, {"cn", *cluster_name}},
        Now() + ttl);
    Json body = {{"device_handle", handle},
                 {"user_code", started->user_code},
                 {"verification_uri", started->verification_uri},
                 {"expires_in", ttl.count()},
                 {"interval", started->interval}};
    if (!started->verification_uri_complete.empty()) {
      body["verification_uri_complete"] = started->verification_uri_complete;
    }
    return JsonResponse(200, body);
  }

  http::Response DeviceToken(const http::Request& request) {
    auto form = ParseForm(request.body);
    const std::string handle_text = FirstValue(form, "device_handle").value_or("");
    const std::string group = FirstValue(form, "group").value_or("");
    const std::string resource = FirstValue(form, "resource").value_or("");
    if (handle_text.empty()) {
      return OAuthError(400, "invalid_request", "device_handle is required");
    }
    auto handle = sealer_.Unseal(kDevicePurpose, handle_text, Now());
    if (!handle.ok()) {
      if (handle.status().reason() == core::Reason::kExpired) {
        return OAuthError(400, "expired_token",
                          "the device authorization expired; run kubectl bind --headless again");
      }
      return OAuthError(400, "invalid_grant",
                        "device_handle was not issued by this backend or was altered");
    }
    // The API is checked before the device code is redeemed: a typo must not use it up.
    if (!resource.empty()) {
      auto api = FindOfferedApi(admin_, options_.consumer_scope, group, resource);
      if (!api.ok()) {
        if (core::IsNotFound(api.status())) {
          return OAuthError(400, "invalid_request",
                            resource + "." + group + " is not offered by this Control Plane");
        }
        return OAuthError(503, "server_error", "reading the catalog: " + api.status().message());
      }
    }
    auto poll = idp_.PollDeviceToken(Str(*handle, "d"));
    if (!poll.ok()) {
      Count(logins_, "refused");
      if (poll.status().reason() == core::Reason::kUnauthorized) {
        return OAuthError(400, "access_denied", poll.status().message());
      }
      return OAuthError(502, "server_error", poll.status().message());
    }
    if (!poll->claims) {
      if (poll->error != "authorization_pending" && poll->error != "slow_down") {
        Count(logins_, "refused");
      }
      // Issuers may send none (a redeemed code often comes back as a bare invalid_grant);
      // the CLI prints the description, so there always is one.
      return OAuthError(400, poll->error,
                        poll->error_description.empty() ? DeviceErrorDescription(poll->error)
                                                        : poll->error_description);
    }
    Count(logins_, "ok");
    if (resource.empty()) {
      // No API named yet: a short-lived session and the catalog, so the CLI can ask the user
      // and finish with /device/bind.
      auto apis = ListOfferedApis(admin_, options_.consumer_scope);
      if (!apis.ok()) {
        return OAuthError(503, "server_error", "reading the catalog: " + apis.status().message());
      }
      Json list = Json::array();
      for (const auto& a : *apis) {
        list.push_back({{"group", a.group},
                        {"resource", a.resource},
                        {"kind", a.kind},
                        {"scope", a.scope},
                        {"description", a.description},
                        {"versions", a.versions},
                        {"plans", a.plans},
                        {"permissionClaims", a.permission_claims}});
      }
      const std::string session = sealer_.Seal(kDeviceSessionPurpose,
                                               Json{{"sub", poll->claims->subject},
                                                    {"iss", poll->claims->issuer},
                                                    {"dn", DisplayNameOf(*poll->claims)},
                                                    {"s", Str(*handle, "s")},
                                                    {"c", Str(*handle, "c")},
                                                    {"cn", Str(*handle, "cn")}},
                                               Now() + options_.login_ttl);
      return JsonResponse(200, Json{{"kind", "DeviceSession"},
                                    {"session", session},
                                    {"expires_in", options_.login_ttl.count()},
                                    {"apis", std::move(list)}});
    }
    return DeviceBindResponse(poll->claims->subject, poll->claims->issuer,
                              DisplayNameOf(*poll->claims), Str(*handle, "s"), Str(*handle, "c"),
                              Str(*handle, "cn"), group, resource);
  }

  http::Response DeviceBindResponse(const std::string& subject, const std::string& issuer,
                                    const std::string& display_name, const std::string& sid,
                                    const std::string& cid, const std::string& cluster_name,
                                    const std::string& group, const std::string& resource) {
    auto result = Bind(subject, issuer, display_name, sid, cid, cluster_name, group, resource);
    if (auto* e = std::get_if<BindError>(&result)) {
      return OAuthError(e->status >= 500 ? 502 : 400, e->oauth_error,
                        e->todo_in_description ? e->what + " What to do: " + e->todo : e->what);
    }
    return JsonResponse(200, std::get<Json>(result));
  }

  // The second step after a /device/token that named no API.
  http::Response DeviceBind(const http::Request& request) {
    auto form = ParseForm(request.body);
    const std::string resource = FirstValue(form, "resource").value_or("");
    if (resource.empty()) {
      return OAuthError(400, "invalid_request",
                        "resource (and group) name the API to bind, e.g. "
                        "resource=postgresqlinstances&group=anynines.com");
    }
    auto session =
        sealer_.Unseal(kDeviceSessionPurpose, FirstValue(form, "session").value_or(""), Now());
    if (!session.ok()) {
      if (session.status().reason() == core::Reason::kExpired) {
        return OAuthError(400, "expired_token",
                          "the login expired; run kubectl bind --headless again");
      }
      Count(binds_, "unauthenticated");
      return OAuthError(400, "invalid_grant",
                        "session was not issued by this backend or was altered");
    }
    return DeviceBindResponse(Str(*session, "sub"), Str(*session, "iss"), Str(*session, "dn"),
                              Str(*session, "s"), Str(*session, "c"), Str(*session, "cn"),
                              FirstValue(form, "group").value_or(""), resource);
  }

  client::RestClient& admin_;
  IdentityProvider& idp_;
  const Sealer sealer_;
  const WebOptions options_;
  const core::Clock& clock_;
  serving::CounterFamily* logins_ = nullptr;
  serving::CounterFamily* binds_ = nullptr;
  KeyedRateLimiter device_authorize_limiter_;
};

WebBackend::WebBackend(client::RestClient& admin, IdentityProvider& idp, Sealer sealer,
                       WebOptions options)
    : impl_(std::make_unique<Impl>(admin, idp, std::move(sealer), std::move(options))) {}
WebBackend::~WebBackend() = default;

void WebBackend::AddRoutes(http::Router& router) { impl_->AddRoutes(router); }

}  // namespace klutch::bind
