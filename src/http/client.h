// Client: a blocking HTTP/1.1 client (plain or TLS) over one keep-alive connection.
//
// Enough for tests, tools and the client library to talk to API servers: request/response
// calls and streamed bodies (watch). TLS verifies the server against the given CA unless
// told otherwise, and can present a client certificate. Not thread-safe: one request at a
// time per Client; use one Client per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "http/message.h"

namespace klutch::http {

struct ClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  bool tls = false;
  std::string ca_pem;    // trusted CA (PEM data); empty = system default paths
  std::string cert_pem;  // client certificate (PEM data), optional
  std::string key_pem;   // its key (PEM data)
  bool insecure_skip_verify = false;
  std::string server_name;  // name to verify (default: host)
  // Bounds connecting, writing a request and reading a whole response (or a stream's
  // headers).
  std::chrono::milliseconds timeout{30000};
  // Ends a streamed body after this long without a byte (0 = never): how a watch notices a
  // network cut that sends no FIN.
  std::chrono::milliseconds stream_idle_timeout{0};
};

struct ClientResponse {
  int status = 0;
  Headers headers;
  std::string body;
  // Stream(): false when the connection broke (or went idle) before the server ended the
  // body; stream_error then says how.
  bool complete = true;
  std::string stream_error;
};

class Client {
 public:
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends one request and reads the whole response. Connects (or reconnects) as needed.
  // Transport failures -> kServiceUnavailable naming the host and the problem.
  core::Result<ClientResponse> Do(std::string_view method, std::string_view target,
                                  const Headers& headers = {}, std::string body = {});

  // Sends a request and hands body bytes to `on_data` as they arrive, until the server ends
  // the body or `on_data` returns false (the connection is then dropped). Returns status and
  // headers; the body of a 2xx response is not kept. Bodies of other responses (errors) are
  // not streamed: they come back in `body` (up to 1 MiB).
  core::Result<ClientResponse> Stream(std::string_view method, std::string_view target,
                                      const Headers& headers,
                                      const std::function<bool(std::string_view)>& on_data);

  // Replaces ClientOptions::timeout for the following calls.
  void set_timeout(std::chrono::milliseconds timeout);

  // Drops the connection: a running Stream() returns (with complete=false); otherwise the
  // next Do() opens a new connection and the next Stream() returns at once (complete=false),
  // so a cancel racing with a stream's start is never lost. The one call that is safe from
  // any thread.
  void Disconnect();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::http
