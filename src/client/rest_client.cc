#include "client/rest_client.h"

#include <fmt/format.h>

#include <random>
#include <thread>

#include "client/credentials.h"
#include "client/workqueue.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::client {

namespace {

bool IsReadVerb(std::string_view verb) { return verb == "GET" || verb == "HEAD"; }

// The status a non-2xx response stands for: the server's metav1.Status when it sent one.
core::Status ErrorFromResponse(const Request& req, int code, const std::string& body) {
  Json parsed = Json::parse(body, nullptr, false);
  if (parsed.is_object() && machinery::GetString(parsed, {"kind"}) == "Status") {
    core::Status st = machinery::StatusFromJson(parsed);
    if (!st.ok()) return st.set_code(code);
  }
  core::Reason reason = core::Reason::kUnknown;
  switch (code) {
    case 400:
      reason = core::Reason::kBadRequest;
      break;
    case 401:
      reason = core::Reason::kUnauthorized;
      break;
    case 403:
      reason = core::Reason::kForbidden;
      break;
    case 404:
      reason = core::Reason::kNotFound;
      break;
    case 405:
      reason = core::Reason::kMethodNotAllowed;
      break;
    case 406:
      reason = core::Reason::kNotAcceptable;
      break;
    case 409:
      reason = core::Reason::kConflict;
      break;
    case 410:
      reason = core::Reason::kGone;
      break;
    case 413:
      reason = core::Reason::kRequestEntityTooLarge;
      break;
    case 415:
      reason = core::Reason::kUnsupportedMediaType;
      break;
    case 422:
      reason = core::Reason::kInvalid;
      break;
    case 429:
      reason = core::Reason::kTooManyRequests;
      break;
    case 500:
      reason = core::Reason::kInternalError;
      break;
    case 503:
      reason = core::Reason::kServiceUnavailable;
      break;
    case 504:
      reason = core::Reason::kTimeout;
      break;
    default:
      break;
  }
  std::string excerpt = body.substr(0, 200);
  core::Status st(reason, fmt::format("{} {}: the server responded with {}{}{}", req.verb, req.path,
                                      code, excerpt.empty() ? "" : ": ", excerpt));
  return st.set_code(code);
}

// Seconds from a Retry-After header (delta-seconds form); 0 when absent or malformed.
int RetryAfterSeconds(const http::Headers& headers) {
  std::string_view v = headers.Get("Retry-After");
  if (v.empty() || v.size() > 6) return 0;
  int s = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return 0;
    s = s * 10 + (c - '0');
  }
  return s;
}

}  // namespace

class RestClient::Impl {
 public:
  Impl(RestConfig config, RestClientOptions options, std::string prefix,
       std::shared_ptr<Transport> transport, std::unique_ptr<Credentials> credentials)
      : config_(std::move(config)),
        options_(std::move(options)),
        observer_(options_.on_request),
        prefix_(std::move(prefix)),
        transport_(std::move(transport)),
        credentials_(std::move(credentials)),
        throttle_(config_.qps > 0 ? NewBucketRateLimiter(config_.qps, std::max(1, config_.burst))
                                  : nullptr) {}

  const RestConfig& config() const { return config_; }
  std::shared_ptr<Transport> transport() const { return transport_; }

