#include "bind/web/oidc_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "auth/jwt.h"
#include "auth/oidc.h"
#include "bind/web/web_protocol.h"
#include "core/log.h"
#include "core/strings.h"
#include "http/client.h"
#include "http/url.h"
#include "machinery/object.h"

namespace klutch::bind {
namespace {

using machinery::Json;

// The issuer's error answer as text for logs and pages: "invalid_grant: code expired".
std::string OAuthError(int status, const Json& body) {
  std::string error = machinery::GetString(body, {"error"});
  std::string description = machinery::GetString(body, {"error_description"});
  if (error.empty()) return fmt::format("HTTP {}", status);
  return description.empty() ? error : error + ": " + description;
}

int64_t IntOr(const Json& body, const char* key, int64_t fallback) {
  const Json* v = machinery::Find(body, {key});
  if (v == nullptr || !v->is_number_integer()) return fallback;
  return v->get<int64_t>();  // json-ok: is_number_integer() checked above
}

}  // namespace

core::Result<std::pair<int, Json>> PostForm(const std::string& url, const std::string& ca_pem,
                                            const std::string& form,
                                            const std::string& authorization,
                                            std::chrono::seconds timeout) {
  KLUTCH_ASSIGN_OR_RETURN(http::Url u, http::ParseHttpsUrl(url));
  http::Client client({.host = u.host,
                       .port = u.port,
                       .tls = true,
                       .ca_pem = ca_pem,
                       .timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout)});
  http::Headers headers;
  headers.Add("Content-Type", "application/x-www-form-urlencoded");
  headers.Add("Accept", "application/json");
  if (!authorization.empty()) headers.Add("Authorization", authorization);
  KLUTCH_ASSIGN_OR_RETURN(http::ClientResponse resp, client.Do("POST", u.Target(), headers, form));
  auto parsed = machinery::ParseJson(resp.body);
  Json body = parsed.ok() && parsed->is_object() ? std::move(*parsed) : Json::object();
  return std::make_pair(resp.status, std::move(body));
}

core::Result<std::unique_ptr<OidcClient>> OidcClient::New(OidcClientOptions options) {
  if (options.issuer_url.empty()) return core::Invalid("--oidc-issuer-url is required");
  if (auto u = http::ParseHttpsUrl(options.issuer_url); !u.ok()) {
    return core::Invalid("--oidc-issuer-url " + u.status().message());
  }
  if (options.client_id.empty()) return core::Invalid("--oidc-issuer-client-id is required");
  if (options.client_secret.empty()) {
    return core::Invalid("--oidc-issuer-client-secret is required");
  }
  if (options.redirect_url.empty() || !(options.redirect_url.starts_with("https://") ||
                                        options.redirect_url.starts_with("http://"))) {
    return core::Invalid(
        "--oidc-callback-url is required: this backend's /callback URL as registered at the "
        "issuer (http or https)");
  }
  auto client = std::unique_ptr<OidcClient>(new OidcClient(std::move(options)));
  if (!client->options_.ca_file.empty()) {
    std::ifstream in(client->options_.ca_file, std::ios::binary);
    if (!in) return core::Invalid("--oidc-ca-file " + client->options_.ca_file + ": cannot read");
    client->ca_pem_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auth::OidcOptions verify;
  verify.issuer_url = client->options_.issuer_url;
  verify.client_id = client->options_.client_id;
  verify.ca_file = client->options_.ca_file;
  verify.fetch_timeout = client->options_.timeout;
  if (client->options_.clock) verify.clock = client->options_.clock;
  auto verifier = auth::OidcAuthenticator::New(std::move(verify));
  if (!verifier.ok()) return core::Invalid(verifier.status().message());
  client->verifier_ = std::move(*verifier);
  return client;
}

OidcClient::OidcClient(OidcClientOptions options) : options_(std::move(options)) {}
OidcClient::~OidcClient() = default;

core::Status OidcClient::Discover() {
  std::string issuer = options_.issuer_url;
  while (!issuer.empty() && issuer.back() == '/') issuer.pop_back();
  const std::string url = issuer + "/.well-known/openid-configuration";
  KLUTCH_ASSIGN_OR_RETURN(http::Url u, http::ParseHttpsUrl(url));
  http::Client client(
      {.host = u.host,
       .port = u.port,
       .tls = true,
       .ca_pem = ca_pem_,
       .timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options_.timeout)});
  http::Headers headers;
  headers.Add("Accept", "application/json");
  KLUTCH_ASSIGN_OR_RETURN(http::ClientResponse resp, client.Do("GET", u.Target(), headers));
  if (resp.status != 200) {
    return core::Unavailable(fmt::format("GET {}: HTTP {}", url, resp.status));
  }
  auto doc = machinery::ParseJson(resp.body);
  if (!doc.ok() || !doc->is_object()) {
    return core::Unavailable(fmt::format("GET {}: not a JSON object", url));
  }
  if (machinery::GetString(*doc, {"issuer"}) != options_.issuer_url) {
    return core::Unavailable(fmt::format("{} names issuer {}, want {}", url,
                                         core::GoQuote(machinery::GetString(*doc, {"issuer"})),
                                         core::GoQuote(options_.issuer_url)));
  }
  Endpoints e{
      .authorization = machinery::GetString(*doc, {"authorization_endpoint"}),
      .token = machinery::GetString(*doc, {"token_endpoint"}),
      .device_authorization = machinery::GetString(*doc, {"device_authorization_endpoint"})};
  if (e.authorization.empty() || e.token.empty()) {
    return core::Unavailable(url + " lacks authorization_endpoint or token_endpoint");
  }
  if (!http::ParseHttpsUrl(e.token).ok()) return core::Unavailable("token_endpoint must use https");
  if (!e.device_authorization.empty() && !http::ParseHttpsUrl(e.device_authorization).ok()) {
    e.device_authorization.clear();
  }
  // The keys too, so the first login does not wait for them.
  if (auto s = verifier_->Refresh(); !s.ok()) {
    return core::Unavailable("fetching the issuer's keys: " + s.message());
  }
  core::MutexLock lock(mu_);
  endpoints_ = std::move(e);
  return core::Status::Ok();
}

