#include "http/client.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

#include "core/sync.h"
#include "fmt/format.h"

namespace klutch::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

class Client::Impl {
 public:
  explicit Impl(ClientOptions options)
      : options_(std::move(options)), ssl_ctx_(asio::ssl::context::tls_client) {}

  core::Status Setup() {
    if (setup_done_) return core::Status::Ok();
    if (options_.tls) {
      try {
        if (options_.ca_pem.empty()) {
          ssl_ctx_.set_default_verify_paths();
        } else {
          ssl_ctx_.add_certificate_authority(asio::buffer(options_.ca_pem));
        }
        if (!options_.cert_pem.empty()) {
          ssl_ctx_.use_certificate_chain(asio::buffer(options_.cert_pem));
          ssl_ctx_.use_private_key(asio::buffer(options_.key_pem), asio::ssl::context::pem);
        }
        ssl_ctx_.set_verify_mode(options_.insecure_skip_verify ? asio::ssl::verify_none
                                                               : asio::ssl::verify_peer);
      } catch (const boost::system::system_error& e) {
        return core::BadRequest(fmt::format("invalid TLS material: {}", e.what()));
      }
    }
    setup_done_ = true;
    return core::Status::Ok();
  }

  // Runs one asynchronous operation to completion on this thread. Beast's stream timeouts
  // (expires_after) only apply to asynchronous operations, so every blocking call of this
  // client is an async operation driven here.
  template <typename Start>
  boost::system::error_code RunOp(Start&& start) {
    boost::system::error_code result = asio::error::would_block;
    bool done = false;
    start([&](boost::system::error_code ec, auto&&...) {
      result = ec;
      done = true;
    });
    ioc_.restart();
    while (!done && ioc_.run_one() > 0) {
    }
    return result;
  }

  core::Status Connect() {
    KLUTCH_RETURN_IF_ERROR(Setup());
    Close();
    boost::system::error_code ec;
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(options_.host, std::to_string(options_.port), ec);
    if (ec) return Fail("resolve", ec);
    {
      core::MutexLock lock(mu_);
      if (options_.tls) {
        tls_.emplace(ioc_, ssl_ctx_);
      } else {
        plain_.emplace(ioc_);
      }
    }
    auto& lowest = Lowest();
    lowest.expires_after(options_.timeout);
    ec = RunOp([&](auto h) { lowest.async_connect(results, std::move(h)); });
    if (ec) return Fail("connect", ec);
    if (options_.tls) {
      std::string name = options_.server_name.empty() ? options_.host : options_.server_name;
      if (!options_.insecure_skip_verify) {
        tls_->set_verify_callback(asio::ssl::host_name_verification(name));
      }
      SSL_set_tlsext_host_name(tls_->native_handle(), name.c_str());
      ec = RunOp(
          [&](auto h) { tls_->async_handshake(asio::ssl::stream_base::client, std::move(h)); });
      if (ec) return Fail("TLS handshake", ec);
    }
    connected_ = true;
    return core::Status::Ok();
  }

  void Close() {
    core::MutexLock lock(mu_);
    boost::system::error_code ec;
    if (tls_) beast::get_lowest_layer(*tls_).socket().close(ec);
    if (plain_) plain_->socket().close(ec);
    connected_ = false;
  }

  // Called from any thread. While a Stream() runs, the cut is posted to the streaming
  // thread's io_context (the only thread-safe way in); otherwise the next request simply
  // starts on a fresh connection.
  void Disconnect() {
    core::MutexLock lock(mu_);
    if (streaming_) {
      uint64_t gen = stream_gen_;
      asio::post(ioc_, [this, gen] {
        core::MutexLock inner(mu_);
        if (!streaming_ || gen != stream_gen_) return;
        boost::system::error_code ec;
        if (tls_) beast::get_lowest_layer(*tls_).socket().shutdown(tcp::socket::shutdown_both, ec);
        if (plain_) plain_->socket().shutdown(tcp::socket::shutdown_both, ec);
        if (tls_) beast::get_lowest_layer(*tls_).cancel();
        if (plain_) plain_->cancel();
      });
    } else {
      disconnect_requested_ = true;
    }
  }

