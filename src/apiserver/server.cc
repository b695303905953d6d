#include "apiserver/server.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "apiserver/builtin_resources.h"
#include "apiserver/crd.h"
#include "apiserver/handler.h"
#include "apiserver/openapi.h"
#include "apiserver/watch.h"
#include "core/log.h"
#include "core/strings.h"
#include "http/certs.h"
#include "http/server.h"
#include "storage/memory/memory_store.h"
#include "storage/sqlite/sqlite_store.h"

namespace klutch::apiserver {

namespace fs = std::filesystem;

namespace {

core::Result<std::string> ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return core::Internal(fmt::format("cannot read {}", p.string()));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

core::Status WriteFileAtomic(const fs::path& p, const std::string& data, fs::perms perms) {
  fs::path tmp = p;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return core::Internal(fmt::format("cannot write {}", tmp.string()));
    out << data;
    if (!out) return core::Internal(fmt::format("cannot write {}", tmp.string()));
  }
  std::error_code ec;
  fs::permissions(tmp, perms, ec);
  fs::rename(tmp, p, ec);
  if (ec) return core::Internal(fmt::format("cannot rename {}: {}", tmp.string(), ec.message()));
  return core::Status::Ok();
}

struct Pki {
  http::Pem ca;
  std::string ca_file, cert_file, key_file;
  http::Pem admin;
};

// Generates the CA, the serving certificate and the admin client certificate on first start;
// later starts reuse them.
core::Result<Pki> EnsurePki(const fs::path& dir, const std::string& host,
                            const std::vector<std::string>& extra_sans) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return core::Internal(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  Pki pki;
  pki.ca_file = (dir / "ca.crt").string();
  pki.cert_file = (dir / "apiserver.crt").string();
  pki.key_file = (dir / "apiserver.key").string();
  const auto owner_only = fs::perms::owner_read | fs::perms::owner_write;
  const auto readable = owner_only | fs::perms::group_read | fs::perms::others_read;
  if (!fs::exists(dir / "ca.key")) {
    KLUTCH_ASSIGN_OR_RETURN(
        pki.ca, http::GenerateCertificateAuthority("klutch-ca", std::chrono::hours(24 * 365 * 10)));
    KLUTCH_RETURN_IF_ERROR(WriteFileAtomic(dir / "ca.key", pki.ca.private_key, owner_only));
    KLUTCH_RETURN_IF_ERROR(WriteFileAtomic(dir / "ca.crt", pki.ca.certificate, readable));
  } else {
    KLUTCH_ASSIGN_OR_RETURN(pki.ca.private_key, ReadFile(dir / "ca.key"));
    KLUTCH_ASSIGN_OR_RETURN(pki.ca.certificate, ReadFile(dir / "ca.crt"));
  }
  http::CertificateRequest req;
  req.common_name = "klutch-apiserver";
  req.dns_names = {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                   "kubernetes.default.svc.cluster.local"};
  req.ip_addresses = {"127.0.0.1", "::1"};
  auto add_san = [&req](const std::string& name) {
    if (name.empty() || name == "0.0.0.0" || name == "::") return;
    unsigned char buf[sizeof(struct in6_addr)];
    const bool ip =
        inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
    auto& list = ip ? req.ip_addresses : req.dns_names;
    if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
  };
  add_san(host);
  for (const auto& san : extra_sans) add_san(san);
  // The names the serving certificate was issued for; a different set reissues it.
  std::string sans = core::Join(req.dns_names, ",") + ";" + core::Join(req.ip_addresses, ",");
  auto issued_for = ReadFile(dir / "apiserver.sans");
  if (!fs::exists(dir / "apiserver.key") || !issued_for.ok() || *issued_for != sans) {
    req.server = true;
    req.validity = std::chrono::hours(24 * 365);
    KLUTCH_ASSIGN_OR_RETURN(http::Pem serving, http::IssueCertificate(pki.ca, req));
    KLUTCH_RETURN_IF_ERROR(WriteFileAtomic(dir / "apiserver.key", serving.private_key, owner_only));
    KLUTCH_RETURN_IF_ERROR(WriteFileAtomic(dir / "apiserver.crt", serving.certificate, readable));
    KLUTCH_RETURN_IF_ERROR(WriteFileAtomic(dir / "apiserver.sans", sans, readable));
  }
  if (!fs::exists(dir / "admin.key")) {
    http::CertificateRequest req;
    req.common_name = "kubernetes-admin";
    req.organizations = {"system:masters"};
    req.client = true;
    KLUTCH_ASSIGN_OR_RETURN(pki.admin, http::IssueCertificate(pki.ca, req));
    KLUTCH_RETURN_IF_ERROR(WriteFileAtomic(dir / "admin.key", pki.admin.private_key, owner_only));
    KLUTCH_RETURN_IF_ERROR(WriteFileAtomic(dir / "admin.crt", pki.admin.certificate, readable));
  } else {
    KLUTCH_ASSIGN_OR_RETURN(pki.admin.private_key, ReadFile(dir / "admin.key"));
    KLUTCH_ASSIGN_OR_RETURN(pki.admin.certificate, ReadFile(dir / "admin.crt"));
  }
  return pki;
}

std::string Kubeconfig(const std::string& server, const std::string& ca_pem,
                       const http::Pem& user) {
  return fmt::format(
      "apiVersion: v1\n"
      "kind: Config\n"
      "clusters:\n"
      "- name: klutch\n"
      "  cluster:\n"
      "    server: {}\n"
      "    certificate-authority-data: {}\n"
      "users:\n"
      "- name: klutch-admin\n"
      "  user:\n"
      "    client-certificate-data: {}\n"
      "    client-key-data: {}\n"
      "contexts:\n"
      "- name: klutch\n"
      "  context:\n"
      "    cluster: klutch\n"
      "    user: klutch-admin\n"
      "    namespace: default\n"
      "current-context: klutch\n",
      server, core::Base64Encode(ca_pem), core::Base64Encode(user.certificate),
      core::Base64Encode(user.private_key));
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

    if (options_.storage == "memory") {
      store_ = std::make_unique<storage::MemoryStore>();
    } else if (options_.storage == "sqlite") {
      KLUTCH_ASSIGN_OR_RETURN(auto s,
                              storage::SqliteStore::Open({.path = (dir / "state.db").string()}));
      store_ = std::move(s);
    } else {
      return core::BadRequest(
          fmt::format("--storage {}: must be sqlite or memory", options_.storage));
    }
    registry_.SetOwner("builtin", BuiltinResources());
    rest_ = std::make_unique<RestStorage>(
        *store_, registry_, options_.clock ? *options_.clock : core::RealClock::Get());
    KLUTCH_RETURN_IF_ERROR(LoadCrds());
    KLUTCH_RETURN_IF_ERROR(SeedNamespaces());

    const fs::path pki_dir = options_.pki_dir.empty() ? dir / "pki" : fs::path(options_.pki_dir);
    KLUTCH_ASSIGN_OR_RETURN(pki_, EnsurePki(pki_dir, host, options_.tls_sans));
    KLUTCH_ASSIGN_OR_RETURN(access_,
                            AccessControl::Start(options_.access, pki_dir.string(), *rest_));
    openapi_ = std::make_unique<OpenApi>(registry_);
    watches_ = std::make_unique<WatchManager>(*rest_, options_.bookmark_interval,
                                              options_.default_watch_timeout);
    handler_ = std::make_unique<ApiHandler>(
        *rest_, registry_, *openapi_, *watches_, *access_,
        HandlerOptions{.server_address = options_.listen, .version_minor = options_.version_minor});

    http::ServerOptions so;
    so.address = host.empty() ? "127.0.0.1" : host;
    so.port = port;
    so.threads = options_.threads;
    so.io_threads = options_.io_threads;
    // Quick point reads run on the I/O thread, unless their token still needs checking
    // (a signature, an account read or even an OIDC key fetch).
    so.run_inline = [this](const http::Request& r) {
      return ApiHandler::IsQuick(r) && access_->QuickToAuthenticate(r);
    };
    so.tls =
        http::TlsOptions{options_.tls_cert_file.empty() ? pki_.cert_file : options_.tls_cert_file,
                         options_.tls_key_file.empty() ? pki_.key_file : options_.tls_key_file,
                         options_.client_ca_file.empty() ? pki_.ca_file : options_.client_ca_file};
    so.error_response = [](int code, std::string message) {
      core::Reason reason =
          code == 413 ? core::Reason::kRequestEntityTooLarge : core::Reason::kBadRequest;
      core::Status s(reason, std::move(message));
      s.set_code(code);
      return ApiHandler::StatusResponse(s);
    };
    KLUTCH_ASSIGN_OR_RETURN(
        server_, http::Server::Start(so, [this](http::Request& req) { return Serve(req); }));
    std::string url_host = so.address == "0.0.0.0" ? "127.0.0.1" : so.address;
    if (url_host.find(':') != std::string::npos) url_host = "[" + url_host + "]";
    url_ = fmt::format("https://{}:{}", url_host, server_->port());
    KLUTCH_RETURN_IF_ERROR(WriteFileAtomic(dir / "admin.kubeconfig",
                                           Kubeconfig(url_, pki_.ca.certificate, pki_.admin),
                                           fs::perms::owner_read | fs::perms::owner_write));
    compactor_ = std::thread([this] { CompactLoop(); });
    KLUTCH_LOG(kInfo, "apiserver", "serving on {} (storage {}, revision {})", url_,
               options_.storage, store_->Revision());
    return core::Status::Ok();
  }

