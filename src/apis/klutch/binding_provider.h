// BindingProvider (bind-protocol.md §1.8): the document a bind backend answers on GET /export,
// naming the provider and how to log in. The backend encodes it (src/bind), kubectl bind decodes
// it (src/kubectl_bind); both through this one encoder and decoder.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::apis::klutch {

inline constexpr std::string_view kBindingProviderKind = "BindingProvider";
// BindingProvider's apiVersion: literally "v1alpha1" (no group), the Klutch CLI rejects anything
// else.
inline constexpr std::string_view kBindingProviderApiVersion = "v1alpha1";
// The authentication methods: upstream's browser login, and ours, the device grant
// (docs/decisions/0013-bind-backend.md).
inline constexpr std::string_view kOAuth2CodeGrantMethod = "OAuth2CodeGrant";
inline constexpr std::string_view kOAuth2DeviceGrantMethod = "OAuth2DeviceGrant";

struct BindingProvider {
  std::string pretty_name;        // providerPrettyName
  std::string version;            // the backend's version ("v0.0.0" for development builds)
  std::string authenticated_url;  // OAuth2CodeGrant.authenticatedURL
  // The OAuth2DeviceGrant method, when device_authorization_url is not empty.
  std::string device_authorization_url;  // POST: starts a device authorization
  std::string device_token_url;          // POST: polls it
  std::string device_bind_url;           // POST: binds more APIs with one login ("" = none)

  bool operator==(const BindingProvider&) const = default;
};

// {"kind":"BindingProvider","apiVersion":"v1alpha1","providerPrettyName",...,"version",...,
// "authenticationMethods":[{"method":"OAuth2CodeGrant","oauth2CodeGrant":{"authenticatedURL"}},
// then, with a device_authorization_url, {"method":"OAuth2DeviceGrant","oauth2DeviceGrant":
// {"deviceAuthorizationURL","tokenURL","bindURL"}}]} (upstream CLIs take the first method they
// know, so ours comes last).
machinery::Json EncodeBindingProvider(const BindingProvider& provider);

// Reads a BindingProvider: kBadRequest unless `doc` is an object of kind BindingProvider and
// apiVersion v1alpha1 offering OAuth2CodeGrant or OAuth2DeviceGrant (the first of each kind
// counts; unknown methods are skipped). Messages read after the document's source ("<url>
// answered kind ..."). The version is returned as written; whether a client can talk to it is
// the client's call.
core::Result<BindingProvider> DecodeBindingProvider(const machinery::Json& doc);

}  // namespace klutch::apis::klutch