  beast::tcp_stream& Lowest() { return tls_ ? beast::get_lowest_layer(*tls_) : *plain_; }

  core::Status Fail(std::string_view what, const boost::system::error_code& ec) {
    connected_ = false;
    std::string reason = ec == beast::error::timeout
                             ? fmt::format("timed out after {} ms", options_.timeout.count())
                             : ec.message();
    return core::Unavailable(
        fmt::format("{} {}:{}: {}", what, options_.host, options_.port, reason));
  }

  bhttp::request<bhttp::string_body> Build(std::string_view method, std::string_view target,
                                           const Headers& headers, std::string body) {
    bhttp::request<bhttp::string_body> req;
    req.method_string(method);
    req.target(target);
    req.version(11);
    req.set(bhttp::field::host, options_.host + ":" + std::to_string(options_.port));
    for (const auto& [k, v] : headers.items()) req.set(k, v);
    req.keep_alive(true);
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
  }

  template <typename F>
  core::Result<ClientResponse> WithStream(F&& f) {
    if (tls_) return f(*tls_);
    return f(*plain_);
  }

  bool TakeDisconnectRequest() {
    core::MutexLock lock(mu_);
    bool r = disconnect_requested_;
    disconnect_requested_ = false;
    return r;
  }

  core::Result<ClientResponse> Do(std::string_view method, std::string_view target,
                                  const Headers& headers, std::string body) {
    if (TakeDisconnectRequest()) Close();
    // One retry on a stale keep-alive connection (the server may have closed it): when the
    // request could not be written or the connection closed with no response at all, and
    // after any other failed read only for idempotent methods, which may be seen twice.
    // Like Go's transport: only reads are replayed after a failed read; a PUT or DELETE
    // that took effect would come back as a confusing Conflict or NotFound.
    const bool idempotent = method == "GET" || method == "HEAD" || method == "OPTIONS";
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool reused = connected_;
      bool written = false;
      bool closed_idle = false;
      if (!connected_) KLUTCH_RETURN_IF_ERROR(Connect());
      auto req = Build(method, target, headers, body);
      auto r = WithStream([&](auto& s) -> core::Result<ClientResponse> {
        Lowest().expires_after(options_.timeout);
        auto ec = RunOp([&](auto h) { bhttp::async_write(s, req, std::move(h)); });
        if (ec) return Fail("write", ec);
        written = true;
        beast::flat_buffer buffer;
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(1024ull * 1024 * 1024);
        if (method == "HEAD") parser.skip(true);  // Content-Length without a body follows
        ec = RunOp([&](auto h) { bhttp::async_read(s, buffer, parser, std::move(h)); });
        if (ec) {
          // The server closed the idle connection before reading the request: no byte of a
          // response came back, so it was not processed and any method may be sent again.
          closed_idle =
              buffer.size() == 0 && !parser.got_some() &&
              (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
               ec == asio::error::connection_reset || ec == asio::ssl::error::stream_truncated);
          return Fail("read", ec);
        }
        auto msg = parser.release();
        ClientResponse out;
        out.status = static_cast<int>(msg.result_int());
        for (const auto& f : msg)
          out.headers.Add(std::string(f.name_string()), std::string(f.value()));
        out.body = std::move(msg.body());
        if (!msg.keep_alive()) Close();
        return out;
      });
      if (r.ok() || !reused || (written && !idempotent && !closed_idle)) return r;
    }
    return core::Unavailable("unreachable");
  }

  core::Result<ClientResponse> Stream(std::string_view method, std::string_view target,
                                      const Headers& headers,
                                      const std::function<bool(std::string_view)>& on_data) {
    if (!connected_) KLUTCH_RETURN_IF_ERROR(Connect());
    {
      core::MutexLock lock(mu_);
      if (disconnect_requested_) {
        // Cancelled while connecting: do not start the stream at all.
        disconnect_requested_ = false;
        boost::system::error_code ec;
        if (tls_) beast::get_lowest_layer(*tls_).socket().close(ec);
        if (plain_) plain_->socket().close(ec);
        connected_ = false;
        ClientResponse cut;
        cut.complete = false;
        cut.stream_error = "disconnected before the stream started";
        return cut;
      }
      streaming_ = true;
      ++stream_gen_;
    }
    auto result = StreamOn(method, target, headers, on_data);
    {
      core::MutexLock lock(mu_);
      streaming_ = false;
    }
    return result;
  }

  core::Result<ClientResponse> StreamOn(std::string_view method, std::string_view target,
                                        const Headers& headers,
                                        const std::function<bool(std::string_view)>& on_data) {
    auto req = Build(method, target, headers, {});
    return WithStream([&](auto& s) -> core::Result<ClientResponse> {
      Lowest().expires_after(options_.timeout);
      auto ec = RunOp([&](auto h) { bhttp::async_write(s, req, std::move(h)); });
      if (ec) return Fail("write", ec);
      beast::flat_buffer buffer;
      bhttp::response_parser<bhttp::buffer_body> parser;
      parser.body_limit(boost::none);
      ec = RunOp([&](auto h) { bhttp::async_read_header(s, buffer, parser, std::move(h)); });
      if (ec) return Fail("read", ec);
      ClientResponse out;
      out.status = static_cast<int>(parser.get().result_int());
      for (const auto& f : parser.get()) {
        out.headers.Add(std::string(f.name_string()), std::string(f.value()));
      }
      const bool success = out.status >= 200 && out.status < 300;
      std::array<char, 16384> chunk;
      while (!parser.is_done()) {
        // A stream may be quiet for long; only an idle limit, when set, ends it.
        if (options_.stream_idle_timeout.count() > 0) {
          Lowest().expires_after(options_.stream_idle_timeout);
        } else {
          Lowest().expires_never();
        }
        parser.get().body().data = chunk.data();
        parser.get().body().size = chunk.size();
        ec = RunOp([&](auto h) { bhttp::async_read_some(s, buffer, parser, std::move(h)); });
        if (ec == bhttp::error::need_buffer) ec = {};
        size_t n = chunk.size() - parser.get().body().size;
        if (!success) {
          // An error response (a metav1.Status): kept for the caller, not streamed.
          if (out.body.size() < kMaxErrorBody) out.body.append(chunk.data(), n);
        } else if (n > 0 && !on_data(std::string_view(chunk.data(), n))) {
          Close();
          return out;
        }
        if (ec) {
          Close();
          out.complete = false;  // cut before the server ended the body
          out.stream_error =
              ec == beast::error::timeout
                  ? fmt::format("no data for {} ms", options_.stream_idle_timeout.count())
                  : ec.message();
          return out;
        }
      }
      if (!parser.keep_alive()) Close();
      return out;
    });
  }

  void set_timeout(std::chrono::milliseconds timeout) { options_.timeout = timeout; }

 private:
  static constexpr size_t kMaxErrorBody = 1 << 20;
  ClientOptions options_;
  asio::io_context ioc_;
  asio::ssl::context ssl_ctx_;
  // Orders socket creation, close and shutdown against a concurrent Disconnect(). The sockets
  // themselves are used by the owning thread only (Disconnect's shutdown is posted to it), so
  // they are not GUARDED_BY.
  core::Mutex mu_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
  std::optional<beast::tcp_stream> plain_;
  bool connected_ = false;
  bool setup_done_ = false;
  bool streaming_ GUARDED_BY(mu_) = false;
  uint64_t stream_gen_ GUARDED_BY(mu_) = 0;
  bool disconnect_requested_ GUARDED_BY(mu_) = false;
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;

core::Result<ClientResponse> Client::Do(std::string_view method, std::string_view target,
                                        const Headers& headers, std::string body) {
  return impl_->Do(method, target, headers, std::move(body));
}

core::Result<ClientResponse> Client::Stream(std::string_view method, std::string_view target,
                                            const Headers& headers,
                                            const std::function<bool(std::string_view)>& on_data) {
  return impl_->Stream(method, target, headers, on_data);
}

void Client::Disconnect() { impl_->Disconnect(); }

void Client::set_timeout(std::chrono::milliseconds timeout) { impl_->set_timeout(timeout); }

}  // namespace klutch::http
