// HTTP request and response values exchanged between the transport (server.cc, client.cc)
// and the rest of the project, with no Boost types in sight.
//
// Plain values; thread-compatible.
#pragma once

#include <any>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace klutch::http {

// Header list with case-insensitive lookup; keeps order and repeated names.
class Headers {
 public:
  // First value of `name`, "" when absent.
  std::string_view Get(std::string_view name) const;
  bool Has(std::string_view name) const;
  void Add(std::string name, std::string value) {
    items_.emplace_back(std::move(name), std::move(value));
  }
  // Replaces every value of `name` by one.
  void Set(std::string name, std::string value);
  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// The verified client certificate of a TLS connection.
struct ClientCertificate {
  std::string common_name;                 // subject CN
  std::vector<std::string> organizations;  // subject O entries
};

struct Request {
  std::string method;
  std::string target;                                      // as received: path plus query
  std::string path;                                        // percent-decoded path
  std::vector<std::pair<std::string, std::string>> query;  // decoded, in order
  Headers headers;
  std::string body;
  std::optional<ClientCertificate> client_certificate;
  // A client certificate was presented that does not verify against the client CA.
  bool client_certificate_rejected = false;
  std::string remote_address;
  // What the server learned about the request before its handler ran (e.g. the API server's
  // parsed request info, from ServerOptions::run_inline); empty otherwise.
  std::any context;

  // First value of a query parameter, nullopt when absent.
  std::optional<std::string_view> Query(std::string_view name) const;
  // Sets `target` and derives `path` (percent-decoded; kept verbatim when malformed) and
  // `query` from it, as the server does for every request it reads.
  void SetTarget(std::string target);
};

// A response body delivered piece by piece (watch streams), implemented by the server.
// Thread-safe: any thread may write or close.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Queues one chunk. Returns false when the stream is closed (peer gone or Close() called);
  // the chunk is then dropped.
  virtual bool Write(std::string data) = 0;
  // Ends the response cleanly after the queued chunks. Idempotent.
  virtual void Close() = 0;
  virtual bool closed() const = 0;
  // Runs `callback` once when the stream ends for any reason (immediately if it already has).
  // The callback runs on a server thread and must not block.
  virtual void OnClosed(std::function<void()> callback) = 0;
};

struct Response {
  int status = 200;
  Headers headers;
  std::string body;
  // When set, the server sends the status and headers at once with chunked encoding and
  // hands the stream to this function (which must return quickly, keeping the stream).
  std::function<void(std::shared_ptr<ResponseStream>)> stream;
};

// Serves one request (the server calls it on a worker or I/O thread).
using Handler = std::function<Response(Request& request)>;

// Splits "a=1&b=x%20y" into decoded pairs; malformed escapes are kept verbatim.
std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view query);

}  // namespace klutch::http