core::Result<OidcClient::Endpoints> OidcClient::GetEndpoints() {
  {
    core::MutexLock lock(mu_);
    if (endpoints_) return *endpoints_;
  }
  if (auto s = Discover(); !s.ok()) {
    return core::Unavailable("the identity provider " + options_.issuer_url +
                             " cannot be reached: " + s.message());
  }
  core::MutexLock lock(mu_);
  return *endpoints_;
}

core::Result<std::string> OidcClient::AuthorizationUrl(const AuthorizationRequest& request) {
  KLUTCH_ASSIGN_OR_RETURN(Endpoints e, GetEndpoints());
  std::string url = e.authorization;
  for (const auto& [k, v] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"response_type", "code"},
           {"client_id", options_.client_id},
           {"redirect_uri", options_.redirect_url},
           {"scope", options_.scopes},
           {"state", request.state},
           {"nonce", request.nonce},
           {"code_challenge", request.code_challenge},
           {"code_challenge_method", "S256"}}) {
    url = AddQueryParameter(url, k, v);
  }
  return url;
}

core::Result<std::pair<int, Json>> OidcClient::PostWithClientAuth(const std::string& url,
                                                                  const std::string& form) {
  // RFC 6749 §2.3.1: the id and secret are form-encoded before going into the basic header.
  const std::string basic =
      "Basic " + core::Base64Encode(core::PercentEncode(options_.client_id) + ":" +
                                    core::PercentEncode(options_.client_secret));
  KLUTCH_ASSIGN_OR_RETURN(auto first, PostForm(url, ca_pem_, form, basic, options_.timeout));
  const std::string error = machinery::GetString(first.second, {"error"});
  if (first.first != 401 && error != "invalid_client" && error != "unauthorized_client") {
    return first;
  }
  // client_secret_post for issuers that do not take the basic header.
  std::string with_secret = form + "&" +
                            http::FormEncode({{"client_id", options_.client_id},
                                              {"client_secret", options_.client_secret}});
  return PostForm(url, ca_pem_, with_secret, "", options_.timeout);
}

core::Result<IdTokenClaims> OidcClient::Verify(const Json& token_response,
                                               const std::string& nonce) {
  const std::string id_token = machinery::GetString(token_response, {"id_token"});
  if (id_token.empty()) {
    return core::Status(core::Reason::kUnauthorized,
                        "the identity provider's token response holds no id_token (is the "
                        "openid scope allowed for this client?)");
  }
  return VerifyIdToken(id_token, nonce);
}

