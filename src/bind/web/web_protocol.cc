#include "bind/web/web_protocol.h"

#include <algorithm>
#include <cctype>
#include <ctime>

#include "core/strings.h"
#include "http/message.h"

namespace klutch::bind {
namespace {

constexpr size_t kMaxFormBytes = 64 * 1024;
constexpr size_t kMaxUrlBytes = 2048;

bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// 127.x.y.z with decimal octets of at most 255.
bool IsIpv4Loopback(std::string_view host) {
  auto parts = core::Split(host, '.');
  if (parts.size() != 4 || parts[0] != "127") return false;
  for (auto p : parts) {
    if (!IsDigits(p) || p.size() > 3) return false;
    auto v = core::ParseInt64(p);
    if (!v || *v > 255) return false;
  }
  return true;
}

}  // namespace

core::Result<std::string> ClusterNameParameter(std::optional<std::string_view> n) {
  if (!n) return std::string();
  const std::string_view name = core::Trim(*n);
  if (name.size() > 253) {
    return core::BadRequest("parameter n (the cluster's name) must be at most 253 bytes long");
  }
  if (std::any_of(name.begin(), name.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return core::BadRequest("parameter n (the cluster's name) must not hold control characters");
  }
  return std::string(name);
}

bool IsValidId(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  });
}

core::Result<std::string> CliRedirectUrl(std::optional<std::string_view> u,
                                         std::optional<std::string_view> p) {
  if (p && !p->empty()) {
    auto port = core::ParseInt64(*p);
    if (!port || *port < 1 || *port > 65535) {
      return core::BadRequest(
          "parameter p must be the port of the kubectl bind callback (1-65535)");
    }
    return "http://localhost:" + std::to_string(*port) + "/callback";
  }
  if (!u || u->empty()) {
    return core::BadRequest(
        "parameter u or p (where kubectl bind waits for the answer) is missing");
  }
  std::string_view url = *u;
  if (url.size() > kMaxUrlBytes) return core::BadRequest("parameter u is too long");
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    rest = url.substr(8);
  } else {
    return core::BadRequest("parameter u must be an http or https URL");
  }
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '\\') {
      return core::BadRequest("parameter u holds characters a URL cannot");
    }
  }
  const size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  if (authority.find('@') != std::string_view::npos) {
    return core::BadRequest("parameter u must not carry user information");
  }
  std::string_view host = authority;
  std::string_view port;
  if (host.starts_with('[')) {
    size_t close = host.find(']');
    if (close == std::string_view::npos) return core::BadRequest("parameter u has a bad host");
    port = host.substr(close + 1);
    host = host.substr(0, close + 1);
  } else if (size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    port = host.substr(colon);
    host = host.substr(0, colon);
  }
  if (!port.empty()) {
    auto n = port.size() > 1 && port[0] == ':' ? core::ParseInt64(port.substr(1)) : std::nullopt;
    if (!n || *n < 1 || *n > 65535) return core::BadRequest("parameter u has a bad port");
  }
  const std::string lower = core::ToLower(host);
  if (lower != "localhost" && lower != "[::1]" && !IsIpv4Loopback(lower)) {
    return core::BadRequest(
        "parameter u must point at this machine (localhost, 127.0.0.1 or [::1]): the answer "
        "carries credentials for kubectl bind");
  }
  return std::string(url);
}

std::string AddQueryParameter(std::string_view url, std::string_view key, std::string_view value) {
  std::string_view fragment;
  if (size_t hash = url.find('#'); hash != std::string_view::npos) {
    fragment = url.substr(hash);
    url = url.substr(0, hash);
  }
  std::string out(url);
  if (out.find('?') == std::string::npos) {
    out += '?';
  } else if (out.back() != '?' && out.back() != '&') {
    out += '&';
  }
  out += core::PercentEncode(key);
  out += '=';
  out += core::PercentEncode(value);
  out += fragment;
  return out;
}

std::vector<std::pair<std::string, std::string>> ParseCookies(std::string_view header) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto part : core::Split(header, ';')) {
    part = core::Trim(part);
    size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string_view name = core::Trim(part.substr(0, eq));
    std::string_view value = core::Trim(part.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (name.empty()) continue;
    out.emplace_back(std::string(name), std::string(value));
  }
  return out;
}

std::optional<std::string> FindCookie(const std::vector<std::string_view>& headers,
                                      std::string_view name) {
  for (auto header : headers) {
    for (auto& [k, v] : ParseCookies(header)) {
      if (k == name) return std::move(v);
    }
  }
  return std::nullopt;
}

std::string HttpDate(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

std::string SetCookieValue(std::string_view name, std::string_view value, int64_t now_unix,
                           const CookieOptions& options) {
  std::string out(name);
  out += '=';
  if (!options.clear) out += value;
  out += "; Path=/";
  const int64_t max_age = options.clear ? 0 : std::max<int64_t>(1, options.max_age_seconds);
  out += "; Max-Age=" + std::to_string(options.clear ? 0 : max_age);
  out += "; Expires=" + HttpDate(options.clear ? 0 : now_unix + max_age);
  out += "; HttpOnly; SameSite=Lax";
  if (options.secure) out += "; Secure";
  return out;
}

std::vector<std::pair<std::string, std::string>> ParseForm(std::string_view body) {
  if (body.size() > kMaxFormBytes) return {};
  return http::ParseQuery(body);
}

std::optional<std::string> FirstValue(const std::vector<std::pair<std::string, std::string>>& pairs,
                                      std::string_view name) {
  for (const auto& [k, v] : pairs) {
    if (k == name) return v;
  }
  return std::nullopt;
}

}  // namespace klutch::bind
