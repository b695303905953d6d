#include "bind/web/bind_endpoints.h"

#include "apis/klutch/binding_provider.h"
#include "apis/klutch/binding_response.h"
#include "bind/web/web_protocol.h"
#include "bind/web/web_responses.h"

namespace klutch::bind {

using machinery::Json;

http::Response BindEndpoints::Export(const http::Request& request) {
  const std::string base = ctx_.BaseUrl(request);
  const std::string authorize =
      ctx_.options.authorize_url.empty() ? base + "/authorize" : ctx_.options.authorize_url;
  apis::klutch::BindingProvider provider{.pretty_name = ctx_.options.pretty_name,
                                         .version = std::string(kBackendVersion),
                                         .authenticated_url = authorize};
  if (ctx_.idp.SupportsDeviceGrant()) {
    provider.device_authorization_url = base + "/device/authorize";
    provider.device_token_url = base + "/device/token";
    provider.device_bind_url = base + "/device/bind";
  }
  return WebJsonResponse(200, apis::klutch::EncodeBindingProvider(provider));
}

http::Response BindEndpoints::BindFromBrowser(
    const http::Request& request, const std::vector<std::pair<std::string, std::string>>& params,
    int redirect_status) {
  auto found = cookies_.SessionFor(request, FirstValue(params, "s").value_or(""));
  if (auto* page = std::get_if<http::Response>(&found)) {
    ctx_.CountBind("unauthenticated");
    return std::move(*page);
  }
  const Session& s = std::get<Session>(found);
  if (!cookies_.VerifyCsrf(s, FirstValue(params, "csrf").value_or(""))) {
    ctx_.CountBind("csrf");
    return ErrorResponse(
        403, "Request refused",
        "This bind request did not come from your catalog page (the CSRF check "
        "failed), so nothing was changed.",
        "Open the catalog page again (/resources?s=" + s.sid + ") and choose the API there.");
  }
  auto result = binder_.Bind({.subject = s.subject,
                              .issuer = s.issuer,
                              .display_name = s.display_name,
                              .sid = s.sid,
                              .cid = s.cid,
                              .cluster_name = s.cluster_name,
                              .group = FirstValue(params, "group").value_or(""),
                              .resource = FirstValue(params, "resource").value_or("")});
  if (auto* e = std::get_if<BindError>(&result)) {
    return ErrorResponse(e->status, e->title, e->what, e->todo);
  }
  return RedirectResponse(
      redirect_status,
      AddQueryParameter(s.redirect, "response",
                        apis::klutch::EncodeResponsePayload(std::get<Json>(result))));
}

}  // namespace klutch::bind
