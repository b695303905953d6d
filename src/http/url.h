// Url: an absolute http(s) URL taken apart, and Fetch: one request to such a URL.
//
// What tools and the bind protocol need (kubectl bind's export URL, an OIDC issuer's
// endpoints, redirects with query parameters added): scheme, host (IPv6 literals without
// brackets), port (the scheme's default when absent), path and raw query; no user info.
// Pure functions except Fetch; all thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "http/client.h"
#include "http/message.h"

namespace klutch::http {

struct Url {
  std::string scheme;  // "http" or "https"
  std::string host;
  uint16_t port = 0;
  std::string path = "/";  // as written (still percent-encoded), at least "/"
  std::string query;       // without '?', as written
  std::string fragment;    // without '#'

  // path plus "?query" when there is one: the request target.
  std::string Target() const;
  // scheme://host[:port] with the port left out when it is the scheme's default.
  std::string Origin() const;
  // The whole URL again (fragment included).
  std::string String() const;
};

// kBadRequest naming the URL for anything else than http(s)://host[:port][/path][?q][#f]:
// another scheme, user info, an empty host, a bad port.
core::Result<Url> ParseUrl(std::string_view text);

// ParseUrl for the https URLs of an OIDC issuer and its endpoints: kBadRequest "<url>: must use
// https" for any other scheme.
core::Result<Url> ParseHttpsUrl(std::string_view text);

// `url` with `params` appended to its query (percent-encoded; existing parameters kept).
std::string AddQuery(const Url& url,
                     const std::vector<std::pair<std::string, std::string>>& params);

struct FetchOptions {
  std::string method = "GET";
  Headers headers;
  std::string body;
  std::string ca_pem;  // trusted CA for https; "" = the system's
  bool insecure_skip_verify = false;
  std::chrono::milliseconds timeout{30000};
};

// One request to `url` on a fresh connection. Transport failures -> kServiceUnavailable
// naming the URL; any HTTP status is returned as the response.
core::Result<ClientResponse> Fetch(const Url& url, const FetchOptions& options = {});

// An application/x-www-form-urlencoded body: k=v pairs, percent-encoded, joined with '&'.
std::string FormEncode(const std::vector<std::pair<std::string, std::string>>& fields);

// POST of `fields` as a form to `url` (Accept: application/json) with Fetch; a URL ParseUrl
// refuses -> its error.
core::Result<ClientResponse> PostForm(
    const std::string& url, const std::string& ca_pem,
    const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace klutch::http
