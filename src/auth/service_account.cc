#include "auth/service_account.h"

#include <fmt/format.h>
#include <openssl/crypto.h>

#include <algorithm>

#include "auth/internal.h"
#include "core/random.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::auth {

namespace {

using machinery::Json;

using internal::Refused;

int64_t UnixSeconds(core::SystemTime t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

std::string StringClaim(const Json& claims, const char* name) {
  return machinery::GetString(claims, {name});
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

UserInfo ServiceAccountUser(std::string_view ns, std::string_view name, std::string_view uid) {
  UserInfo u;
  u.name = fmt::format("{}{}:{}", kServiceAccountPrefix, ns, name);
  u.uid = std::string(uid);
  u.groups = {kServiceAccountsGroup, fmt::format("{}:{}", kServiceAccountsGroup, ns)};
  return u;
}

std::optional<std::pair<std::string, std::string>> ParseServiceAccountUser(std::string_view user) {
  std::string_view prefix = kServiceAccountPrefix;
  if (!user.starts_with(prefix)) return std::nullopt;
  user.remove_prefix(prefix.size());
  auto colon = user.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == user.size()) {
    return std::nullopt;
  }
  std::string_view name = user.substr(colon + 1);
  if (name.find(':') != std::string_view::npos) return std::nullopt;
  return std::make_pair(std::string(user.substr(0, colon)), std::string(name));
}

ServiceAccountTokens::ServiceAccountTokens(SigningKey signing_key,
                                           std::vector<PublicKey> verify_keys,
                                           ServiceAccountTokenOptions options,
                                           ServiceAccountLookup& lookup)
    : signing_key_(std::move(signing_key)), options_(std::move(options)), lookup_(lookup) {
  keys_.push_back(signing_key_.public_key());
  for (auto& k : verify_keys) keys_.push_back(std::move(k));
  audiences_ = options_.api_audiences.empty() ? std::vector<std::string>{options_.issuer}
                                              : options_.api_audiences;
}

core::Result<IssuedToken> ServiceAccountTokens::Issue(
    std::string_view ns, std::string_view name, std::string_view uid,
    std::vector<std::string> audiences, std::chrono::seconds expiration,
    const std::optional<BoundObject>& bound) const {
  if (audiences.empty()) audiences = audiences_;
  if (expiration > options_.max_expiration) expiration = options_.max_expiration;
  const core::SystemTime now = options_.clock->Now();
  const int64_t iat = UnixSeconds(now);
  Json k8s = {{"namespace", ns}, {"serviceaccount", {{"name", name}, {"uid", uid}}}};
  if (bound) {
    std::string key = core::ToLower(bound->kind);
    k8s[key] = {{"name", bound->name}, {"uid", bound->uid}};
  }
  Json claims = {{"aud", audiences},
                 {"exp", iat + expiration.count()},
                 {"iat", iat},
                 {"iss", options_.issuer},
                 {"jti", core::NewUuid()},
                 {"kubernetes.io", std::move(k8s)},
                 {"nbf", iat},
                 {"sub", fmt::format("{}{}:{}", kServiceAccountPrefix, ns, name)}};
  KLUTCH_ASSIGN_OR_RETURN(std::string token, signing_key_.Sign(claims));
  return IssuedToken{std::move(token), now + expiration};
}

core::Result<std::string> ServiceAccountTokens::IssueLegacy(std::string_view ns,
                                                            std::string_view name,
                                                            std::string_view uid,
                                                            std::string_view secret_name) const {
  Json claims = {{"iss", kLegacyServiceAccountIssuer},
                 {"kubernetes.io/serviceaccount/namespace", ns},
                 {"kubernetes.io/serviceaccount/secret.name", secret_name},
                 {"kubernetes.io/serviceaccount/service-account.name", name},
                 {"kubernetes.io/serviceaccount/service-account.uid", uid},
                 {"sub", fmt::format("{}{}:{}", kServiceAccountPrefix, ns, name)}};
  return signing_key_.Sign(claims);
}

Json ServiceAccountTokens::PublicJwks() const {
  Json keys = Json::array();
  for (const auto& k : keys_) keys.push_back(k.ToJwk());
  return Json{{"keys", std::move(keys)}};
}

core::Result<std::optional<TokenResult>> ServiceAccountTokens::Authenticate(
    std::string_view token) {
  return AuthenticateFor(token, audiences_);
}

core::Result<std::optional<TokenResult>> ServiceAccountTokens::AuthenticateFor(
    std::string_view token, const std::vector<std::string>& audiences) {
  auto jwt = ParseJwt(token);
  if (!jwt.ok()) return std::optional<TokenResult>();  // not a JWT: someone else's token
  const std::string iss = StringClaim(jwt->claims, "iss");
  const bool legacy = iss == kLegacyServiceAccountIssuer;
  if (!legacy && iss != options_.issuer) return std::optional<TokenResult>();
  KLUTCH_RETURN_IF_ERROR(VerifyJwt(*jwt, keys_));
  KLUTCH_ASSIGN_OR_RETURN(
      TokenResult r, legacy ? CheckLegacy(*jwt, token, audiences) : CheckBound(*jwt, audiences));
  r.service_account = true;
  return std::optional<TokenResult>(std::move(r));
}

core::Result<TokenResult> ServiceAccountTokens::CheckBound(
    const Jwt& jwt, const std::vector<std::string>& audiences) {
  ClaimChecks checks;
  checks.issuers = {options_.issuer};
  checks.audiences = audiences;
  checks.now = options_.clock->Now();
  KLUTCH_RETURN_IF_ERROR(CheckClaims(jwt, checks));
  const Json* k8s = machinery::Find(jwt.claims, {"kubernetes.io"});
  if (!k8s || !k8s->is_object())
    return Refused("service account token without kubernetes.io claim");
  const std::string ns = machinery::GetString(*k8s, {"namespace"});
  const std::string name = machinery::GetString(*k8s, {"serviceaccount", "name"});
  const std::string uid = machinery::GetString(*k8s, {"serviceaccount", "uid"});
  if (ns.empty() || name.empty()) return Refused("service account token names no account");
  if (StringClaim(jwt.claims, "sub") != fmt::format("{}{}:{}", kServiceAccountPrefix, ns, name)) {
    return Refused("service account token subject does not match its account");
  }
  auto live_uid = lookup_.ServiceAccountUid(ns, name);
  if (!live_uid) return Refused(fmt::format("service account {}/{} not found", ns, name));
  if (*live_uid != uid) {
    return Refused(fmt::format("service account {}/{} was re-created (uid {} != {})", ns, name,
                               *live_uid, uid));
  }
  if (const Json* secret = machinery::Find(*k8s, {"secret"})) {
    const std::string sname = machinery::GetString(*secret, {"name"});
    auto live = lookup_.GetSecret(ns, sname);
    if (!live) return Refused(fmt::format("bound secret {}/{} not found", ns, sname));
    if (live->uid != machinery::GetString(*secret, {"uid"})) {
      return Refused(fmt::format("bound secret {}/{} was re-created", ns, sname));
    }
  }
  TokenResult r;
  r.user = ServiceAccountUser(ns, name, uid);
  if (std::string jti = StringClaim(jwt.claims, "jti"); !jti.empty()) {
    r.user.extra["authentication.kubernetes.io/credential-id"] = {"JTI=" + jti};
  }
  // CheckClaims found "aud" naming one of `audiences` and a numeric "exp".
  const Json* aud = machinery::Find(jwt.claims, {"aud"});
  for (const auto& a : audiences) {
    const auto* one = aud ? aud->get_ptr<const std::string*>() : nullptr;
    bool named = one != nullptr ? *one == a
                                : aud != nullptr && aud->is_array() &&
                                      std::find(aud->begin(), aud->end(), Json(a)) != aud->end();
    if (named) r.audiences.push_back(a);
  }
  r.expires = ExpiryOf(jwt);  // clamped: a far-future "exp" cannot overflow the clock
  return r;
}

core::Result<TokenResult> ServiceAccountTokens::CheckLegacy(
    const Jwt& jwt, std::string_view token, const std::vector<std::string>& audiences) {
  const Json& c = jwt.claims;
  std::vector<std::string> accepted;
  for (const auto& a : audiences) {
    if (std::find(audiences_.begin(), audiences_.end(), a) != audiences_.end()) {
      accepted.push_back(a);
    }
  }
  if (accepted.empty()) return Refused("legacy token used for another audience");
  const std::string ns = StringClaim(c, "kubernetes.io/serviceaccount/namespace");
  const std::string name = StringClaim(c, "kubernetes.io/serviceaccount/service-account.name");
  const std::string uid = StringClaim(c, "kubernetes.io/serviceaccount/service-account.uid");
  const std::string secret_name = StringClaim(c, "kubernetes.io/serviceaccount/secret.name");
  if (ns.empty() || name.empty() || secret_name.empty()) {
    return Refused("legacy service account token lacks its claims");
  }
  if (StringClaim(c, "sub") != fmt::format("{}{}:{}", kServiceAccountPrefix, ns, name)) {
    return Refused("service account token subject does not match its account");
  }
  auto live_uid = lookup_.ServiceAccountUid(ns, name);
  if (!live_uid) return Refused(fmt::format("service account {}/{} not found", ns, name));
  if (!uid.empty() && *live_uid != uid) {
    return Refused(fmt::format("service account {}/{} was re-created", ns, name));
  }
  auto secret = lookup_.GetSecret(ns, secret_name);
  if (!secret) return Refused(fmt::format("token secret {}/{} not found", ns, secret_name));
  if (secret->type != kServiceAccountTokenSecretType || secret->service_account_name != name ||
      !ConstantTimeEquals(secret->token, token)) {
    return Refused(fmt::format("token secret {}/{} no longer holds this token", ns, secret_name));
  }
  TokenResult r;
  r.user = ServiceAccountUser(ns, name, *live_uid);
  r.audiences = std::move(accepted);
  return r;
}

}  // namespace klutch::auth
