#include "apis/klutch/binding_provider.h"

#include <fmt/format.h>

#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::apis::klutch {

using machinery::Json;

Json EncodeBindingProvider(const BindingProvider& provider) {
  Json methods = Json::array();
  methods.push_back({{"method", kOAuth2CodeGrantMethod},
                     {"oauth2CodeGrant", {{"authenticatedURL", provider.authenticated_url}}}});
  if (!provider.device_authorization_url.empty()) {
    methods.push_back({{"method", kOAuth2DeviceGrantMethod},
                       {"oauth2DeviceGrant",
                        {{"deviceAuthorizationURL", provider.device_authorization_url},
                         {"tokenURL", provider.device_token_url},
                         {"bindURL", provider.device_bind_url}}}});
  }
  return Json{{"kind", kBindingProviderKind},
              {"apiVersion", kBindingProviderApiVersion},
              {"providerPrettyName", provider.pretty_name},
              {"version", provider.version},
              {"authenticationMethods", std::move(methods)}};
}

core::Result<BindingProvider> DecodeBindingProvider(const Json& doc) {
  if (!doc.is_object()) return core::BadRequest("answered no BindingProvider document");
  if (machinery::Kind(doc) != kBindingProviderKind) {
    return core::BadRequest(fmt::format("answered kind {} instead of BindingProvider",
                                        core::GoQuote(machinery::Kind(doc))));
  }
  const std::string api_version = machinery::ApiVersionOf(doc);
  if (api_version != kBindingProviderApiVersion) {
    return core::BadRequest(
        fmt::format("speaks binding provider API {}; this kubectl-bind speaks v1alpha1 — use a "
                    "kubectl-bind release matching the backend",
                    core::GoQuote(api_version)));
  }
  BindingProvider p;
  p.pretty_name = machinery::GetString(doc, {"providerPrettyName"});
  p.version = machinery::GetString(doc, {"version"});
  const Json* methods = machinery::Find(doc, {"authenticationMethods"});
  if (methods != nullptr && methods->is_array()) {
    for (const Json& m : *methods) {
      const std::string method = machinery::GetString(m, {"method"});
      if (method == kOAuth2CodeGrantMethod && p.authenticated_url.empty()) {
        p.authenticated_url = machinery::GetString(m, {"oauth2CodeGrant", "authenticatedURL"});
      } else if (method == kOAuth2DeviceGrantMethod && p.device_authorization_url.empty()) {
        p.device_authorization_url =
            machinery::GetString(m, {"oauth2DeviceGrant", "deviceAuthorizationURL"});
        p.device_token_url = machinery::GetString(m, {"oauth2DeviceGrant", "tokenURL"});
        p.device_bind_url = machinery::GetString(m, {"oauth2DeviceGrant", "bindURL"});
      }
    }
  }
  if (p.authenticated_url.empty() && p.device_authorization_url.empty()) {
    return core::BadRequest(
        "offers no authentication method this kubectl-bind knows (OAuth2CodeGrant or "
        "OAuth2DeviceGrant)");
  }
  return p;
}

}  // namespace klutch::apis::klutch
