#include "http/url.h"

#include <fmt/format.h>

#include "core/strings.h"

namespace klutch::http {
namespace {

uint16_t DefaultPort(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

}  // namespace

std::string Url::Target() const { return query.empty() ? path : path + "?" + query; }

std::string Url::Origin() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port == DefaultPort(scheme)) return fmt::format("{}://{}", scheme, h);
  return fmt::format("{}://{}:{}", scheme, h, port);
}

std::string Url::String() const {
  std::string out = Origin() + Target();
  if (!fragment.empty()) out += "#" + fragment;
  return out;
}

core::Result<Url> ParseUrl(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return core::BadRequest(fmt::format("{}: {}", core::GoQuote(text), why));
  };
  Url url;
  size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) return bad("not an absolute http(s) URL");
  url.scheme = core::ToLower(text.substr(0, scheme_end));
  if (url.scheme != "http" && url.scheme != "https") return bad("the scheme must be http or https");
  std::string_view rest = text.substr(scheme_end + 3);
  if (size_t hash = rest.find('#'); hash != std::string_view::npos) {
    url.fragment = std::string(rest.substr(hash + 1));
    rest = rest.substr(0, hash);
  }
  size_t path_start = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, path_start);
  std::string_view path_query =
      path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
  if (authority.empty()) return bad("the host is missing");
  for (char c : path_query) {
    // Raw spaces and control characters (CR/LF would split the request line) must be encoded.
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f)
      return bad("unencoded space or control character");
  }
  if (authority.find('@') != std::string_view::npos) return bad("user info is not allowed");
  for (char c : authority) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '\\') return bad("bad character in host");
  }
  size_t colon = std::string_view::npos;
  if (authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos || close == 1) return bad("bad IPv6 host");
    url.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return bad("bad host");
      colon = close + 1;
    }
  } else {
    colon = authority.find(':');
    url.host = std::string(authority.substr(0, colon));
    if (url.host.empty()) return bad("the host is missing");
  }
  url.port = DefaultPort(url.scheme);
  if (colon != std::string_view::npos) {
    auto port = core::ParseInt64(authority.substr(colon + 1));
    if (!port || *port <= 0 || *port > 65535) return bad("bad port");
    url.port = static_cast<uint16_t>(*port);
  }
  size_t q = path_query.find('?');
  std::string_view path = path_query.substr(0, q);
  url.path = path.empty() ? "/" : std::string(path);
  if (q != std::string_view::npos) url.query = std::string(path_query.substr(q + 1));
  return url;
}

core::Result<Url> ParseHttpsUrl(std::string_view text) {
  KLUTCH_ASSIGN_OR_RETURN(Url url, ParseUrl(text));
  if (url.scheme != "https") {
    return core::BadRequest(fmt::format("{}: must use https", core::GoQuote(text)));
  }
  return url;
}

std::string AddQuery(const Url& url,
                     const std::vector<std::pair<std::string, std::string>>& params) {
  Url out = url;
  for (const auto& [k, v] : params) {
    if (!out.query.empty()) out.query += "&";
    out.query += core::PercentEncode(k) + "=" + core::PercentEncode(v);
  }
  return out.String();
}

core::Result<ClientResponse> Fetch(const Url& url, const FetchOptions& options) {
  Client client({.host = url.host,
                 .port = url.port,
                 .tls = url.scheme == "https",
                 .ca_pem = options.ca_pem,
                 .insecure_skip_verify = options.insecure_skip_verify,
                 .timeout = options.timeout});
  Headers headers = options.headers;
  auto response = client.Do(options.method, url.Target(), headers, options.body);
  if (!response.ok()) {
    return core::Status(
        core::Reason::kServiceUnavailable,
        fmt::format("{} {}: {}", options.method, url.String(), response.status().message()));
  }
  return response;
}

std::string FormEncode(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [k, v] : fields) {
    if (!out.empty()) out += '&';
    out += core::PercentEncode(k) + "=" + core::PercentEncode(v);
  }
  return out;
}

core::Result<ClientResponse> PostForm(
    const std::string& url, const std::string& ca_pem,
    const std::vector<std::pair<std::string, std::string>>& fields) {
  KLUTCH_ASSIGN_OR_RETURN(Url parsed, ParseUrl(url));
  FetchOptions options;
  options.method = "POST";
  options.headers.Set("Content-Type", "application/x-www-form-urlencoded");
  options.headers.Set("Accept", "application/json");
  options.body = FormEncode(fields);
  options.ca_pem = ca_pem;
  return Fetch(parsed, options);
}

}  // namespace klutch::http
