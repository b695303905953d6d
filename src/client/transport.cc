#include "client/transport.h"

#include <fmt/format.h>

#include <deque>
#include <vector>

namespace klutch::client {

// ---------------------------------------------------------------------------------------------
// StreamCanceller

void StreamCanceller::Cancel() {
  std::function<void()> disconnect;
  {
    core::MutexLock lock(mu_);
    cancelled_ = true;
    disconnect = disconnect_;
  }
  if (disconnect) disconnect();
}

bool StreamCanceller::cancelled() const {
  core::MutexLock lock(mu_);
  return cancelled_;
}

void StreamCanceller::Attach(std::function<void()> disconnect) {
  bool cancelled;
  {
    core::MutexLock lock(mu_);
    disconnect_ = disconnect;
    cancelled = cancelled_;
  }
  if (cancelled) disconnect();
}

void StreamCanceller::Detach() {
  core::MutexLock lock(mu_);
  disconnect_ = nullptr;
}

Transport::~Transport() = default;

namespace {

struct ServerUrl {
  bool tls = true;
  std::string host;
  uint16_t port = 443;
  std::string prefix;  // path prefix without a trailing slash
};

core::Result<ServerUrl> ParseServer(const std::string& server) {
  ServerUrl u;
  std::string_view rest = server;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    u.tls = false;
    u.port = 80;
    rest.remove_prefix(7);
  } else {
    return core::Invalid(fmt::format("server \"{}\": must start with https:// or http://", server));
  }
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    u.prefix = std::string(rest.substr(slash));
    while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
  }
  std::string_view port;
  if (authority.starts_with('[')) {  // [IPv6]:port
    auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return core::Invalid(fmt::format("server \"{}\": unterminated IPv6 address", server));
    }
    u.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return core::Invalid(fmt::format("server \"{}\": bad port", server));
      port = after.substr(1);
    }
  } else {
    auto colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return core::Invalid(fmt::format("server \"{}\": no host", server));
  if (!port.empty()) {
    int p = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || p > 65535) {
        return core::Invalid(fmt::format("server \"{}\": bad port \"{}\"", server, port));
      }
      p = p * 10 + (c - '0');
    }
    if (p <= 0 || p > 65535) {
      return core::Invalid(fmt::format("server \"{}\": bad port \"{}\"", server, port));
    }
    u.port = static_cast<uint16_t>(p);
  }
  return u;
}

// ---------------------------------------------------------------------------------------------
// HttpTransport

class HttpTransport final : public Transport {
 public:
  HttpTransport(const RestConfig& config, ServerUrl url) : config_(config), url_(std::move(url)) {}

  core::Result<http::ClientResponse> Do(const TransportRequest& req) override {
    std::unique_ptr<http::Client> conn = Acquire(req.cert_pem, req.key_pem);
    conn->set_timeout(req.timeout);
    auto r = conn->Do(req.method, req.target, req.headers, req.body);
    // A failed connection is dropped; a good one goes back to the pool.
    if (r.ok()) Release(std::move(conn), req.cert_pem);
    return r;
  }

  core::Result<http::ClientResponse> Stream(const TransportRequest& req,
                                            const std::function<bool(std::string_view)>& on_data,
                                            StreamCanceller* canceller) override {
    // A stream holds its connection for its lifetime: never one from the pool.
    http::ClientOptions co = Options(req.cert_pem, req.key_pem);
    co.timeout = req.timeout;
    co.stream_idle_timeout = req.idle_timeout;
    http::Client conn(co);
    if (canceller) canceller->Attach([&conn] { conn.Disconnect(); });
    auto r = conn.Stream(req.method, req.target, req.headers, on_data);
    if (canceller) canceller->Detach();
    return r;
  }

 private:
  http::ClientOptions Options(const std::string& cert_pem, const std::string& key_pem) const {
    http::ClientOptions o;
    o.host = url_.host;
    o.port = url_.port;
    o.tls = url_.tls;
    o.ca_pem = config_.ca_pem;
    o.cert_pem = cert_pem;
    o.key_pem = key_pem;
    o.insecure_skip_verify = config_.insecure_skip_tls_verify;
    o.server_name = config_.tls_server_name;
    o.timeout = config_.timeout;
    return o;
  }

  // Connections are keyed by the client certificate they present: when an exec plugin
  // hands out a new one, older connections are not reused.
  std::unique_ptr<http::Client> Acquire(const std::string& cert_pem, const std::string& key_pem) {
    {
      core::MutexLock lock(mu_);
      if (pool_cert_ != cert_pem) {
        pool_.clear();
        pool_cert_ = cert_pem;
      }
      if (!pool_.empty()) {
        auto c = std::move(pool_.back());
        pool_.pop_back();
        return c;
      }
    }
    return std::make_unique<http::Client>(Options(cert_pem, key_pem));
  }

  void Release(std::unique_ptr<http::Client> conn, const std::string& cert_pem) {
    core::MutexLock lock(mu_);
    if (pool_cert_ == cert_pem && pool_.size() < kMaxIdle) pool_.push_back(std::move(conn));
  }

