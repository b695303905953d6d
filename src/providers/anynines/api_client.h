// The HTTP layer shared by the Open Service Broker client (osb_client.h) and the a9s Backup
// Manager client (backup_client.h): where a service lives and how to authenticate to it
// (ServiceEndpoint), one JSON request at a time over a pool of keep-alive connections
// (ApiClient), and errors as values that keep what the service answered.
//
// Error vocabulary (data-services.md §4.8, §6.1), all core::Status:
//  * ServiceError: the service answered with a non-2xx status. code() is that HTTP status;
//    ServiceErrorCode() is the body's `error` (the OSB machine code, e.g. "InstanceNotFound"),
//    ServiceErrorDescription() its `description`. Reason kUnknown, so that no Kubernetes
//    meaning (NotFound, Conflict) is read into a broker's answer by accident.
//  * Unreachable: no answer at all (connect, TLS, timeout); the message names the URL.
//  * UserError: a problem the user can fix (a name not in the catalog, a ProviderConfig field),
//    shown verbatim.
// UserMessage() turns any of them into what the managed resource's Synced condition says.
//
// ApiClient is thread-safe: any number of threads may send requests at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "http/message.h"
#include "machinery/json.h"

namespace klutch::client {
class Transport;
}

namespace klutch::providers::anynines {

using machinery::Json;

// How to reach a broker or backup manager (a ProviderConfig, resolved).
struct ServiceEndpoint {
  std::string url;                 // http(s)://host[:port][/prefix]; a trailing '/' is ignored
  std::string username, password;  // HTTP basic auth; both empty: none
  std::string ca_pem;              // trusted CA bundle (PEM); empty: the system's
  bool insecure_skip_verify = false;
  std::string server_name;  // TLS server name to verify instead of the URL's host
  // Bounds one request: connecting, sending and reading the whole answer.
  std::chrono::milliseconds timeout{60000};
  bool operator==(const ServiceEndpoint&) const = default;
};

struct ApiResponse {
  int status = 0;
  std::string body;
  Json json;  // the parsed body; null when the body is empty
};

class ApiClient {
 public:
  // `headers` go with every request (e.g. X-Broker-API-Version). kInvalid (a UserError)
  // when the URL is not http(s)://, when a CA bundle and insecure_skip_verify are both set,
  // or when the CA bundle holds no PEM certificate ("failed to parse CA certificate").
  // `what` names the service in messages ("service broker", "backup manager").
  static core::Result<std::unique_ptr<ApiClient>> New(ServiceEndpoint endpoint, std::string what,
                                                      http::Headers headers = {});
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // Sends `method` to `path` (with its query, below the URL) with basic auth, the client's
  // headers and, when `body` is not null, `body` as JSON. A 2xx answer whose body is not
  // JSON is kInternalError; a non-2xx answer a ServiceError; no answer Unreachable.
  // `allow_empty` lets a 2xx answer have an empty body (json stays null).
  core::Result<ApiResponse> Do(std::string_view method, const std::string& path,
                               const Json& body = nullptr, bool allow_empty = true) const;
  // Like Do but hands back any answer with its status (only transport failures are
  // errors), without parsing the body: health checks.
  core::Result<ApiResponse> Probe(std::string_view method, const std::string& path) const;

  const ServiceEndpoint& endpoint() const { return endpoint_; }
  // The base URL without a trailing '/'.
  const std::string& url() const { return url_; }

 private:
  ApiClient(ServiceEndpoint endpoint, std::string what, http::Headers headers, std::string prefix,
            std::unique_ptr<client::Transport> transport);
  core::Result<ApiResponse> Send(std::string_view method, const std::string& path,
                                 const Json& body) const;

  const ServiceEndpoint endpoint_;
  const std::string what_;
  const http::Headers headers_;
  const std::string url_;
  const std::string prefix_;  // the URL's path, prepended to every request path
  std::unique_ptr<client::Transport> transport_;
};

// A path segment, percent-encoded.
std::string PathSegment(std::string_view value);

// --- errors -----------------------------------------------------------------------------------

// A non-2xx answer of `method url`; `body` parsed for `error` and `description` when JSON.
core::Status ServiceError(int http_status, std::string_view method, std::string_view url,
                          std::string_view body);
bool IsServiceError(const core::Status& status);
// The HTTP status of a ServiceError, 0 for anything else.
int ServiceErrorStatus(const core::Status& status);
std::string ServiceErrorCode(const core::Status& status);
std::string ServiceErrorDescription(const core::Status& status);

// "the <what> at <url> is unreachable: <problem>".
core::Status Unreachable(std::string_view what, std::string_view url, std::string_view problem);
bool IsUnreachable(const core::Status& status);

core::Status UserError(std::string message);
bool IsUserError(const core::Status& status);

// What a user is told about `status` (§4.8): a ServiceError with status 400-499 and a
// description -> the description verbatim; a 401/403 without one -> that the service at the
// URL refused the ProviderConfig's credentials; Unreachable -> that the service at the URL
// cannot be reached, and why; a UserError -> its message. Anything else -> "Internal error in
// provider", with `internal` set so that the caller logs the real error.
std::string UserMessage(const core::Status& status, bool& internal);
inline constexpr std::string_view kInternalErrorMessage = "Internal error in provider";

}  // namespace klutch::providers::anynines