core::Result<IdTokenClaims> OidcClient::VerifyIdToken(const std::string& id_token,
                                                      const std::string& nonce) {
  auto claims = verifier_->VerifyIdToken(id_token);
  if (!claims.ok()) {
    return core::Status(core::Reason::kUnauthorized,
                        "the ID token does not verify: " + claims.status().message());
  }
  if (!nonce.empty() && machinery::GetString(*claims, {"nonce"}) != nonce) {
    return core::Status(core::Reason::kUnauthorized,
                        "the ID token was issued for another login (nonce mismatch)");
  }
  IdTokenClaims out;
  out.issuer = machinery::GetString(*claims, {"iss"});
  out.subject = machinery::GetString(*claims, {"sub"});
  out.email = machinery::GetString(*claims, {"email"});
  out.name = machinery::GetString(*claims, {"name"});
  out.preferred_username = machinery::GetString(*claims, {"preferred_username"});
  if (out.subject.empty()) {
    return core::Status(core::Reason::kUnauthorized, "the ID token has no subject (sub)");
  }
  auto jwt = auth::ParseJwt(id_token);
  auto exp = jwt.ok() ? auth::ExpiryOf(*jwt) : std::nullopt;
  out.expires = exp ? *exp : core::SystemTime();
  out.claims = std::move(*claims);
  return out;
}

core::Result<IdTokenClaims> OidcClient::ExchangeCode(const std::string& code,
                                                     const std::string& code_verifier,
                                                     const std::string& nonce) {
  KLUTCH_ASSIGN_OR_RETURN(Endpoints e, GetEndpoints());
  const std::string form = http::FormEncode({{"grant_type", "authorization_code"},
                                             {"code", code},
                                             {"redirect_uri", options_.redirect_url},
                                             {"code_verifier", code_verifier}});
  KLUTCH_ASSIGN_OR_RETURN(auto answer, PostWithClientAuth(e.token, form));
  if (answer.first != 200) {
    return core::Status(core::Reason::kUnauthorized,
                        "the identity provider refused the login code (" +
                            OAuthError(answer.first, answer.second) + ")");
  }
  return Verify(answer.second, nonce);
}

bool OidcClient::SupportsDeviceGrant() {
  auto e = GetEndpoints();
  return e.ok() && !e->device_authorization.empty();
}

core::Result<DeviceAuthorization> OidcClient::StartDeviceAuthorization() {
  KLUTCH_ASSIGN_OR_RETURN(Endpoints e, GetEndpoints());
  if (e.device_authorization.empty()) {
    return core::BadRequest("the identity provider " + options_.issuer_url +
                            " does not offer the device authorization grant");
  }
  const std::string form =
      http::FormEncode({{"client_id", options_.client_id}, {"scope", options_.scopes}});
  KLUTCH_ASSIGN_OR_RETURN(auto answer, PostWithClientAuth(e.device_authorization, form));
  if (answer.first != 200) {
    return core::Unavailable("the identity provider refused the device authorization (" +
                             OAuthError(answer.first, answer.second) + ")");
  }
  const Json& body = answer.second;
  DeviceAuthorization out;
  out.device_code = machinery::GetString(body, {"device_code"});
  out.user_code = machinery::GetString(body, {"user_code"});
  out.verification_uri = machinery::GetString(body, {"verification_uri"});
  out.verification_uri_complete = machinery::GetString(body, {"verification_uri_complete"});
  out.expires_in = IntOr(body, "expires_in", 600);
  out.interval = IntOr(body, "interval", 5);
  if (out.device_code.empty() || out.user_code.empty() || out.verification_uri.empty()) {
    return core::Unavailable(
        "the identity provider's device authorization lacks device_code, user_code or "
        "verification_uri");
  }
  return out;
}

core::Result<DevicePoll> OidcClient::PollDeviceToken(const std::string& device_code) {
  KLUTCH_ASSIGN_OR_RETURN(Endpoints e, GetEndpoints());
  const std::string form =
      http::FormEncode({{"grant_type", "urn:ietf:params:oauth:grant-type:device_code"},
                        {"device_code", device_code},
                        {"client_id", options_.client_id}});
  KLUTCH_ASSIGN_OR_RETURN(auto answer, PostWithClientAuth(e.token, form));
  DevicePoll out;
  if (answer.first != 200) {
    out.error = machinery::GetString(answer.second, {"error"});
    out.error_description = machinery::GetString(answer.second, {"error_description"});
    if (out.error.empty()) {
      return core::Unavailable(
          fmt::format("the identity provider's token endpoint answered HTTP {}", answer.first));
    }
    return out;
  }
  // No nonce in the device grant: the device code itself is the one-time binding.
  KLUTCH_ASSIGN_OR_RETURN(IdTokenClaims claims, Verify(answer.second, ""));
  out.claims = std::move(claims);
  return out;
}

}  // namespace klutch::bind
