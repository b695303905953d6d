#include "apiserver/server.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "apiserver/builtin_resources.h"
#include "apiserver/crd.h"
#include "apiserver/handler.h"
#include "apiserver/metrics.h"
#include "apiserver/openapi.h"
#include "apiserver/watch.h"
#include "core/log.h"
#include "core/strings.h"
#include "core/sync.h"
#include "http/server.h"
#include "serving/health.h"
#include "serving/kubeconfig.h"
#include "serving/metrics.h"
#include "serving/pki.h"
#include "storage/memory/memory_store.h"
#include "storage/sqlite/sqlite_store.h"

namespace klutch::apiserver {

namespace fs = std::filesystem;

namespace {

// The API server's certificates: the serving certificate for every name clients may use to
// reach it, and the admin client certificate (group system:masters).
core::Result<serving::Pki> EnsurePki(const fs::path& dir, const std::string& host,
                                     const std::vector<std::string>& extra_sans) {
  serving::PkiSpec spec;
  spec.serving_file = "apiserver";
  spec.serving_common_name = "klutch-apiserver";
  spec.serving_names = {"kubernetes", "kubernetes.default", "kubernetes.default.svc",
                        "kubernetes.default.svc.cluster.local", host};
  spec.serving_names.insert(spec.serving_names.end(), extra_sans.begin(), extra_sans.end());
  spec.clients = {{"admin", "kubernetes-admin", {"system:masters"}}};
  return serving::EnsurePki(dir, spec);
}

}  // namespace

class ApiServer::Impl {
 public:
  explicit Impl(ApiServerOptions options) : options_(std::move(options)) {}

  ~Impl() { Stop(); }