  // Authentication, then authorization, then the handler; one audit event per request.
  http::Response Serve(http::Request& req) {
    const RequestInfo info = ParseRequestInfo(req);
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
    http::Response resp = handler_->Handle(req, *caller);
    access_->Audit(req, info, &*caller, resp.status, "allow", decision.reason);
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

  void CompactLoop() {
    // Remember (time, revision) samples; compact to the newest one older than `history`.
    std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> samples;
    const auto period = std::clamp<std::chrono::seconds>(
        options_.history / 2, std::chrono::seconds(1), std::chrono::seconds(10));
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, period);
      if (stopping_) break;
      auto now = std::chrono::steady_clock::now();
      samples.emplace_back(now, store_->Revision());
      int64_t target = 0;
      while (!samples.empty() && now - samples.front().first >= options_.history) {
        target = samples.front().second;
        samples.pop_front();
      }
      if (target > store_->CompactedRevision()) {
        lock.unlock();
        auto st = store_->Compact(target);
        if (!st.ok()) KLUTCH_LOG(kWarn, "apiserver", "compaction failed: {}", st.message());
        lock.lock();
      }
    }
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    if (compactor_.joinable()) compactor_.join();
    // The HTTP server first: stopping it ends every connection and stream, whose callbacks
    // still use the watch manager; then the manager and its store watches.
    if (server_) server_->Stop();
    watches_.reset();
  }

  ApiServerOptions options_;
  std::unique_ptr<storage::Store> store_;
  Registry registry_;
  std::unique_ptr<RestStorage> rest_;
  Pki pki_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<OpenApi> openapi_;
  std::unique_ptr<WatchManager> watches_;
  std::unique_ptr<ApiHandler> handler_;
  std::unique_ptr<http::Server> server_;
  std::string url_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
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
