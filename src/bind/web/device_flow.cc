#include "bind/web/device_flow.h"

#include <fmt/format.h>

#include <algorithm>

#include "bind/catalog.h"
#include "bind/web/web_protocol.h"
#include "bind/web/web_responses.h"
#include "core/log.h"

namespace klutch::bind {

using machinery::Json;

namespace {

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

// The catalog as the device session answer lists it.
Json OfferedApisJson(const std::vector<OfferedApi>& apis) {
  Json list = Json::array();
  for (const auto& a : apis) {
    list.push_back({{"group", a.group},
                    {"resource", a.resource},
                    {"kind", a.kind},
                    {"scope", a.scope},
                    {"description", a.description},
                    {"versions", a.versions},
                    {"plans", a.plans},
                    {"permissionClaims", a.permission_claims}});
  }
  return list;
}

}  // namespace

DeviceFlow::DeviceFlow(const WebContext& ctx, const ConsumerBinder& binder)
    : ctx_(ctx),
      binder_(binder),
      authorize_limiter_(ctx.options.device_authorize_qps, ctx.options.device_authorize_burst,
                         ctx.clock) {}

http::Response DeviceFlow::Authorize(const http::Request& request) {
  // Each start asks the issuer for a device code: bounded per client address.
  const std::string address = ClientAddress(request.remote_address);
  if (auto wait = authorize_limiter_.Take(address); wait.count() > 0) {
    ctx_.CountLogin("rate_limited");
    http::Response r =
        OAuthErrorResponse(429, "temporarily_unavailable",
                           fmt::format("too many device logins started from {}; try again in {} s",
                                       address.empty() ? "this address" : address, wait.count()));
    r.headers.Set("Retry-After", std::to_string(wait.count()));
    return r;
  }
  auto form = ParseForm(request.body);
  const std::string sid = FirstValue(form, "s").value_or("");
  const std::string cid = FirstValue(form, "c").value_or("");
  if (!IsValidId(sid) || !IsValidId(cid)) {
    return OAuthErrorResponse(400, "invalid_request",
                              "s (the CLI session ID) and c (the cluster ID) are required: 1-64 "
                              "letters and digits each");
  }
  auto cluster_name = ClusterNameParameter(FirstValue(form, "n"));
  if (!cluster_name.ok()) {
    return OAuthErrorResponse(400, "invalid_request", cluster_name.status().message());
  }
  if (!ctx_.idp.SupportsDeviceGrant()) {
    return OAuthErrorResponse(400, "unsupported_grant_type",
                              "the identity provider of this backend does not offer the device "
                              "authorization grant; use the browser login");
  }
  auto started = ctx_.idp.StartDeviceAuthorization();
  if (!started.ok()) {
    KLUTCH_LOG(kWarn, "bind", "/device/authorize: {}", started.status().message());
    return OAuthErrorResponse(502, "server_error", started.status().message());
  }
  const auto ttl = std::chrono::seconds(std::clamp<int64_t>(started->expires_in, 1, 3600));
  const std::string handle = ctx_.sealer.Seal(
      kDevicePurpose,
      Json{{"d", started->device_code}, {"s", sid}, {"c", cid}, {"cn", *cluster_name}},
      ctx_.Now() + ttl);
  Json body = {{"device_handle", handle},
               {"user_code", started->user_code},
               {"verification_uri", started->verification_uri},
               {"expires_in", ttl.count()},
               {"interval", started->interval}};
  if (!started->verification_uri_complete.empty()) {
    body["verification_uri_complete"] = started->verification_uri_complete;
  }
  return WebJsonResponse(200, body);
}

http::Response DeviceFlow::Token(const http::Request& request) {
  auto form = ParseForm(request.body);
  const std::string group = FirstValue(form, "group").value_or("");
  const std::string resource = FirstValue(form, "resource").value_or("");
  auto handle = OpenHandle(FirstValue(form, "device_handle").value_or(""));
  if (auto* error = std::get_if<http::Response>(&handle)) return std::move(*error);
  const Json& h = std::get<Json>(handle);
  // The API is checked before the device code is redeemed: a typo must not use it up.
  if (auto refused = CheckOffered(group, resource)) return std::move(*refused);
  auto claims = Poll(h);
  if (auto* answer = std::get_if<http::Response>(&claims)) return std::move(*answer);
  const IdTokenClaims& user = std::get<IdTokenClaims>(claims);
  // No API named yet: a short-lived session and the catalog, so the CLI can ask the user and
  // finish with /device/bind.
  if (resource.empty()) return CatalogSession(user, h);
  return BindResponse({.subject = user.subject,
                       .issuer = user.issuer,
                       .display_name = DisplayNameOf(user),
                       .sid = StringMember(h, "s"),
                       .cid = StringMember(h, "c"),
                       .cluster_name = StringMember(h, "cn"),
                       .group = group,
                       .resource = resource});
}

// The device handle /device/authorize sealed: {d (device code), s, c, cn}.
std::variant<Json, http::Response> DeviceFlow::OpenHandle(const std::string& handle) const {
  if (handle.empty()) {
    return OAuthErrorResponse(400, "invalid_request", "device_handle is required");
  }
  auto opened = ctx_.sealer.Unseal(kDevicePurpose, handle, ctx_.Now());
  if (opened.ok()) return std::move(*opened);
  if (opened.status().reason() == core::Reason::kExpired) {
    return OAuthErrorResponse(
        400, "expired_token",
        "the device authorization expired; run kubectl bind --headless again");
  }
  return OAuthErrorResponse(400, "invalid_grant",
                            "device_handle was not issued by this backend or was altered");
}

// An error answer when `resource` (if named) is not offered or the catalog cannot be read.
std::optional<http::Response> DeviceFlow::CheckOffered(const std::string& group,
                                                       const std::string& resource) const {
  if (resource.empty()) return std::nullopt;
  auto api = FindOfferedApi(ctx_.admin, ctx_.options.consumer_scope, group, resource);
  if (api.ok()) return std::nullopt;
  if (core::IsNotFound(api.status())) {
    return OAuthErrorResponse(400, "invalid_request",
                              resource + "." + group + " is not offered by this Control Plane");
  }
  return OAuthErrorResponse(503, "server_error", "reading the catalog: " + api.status().message());
}

// One poll of the issuer: the user's claims once approved, else the RFC 8628 answer to pass on.
std::variant<IdTokenClaims, http::Response> DeviceFlow::Poll(const Json& handle) {
  auto poll = ctx_.idp.PollDeviceToken(StringMember(handle, "d"));
  if (!poll.ok()) {
    ctx_.CountLogin("refused");
    if (poll.status().reason() == core::Reason::kUnauthorized) {
      return OAuthErrorResponse(400, "access_denied", poll.status().message());
    }
    return OAuthErrorResponse(502, "server_error", poll.status().message());
  }
  if (!poll->claims) {
    if (poll->error != "authorization_pending" && poll->error != "slow_down") {
      ctx_.CountLogin("refused");
    }
    // Issuers may send none (a redeemed code often comes back as a bare invalid_grant); the
    // CLI prints the description, so there always is one.
    return OAuthErrorResponse(400, poll->error,
                              poll->error_description.empty() ? DeviceErrorDescription(poll->error)
                                                              : poll->error_description);
  }
  ctx_.CountLogin("ok");
  return std::move(*poll->claims);
}

http::Response DeviceFlow::CatalogSession(const IdTokenClaims& claims, const Json& handle) {
  auto apis = ListOfferedApis(ctx_.admin, ctx_.options.consumer_scope);
  if (!apis.ok()) {
    return OAuthErrorResponse(503, "server_error",
                              "reading the catalog: " + apis.status().message());
  }
  const std::string session = ctx_.sealer.Seal(kDeviceSessionPurpose,
                                               Json{{"sub", claims.subject},
                                                    {"iss", claims.issuer},
                                                    {"dn", DisplayNameOf(claims)},
                                                    {"s", StringMember(handle, "s")},
                                                    {"c", StringMember(handle, "c")},
                                                    {"cn", StringMember(handle, "cn")}},
                                               ctx_.Now() + ctx_.options.login_ttl);
  return WebJsonResponse(200, Json{{"kind", "DeviceSession"},
                                   {"session", session},
                                   {"expires_in", ctx_.options.login_ttl.count()},
                                   {"apis", OfferedApisJson(*apis)}});
}

// The second step after a /device/token that named no API.
http::Response DeviceFlow::Bind(const http::Request& request) {
  auto form = ParseForm(request.body);
  const std::string resource = FirstValue(form, "resource").value_or("");
  if (resource.empty()) {
    return OAuthErrorResponse(400, "invalid_request",
                              "resource (and group) name the API to bind, e.g. "
                              "resource=postgresqlinstances&group=anynines.com");
  }
  auto session = ctx_.sealer.Unseal(kDeviceSessionPurpose, FirstValue(form, "session").value_or(""),
                                    ctx_.Now());
  if (!session.ok()) {
    if (session.status().reason() == core::Reason::kExpired) {
      return OAuthErrorResponse(400, "expired_token",
                                "the login expired; run kubectl bind --headless again");
    }
    ctx_.CountBind("unauthenticated");
    return OAuthErrorResponse(400, "invalid_grant",
                              "session was not issued by this backend or was altered");
  }
  return BindResponse({.subject = StringMember(*session, "sub"),
                       .issuer = StringMember(*session, "iss"),
                       .display_name = StringMember(*session, "dn"),
                       .sid = StringMember(*session, "s"),
                       .cid = StringMember(*session, "c"),
                       .cluster_name = StringMember(*session, "cn"),
                       .group = FirstValue(form, "group").value_or(""),
                       .resource = resource});
}

http::Response DeviceFlow::BindResponse(const BindRequest& request) {
  auto result = binder_.Bind(request);
  if (auto* e = std::get_if<BindError>(&result)) {
    return OAuthErrorResponse(
        e->status >= 500 ? 502 : 400, e->oauth_error,
        e->todo_in_description ? e->what + " What to do: " + e->todo : e->what);
  }
  return WebJsonResponse(200, std::get<Json>(result));
}

}  // namespace klutch::bind
