// Transport: how a RestClient's requests reach an API server.
//
// HttpTransport (the default, built from a RestConfig) sends them over HTTP/1.1 or HTTPS with
// a pool of keep-alive connections and the credentials' client certificate; a stream holds a
// connection of its own. InProcessTransport hands the same requests to an http::Handler in
// this process: no socket and no TLS, but the same method, target, headers and body, and the
// same response bytes, so everything above it (RestClient retries and errors, watches,
// informers, controllers) runs unchanged. The API server's own controllers and the
// in-process test cluster use it.
//
// Thread-safe: any number of threads may call Do and Stream at once.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "client/kubeconfig.h"
#include "core/status.h"
#include "core/sync.h"
#include "http/client.h"
#include "http/message.h"

namespace klutch::client {

// Lets another thread end a running stream (RestClient::Stream, watches). Thread-safe.
class StreamCanceller {
 public:
  // Ends the stream now (or, if it has not started yet, as soon as it starts).
  void Cancel();
  bool cancelled() const;

  // For transports: `disconnect` ends the running stream; called at once when the
  // canceller was already cancelled. Detach before the stream's resources go away.
  void Attach(std::function<void()> disconnect);
  void Detach();

 private:
  mutable core::Mutex mu_;
  std::function<void()> disconnect_ GUARDED_BY(mu_);
  bool cancelled_ GUARDED_BY(mu_) = false;
};

struct TransportRequest {
  std::string method;
  std::string target;  // path and encoded query below the server URL's prefix
  http::Headers headers;
  std::string body;
  // The client certificate to present (HTTPS), from the current credentials; may be empty.
  std::string cert_pem, key_pem;
  // Bounds connecting, sending and reading a whole response (or a stream's headers).
  std::chrono::milliseconds timeout{30000};
  // Stream only: end the stream after this long without a byte (0 = never).
  std::chrono::milliseconds idle_timeout{0};
};

class Transport {
 public:
  virtual ~Transport();
  // One request, whole response. Failing to reach the server at all is kServiceUnavailable
  // whose message starts with "connect ", "resolve " or "TLS handshake " when nothing was
  // sent (RestClient retries those for any verb).
  virtual core::Result<http::ClientResponse> Do(const TransportRequest& request) = 0;
  // Hands body bytes to `on_data` as they arrive until the server ends the body, the
  // connection breaks or idles (complete=false), `on_data` returns false, or `canceller`
  // fires. Non-2xx bodies come back whole in `body`.
  virtual core::Result<http::ClientResponse> Stream(
      const TransportRequest& request, const std::function<bool(std::string_view)>& on_data,
      StreamCanceller* canceller) = 0;
};

// Over the network to `config.server` (http:// or https://), verifying the server with the
// config's CA. kInvalid naming the server when its URL does not parse.
core::Result<std::unique_ptr<Transport>> NewHttpTransport(const RestConfig& config);

// To `handler` in this process. Each request carries `identity` as its verified client
// certificate, as a TLS connection presenting that certificate would (nullopt: none; bearer
// tokens in the headers still authenticate). Handlers run on the calling thread; a streamed
// response is fed from whatever threads write to it.
std::unique_ptr<Transport> NewInProcessTransport(http::Handler handler,
                                                 std::optional<http::ClientCertificate> identity);

// The path prefix of a server URL ("https://host:6443/prefix" -> "/prefix"), "" when none.
// kInvalid naming the server when the URL is not http:// or https://, or has a bad port.
core::Result<std::string> ServerPathPrefix(const std::string& server);

}  // namespace klutch::client