  core::Result<Response> Do(const Request& req) {
    std::string target = Target(req);
    bool refreshed_credentials = false;
    for (int attempt = 0;; ++attempt) {
      Throttle();
      KLUTCH_ASSIGN_OR_RETURN(AuthMaterial auth, credentials_->Current());
      TransportRequest treq = Prepare(req, target, auth);
      auto started = std::chrono::steady_clock::now();
      auto r = transport_->Do(treq);
      double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (!r.ok()) {
        Observe(req.verb, 0, secs);
        // The connection is dropped. Safe to retry: reads, and anything whose connection
        // could not even be opened (nothing was sent).
        const std::string& m = r.status().message();
        bool not_sent = m.starts_with("connect ") || m.starts_with("resolve ") ||
                        m.starts_with("TLS handshake ");
        if ((IsReadVerb(req.verb) || not_sent) && attempt < options_.max_retries) {
          Sleep(Backoff(attempt, 0));
          continue;
        }
        core::Status st = r.status();
        return st.Annotate(fmt::format("{} {}", req.verb, req.path));
      }
      Observe(req.verb, r->status, secs);
      if (r->status >= 200 && r->status < 300) {
        return Response{r->status, std::move(r->headers), std::move(r->body)};
      }
      if (r->status == 401 && !refreshed_credentials) {
        // Expired exec credentials or a rotated token: fetch fresh ones, once.
        refreshed_credentials = true;
        if (!credentials_->IsDynamic()) return ErrorFromResponse(req, r->status, r->body);
        credentials_->Invalidate(auth);
        continue;
      }
      int retry_after = RetryAfterSeconds(r->headers);
      bool retry = r->status == 429 || (r->status >= 500 && retry_after > 0) ||
                   (IsReadVerb(req.verb) &&
                    (r->status == 500 || r->status == 502 || r->status == 503 || r->status == 504));
      if (retry && attempt < options_.max_retries) {
        Sleep(Backoff(attempt, retry_after));
        continue;
      }
      return ErrorFromResponse(req, r->status, r->body);
    }
  }

  core::Result<StreamEnd> Stream(const Request& req,
                                 const std::function<bool(std::string_view)>& on_data,
                                 StreamCanceller* canceller) {
    Throttle();
    KLUTCH_ASSIGN_OR_RETURN(AuthMaterial auth, credentials_->Current());
    TransportRequest treq = Prepare(req, Target(req), auth);
    treq.idle_timeout =
        req.idle_timeout.count() > 0 ? req.idle_timeout : options_.stream_idle_timeout;
    if (canceller && canceller->cancelled()) {
      StreamEnd end;
      end.cancelled = true;
      end.complete = false;
      return end;
    }
    auto r = transport_->Stream(treq, on_data, canceller);
    if (!r.ok()) {
      if (canceller && canceller->cancelled()) {
        StreamEnd end;
        end.cancelled = true;
        end.complete = false;
        return end;
      }
      core::Status st = r.status();
      return st.Annotate(fmt::format("{} {}", req.verb, req.path));
    }
    if (r->status == 401) credentials_->Invalidate(auth);
    StreamEnd end;
    end.status = r->status;
    end.complete = r->complete;
    end.error = r->stream_error;
    end.cancelled = canceller && canceller->cancelled();
    end.body = std::move(r->body);
    return end;
  }

  void SetRequestObserver(RequestObserver observer) {
    core::MutexLock lock(observer_mu_);
    observer_ = std::move(observer);
  }

 private:
  void Observe(std::string_view verb, int code, double secs) {
    RequestObserver o;
    {
      core::MutexLock lock(observer_mu_);
      o = observer_;
    }
    if (o) o(verb, code, secs);
  }

  std::string Target(const Request& req) const {
    std::string t = prefix_ + req.path;
    char sep = '?';
    for (const auto& [k, v] : req.query) {
      t += sep;
      t += core::PercentEncode(k);
      t += '=';
      t += core::PercentEncode(v);
      sep = '&';
    }
    return t;
  }

  TransportRequest Prepare(const Request& req, std::string target, const AuthMaterial& auth) const {
    TransportRequest t;
    t.method = req.verb;
    t.target = std::move(target);
    t.headers = Headers(req, auth);
    t.body = req.body;
    t.timeout = config_.timeout;
    t.cert_pem = auth.cert_pem;
    t.key_pem = auth.key_pem;
    return t;
  }

