#include "kubectl_bind/provider_discovery.h"

#include <fmt/format.h>

#include "core/strings.h"
#include "http/url.h"
#include "kubectl_bind/output.h"
#include "machinery/json.h"

namespace klutch::kubectl_bind {

core::Result<BindingProvider> ParseBindingProvider(std::string_view body, const std::string& url) {
  auto doc = machinery::ParseJson(body);
  if (!doc.ok() || !doc->is_object()) {
    return core::BadRequest(fmt::format(
        "{} did not answer with a BindingProvider document (is it the backend's /export "
        "URL?)",
        url));
  }
  auto decoded = apis::klutch::DecodeBindingProvider(*doc);
  if (!decoded.ok()) {
    return core::Status(decoded.status().reason(),
                        fmt::format("{} {}", url, decoded.status().message()));
  }
  BindingProvider p = std::move(*decoded);
  if (p.version.empty()) {
    return core::BadRequest(fmt::format("{} does not say which version it is", url));
  }
  const bool development = p.version == "v0.0.0" || p.version.starts_with("v0.0.0-master");
  if (!development) {
    auto v = ParseSemanticVersion(p.version);
    if (!v) {
      return core::BadRequest(fmt::format("{}: backend version {} is not a semantic version", url,
                                          core::GoQuote(p.version)));
    }
    if ((*v)[0] == 0 && (*v)[1] < 3) {
      return core::BadRequest(
          fmt::format("{}: backend version {} is older than v0.3.0, which this kubectl-bind needs",
                      url, p.version));
    }
  }
  return p;
}

core::Result<BindingProvider> FetchBindingProvider(const std::string& url,
                                                   const std::string& ca_pem) {
  KLUTCH_ASSIGN_OR_RETURN(http::Url parsed, http::ParseUrl(url));
  auto fetched = http::Fetch(parsed, {.headers = {}, .ca_pem = ca_pem});
  if (!fetched.ok()) {
    return core::Status(fetched.status().reason(),
                        fetched.status().message() +
                            "\n  check the URL; for a backend with a private CA pass "
                            "--backend-ca-file");
  }
  if (fetched->status != 200) {
    return core::BadRequest(
        fmt::format("GET {}: HTTP {} (is it the backend's /export URL?)", url, fetched->status));
  }
  return ParseBindingProvider(fetched->body, url);
}

}  // namespace klutch::kubectl_bind
