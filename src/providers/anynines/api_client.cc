#include "providers/anynines/api_client.h"

#include <fmt/format.h>

#include "client/kubeconfig.h"
#include "client/transport.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::providers::anynines {
namespace {

// details().kind of the three error families; nothing else in the project uses these kinds.
constexpr std::string_view kServiceErrorKind = "anynines.ServiceError";
constexpr std::string_view kUnreachableKind = "anynines.Unreachable";
constexpr std::string_view kUserErrorKind = "anynines.UserError";

bool HasKind(const core::Status& s, std::string_view kind) {
  return !s.ok() && s.details() && s.details()->kind == kind;
}

std::string TrimSlashes(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

}  // namespace

std::string PathSegment(std::string_view value) { return core::PercentEncode(value); }

ApiClient::ApiClient(ServiceEndpoint endpoint, std::string what, http::Headers headers,
                     std::string prefix, std::unique_ptr<client::Transport> transport)
    : endpoint_(std::move(endpoint)),
      what_(std::move(what)),
      headers_(std::move(headers)),
      url_(TrimSlashes(endpoint_.url)),
      prefix_(std::move(prefix)),
      transport_(std::move(transport)) {}

ApiClient::~ApiClient() = default;

core::Result<std::unique_ptr<ApiClient>> ApiClient::New(ServiceEndpoint endpoint, std::string what,
                                                        http::Headers headers) {
  std::string url = TrimSlashes(endpoint.url);
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    return UserError(fmt::format("url \"{}\": must start with http:// or https://", endpoint.url));
  }
  if (!endpoint.ca_pem.empty() && endpoint.insecure_skip_verify) {
    return UserError("tls: a CA bundle and insecureSkipVerify cannot be used together; choose one");
  }
  if (!endpoint.ca_pem.empty() &&
      endpoint.ca_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return UserError("failed to parse CA certificate");
  }
  auto prefix = client::ServerPathPrefix(url);
  if (!prefix.ok()) return UserError(prefix.status().message());
  client::RestConfig config;
  config.server = url;
  config.ca_pem = endpoint.ca_pem;
  config.insecure_skip_tls_verify = endpoint.insecure_skip_verify;
  config.tls_server_name = endpoint.server_name;
  config.timeout = endpoint.timeout;
  auto transport = client::NewHttpTransport(config);
  if (!transport.ok()) return UserError(transport.status().message());
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(endpoint), std::move(what),
                                                  std::move(headers), std::move(*prefix),
                                                  std::move(*transport)));
}

core::Result<ApiResponse> ApiClient::Send(std::string_view method, const std::string& path,
                                          const Json& body) const {
  client::TransportRequest req;
  req.method = std::string(method);
  req.target = prefix_ + path;
  req.headers = headers_;
  req.headers.Set("Accept", "application/json");
  req.headers.Set("User-Agent", "klutch-provider-anynines");
  if (!endpoint_.username.empty() || !endpoint_.password.empty()) {
    req.headers.Set("Authorization",
                    "Basic " + core::Base64Encode(endpoint_.username + ":" + endpoint_.password));
  }
  if (!body.is_null()) {
    req.headers.Set("Content-Type", "application/json");
    req.body = machinery::Dump(body);
  }
  req.timeout = endpoint_.timeout;
  auto r = transport_->Do(req);
  if (!r.ok()) return Unreachable(what_, url_, r.status().message());
  ApiResponse out;
  out.status = r->status;
  out.body = std::move(r->body);
  return out;
}

core::Result<ApiResponse> ApiClient::Do(std::string_view method, const std::string& path,
                                        const Json& body, bool allow_empty) const {
  KLUTCH_ASSIGN_OR_RETURN(ApiResponse r, Send(method, path, body));
  if (r.status < 200 || r.status > 299) {
    return ServiceError(r.status, method, url_ + path, r.body);
  }
  if (core::Trim(r.body).empty()) {
    if (allow_empty) return r;
    return core::Internal(
        fmt::format("{} {}{}: empty answer where JSON was expected", method, url_, path));
  }
  auto parsed = machinery::ParseJson(r.body);
  if (!parsed.ok()) {
    return core::Internal(fmt::format("{} {}{}: answer is not JSON: {}", method, url_, path,
                                      parsed.status().message()));
  }
  r.json = std::move(*parsed);
  return r;
}

core::Result<ApiResponse> ApiClient::Probe(std::string_view method, const std::string& path) const {
  return Send(method, path, nullptr);
}

// --- errors -----------------------------------------------------------------------------------

core::Status ServiceError(int http_status, std::string_view method, std::string_view url,
                          std::string_view body) {
  std::string code, description;
  auto parsed = machinery::ParseJson(body);
  if (parsed.ok() && parsed->is_object()) {
    code = machinery::GetString(*parsed, {"error"});
    description = machinery::GetString(*parsed, {"description"});
  }
  std::string message = fmt::format("{} {}: HTTP {}", method, url, http_status);
  if (!code.empty()) message += " " + code;
  if (!description.empty()) {
    message += ": " + description;
  } else if (!core::Trim(body).empty() && !parsed.ok()) {
    message += ": " + std::string(core::Trim(body.substr(0, 200)));
  }
  core::Status s(core::Reason::kUnknown, std::move(message));
  s.set_code(http_status);
  core::Details& d = s.mutable_details();
  d.kind = std::string(kServiceErrorKind);
  d.causes.push_back({.reason = code, .message = description, .field = ""});
  return s;
}

bool IsServiceError(const core::Status& status) { return HasKind(status, kServiceErrorKind); }

int ServiceErrorStatus(const core::Status& status) {
  return IsServiceError(status) ? status.code() : 0;
}

std::string ServiceErrorCode(const core::Status& status) {
  if (!IsServiceError(status) || status.details()->causes.empty()) return "";
  return status.details()->causes.front().reason;
}

std::string ServiceErrorDescription(const core::Status& status) {
  if (!IsServiceError(status) || status.details()->causes.empty()) return "";
  return status.details()->causes.front().message;
}

core::Status Unreachable(std::string_view what, std::string_view url, std::string_view problem) {
  core::Status s(core::Reason::kServiceUnavailable,
                 fmt::format("the {} at {} is unreachable: {}", what, url, problem));
  s.mutable_details().kind = std::string(kUnreachableKind);
  s.mutable_details().name = std::string(url);
  return s;
}

bool IsUnreachable(const core::Status& status) { return HasKind(status, kUnreachableKind); }

core::Status UserError(std::string message) {
  core::Status s(core::Reason::kBadRequest, std::move(message));
  s.mutable_details().kind = std::string(kUserErrorKind);
  return s;
}

bool IsUserError(const core::Status& status) { return HasKind(status, kUserErrorKind); }

std::string UserMessage(const core::Status& status, bool& internal) {
  internal = false;
  if (IsServiceError(status)) {
    int code = status.code();
    std::string description = ServiceErrorDescription(status);
    if (code >= 400 && code <= 499 && !description.empty()) return description;
    if (code == 401 || code == 403) {
      // The URL is the part of the message before ": HTTP".
      std::string_view m = status.message();
      auto cut = m.find(": HTTP");
      return fmt::format("the service refused the ProviderConfig's credentials (HTTP {}) at {}",
                         code, cut == std::string_view::npos ? m : m.substr(0, cut));
    }
  } else if (IsUnreachable(status)) {
    return status.message();
  } else if (IsUserError(status)) {
    return status.message();
  }
  internal = true;
  return std::string(kInternalErrorMessage);
}

}  // namespace klutch::providers::anynines
