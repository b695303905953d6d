#include "bind/web/consumer_pages.h"

#include <optional>
#include <utility>
#include <variant>

#include "bind/catalog.h"
#include "bind/web/consumer_clusters.h"
#include "bind/web/web_html.h"
#include "bind/web/web_responses.h"
#include "core/log.h"

namespace klutch::bind {

namespace {

// "host:port" of an http(s) URL.
std::string UrlAuthority(std::string_view url) {
  size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return "";
  url = url.substr(scheme + 3);
  return std::string(url.substr(0, url.find_first_of("/?#")));
}

}  // namespace

http::Response ConsumerPages::Landing(const http::Request& request) {
  // The router answers only "/" here; any other unknown path stays a 404.
  std::optional<Session> s = cookies_.AnySession(request);
  return HtmlResponse(200, LandingPage({.pretty_name = ctx_.options.pretty_name,
                                        .export_url = ctx_.BaseUrl(request) + "/export",
                                        .user = s ? SessionCookies::UserLabel(*s) : "",
                                        .device_grant = ctx_.idp.SupportsDeviceGrant()}));
}

http::Response ConsumerPages::Resources(const http::Request& request) {
  std::optional<Session> any;
  if (!request.Query("s").has_value()) {
    // Not from kubectl bind: the catalog to read, for any login of this browser.
    any = cookies_.AnySession(request);
    if (!any) {
      return SessionCookies::NotLoggedIn("/resources", "the services this Control Plane offers");
    }
  }
  auto found = any ? std::variant<Session, http::Response>(*any)
                   : cookies_.SessionFor(request, std::string(request.Query("s").value_or("")));
  if (auto* page = std::get_if<http::Response>(&found)) return std::move(*page);
  const Session& s = std::get<Session>(found);
  auto apis = ListOfferedApis(ctx_.admin, ctx_.options.consumer_scope);
  if (!apis.ok()) {
    KLUTCH_LOG(kWarn, "bind", "/resources: {}", apis.status().message());
    return ErrorResponse(
        500, "Catalog unavailable",
        "The catalog could not be read from the Control Plane: " + apis.status().message(),
        "Reload the page in a minute; if it keeps failing, tell the platform team.");
  }
  // Bind buttons only for a kubectl bind session: it alone has a cluster and a CLI waiting.
  const bool can_bind = !s.cid.empty() && !s.redirect.empty();
  CatalogView view{.sid = can_bind ? s.sid : "",
                   .csrf = can_bind ? cookies_.CsrfToken(s) : "",
                   .user = SessionCookies::UserLabel(s),
                   .cluster_id = s.cid,
                   .destination = UrlAuthority(s.redirect),
                   .apis = std::move(*apis),
                   .export_url = ctx_.BaseUrl(request) + "/export"};
  return HtmlResponse(200, CatalogPage(view));
}

http::Response ConsumerPages::Consumer(const http::Request& request) {
  std::optional<Session> session;
  std::string sid(request.Query("s").value_or(""));
  if (!sid.empty()) {
    auto found = cookies_.SessionFor(request, sid);
    if (auto* page = std::get_if<http::Response>(&found)) return std::move(*page);
    session = std::get<Session>(found);
  } else {
    session = cookies_.AnySession(request);
    if (!session) return SessionCookies::NotLoggedIn("/consumer", "your clusters and claims");
  }
  ConsumerView view{.user = SessionCookies::UserLabel(*session),
                    .sid = sid,
                    .export_url = ctx_.BaseUrl(request) + "/export"};
  auto clusters = ConsumerClusters(ctx_.admin, session->subject, session->issuer, ctx_.clock);
  if (clusters.ok()) {
    view.clusters = std::move(*clusters);
  } else {
    KLUTCH_LOG(kWarn, "bind", "/consumer: {}", clusters.status().message());
    view.error =
        "Your clusters could not be read from the Control Plane: " + clusters.status().message();
  }
  return HtmlResponse(200, ConsumerPage(view));
}

}  // namespace klutch::bind
