// RestClient: the one way this project's programs talk to a Kubernetes API server.
//
// Built from a RestConfig (kubeconfig, in-cluster, or tests), it sends requests through a
// Transport (a pool of keep-alive HTTPS connections, or an in-process handler) with the
// configured credentials, throttles them with a client-side token bucket (QPS/burst), and
// retries what is safe to retry: 429 and any response with Retry-After, connection failures
// before a request was sent, and transport or 5xx failures of reads (GET/HEAD). A 401 makes the
// credentials refresh once (exec plugins, rotated token files). Errors come back as core::Status
// carrying the server's metav1.Status (reason, message, code, causes), so IsNotFound() etc. work on
// them.
//
// Thread-safe: any number of threads may issue requests at once; each stream (watch) holds
// its own connection for its lifetime.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/kubeconfig.h"
#include "client/transport.h"
#include "core/status.h"
#include "http/message.h"
#include "machinery/json.h"

namespace klutch::client {

using machinery::Json;

struct Request {
  std::string verb = "GET";  // GET, POST, PUT, PATCH, DELETE
  std::string path;          // absolute path below the server URL: "/api/v1/namespaces"
  std::vector<std::pair<std::string, std::string>> query;  // encoded by the client
  std::string body;
  std::string content_type = "application/json";
  std::string accept = "application/json";
  // Stream() only: end the stream after this long without a byte (0: the client's
  // RestClientOptions::stream_idle_timeout). How a watch notices a cut that sends no FIN.
  std::chrono::milliseconds idle_timeout{0};
};

struct Response {
  int status = 0;
  http::Headers headers;
  std::string body;
};

// How a stream ended.
struct StreamEnd {
  int status = 0;          // the HTTP status of the response
  bool complete = true;    // false: the connection broke before the server ended the body
  bool cancelled = false;  // Cancel() was called
  std::string error;       // what broke it, when !complete
  std::string body;        // the body of a non-2xx response (a metav1.Status)
};

using RequestObserver = std::function<void(std::string_view verb, int code, double seconds)>;

struct RestClientOptions {
  int max_retries = 5;  // attempts after the first
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10000};
  // A stream with no byte for this long counts as cut (bookmarks keep healthy watches busy).
  std::chrono::milliseconds stream_idle_timeout{0};
  // Observes every finished request (metrics): verb, path template-free path, HTTP code (0
  // for transport errors), seconds taken.
  RequestObserver on_request;
  // How requests reach the server; nullptr: HTTP(S) to the config's server
  // (NewHttpTransport). An InProcessTransport serves them in this process.
  std::shared_ptr<Transport> transport;
};

class RestClient {
 public:
  // Fails when the config is unusable (bad URL, unreadable TLS material, exec config
  // errors): the message names what is wrong.
  static core::Result<std::unique_ptr<RestClient>> New(RestConfig config,
                                                       RestClientOptions options = {});
  ~RestClient();
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  // Sends a request; a 2xx response is returned, anything else becomes the Status the
  // server sent (or one built from the HTTP code when the body is not a Status).
  core::Result<Response> Do(const Request& request);
  // Do() and parse the body as JSON (BadRequest-free: a non-JSON 2xx body is kInternalError
  // naming the path).
  core::Result<Json> DoJson(const Request& request);

  // Sends a request and hands body bytes to `on_data` as they arrive until the server ends
  // the body, the connection breaks, `on_data` returns false, or `canceller` fires. Only
  // failing to get a response at all is an error; how the body ended is in StreamEnd.
  core::Result<StreamEnd> Stream(const Request& request,
                                 const std::function<bool(std::string_view)>& on_data,
                                 StreamCanceller* canceller = nullptr);

  const RestConfig& config() const;
  // The transport requests go through; clients derived from this one (other options, same
  // server) pass it in RestClientOptions::transport.
  std::shared_ptr<Transport> transport() const;
  // Replaces RestClientOptions::on_request (e.g. a Manager plugging in its metrics).
  void SetRequestObserver(RequestObserver observer);

  class Impl;

 private:
  explicit RestClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::client