  core::Status Start() {
    fs::path dir(options_.data_dir);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return core::Internal(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
    std::string host = options_.listen;
    uint16_t port = 6443;
    if (auto colon = options_.listen.rfind(':'); colon != std::string::npos) {
      host = options_.listen.substr(0, colon);
      auto p = core::ParseInt64(options_.listen.substr(colon + 1));
      if (!p || *p < 0 || *p > 65535) {
        return core::BadRequest(fmt::format("--listen {}: bad port", options_.listen));
      }
      port = static_cast<uint16_t>(*p);
    }
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);

    std::unique_ptr<storage::Store> store;
    if (options_.storage == "memory") {
      store = std::make_unique<storage::MemoryStore>();
    } else if (options_.storage == "sqlite") {
      KLUTCH_ASSIGN_OR_RETURN(store,
                              storage::SqliteStore::Open({.path = (dir / "state.db").string()}));
    } else {
      return core::BadRequest(
          fmt::format("--storage {}: must be sqlite or memory", options_.storage));
    }
    metrics_ = std::make_unique<ApiServerMetrics>(registry_metrics_);
    store_ = NewMeteredStore(std::move(store), *metrics_);
    KLUTCH_ASSIGN_OR_RETURN(count_watch_, metrics_->CountObjects(*store_));
    health_.AddLiveness("etcd", [this]() -> core::Status {
      // The store answers a point read (SQLite: the file is readable; memory: always).
      return store_->Get("/registry/core/namespaces/default").status();
    });
    registry_.SetOwner("builtin", BuiltinResources());
    rest_ = std::make_unique<RestStorage>(
        *store_, registry_, options_.clock ? *options_.clock : core::RealClock::Get());
    KLUTCH_RETURN_IF_ERROR(LoadCrds());
    KLUTCH_RETURN_IF_ERROR(SeedNamespaces());
    // Quota status written before a restart may lag behind what is stored.
    rest_->RecountQuotas();

    const fs::path pki_dir = options_.pki_dir.empty() ? dir / "pki" : fs::path(options_.pki_dir);
    KLUTCH_ASSIGN_OR_RETURN(pki_, EnsurePki(pki_dir, host, options_.tls_sans));
    // The authorizer and token caches follow storage through a watch: ready once they have
    // applied every change up to now (kube-apiserver's informer-sync). A feed that stopped or
    // lags fails the check after AccessOptions::settle_timeout.
    health_.AddReadiness("informer-sync", [this]() -> core::Status {
      if (!access_) return core::Unavailable("access control not started");
      return access_->WaitForRevision(store_->Revision());
    });
    KLUTCH_ASSIGN_OR_RETURN(access_,
                            AccessControl::Start(options_.access, pki_dir.string(), *rest_));
    openapi_ = std::make_unique<OpenApi>(registry_);
    watches_ = std::make_unique<WatchManager>(*rest_, options_.bookmark_interval,
                                              options_.default_watch_timeout);
    metrics_->ReportWatches(*watches_);
    // Writes answered before the authorizer caught up with them (AccessControl::WaitForRevision).
    registry_metrics_.OnScrape(
        [this, reported = std::make_shared<std::atomic<uint64_t>>(0),
         counter = registry_metrics_
                       .Counter("klutch_apiserver_access_settle_timeouts_total",
                                "Writes answered before the authorizer "
                                "and token caches had applied them")
                       .With({})] {
          const uint64_t now = access_->settle_timeouts();
          const uint64_t before = reported->exchange(now);
          if (now > before) counter.Increment(static_cast<double>(now - before));
        });
    handler_ = std::make_unique<ApiHandler>(*rest_, registry_, *openapi_, *watches_, *access_,
                                            HandlerOptions{.server_address = options_.listen,
                                                           .version_minor = options_.version_minor,
                                                           .health = &health_,
                                                           .metrics = &registry_metrics_});

    http::ServerOptions so;
    so.address = host.empty() ? "127.0.0.1" : host;
    so.port = port;
    so.threads = options_.threads;
    so.io_threads = options_.io_threads;
    // Quick point reads run on the I/O thread, unless their token still needs checking
    // (a signature, an account read or even an OIDC key fetch).
    so.run_inline = [this](http::Request& r) {
      // The one parse of the request's URL: Serve and the handler read it from the context.
      const RequestInfo& info = r.context.emplace<RequestInfo>(ParseRequestInfo(r));
      return ApiHandler::IsQuick(info) && access_->QuickToAuthenticate(r);
    };
    so.tls = http::TlsOptions{
        options_.tls_cert_file.empty() ? pki_.serving_cert_file : options_.tls_cert_file,
        options_.tls_key_file.empty() ? pki_.serving_key_file : options_.tls_key_file,
        options_.client_ca_file.empty() ? pki_.ca_file : options_.client_ca_file};
    so.error_response = [](int code, std::string message) {
      core::Reason reason = code == 413   ? core::Reason::kRequestEntityTooLarge
                            : code >= 500 ? core::Reason::kInternalError
                                          : core::Reason::kBadRequest;
      core::Status s(reason, std::move(message));
      s.set_code(code);
      return ApiHandler::StatusResponse(s);
    };
    KLUTCH_ASSIGN_OR_RETURN(
        server_, http::Server::Start(so, [this](http::Request& req) { return Serve(req); }));
    std::string url_host = so.address == "0.0.0.0" ? "127.0.0.1" : so.address;
    if (url_host.find(':') != std::string::npos) url_host = "[" + url_host + "]";
    url_ = fmt::format("https://{}:{}", url_host, server_->port());
    KLUTCH_RETURN_IF_ERROR(serving::WriteKubeconfig(
        dir / "admin.kubeconfig", {.name = "klutch",
                                   .server = url_,
                                   .ca_pem = pki_.ca.certificate,
                                   .client_certificate_pem = pki_.clients[0].certificate,
                                   .client_key_pem = pki_.clients[0].private_key,
                                   .ns = "default"}));
    compactor_ = std::thread([this] { CompactLoop(); });
    KLUTCH_LOG(kInfo, "apiserver", "serving on {} (storage {}, revision {})", url_,
               options_.storage, store_->Revision());
    return core::Status::Ok();
  }

