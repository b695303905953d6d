// Server: an HTTP/1.1 server (plain or TLS) that calls one Handler per request.
//
// Each connection is served by a coroutine on one of a few I/O threads (one io_context each).
// The handler runs on a separate pool of worker threads, where it may block (e.g. on a
// storage commit), unless `run_inline` says the request is quick, in which case it runs on
// the I/O thread and saves two thread handoffs. Responses with `stream` set are sent chunked and
// stay open until closed by either side. Bodies over `max_body_bytes` get 413 without
// reaching the handler. Asio and OpenSSL stay inside server.cc. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "http/message.h"

namespace klutch::http {

struct TlsOptions {
  std::string certificate_file;  // PEM chain of the serving certificate
  std::string key_file;          // PEM private key
  std::string client_ca_file;    // when set, client certificates are verified against it
};

struct ServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;   // 0 = pick a free port
  int threads = 32;    // worker threads for handlers that may block
  int io_threads = 2;  // I/O threads (one io_context each)
  // Requests for which the handler is quick and never blocks long (point reads): run on the
  // I/O thread. Unset: every request goes to the workers. It sees every request first and may
  // keep what it learned in Request::context for the handler.
  std::function<bool(Request&)> run_inline;
  std::optional<TlsOptions> tls;
  size_t max_body_bytes = 3 * 1024 * 1024;
  int max_connections = 10000;  // further connections are closed at once
  // A connection waiting for its next request is closed after this long; a write (also of
  // a stream chunk) that makes no progress for `write_timeout` ends the connection. Streams
  // themselves may stay quiet for any time.
  std::chrono::seconds idle_timeout{120};
  std::chrono::seconds write_timeout{60};
  // Formats transport-level errors (413, 400, 431) as the application wants them.
  std::function<Response(int code, std::string message)> error_response;
};

class Server {
 public:
  // Binds, starts the threads and returns once accepting. kInternalError naming the address
  // when binding or loading TLS material fails.
  static core::Result<std::unique_ptr<Server>> Start(ServerOptions options, Handler handler);
  ~Server();

  uint16_t port() const;
  // The first half of a graceful stop: closes the listening socket (new connections are
  // refused), answers the requests already read, closing their connections after the answer,
  // and waits until none is left or `timeout` passes. Streams already started keep running
  // (Stop ends them). True when every request was answered. Call Stop afterwards.
  bool Drain(std::chrono::milliseconds timeout);
  // Stops accepting, closes every connection and joins the threads. Every stream has ended
  // (its OnClosed callbacks have run) when Stop returns.
  void Stop();

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::http
