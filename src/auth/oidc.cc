#include "auth/oidc.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "auth/internal.h"
#include "core/log.h"
#include "core/strings.h"
#include "http/client.h"
#include "http/url.h"
#include "machinery/json.h"
#include "machinery/object.h"

namespace klutch::auth {

namespace {

using machinery::Json;

using internal::Refused;

// The claim's value as a list of strings (a string or an array of strings).
core::Result<std::vector<std::string>> StringList(const Json& v, const std::string& claim) {
  std::vector<std::string> out;
  if (const auto* one = v.get_ptr<const std::string*>()) {
    out.push_back(*one);
  } else if (v.is_array()) {
    for (const auto& g : v) {
      const auto* each = g.get_ptr<const std::string*>();
      if (each == nullptr) return Refused(fmt::format("claim {} holds a non-string", claim));
      out.push_back(*each);
    }
  } else {
    return Refused(fmt::format("claim {} is neither a string nor a list", claim));
  }
  return out;
}

}  // namespace

core::Result<std::unique_ptr<OidcAuthenticator>> OidcAuthenticator::New(OidcOptions options) {
  auto url = http::ParseHttpsUrl(options.issuer_url);
  if (!url.ok()) return core::BadRequest("--oidc-issuer-url " + url.status().message());
  if (options.client_id.empty()) {
    return core::BadRequest("--oidc-client-id is required with --oidc-issuer-url");
  }
  if (options.username_claim.empty()) {
    return core::BadRequest("--oidc-username-claim must not be empty");
  }
  for (const auto& alg : options.signing_algs) {
    if (alg.empty() || alg == "none" || alg.starts_with("HS")) {
      return core::BadRequest(
          fmt::format("--oidc-signing-algs: {} is not an asymmetric algorithm", alg));
    }
  }
  auto a = std::unique_ptr<OidcAuthenticator>(new OidcAuthenticator(std::move(options)));
  if (!a->options_.ca_file.empty()) {
    std::ifstream in(a->options_.ca_file, std::ios::binary);
    if (!in)
      return core::BadRequest(fmt::format("--oidc-ca-file {}: cannot read", a->options_.ca_file));
    a->ca_pem_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return a;
}

OidcAuthenticator::OidcAuthenticator(OidcOptions options) : options_(std::move(options)) {}
OidcAuthenticator::~OidcAuthenticator() = default;

core::Result<std::string> OidcAuthenticator::Fetch(const std::string& url) {
  KLUTCH_ASSIGN_OR_RETURN(http::Url u, http::ParseHttpsUrl(url));
  http::ClientOptions co;
  co.host = u.host;
  co.port = u.port;
  co.tls = true;
  co.ca_pem = ca_pem_;
  co.timeout = options_.fetch_timeout;
  http::Client client(co);
  http::Headers h;
  h.Add("Accept", "application/json");
  KLUTCH_ASSIGN_OR_RETURN(http::ClientResponse resp, client.Do("GET", u.Target(), h));
  if (resp.status != 200) {
    return core::Status(core::Reason::kServiceUnavailable,
                        fmt::format("GET {}: HTTP {}", url, resp.status));
  }
  if (resp.body.size() > (1 << 20)) {
    return core::Status(core::Reason::kServiceUnavailable, fmt::format("GET {}: too large", url));
  }
  return std::move(resp.body);
}

core::Status OidcAuthenticator::Refresh() {
  std::string issuer = options_.issuer_url;
  while (!issuer.empty() && issuer.back() == '/') issuer.pop_back();
  KLUTCH_ASSIGN_OR_RETURN(std::string body, Fetch(issuer + "/.well-known/openid-configuration"));
  KLUTCH_ASSIGN_OR_RETURN(Json discovery, machinery::ParseJson(body));
  if (!discovery.is_object()) return core::Internal("OIDC discovery document is not an object");
  // The discovery document must name the issuer exactly as configured (OpenID Connect
  // Discovery 1.0 §4.3), or tokens would be accepted for an issuer that is someone else.
  if (machinery::GetString(discovery, {"issuer"}) != options_.issuer_url) {
    return core::Internal(fmt::format("OIDC discovery names issuer \"{}\", want \"{}\"",
                                      machinery::GetString(discovery, {"issuer"}),
                                      options_.issuer_url));
  }
  std::string jwks_uri = machinery::GetString(discovery, {"jwks_uri"});
  if (jwks_uri.empty()) return core::Internal("OIDC discovery has no jwks_uri");
  KLUTCH_ASSIGN_OR_RETURN(std::string jwks_body, Fetch(jwks_uri));
  KLUTCH_ASSIGN_OR_RETURN(Jwks jwks, Jwks::Parse(jwks_body));
  core::MutexLock lock(mu_);
  keys_ = std::make_shared<const Jwks>(std::move(jwks));
  KLUTCH_LOG(kInfo, "auth", "OIDC issuer {}: {} signing keys", options_.issuer_url,
             keys_->keys().size());
  return core::Status::Ok();
}

core::Result<std::shared_ptr<const Jwks>> OidcAuthenticator::KeysFor(std::string_view kid) {
  {
    core::MutexLock lock(mu_);
    if (keys_ && (kid.empty() || std::any_of(keys_->keys().begin(), keys_->keys().end(),
                                             [&](const auto& k) { return k.kid() == kid; }))) {
      return keys_;
    }
    // Requests arriving while a fetch runs wait for its result instead of being refused by the
    // rate limit (the first requests after a key rotation come in bursts).
    if (fetching_) {
      const auto deadline = core::CondVar::DeadlineAfter(2 * options_.fetch_timeout);
      while (fetching_) {
        if (!cv_.WaitUntil(mu_, deadline)) break;
      }
      if (keys_) return keys_;
      return Refused("OIDC keys not available");
    }
    auto now = std::chrono::steady_clock::now();
    if (last_fetch_ && now - *last_fetch_ < options_.refetch_interval) {
      if (keys_) return keys_;
      return Refused("OIDC keys not available yet");
    }
    last_fetch_ = now;
    fetching_ = true;
  }
  auto st = Refresh();
  if (!st.ok()) {
    KLUTCH_LOG(kWarn, "auth", "OIDC issuer {}: {}", options_.issuer_url, st.message());
  }
  core::MutexLock lock(mu_);
  fetching_ = false;
  cv_.SignalAll();
  if (!keys_) return Refused("OIDC keys not available");
  return keys_;
}

core::Result<machinery::Json> OidcAuthenticator::VerifyIdToken(std::string_view token) {
  KLUTCH_ASSIGN_OR_RETURN(Jwt jwt, ParseJwt(token));
  if (machinery::GetString(jwt.claims, {"iss"}) != options_.issuer_url) {
    return Refused("token of another issuer");
  }
  KLUTCH_RETURN_IF_ERROR(VerifyOwn(jwt));
  return std::move(jwt.claims);
}

core::Status OidcAuthenticator::VerifyOwn(const Jwt& jwt) {
  if (std::find(options_.signing_algs.begin(), options_.signing_algs.end(), jwt.alg) ==
      options_.signing_algs.end()) {
    return Refused(fmt::format("OIDC token signed with {}, not an accepted algorithm", jwt.alg));
  }
  KLUTCH_ASSIGN_OR_RETURN(auto keys, KeysFor(jwt.kid));
  KLUTCH_RETURN_IF_ERROR(VerifyJwt(jwt, keys->Candidates(jwt.kid, jwt.alg)));
  ClaimChecks checks;
  checks.issuers = {options_.issuer_url};
  checks.audiences = {options_.client_id};
  checks.now = options_.clock->Now();
  KLUTCH_RETURN_IF_ERROR(CheckClaims(jwt, checks));
  for (const auto& [claim, want] : options_.required_claims) {
    const Json* value = machinery::Find(jwt.claims, {claim});
    const auto* text = value ? value->get_ptr<const std::string*>() : nullptr;
    if (text == nullptr || *text != want) {
      return Refused(fmt::format("required claim {} missing or different", claim));
    }
  }
  return core::Status::Ok();
}

core::Result<std::optional<TokenResult>> OidcAuthenticator::Authenticate(std::string_view token) {
  auto parsed = ParseJwt(token);
  if (!parsed.ok()) return std::optional<TokenResult>();
  const Jwt& jwt = *parsed;
  if (machinery::GetString(jwt.claims, {"iss"}) != options_.issuer_url) {
    return std::optional<TokenResult>();
  }
  KLUTCH_RETURN_IF_ERROR(VerifyOwn(jwt));

  const std::string username = machinery::GetString(jwt.claims, {options_.username_claim});
  if (username.empty()) return Refused(fmt::format("claim {} missing", options_.username_claim));
  if (options_.username_claim == "email") {
    const Json* verified = machinery::Find(jwt.claims, {"email_verified"});
    const bool* is_verified = verified ? verified->get_ptr<const bool*>() : nullptr;
    if (verified != nullptr && !(is_verified != nullptr && *is_verified)) {
      return Refused("email not verified");
    }
  }
  std::string prefix;
  if (options_.username_prefix) {
    if (*options_.username_prefix != "-") prefix = *options_.username_prefix;
  } else if (options_.username_claim != "email") {
    prefix = options_.issuer_url + "#";
  }
  TokenResult r;
  r.user.name = prefix + username;
  if (!options_.groups_claim.empty()) {
    auto g = jwt.claims.find(options_.groups_claim);
    if (g != jwt.claims.end()) {
      KLUTCH_ASSIGN_OR_RETURN(auto groups, StringList(*g, options_.groups_claim));
      for (auto& group : groups) r.user.groups.push_back(options_.groups_prefix + group);
    }
  }
  r.audiences = {options_.client_id};
  r.expires = ExpiryOf(jwt);  // clamped: a far-future "exp" cannot overflow the clock
  return std::optional<TokenResult>(std::move(r));
}

}  // namespace klutch::auth
