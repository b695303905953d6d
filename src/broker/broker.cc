#include "broker/broker.h"

#include <fmt/format.h>

#include "broker/backup_api.h"
#include "broker/broker_metrics.h"
#include "broker/http_responses.h"
#include "broker/instance_registry.h"
#include "broker/osb_api.h"
#include "core/strings.h"
#include "engines/engine_ca.h"
#include "http/router.h"

namespace klutch::broker {

class Broker::Impl {
 public:
  explicit Impl(BrokerOptions options) : options_(std::move(options)) {}
  ~Impl() { Shutdown(); }

  core::Status Init() {
    StateDir state(options_.state_dir);
    KLUTCH_RETURN_IF_ERROR(state.Init());
    KLUTCH_RETURN_IF_ERROR(
        engines::LoadOrCreateEngineCa(state.TlsDir(), "klutch-broker-ca", options_.engine));
    KLUTCH_ASSIGN_OR_RETURN(credentials_, BrokerCredentials::LoadOrCreate(state));
    registry_ = std::make_unique<InstanceRegistry>(
        options_, [this](std::string_view kind, bool ok, double seconds) {
          metrics_.ObserveOperation(kind, ok, seconds);
        });
    metrics_.ScrapeFrom(*registry_);
    osb_ = std::make_unique<OsbApi>(*registry_, metrics_);
    backups_ = std::make_unique<BackupApi>(*registry_);
    metrics_.AddRoute(router_);
    router_.Get("/healthz", [](http::Request&, const http::PathParams&) {
      return JsonResponse(200, {{"status", "ok"}});
    });
    osb_->AddRoutes(router_);
    backups_->AddRoutes(router_);
    return registry_->Open();
  }

  void Shutdown() {
    if (registry_ != nullptr) registry_->Shutdown();
  }

  // Authentication per base path and the OSB version header, then the routes.
  http::Response Serve(http::Request& request) {
    if (request.path == "/healthz") return router_.Serve(request);
    if (request.path == "/metrics") {
      // Instance counts by service and state are the operator's: any of the broker's
      // credentials may read them.
      if (credentials_.AuthorizedForAny(request)) return router_.Serve(request);
      http::Response r = ErrorResponse(
          401, "Unauthorized",
          "/metrics needs basic-auth credentials: any of the broker's (see credentials.json)");
      r.headers.Set("WWW-Authenticate", "Basic realm=\"klutch-broker\"");
      return r;
    }
    auto segments = core::SplitNonEmpty(request.path, '/');
    if (segments.empty()) {
      return ErrorResponse(404, "NotFound", "no such path; see /<type>/v2/catalog");
    }
    std::string base(segments[0]);
    if (!credentials_.Has(base)) {
      return ErrorResponse(404, "NotFound",
                           fmt::format("no service type {} here; this broker serves {}",
                                       core::GoQuote(base), core::Join(Bases(), ", ")));
    }
    if (!credentials_.Authorized(request, base)) {
      http::Response r =
          ErrorResponse(401, "Unauthorized", "missing or wrong basic-auth credentials for " + base);
      r.headers.Set("WWW-Authenticate", fmt::format("Basic realm=\"klutch-broker/{}\"", base));
      return r;
    }
    bool osb = segments.size() > 1 && segments[1] == "v2" && !IsBackupManagerBase(base);
    if (osb) {
      if (auto e = CheckApiVersion(request.headers.Get("X-Broker-API-Version"))) {
        return ErrorResponse(*e);
      }
    }
    return router_.Serve(request);
  }

  std::vector<std::string> Bases() const { return credentials_.Bases(); }
  BasicCredentials Credentials(std::string_view base) const { return credentials_.Get(base); }
  std::string CaPem() const { return options_.engine.ca_pem; }

 private:
  BrokerOptions options_;
  BrokerCredentials credentials_;
  BrokerMetrics metrics_;
  http::Router router_{[](int code, std::string message) {
    return ErrorResponse(code, code == 405 ? "MethodNotAllowed" : "NotFound", std::move(message));
  }};
  // After metrics_ and router_: destroyed before them (its workers observe metrics).
  std::unique_ptr<InstanceRegistry> registry_;
  std::unique_ptr<OsbApi> osb_;
  std::unique_ptr<BackupApi> backups_;
};

core::Result<std::unique_ptr<Broker>> Broker::Open(BrokerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  KLUTCH_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Broker>(new Broker(std::move(impl)));
}

Broker::Broker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Broker::~Broker() { impl_->Shutdown(); }
http::Response Broker::Serve(http::Request& request) { return impl_->Serve(request); }
std::vector<std::string> Broker::Bases() const { return impl_->Bases(); }
BasicCredentials Broker::Credentials(std::string_view base) const {
  return impl_->Credentials(base);
}
std::string Broker::CaPem() const { return impl_->CaPem(); }
void Broker::Shutdown() { impl_->Shutdown(); }

}  // namespace klutch::broker
