// The wire values of the bind backend's HTTP surface (bind-protocol.md §1.8, §1.9, §2.2) and
// the parsing of what browsers and CLIs send it: BindingProvider and BindingResponse JSON, the
// `response=` payload, the CLI redirect URL, session and cluster IDs, cookies and forms.
//
// Everything here reads untrusted input without trusting it (the fuzz target
// fuzz_bind_session covers it). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::bind {

// The apiVersion of BindingResponse and of the requests in it.
inline constexpr std::string_view kBindApiVersion = "klutch.anynines.com/v1alpha1";
// BindingProvider's apiVersion: literally "v1alpha1", the Klutch CLI rejects anything else.
inline constexpr std::string_view kBindingProviderApiVersion = "v1alpha1";

// Cookie names: the session of CLI session <sid> (as upstream), and the pre-login cookie that
// binds an OIDC `state` to the browser that started the login.
inline constexpr std::string_view kSessionCookiePrefix = "klutch-bind-";
inline constexpr std::string_view kLoginCookiePrefix = "klutch-bind-login-";

struct DeviceGrantUrls {
  std::string authorize;  // POST: starts a device authorization
  std::string token;      // POST: polls it
  std::string bind;       // POST: binds an API after a poll that named none
};

// GET /export (§1.8): the OAuth2CodeGrant method first, then, when `device` is set, ours:
// {"method":"OAuth2DeviceGrant","oauth2DeviceGrant":{"deviceAuthorizationURL":...,
// "tokenURL":...,"bindURL":...}} (upstream CLIs take the first method they know).
machinery::Json BindingProviderJson(const std::string& pretty_name, const std::string& version,
                                    const std::string& authenticated_url,
                                    const std::optional<DeviceGrantUrls>& device);

// One APIServiceExportRequestResponse (§1.1): metadata.name "<resource>.<group>", one resource
// with the template's permission claims (`claims`: a JSON array, may be empty or null).
machinery::Json ExportRequestJson(const std::string& group, const std::string& resource,
                                  const machinery::Json& claims);

// BindingResponse (§1.9): authentication.oauth2CodeGrant {sid, id}, the kubeconfig as standard
// base64, and `requests`. Ours: oauth2CodeGrant.displayName, the name kubectl bind greets the
// user with (DisplayNameOf the ID token's claims), when `display_name` is not empty.
machinery::Json BindingResponseJson(const std::string& sid, const std::string& id,
                                    const std::string& kubeconfig, const machinery::Json& requests,
                                    const std::string& display_name = "");

// JSON text safe for both base64 alphabets (§6 quirk 2): ASCII only, with '<', '>', '&', '?',
// '~' and DEL written as \u escapes (they occur only inside strings), so base64url and
// standard base64 of it are the same text but for the two alphabet-specific characters, which
// then never occur.
std::string AlphabetSafeJson(const machinery::Json& value);
// The `response` query value: base64url with padding of AlphabetSafeJson(response), which the
// Klutch CLI decodes with the standard alphabet and upstream's with the URL one.
std::string EncodeResponsePayload(const machinery::Json& response);
// Decodes base64 in either alphabet, padded or not (what the CLI side should accept).
std::optional<std::string> DecodeAnyBase64(std::string_view text);

// On a cluster namespace: the App Cluster's name as its user knows it (the kubeconfig context
// kubectl bind used), sent as `n` to /authorize or /device/authorize and recorded at bind time
// (ours; the consumer page titles the cluster with it).
inline constexpr std::string_view kClusterNameAnnotation = "klutch.anynines.com/cluster-name";
// The cluster name parameter `n`, trimmed: "" when absent; kBadRequest naming `n` when longer
// than 253 bytes or holding control characters (any other text is kept; pages escape it).
core::Result<std::string> ClusterNameParameter(std::optional<std::string_view> n);

// Session IDs (`s`) and cluster IDs (`c`) are what the CLI makes (6 base-62 characters); we
// accept 1 to 64 ASCII letters and digits, which keeps them safe in cookie names and
// identities.
bool IsValidId(std::string_view id);

// The CLI's callback URL from /authorize's `u` or `p` (§2.2.1): `p` (a port, 1-65535) ->
// http://localhost:<p>/callback; else `u`, which must be an http or https URL on a loopback
// host (localhost, 127.0.0.0/8, [::1]) without user info: the BindingResponse carries
// credentials, so it goes to the user's own machine only (upstream took any URL).
// kBadRequest naming the parameter otherwise.
core::Result<std::string> CliRedirectUrl(std::optional<std::string_view> u,
                                         std::optional<std::string_view> p);

// `url` with query parameter key=value added after its existing query (before a fragment),
// both percent-encoded.
std::string AddQueryParameter(std::string_view url, std::string_view key, std::string_view value);

// "a=1; b=2" (a Cookie header) into pairs, in order; malformed parts are skipped.
std::vector<std::pair<std::string, std::string>> ParseCookies(std::string_view header);
// The value of cookie `name` among every Cookie header value in `headers`, nullopt if absent.
std::optional<std::string> FindCookie(const std::vector<std::string_view>& headers,
                                      std::string_view name);

struct CookieOptions {
  int64_t max_age_seconds = 0;  // 0 with `clear` = delete
  bool clear = false;
  bool secure = true;
};
// A Set-Cookie value: name=value; Path=/; Max-Age; Expires (RFC 1123, from `now_unix`);
// HttpOnly; SameSite=Lax; Secure unless told otherwise.
std::string SetCookieValue(std::string_view name, std::string_view value, int64_t now_unix,
                           const CookieOptions& options);

// RFC 1123 date of a unix time ("Thu, 01 Jan 1970 00:00:00 GMT").
std::string HttpDate(int64_t unix_seconds);

// An application/x-www-form-urlencoded body into pairs ('+' is a space); bodies over 64 KiB
// yield nothing.
std::vector<std::pair<std::string, std::string>> ParseForm(std::string_view body);
// The first value of `name` in `pairs`.
std::optional<std::string> FirstValue(const std::vector<std::pair<std::string, std::string>>& pairs,
                                      std::string_view name);

}  // namespace klutch::bind