  static constexpr size_t kMaxIdle = 16;
  const RestConfig config_;
  const ServerUrl url_;
  core::Mutex mu_;
  std::vector<std::unique_ptr<http::Client>> pool_ GUARDED_BY(mu_);
  std::string pool_cert_ GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------------------------
// InProcessTransport

// The server side of a streamed response in this process: the handler's writers push chunks,
// the client's thread pops them. Either side may end it; OnClosed callbacks run once, on the
// thread that ended it, with no lock held.
class InProcessStream final : public http::ResponseStream {
 public:
  bool Write(std::string data) override {
    {
      core::MutexLock lock(mu_);
      if (closed_) return false;
      chunks_.push_back(std::move(data));
    }
    cv_.SignalAll();
    return true;
  }
  void Close() override { End(/*by_server=*/true); }
  bool closed() const override {
    core::MutexLock lock(mu_);
    return closed_;
  }
  void OnClosed(std::function<void()> callback) override {
    {
      core::MutexLock lock(mu_);
      if (!callbacks_run_) {
        callbacks_.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }

  // The client went away (cancelled, stopped reading, idle).
  void Abort() { End(/*by_server=*/false); }

  enum class Next { kData, kEnded, kIdle };
  // Waits for the next chunk (moved into `out`) or the end; kIdle after `idle` (0 = never)
  // without either.
  Next Pop(std::string& out, std::chrono::milliseconds idle) {
    const auto deadline = core::CondVar::DeadlineAfter(idle);
    core::MutexLock lock(mu_);
    while (chunks_.empty() && !closed_) {
      if (idle.count() > 0) {
        if (!cv_.WaitUntil(mu_, deadline) && chunks_.empty() && !closed_) return Next::kIdle;
      } else {
        cv_.Wait(mu_);
      }
    }
    if (!chunks_.empty()) {
      out = std::move(chunks_.front());
      chunks_.pop_front();
      return Next::kData;
    }
    return Next::kEnded;
  }

  bool ended_by_server() const {
    core::MutexLock lock(mu_);
    return ended_by_server_;
  }

 private:
  void End(bool by_server) {
    std::vector<std::function<void()>> callbacks;
    {
      core::MutexLock lock(mu_);
      if (closed_) return;
      closed_ = true;
      ended_by_server_ = by_server;
      if (!by_server) chunks_.clear();
      callbacks_run_ = true;
      callbacks.swap(callbacks_);
    }
    cv_.SignalAll();
    for (auto& cb : callbacks) cb();
  }

  mutable core::Mutex mu_;
  core::CondVar cv_;
  std::deque<std::string> chunks_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  bool ended_by_server_ GUARDED_BY(mu_) = false;
  bool callbacks_run_ GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> callbacks_ GUARDED_BY(mu_);
};

class InProcessTransport final : public Transport {
 public:
  InProcessTransport(http::Handler handler, std::optional<http::ClientCertificate> identity)
      : handler_(std::move(handler)), identity_(std::move(identity)) {}

  core::Result<http::ClientResponse> Do(const TransportRequest& req) override {
    std::string body;
    auto r = Stream(
        req,
        [&body](std::string_view data) {
          body.append(data);
          return true;
        },
        nullptr);
    if (r.ok() && r->status >= 200 && r->status < 300) r->body = std::move(body);
    return r;
  }

  core::Result<http::ClientResponse> Stream(const TransportRequest& req,
                                            const std::function<bool(std::string_view)>& on_data,
                                            StreamCanceller* canceller) override {
    http::Request hreq;
    hreq.method = req.method;
    hreq.SetTarget(req.target);
    hreq.headers = req.headers;
    hreq.body = req.body;
    hreq.client_certificate = identity_;
    hreq.remote_address = "in-process";
    if (canceller && canceller->cancelled()) {
      return core::Unavailable("in-process stream cancelled before it started");
    }
    http::Response resp = handler_(hreq);
    http::ClientResponse out;
    out.status = resp.status;
    out.headers = std::move(resp.headers);
    const bool success = resp.status >= 200 && resp.status < 300;
    if (!resp.stream) {
      if (!success) {
        out.body = std::move(resp.body);
      } else if (!resp.body.empty()) {
        on_data(resp.body);
      }
      return out;
    }
    auto stream = std::make_shared<InProcessStream>();
    if (canceller) canceller->Attach([stream] { stream->Abort(); });
    resp.stream(stream);
    std::string chunk;
    while (true) {
      InProcessStream::Next next = stream->Pop(chunk, req.idle_timeout);
      if (next == InProcessStream::Next::kData) {
        if (!success) {
          out.body += chunk;
          continue;
        }
        if (!on_data(chunk)) {
          stream->Abort();
          out.complete = false;
          out.stream_error = "stream ended by the reader";
          break;
        }
        continue;
      }
      if (next == InProcessStream::Next::kIdle) {
        stream->Abort();
        out.complete = false;
        out.stream_error = fmt::format("no data for {} ms", req.idle_timeout.count());
        break;
      }
      if (!stream->ended_by_server()) {
        out.complete = false;
        out.stream_error = "stream aborted";
      }
      break;
    }
    if (canceller) canceller->Detach();
    return out;
  }

 private:
  const http::Handler handler_;
  const std::optional<http::ClientCertificate> identity_;
};

}  // namespace

core::Result<std::unique_ptr<Transport>> NewHttpTransport(const RestConfig& config) {
  KLUTCH_ASSIGN_OR_RETURN(ServerUrl url, ParseServer(config.server));
  return std::unique_ptr<Transport>(new HttpTransport(config, std::move(url)));
}

std::unique_ptr<Transport> NewInProcessTransport(http::Handler handler,
                                                 std::optional<http::ClientCertificate> identity) {
  return std::make_unique<InProcessTransport>(std::move(handler), std::move(identity));
}

core::Result<std::string> ServerPathPrefix(const std::string& server) {
  KLUTCH_ASSIGN_OR_RETURN(ServerUrl url, ParseServer(server));
  return url.prefix;
}

}  // namespace klutch::client