  http::Headers Headers(const Request& req, const AuthMaterial& auth) const {
    http::Headers h;
    h.Set("Accept", req.accept);
    h.Set("User-Agent", config_.user_agent);
    if (!req.body.empty() || req.verb == "POST" || req.verb == "PUT" || req.verb == "PATCH") {
      h.Set("Content-Type", req.content_type);
    }
    if (!config_.impersonate_user.empty()) h.Set("Impersonate-User", config_.impersonate_user);
    if (!config_.impersonate_uid.empty()) h.Set("Impersonate-Uid", config_.impersonate_uid);
    for (const auto& g : config_.impersonate_groups) h.Add("Impersonate-Group", g);
    if (!auth.bearer_token.empty()) {
      h.Set("Authorization", "Bearer " + auth.bearer_token);
    } else if (!auth.username.empty()) {
      h.Set("Authorization", "Basic " + core::Base64Encode(auth.username + ":" + auth.password));
    }
    return h;
  }

  void Throttle() {
    if (!throttle_) return;
    std::chrono::nanoseconds wait;
    {
      core::MutexLock lock(throttle_mu_);
      wait = throttle_->When("");
    }
    if (wait.count() > 0) std::this_thread::sleep_for(wait);
  }

  std::chrono::milliseconds Backoff(int attempt, int retry_after_seconds) {
    if (retry_after_seconds > 0) {
      return std::min<std::chrono::milliseconds>(std::chrono::seconds(retry_after_seconds),
                                                 options_.max_backoff);
    }
    auto base = options_.initial_backoff * (1LL << std::min(attempt, 16));
    base = std::min<std::chrono::milliseconds>(base, options_.max_backoff);
    // Full jitter on the upper half, so clients that failed together do not retry together.
    core::MutexLock lock(rng_mu_);
    std::uniform_int_distribution<int64_t> d(base.count() / 2, std::max<int64_t>(1, base.count()));
    return std::chrono::milliseconds(d(rng_));
  }

  static void Sleep(std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }

  core::Mutex observer_mu_;
  RestConfig config_;
  const RestClientOptions options_;
  RequestObserver observer_ GUARDED_BY(observer_mu_);
  const std::string prefix_;
  const std::shared_ptr<Transport> transport_;
  std::unique_ptr<Credentials> credentials_;
  core::Mutex throttle_mu_;
  std::unique_ptr<RateLimiter> throttle_ PT_GUARDED_BY(throttle_mu_);
  core::Mutex rng_mu_;
  std::mt19937_64 rng_ GUARDED_BY(rng_mu_){std::random_device{}()};
};

core::Result<std::unique_ptr<RestClient>> RestClient::New(RestConfig config,
                                                          RestClientOptions options) {
  KLUTCH_ASSIGN_OR_RETURN(std::string prefix, ServerPathPrefix(config.server));
  std::shared_ptr<Transport> transport = options.transport;
  if (!transport) {
    KLUTCH_ASSIGN_OR_RETURN(std::unique_ptr<Transport> http, NewHttpTransport(config));
    transport = std::move(http);
  }
  KLUTCH_ASSIGN_OR_RETURN(std::unique_ptr<Credentials> creds, Credentials::For(config));
  auto impl = std::make_unique<Impl>(std::move(config), std::move(options), std::move(prefix),
                                     std::move(transport), std::move(creds));
  return std::unique_ptr<RestClient>(new RestClient(std::move(impl)));
}

RestClient::RestClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RestClient::~RestClient() = default;

core::Result<Response> RestClient::Do(const Request& request) { return impl_->Do(request); }

core::Result<Json> RestClient::DoJson(const Request& request) {
  KLUTCH_ASSIGN_OR_RETURN(Response r, impl_->Do(request));
  Json j = Json::parse(r.body, nullptr, false);
  if (j.is_discarded()) {
    return core::Internal(fmt::format("{} {}: the response is not JSON: {}", request.verb,
                                      request.path, r.body.substr(0, 120)));
  }
  return j;
}

core::Result<StreamEnd> RestClient::Stream(const Request& request,
                                           const std::function<bool(std::string_view)>& on_data,
                                           StreamCanceller* canceller) {
  return impl_->Stream(request, on_data, canceller);
}

const RestConfig& RestClient::config() const { return impl_->config(); }

std::shared_ptr<Transport> RestClient::transport() const { return impl_->transport(); }

void RestClient::SetRequestObserver(RequestObserver observer) {
  impl_->SetRequestObserver(std::move(observer));
}

}  // namespace klutch::client
