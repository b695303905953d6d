#include "auth/authenticator.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "auth/internal.h"
#include "core/log.h"
#include "core/strings.h"

namespace klutch::auth {

namespace {

using internal::Refused;
using internal::Sha256;

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Splits one CSV line (RFC 4180 quoting) into fields.
core::Result<std::vector<std::string>> SplitCsv(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          fields.back() += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        fields.back() += c;
      }
    } else if (c == '"' && fields.back().empty()) {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) return core::BadRequest("unterminated quote");
  return fields;
}

}  // namespace

std::optional<std::string_view> BearerToken(std::string_view authorization) {
  // As kube-apiserver reads it: the header split on single spaces, scheme "bearer" in any
  // case, the second part the token; anything else is no bearer token at all.
  auto space = authorization.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  if (!IEquals(authorization.substr(0, space), "bearer")) return std::nullopt;
  std::string_view token = authorization.substr(space + 1);
  token = token.substr(0, token.find(' '));
  if (token.empty()) return std::nullopt;
  return token;
}

void AddAuthenticatedGroup(UserInfo& user) {
  if (user.name == kAnonymousUser) return;
  if (!user.InGroup(kAuthenticatedGroup)) user.groups.push_back(kAuthenticatedGroup);
}

Authenticator::Authenticator(AuthenticatorOptions options) : options_(options) {}
Authenticator::~Authenticator() = default;

void Authenticator::AddTokenAuthenticator(std::unique_ptr<TokenAuthenticator> authenticator) {
  token_authenticators_.push_back(std::move(authenticator));
}

core::Result<TokenResult> Authenticator::AuthenticateToken(std::string_view token) {
  const core::SystemTime now = options_.clock->Now();
  const std::string key = Sha256(token);
  uint64_t generation;
  {
    core::MutexLock lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      if (it->second.valid_until > now) return it->second.result;
      cache_.erase(it);
    }
    generation = generation_;
  }
  std::vector<std::string> errors;
  for (auto& a : token_authenticators_) {
    auto r = a->Authenticate(token);
    if (!r.ok()) {
      errors.push_back(fmt::format("{}: {}", a->name(), r.status().message()));
      continue;
    }
    if (!r->has_value()) continue;
    TokenResult result = std::move(**r);
    AddAuthenticatedGroup(result.user);
    core::SystemTime until = now + options_.cache_ttl;
    if (result.expires && *result.expires < until) until = *result.expires;
    core::MutexLock lock(mu_);
    // A result computed before an invalidation may describe an account that is gone.
    if (!result.service_account || generation == generation_) {
      if (cache_.size() >= options_.cache_max_entries) {
        for (auto it = cache_.begin(); it != cache_.end();) {
          it = it->second.valid_until <= now ? cache_.erase(it) : std::next(it);
        }
        if (cache_.size() >= options_.cache_max_entries) cache_.clear();
      }
      cache_[key] = CacheEntry{result, until};
    }
    return result;
  }
  if (errors.empty()) return Refused("no authenticator accepts the token");
  return Refused(core::Join(errors, "; "));
}

core::Result<AuthResult> Authenticator::Authenticate(const Credentials& c) {
  if (c.certificate_cn != nullptr) {
    AuthResult r;
    r.method = "x509";
    r.user.name = *c.certificate_cn;
    if (r.user.name.empty()) return Refused("client certificate without a common name");
    if (c.certificate_organizations) r.user.groups = *c.certificate_organizations;
    AddAuthenticatedGroup(r.user);
    return r;
  }
  // A header that holds no bearer token ("Basic ...", "Bearer") is no credential, as in
  // kube-apiserver: the request is anonymous if that is allowed, 401 otherwise.
  if (auto token = BearerToken(c.authorization)) {
    KLUTCH_ASSIGN_OR_RETURN(TokenResult t, AuthenticateToken(*token));
    return AuthResult{std::move(t.user), "token"};
  }
  if (c.certificate_rejected) return Refused("client certificate does not verify");
  if (options_.anonymous) {
    AuthResult r;
    r.method = "anonymous";
    r.user.name = kAnonymousUser;
    r.user.groups = {kUnauthenticatedGroup};
    return r;
  }
  return Refused("no credentials");
}

bool Authenticator::IsCached(std::string_view token) {
  const core::SystemTime now = options_.clock->Now();
  const std::string key = Sha256(token);
  core::MutexLock lock(mu_);
  auto it = cache_.find(key);
  return it != cache_.end() && it->second.valid_until > now;
}

void Authenticator::InvalidateServiceAccountTokens() {
  core::MutexLock lock(mu_);
  ++generation_;
  for (auto it = cache_.begin(); it != cache_.end();) {
    it = it->second.result.service_account ? cache_.erase(it) : std::next(it);
  }
}

core::Result<std::unique_ptr<TokenFileAuthenticator>> TokenFileAuthenticator::Load(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::BadRequest(fmt::format("--token-auth-file {}: cannot read", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto r = Parse(text);
  if (!r.ok()) {
    return core::BadRequest(fmt::format("--token-auth-file {}: {}", path, r.status().message()));
  }
  return r;
}

core::Result<std::unique_ptr<TokenFileAuthenticator>> TokenFileAuthenticator::Parse(
    std::string_view text) {
  auto out = std::unique_ptr<TokenFileAuthenticator>(new TokenFileAuthenticator());
  size_t line_no = 0;
  for (std::string_view line : core::Split(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view trimmed = core::Trim(line);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    auto fields = SplitCsv(trimmed);
    if (!fields.ok()) {
      return core::BadRequest(fmt::format("line {}: {}", line_no, fields.status().message()));
    }
    if (fields->size() < 3) {
      return core::BadRequest(fmt::format(
          "line {}: want at least 3 fields (token,user,uid), found {}", line_no, fields->size()));
    }
    const std::string& token = (*fields)[0];
    if (token.empty()) return core::BadRequest(fmt::format("line {}: empty token", line_no));
    UserInfo u;
    u.name = (*fields)[1];
    u.uid = (*fields)[2];
    if (u.name.empty()) return core::BadRequest(fmt::format("line {}: empty user name", line_no));
    if (fields->size() >= 4) {
      for (auto g : core::Split((*fields)[3], ',')) {
        g = core::Trim(g);
        if (!g.empty()) u.groups.emplace_back(g);
      }
    }
    if (out->tokens_.count(token)) {
      return core::BadRequest(fmt::format("line {}: duplicate token", line_no));
    }
    out->tokens_.emplace(token, std::move(u));
  }
  return out;
}

core::Result<std::optional<TokenResult>> TokenFileAuthenticator::Authenticate(
    std::string_view token) {
  auto it = tokens_.find(std::string(token));
  if (it == tokens_.end()) return std::optional<TokenResult>();
  TokenResult r;
  r.user = it->second;
  return std::optional<TokenResult>(std::move(r));
}

}  // namespace klutch::auth
