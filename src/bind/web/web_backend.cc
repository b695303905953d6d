// WebBackend: the parts of the HTTP surface wired to their routes.
#include "bind/web/web_backend.h"

#include <utility>

#include "bind/web/bind_endpoints.h"
#include "bind/web/browser_login.h"
#include "bind/web/consumer_binder.h"
#include "bind/web/consumer_pages.h"
#include "bind/web/device_flow.h"
#include "bind/web/session_cookies.h"
#include "bind/web/web_context.h"
#include "bind/web/web_protocol.h"
#include "bind/web/web_responses.h"

namespace klutch::bind {

class WebBackend::Impl {
 public:
  Impl(client::RestClient& admin, IdentityProvider& idp, Sealer sealer, WebOptions options)
      : sealer_(std::move(sealer)),
        options_(std::move(options)),
        ctx_{.admin = admin,
             .idp = idp,
             .sealer = sealer_,
             .options = options_,
             .clock = options_.clock ? *options_.clock : core::RealClock::Get()},
        cookies_(ctx_),
        binder_(ctx_),
        login_(ctx_, cookies_),
        device_(ctx_, binder_),
        endpoints_(ctx_, cookies_, binder_),
        pages_(ctx_, cookies_) {
    if (options_.metrics) {
      ctx_.logins = &options_.metrics->Counter(
          "klutch_backend_logins_total", "OIDC logins at /callback and /device/token by result");
      ctx_.binds = &options_.metrics->Counter("klutch_backend_binds_total",
                                              "Bind requests (/bind, /device/token) by result");
    }
  }

  void AddRoutes(http::Router& router) {
    using Params = http::PathParams;
    router.Get("/", [this](http::Request& r, const Params&) { return pages_.Landing(r); });
    router.Get("/login", [this](http::Request& r, const Params&) { return login_.Login(r); });
    router.Get("/export", [this](http::Request& r, const Params&) { return endpoints_.Export(r); });
    router.Get("/authorize",
               [this](http::Request& r, const Params&) { return login_.Authorize(r); });
    router.Get("/callback", [this](http::Request& r, const Params&) { return login_.Callback(r); });
    router.Get("/resources",
               [this](http::Request& r, const Params&) { return pages_.Resources(r); });
    router.Get("/bind", [this](http::Request& r, const Params&) {
      // The router answers HEAD with GET routes; a HEAD must not bind.
      if (r.method == "HEAD") return HtmlResponse(405, "");
      return endpoints_.BindFromBrowser(r, r.query, 302);
    });
    router.Post("/bind", [this](http::Request& r, const Params&) {
      return endpoints_.BindFromBrowser(r, ParseForm(r.body), 303);
    });
    router.Get("/consumer", [this](http::Request& r, const Params&) { return pages_.Consumer(r); });
    router.Post("/device/authorize",
                [this](http::Request& r, const Params&) { return device_.Authorize(r); });
    router.Post("/device/token",
                [this](http::Request& r, const Params&) { return device_.Token(r); });
    router.Post("/device/bind",
                [this](http::Request& r, const Params&) { return device_.Bind(r); });
  }

 private:
  const Sealer sealer_;
  const WebOptions options_;
  WebContext ctx_;
  SessionCookies cookies_;
  ConsumerBinder binder_;
  BrowserLogin login_;
  DeviceFlow device_;
  BindEndpoints endpoints_;
  ConsumerPages pages_;
};

WebBackend::WebBackend(client::RestClient& admin, IdentityProvider& idp, Sealer sealer,
                       WebOptions options)
    : impl_(std::make_unique<Impl>(admin, idp, std::move(sealer), std::move(options))) {}
WebBackend::~WebBackend() = default;

void WebBackend::AddRoutes(http::Router& router) { impl_->AddRoutes(router); }

}  // namespace klutch::bind
