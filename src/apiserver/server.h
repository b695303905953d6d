// ApiServer: `klutch apiserver` as a library. Opens the store, registers the built-in
// resources and every stored CRD, generates (or loads) the PKI, serves HTTPS and writes an
// admin kubeconfig once ready. Controllers (namespace lifecycle, garbage collection, CRD
// status, service accounts) run beside it and are wired by the caller (src/controllers).
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "apiserver/access.h"
#include "apiserver/rest_storage.h"
#include "core/clock.h"
#include "core/status.h"
#include "http/message.h"

namespace klutch::apiserver {

struct ApiServerOptions {
  std::string data_dir;                   // state, PKI and admin.kubeconfig live here
  std::string listen = "127.0.0.1:6443";  // host:port; port 0 picks a free one
  std::string storage = "sqlite";         // sqlite | memory
  std::string tls_cert_file;              // serving certificate (default: generated)
  std::string tls_key_file;
  // Extra DNS names or IP addresses for the generated serving certificate (besides loopback,
  // localhost, kubernetes.default... and the listen host); the certificate is reissued when
  // the set changes.
  std::vector<std::string> tls_sans;
  std::string client_ca_file;  // CA for client certificates (default: generated)
  int threads = 32;            // request workers (handlers may block on storage)
  int io_threads = 2;          // connection I/O threads
  // History kept for watches and continue tokens before compaction.
  std::chrono::seconds history = std::chrono::minutes(5);
  std::chrono::seconds bookmark_interval = std::chrono::seconds(60);
  std::chrono::seconds default_watch_timeout = std::chrono::minutes(30);
  std::string version_minor = "32";  // reported by /version
  AccessOptions access;              // authentication, authorization, audit
  // Where the CA, certificates and keys live (default: `data_dir`/pki). Servers started by
  // one test process may share one directory so keys are generated once.
  std::string pki_dir;
  // Time for timestamps written into objects (nullptr: core::RealClock::Get()).
  const core::Clock* clock = nullptr;
  // Graceful stop, as kube-apiserver's --shutdown-delay-duration and its wait for in-flight
  // requests: Stop first fails /readyz and keeps serving for `shutdown_delay` (so load
  // balancers take the server out), then refuses new connections and waits up to
  // `shutdown_timeout` for the requests already read to be answered.
  std::chrono::milliseconds shutdown_delay{0};
  std::chrono::milliseconds shutdown_timeout = std::chrono::seconds(60);
};

class ApiServer {
 public:
  static core::Result<std::unique_ptr<ApiServer>> Start(const ApiServerOptions& options);
  ~ApiServer();

  uint16_t port() const;
  std::string url() const;  // https://host:port
  // Serves one request exactly as the HTTPS listener does (authentication, authorization,
  // audit, routing), for in-process clients (client::NewInProcessTransport): the API
  // server's own controllers and tests. Thread-safe; the server must outlive the handler.
  http::Handler handler();
  std::string admin_kubeconfig_path() const;
  std::string ca_file() const;

  RestStorage& storage();
  Registry& registry();
  AccessControl& access();
  // Registers the resources of a CRD object (used by the CRD controller and at startup).
  core::Status RegisterCrd(const Json& crd);
  void UnregisterCrd(const std::string& crd_name);
  // Compacts history up to `revision` now (tests; the server also compacts periodically).
  core::Status Compact(int64_t revision);
  // The graceful stop of ApiServerOptions::shutdown_delay / shutdown_timeout, then every
  // connection and stream ends. Idempotent.
  void Stop();

  class Impl;

 private:
  explicit ApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::apiserver