  // Authentication, then authorization, then the handler; one audit event and one metrics
  // sample per request.
  http::Response Serve(http::Request& req) {
    const auto started = std::chrono::steady_clock::now();
    http::Response resp = Authorized(req);
    const RequestInfo& info = std::any_cast<const RequestInfo&>(req.context);
    ResourcePtr served;
    if (info.resource_request) {
      served = registry_.Find(info.api_group, info.api_version, info.resource);
    }
    metrics_->OnRequest(
        info, req, served.get(), resp.status,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    return resp;
  }

  http::Response Authorized(http::Request& req) {
    // Parsed already when the request came through the HTTPS listener (run_inline).
    const RequestInfo* parsed = std::any_cast<RequestInfo>(&req.context);
    if (!parsed) parsed = &req.context.emplace<RequestInfo>(ParseRequestInfo(req));
    const RequestInfo& info = *parsed;
    Caller refused;
    auto caller = access_->Authenticate(req, &refused);
    if (!caller.ok()) {
      http::Response resp = ApiHandler::StatusResponse(caller.status());
      // A refused impersonation names who tried.
      const bool impersonation = !refused.user.name.empty();
      access_->Audit(req, info, impersonation ? &refused : nullptr, resp.status,
                     impersonation ? "forbid" : "", "");
      return resp;
    }
    const auth::Decision decision = access_->Decide(ToAttributes(caller->user, info));
    if (!decision.allowed) {
      http::Response resp =
          ApiHandler::StatusResponse(ForbiddenFor(caller->user, info, decision.reason));
      access_->Audit(req, info, &*caller, resp.status, "forbid", decision.reason);
      return resp;
    }
    http::Response resp;
    AuditFacts facts;
    try {
      resp = handler_->Handle(req, info, *caller, &facts);
    } catch (const std::exception& e) {
      // A bug, never a client error; the request may have written already, so it still gets
      // its audit event.
      KLUTCH_LOG(kError, "apiserver", "handler threw for {} {}: {}", req.method, req.path,
                 e.what());
      resp = ApiHandler::StatusResponse(
          core::Internal("Internal error occurred: the request failed; see the server log"));
    }
    access_->Audit(req, info, &*caller, resp.status, "allow", decision.reason, &facts);
    return resp;
  }

  core::Status LoadCrds() {
    auto crd = registry_.Find("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    KLUTCH_ASSIGN_OR_RETURN(ListOutcome list, rest_->List(*crd, "", {}));
    for (auto& item : list.items) {
      const Json& obj = item.Object();
      auto st = RegisterCrd(obj);
      if (!st.ok()) {
        KLUTCH_LOG(kWarn, "apiserver", "stored CRD {} not served: {}", machinery::Name(obj),
                   st.message());
      }
    }
    return core::Status::Ok();
  }

  core::Status RegisterCrd(const Json& crd) {
    KLUTCH_ASSIGN_OR_RETURN(auto resources, ResourcesForCrd(crd));
    // A CRD may not take over what a built-in kind or another CRD serves: they would share
    // storage keys.
    const std::string name = machinery::Name(crd);
    for (const auto& r : resources) {
      auto existing = registry_.FindStored(r->group, r->plural);
      if (existing && existing->crd_name != name) {
        return core::Conflict(fmt::format("{} is already served by {}", r->GroupResource(),
                                          existing->crd_name.empty()
                                              ? std::string("the API server itself")
                                              : existing->crd_name));
      }
    }
    registry_.SetOwner(machinery::Name(crd), std::move(resources));
    return core::Status::Ok();
  }

  core::Status SeedNamespaces() {
    auto ns = registry_.Find("", "v1", "namespaces");
    for (const char* name : kSeedNamespaces) {
      Json obj = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
      auto res = rest_->Create(*ns, "", obj, WriteOptions{.field_manager = "klutch-apiserver"});
      if (!res.ok() && !core::IsAlreadyExists(res.status())) return res.status();
    }
    return core::Status::Ok();
  }

  void CompactLoop() EXCLUDES(mu_) {
    // Remember (time, revision) samples; compact to the newest one older than `history`.
    std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> samples;
    const auto period = std::clamp<std::chrono::seconds>(
        options_.history / 2, std::chrono::seconds(1), std::chrono::seconds(10));
    core::MutexLock lock(mu_);
    while (!stopping_) {
      cv_.WaitFor(mu_, period);
      if (stopping_) break;
      auto now = std::chrono::steady_clock::now();
      samples.emplace_back(now, store_->Revision());
      int64_t target = 0;
      while (!samples.empty() && now - samples.front().first >= options_.history) {
        target = samples.front().second;
        samples.pop_front();
      }
      if (target > store_->CompactedRevision()) {
        mu_.Unlock();
        auto st = store_->Compact(target);
        if (!st.ok()) KLUTCH_LOG(kWarn, "apiserver", "compaction failed: {}", st.message());
        mu_.Lock();
      }
    }
  }

  void Stop() EXCLUDES(mu_) {
    {
      core::MutexLock lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    health_.SetShuttingDown();
    if (server_) {
      // Still serving, but no longer ready: clients behind a load balancer move elsewhere.
      if (options_.shutdown_delay.count() > 0) std::this_thread::sleep_for(options_.shutdown_delay);
      if (!server_->Drain(options_.shutdown_timeout)) {
        KLUTCH_LOG(kWarn, "apiserver", "shutdown: requests still running after {} ms are cut off",
                   options_.shutdown_timeout.count());
      }
    }
    cv_.SignalAll();
    if (compactor_.joinable()) compactor_.join();
    // The HTTP server first: stopping it ends every connection and stream, whose callbacks
    // still use the watch manager; then the manager and its store watches.
    if (server_) server_->Stop();
    watches_.reset();
  }

  ApiServerOptions options_;
  serving::MetricRegistry registry_metrics_;
  serving::HealthChecks health_;
  std::unique_ptr<ApiServerMetrics> metrics_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<storage::WatchHandle> count_watch_;  // destroyed before the store
  Registry registry_;
  std::unique_ptr<RestStorage> rest_;
  serving::Pki pki_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<OpenApi> openapi_;
  std::unique_ptr<WatchManager> watches_;
  std::unique_ptr<ApiHandler> handler_;
  std::unique_ptr<http::Server> server_;
  std::string url_;
  core::Mutex mu_;
  core::CondVar cv_;  // stopping_ set
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread compactor_;
};

core::Result<std::unique_ptr<ApiServer>> ApiServer::Start(const ApiServerOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  KLUTCH_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<ApiServer>(new ApiServer(std::move(impl)));
}

ApiServer::ApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiServer::~ApiServer() = default;
uint16_t ApiServer::port() const { return impl_->server_->port(); }
std::string ApiServer::url() const { return impl_->url_; }
http::Handler ApiServer::handler() {
  return [impl = impl_.get()](http::Request& req) { return impl->Serve(req); };
}
std::string ApiServer::admin_kubeconfig_path() const {
  return (fs::path(impl_->options_.data_dir) / "admin.kubeconfig").string();
}
std::string ApiServer::ca_file() const { return impl_->pki_.ca_file; }
RestStorage& ApiServer::storage() { return *impl_->rest_; }
Registry& ApiServer::registry() { return impl_->registry_; }
AccessControl& ApiServer::access() { return *impl_->access_; }
core::Status ApiServer::RegisterCrd(const Json& crd) { return impl_->RegisterCrd(crd); }
void ApiServer::UnregisterCrd(const std::string& name) { impl_->registry_.RemoveOwner(name); }
core::Status ApiServer::Compact(int64_t revision) { return impl_->store_->Compact(revision); }
void ApiServer::Stop() { impl_->Stop(); }

}  // namespace klutch::apiserver
