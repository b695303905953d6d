#include "http/server.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "core/strings.h"
#include "core/sync.h"
#include "fmt/format.h"
#include "http/request_reader.h"

namespace klutch::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kMaxQueuedStreamBytes = 64 * 1024 * 1024;

// The server side of a ResponseStream: chunks queued by any thread, drained by the session
// coroutine on its strand.
class StreamImpl final : public ResponseStream, public std::enable_shared_from_this<StreamImpl> {
 public:
  explicit StreamImpl(asio::any_io_executor strand) : timer_(strand) {
    timer_.expires_at(asio::steady_timer::time_point::max());
  }

  bool Write(std::string data) override {
    {
      core::MutexLock lock(mu_);
      if (closing_ || ended_) return false;
      queued_bytes_ += data.size();
      queue_.push_back(std::move(data));
      // A consumer that stopped reading must not grow memory without bound.
      if (queued_bytes_ > kMaxQueuedStreamBytes) closing_ = true;
    }
    Wake();
    return true;
  }

  void Close() override {
    {
      core::MutexLock lock(mu_);
      closing_ = true;
    }
    Wake();
  }

  bool closed() const override {
    core::MutexLock lock(mu_);
    return closing_ || ended_;
  }

  void OnClosed(std::function<void()> callback) override {
    {
      core::MutexLock lock(mu_);
      if (!ended_) {
        callbacks_.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }

  // Session side. Moves queued chunks out; `closing` tells whether to end after them.
  void Take(std::deque<std::string>& out, bool& closing) {
    core::MutexLock lock(mu_);
    out.swap(queue_);
    closing = closing_;
  }

  // Bytes leave the budget only once written to the socket.
  void Written(size_t n) {
    core::MutexLock lock(mu_);
    queued_bytes_ -= std::min(queued_bytes_, n);
  }

  bool HasWork() {
    core::MutexLock lock(mu_);
    return closing_ || !queue_.empty();
  }

  // The stream is over (sent, peer gone or server stopping): run the callbacks once.
  void End() {
    std::vector<std::function<void()>> callbacks;
    {
      core::MutexLock lock(mu_);
      if (ended_) return;
      ended_ = true;
      closing_ = true;
      queue_.clear();
      callbacks.swap(callbacks_);
    }
    for (auto& cb : callbacks) cb();
  }

  asio::steady_timer& timer() { return timer_; }

  void Wake() {
    asio::post(timer_.get_executor(), [self = shared_from_this()] { self->timer_.cancel(); });
  }

 private:
  mutable core::Mutex mu_;
  std::deque<std::string> queue_ GUARDED_BY(mu_);
  size_t queued_bytes_ GUARDED_BY(mu_) = 0;
  bool closing_ GUARDED_BY(mu_) = false;
  bool ended_ GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> callbacks_ GUARDED_BY(mu_);
  asio::steady_timer timer_;
};

// The peer's certificate when it verified against the client CA; `rejected` when one was
// presented that did not (the handshake accepts it so the application can answer 401, as
// kube-apiserver does, instead of a bare TLS failure).
struct PeerCert {
  std::optional<ClientCertificate> cert;
  bool rejected = false;
};

PeerCert PeerCertificate(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return {};
  PeerCert result;
  std::optional<ClientCertificate>& out = result.cert;
  result.rejected = SSL_get_verify_result(ssl) != X509_V_OK;
  if (!result.rejected) {
    out.emplace();
    X509_NAME* subject = X509_get_subject_name(cert);
    for (int i = 0; i < X509_NAME_entry_count(subject); ++i) {
      X509_NAME_ENTRY* entry = X509_NAME_get_entry(subject, i);
      int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(entry));
      unsigned char* utf8 = nullptr;
      int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(entry));
      if (len < 0) continue;
      std::string value(reinterpret_cast<char*>(utf8), static_cast<size_t>(len));
      OPENSSL_free(utf8);
      if (nid == NID_commonName) out->common_name = value;
      if (nid == NID_organizationName) out->organizations.push_back(value);
    }
  }
  X509_free(cert);
  return result;
}

// Completion of a connection's coroutine: an exception escaping it (a bug: errors are values
// here) ends that connection only.
void LogEscapedException(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    KLUTCH_LOG(kError, "http", "connection ended by an exception: {}", ex.what());
  } catch (...) {
    KLUTCH_LOG(kError, "http", "connection ended by an exception");
  }
}

// `head`: the answer to a HEAD request, whose headers (Content-Length included) are those the
// GET would get, without the body (RFC 9110 9.3.2).
bhttp::response<bhttp::string_body> ToMessage(Response& resp, unsigned version, bool keep_alive,
                                              bool head = false) {
  bhttp::response<bhttp::string_body> msg{static_cast<bhttp::status>(resp.status), version};
  for (auto& [k, v] : resp.headers.items()) msg.insert(k, v);
  msg.keep_alive(keep_alive);
  msg.body() = std::move(resp.body);
  msg.prepare_payload();
  if (head) msg.body().clear();
  return msg;
}

}  // namespace

class Server::Impl {
 public:
  Impl(ServerOptions options, Handler handler)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        ssl_ctx_(asio::ssl::context::tls_server),
        iocs_(MakeContexts(options_.io_threads)),
        acceptor_(std::make_unique<tcp::acceptor>(*iocs_[0])) {}

  ~Impl() { Stop(); }

  core::Status Start() {
    if (options_.tls) {
      try {
        ssl_ctx_.set_options(asio::ssl::context::default_workarounds |
                             asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                             asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                             asio::ssl::context::single_dh_use);
        ssl_ctx_.use_certificate_chain_file(options_.tls->certificate_file);
        ssl_ctx_.use_private_key_file(options_.tls->key_file, asio::ssl::context::pem);
        if (!options_.tls->client_ca_file.empty()) {
          ssl_ctx_.load_verify_file(options_.tls->client_ca_file);
          // Ask for a certificate but accept connections without one (token auth).
          ssl_ctx_.set_verify_mode(asio::ssl::verify_peer);
          // Chain errors are recorded (SSL_get_verify_result), not fatal: see PeerCertificate.
          ssl_ctx_.set_verify_callback([](bool, asio::ssl::verify_context&) { return true; });
          STACK_OF(X509_NAME)* names =
              SSL_load_client_CA_file(options_.tls->client_ca_file.c_str());
          if (names) SSL_CTX_set_client_CA_list(ssl_ctx_.native_handle(), names);
        }
      } catch (const boost::system::system_error& e) {
        return core::Internal(fmt::format("loading TLS material ({}, {}): {}",
                                          options_.tls->certificate_file, options_.tls->key_file,
                                          e.what()));
      }
    }
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(options_.address, ec);
    if (ec)
      return core::Internal(
          fmt::format("bad listen address {}: {}", options_.address, ec.message()));
    tcp::endpoint ep(addr, options_.port);
    acceptor_->open(ep.protocol(), ec);
    if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_->bind(ep, ec);
    if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return core::Internal(
          fmt::format("cannot listen on {}:{}: {}", options_.address, options_.port, ec.message()));
    }
    port_ = acceptor_->local_endpoint().port();
    asio::co_spawn(*iocs_[0], Accept(), asio::detached);
    for (auto& ioc : iocs_) {
      asio::io_context* c = ioc.get();
      threads_.emplace_back([c] {
        auto guard = asio::make_work_guard(*c);
        // A handler that throws ends its own connection, never the process: run() may be
        // called again after an exception (Asio's contract), and the other connections go on.
        while (true) {
          try {
            c->run();
            return;
          } catch (const std::exception& e) {
            KLUTCH_LOG(kError, "http", "connection handler threw: {}", e.what());
          }
        }
      });
    }
    for (int i = 0; i < options_.threads; ++i) {
      workers_.emplace_back([this] { WorkerLoop(); });
    }
    return core::Status::Ok();
  }

  bool Drain(std::chrono::milliseconds timeout) {
    if (iocs_.empty()) return in_flight_.load() == 0;  // stopped already
    draining_ = true;
    // The acceptor belongs to the first context's thread: close it there.
    std::promise<void> closed;
    asio::post(*iocs_[0], [this, &closed] {
      boost::system::error_code ec;
      if (acceptor_) acceptor_->close(ec);
      closed.set_value();
    });
    closed.get_future().wait();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (in_flight_.load() > 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  int in_flight() const { return in_flight_.load(); }

  void Stop() {
    std::call_once(stop_once_, [this] {
      for (auto& ioc : iocs_) ioc->stop();
      for (auto& t : threads_) t.join();
      threads_.clear();
      {
        core::MutexLock lock(jobs_mu_);
        stopping_ = true;
      }
      jobs_cv_.SignalAll();
      for (auto& t : workers_) t.join();
      workers_.clear();
      boost::system::error_code ec;
      if (acceptor_) acceptor_->close(ec);
      acceptor_.reset();
      // Destroying the contexts destroys every connection coroutine now, while the caller's
      // objects still exist: streams end and their OnClosed callbacks run before Stop returns.
      iocs_.clear();
    });
  }

  uint16_t port() const { return port_; }

 private:
  asio::awaitable<void> Accept() {
    asio::steady_timer backoff(*iocs_[0]);
    while (true) {
      auto [ec, socket] = co_await acceptor_->async_accept(*iocs_[next_context_++ % iocs_.size()],
                                                           asio::as_tuple(asio::use_awaitable));
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor_->is_open()) co_return;
        // Out of descriptors or memory: retrying at once would spin this thread.
        backoff.expires_after(std::chrono::milliseconds(100));
        co_await backoff.async_wait(asio::as_tuple(asio::use_awaitable));
        continue;
      }
      if (connections_.load() >= options_.max_connections) {
        boost::system::error_code ignored;
        socket.close(ignored);
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      auto executor = socket.get_executor();
      if (options_.tls) {
        asio::co_spawn(executor,
                       ServeTls(beast::ssl_stream<beast::tcp_stream>(
                           beast::tcp_stream(std::move(socket)), ssl_ctx_)),
                       LogEscapedException);
      } else {
        asio::co_spawn(executor, Serve(beast::tcp_stream(std::move(socket)), std::nullopt),
                       LogEscapedException);
      }
    }
  }

  asio::awaitable<void> ServeTls(beast::ssl_stream<beast::tcp_stream> stream) {
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
    auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server,
                                                asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    auto peer = PeerCertificate(stream.native_handle());
    co_await Serve(std::move(stream), std::move(peer.cert), peer.rejected);
  }

  Response TransportError(int code, std::string message) {
    if (options_.error_response) return options_.error_response(code, std::move(message));
    Response r;
    r.status = code;
    r.headers.Set("Content-Type", "text/plain");
    r.body = std::move(message);
    return r;
  }

  template <typename Stream>
  asio::awaitable<void> Serve(Stream stream, std::optional<ClientCertificate> cert,
                              bool cert_rejected = false) {
    ++connections_;
    struct Count {
      std::atomic<int>& n;
      ~Count() { --n; }
    } count{connections_};
    // Bounded: Beast checks no limit while it waits for the end of a chunk-size line or of a
    // trailer, so an endless one would otherwise grow this buffer until memory runs out.
    beast::flat_buffer buffer(internal::kMaxReadBufferBytes);
    std::string remote;
    {
      boost::system::error_code ec;
      auto ep = beast::get_lowest_layer(stream).socket().remote_endpoint(ec);
      if (!ec) remote = ep.address().to_string() + ":" + std::to_string(ep.port());
    }
    while (true) {
      internal::RequestParser parser(options_.max_body_bytes);
      beast::get_lowest_layer(stream).expires_after(options_.idle_timeout);
      auto [ec, n] =
          co_await bhttp::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
      if (ec) {
        std::optional<internal::ReadFailure> failure =
            internal::ReadFailureAnswer(ec, options_.max_body_bytes);
        if (!failure) break;
        Response r = TransportError(failure->status, std::move(failure->message));
        auto msg = ToMessage(r, 11, false);
        beast::get_lowest_layer(stream).expires_after(options_.write_timeout);
        co_await bhttp::async_write(stream, msg, asio::as_tuple(asio::use_awaitable));
        // Lingering close: stop sending, then discard what the client is still uploading for
        // a bounded time and amount, so it can finish writing and read the answer instead of
        // a reset.
        boost::system::error_code ignored;
        beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_send, ignored);
        beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
        std::array<char, 16384> sink;
        size_t drained = 0;
        while (drained < 4 * std::max(options_.max_body_bytes, internal::kMaxReadBufferBytes)) {
          auto [rec, rn] = co_await beast::get_lowest_layer(stream).async_read_some(
              asio::buffer(sink), asio::as_tuple(asio::use_awaitable));
          if (rec) break;
          drained += rn;
        }
        break;
      }
      auto message = parser.release();
      const unsigned version = message.version();
      const bool keep_alive = message.keep_alive();
      Request request = internal::ToRequest(std::move(message));
      request.client_certificate = cert;
      request.client_certificate_rejected = cert_rejected;
      request.remote_address = remote;
      // In flight from here until its answer is written (a stream: until its head is sent),
      // so Drain waits for it.
      ++in_flight_;
      struct InFlight {
        std::atomic<int>* n;
        void Done() {
          if (n) --*n;
          n = nullptr;
        }
        ~InFlight() { Done(); }
      } in_flight{&in_flight_};
      Response response;
      if (options_.run_inline && options_.run_inline(request)) {
        response = CallHandler(request);
      } else {
        response = co_await RunBlocking(request);
      }
      if (response.stream) {
        in_flight.Done();
        co_await StreamBody(stream, std::move(response), version);
        break;  // a streamed response ends the connection
      }
      // While draining, the connection closes after this answer instead of waiting for more.
      const bool keep = keep_alive && !draining_.load();
      auto msg = ToMessage(response, version, keep, request.method == "HEAD");
      beast::get_lowest_layer(stream).expires_after(options_.write_timeout);
      auto [wec, wn] =
          co_await bhttp::async_write(stream, msg, asio::as_tuple(asio::use_awaitable));
      in_flight.Done();
      if (wec || !keep) break;
    }
    boost::system::error_code ignored;
    beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  template <typename Stream>
  asio::awaitable<void> StreamBody(Stream& stream, Response response, unsigned version) {
    auto impl = std::make_shared<StreamImpl>(co_await asio::this_coro::executor);
    // Ends the stream however this coroutine finishes, including frame destruction at stop.
    struct EndGuard {
      std::shared_ptr<StreamImpl> s;
      ~EndGuard() { s->End(); }
    } guard{impl};

    bhttp::response<bhttp::empty_body> head{static_cast<bhttp::status>(response.status), version};
    for (auto& [k, v] : response.headers.items()) head.insert(k, v);
    head.chunked(true);
    head.keep_alive(false);
    bhttp::response_serializer<bhttp::empty_body> sr{head};
    beast::get_lowest_layer(stream).expires_after(options_.write_timeout);
    auto [hec, hn] =
        co_await bhttp::async_write_header(stream, sr, asio::as_tuple(asio::use_awaitable));
    if (hec) {
      // Hand the (already ended) stream over anyway: the application learns through
      // OnClosed that it is gone and releases what it set up for it.
      impl->End();
      response.stream(impl);
      co_return;
    }

    // Notice the peer going away: a read completing (EOF or error) ends the stream. The read
    // must finish before this frame (which owns `stream`) goes away; see the end.
    struct Peek {
      std::array<char, 512> buf;
      bool done = false;
    };
    auto peek = std::make_shared<Peek>();
    // The peek may wait for hours: it must not inherit a deadline. Later expires_after calls
    // (before each chunk write) only arm the write timer while this read is pending.
    beast::get_lowest_layer(stream).expires_never();
    stream.async_read_some(asio::buffer(peek->buf),
                           [impl, peek](boost::system::error_code, size_t) {
                             peek->done = true;
                             impl->Close();
                           });

    response.stream(impl);
    std::deque<std::string> chunks;
    while (true) {
      bool closing = false;
      impl->Take(chunks, closing);
      bool failed = false;
      for (auto& chunk : chunks) {
        if (chunk.empty()) continue;
        beast::get_lowest_layer(stream).expires_after(options_.write_timeout);
        auto [wec, wn] = co_await asio::async_write(stream, bhttp::make_chunk(asio::buffer(chunk)),
                                                    asio::as_tuple(asio::use_awaitable));
        impl->Written(chunk.size());
        if (wec) {
          failed = true;
          break;
        }
      }
      chunks.clear();
      if (failed) break;
      if (closing) {
        if (!peek->done) {
          beast::get_lowest_layer(stream).expires_after(options_.write_timeout);
          co_await asio::async_write(stream, bhttp::make_chunk_last(),
                                     asio::as_tuple(asio::use_awaitable));
        }
        break;
      }
      if (impl->HasWork()) continue;
      impl->timer().expires_at(asio::steady_timer::time_point::max());
      co_await impl->timer().async_wait(asio::as_tuple(asio::use_awaitable));
    }
    impl->Close();
    boost::system::error_code ignored;
    beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(stream).socket().cancel(ignored);
    while (!peek->done) {
      impl->timer().expires_at(asio::steady_timer::time_point::max());
      co_await impl->timer().async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }

  ServerOptions options_;
  Handler handler_;
  // Declared before iocs_: connection frames destroyed with the contexts use the TLS context.
  asio::ssl::context ssl_ctx_;
  // One context per I/O thread: a connection lives on one context and is never touched by
  // two threads, so no strands and no cross-thread handoffs on the request path.
  std::vector<std::unique_ptr<asio::io_context>> iocs_;
  size_t next_context_ = 0;
  std::unique_ptr<tcp::acceptor> acceptor_;
  std::atomic<int> connections_{0};
  std::atomic<int> in_flight_{0};  // requests read and not yet answered (streams: not started)
  std::atomic<bool> draining_{false};
  uint16_t port_ = 0;
  std::vector<std::thread> threads_;
  std::once_flag stop_once_;

  // Handlers that may block run here, not on the I/O threads.
  core::Mutex jobs_mu_;
  core::CondVar jobs_cv_;  // a job was queued, or stopping_
  std::deque<std::function<void()>> jobs_ GUARDED_BY(jobs_mu_);
  bool stopping_ GUARDED_BY(jobs_mu_) = false;
  std::vector<std::thread> workers_;

  static std::vector<std::unique_ptr<asio::io_context>> MakeContexts(int n) {
    std::vector<std::unique_ptr<asio::io_context>> out;
    for (int i = 0; i < std::max(1, n); ++i) out.push_back(std::make_unique<asio::io_context>(1));
    return out;
  }

  void WorkerLoop() {
    while (true) {
      std::function<void()> job;
      {
        core::MutexLock lock(jobs_mu_);
        while (!stopping_ && jobs_.empty()) jobs_cv_.Wait(jobs_mu_);
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  // Runs the handler on a worker and resumes the connection's coroutine with the result.
  asio::awaitable<Response> RunBlocking(Request& request) {
    struct Shared {
      explicit Shared(asio::any_io_executor ex) : timer(ex) {
        timer.expires_at(asio::steady_timer::time_point::max());
      }
      asio::steady_timer timer;
      Response response;
      bool done = false;
    };
    auto executor = co_await asio::this_coro::executor;
    auto shared = std::make_shared<Shared>(executor);
    {
      core::MutexLock lock(jobs_mu_);
      jobs_.push_back([this, shared, &request, executor] {
        Response r = CallHandler(request);
        asio::post(executor, [shared, r = std::move(r)]() mutable {
          shared->response = std::move(r);
          shared->done = true;
          shared->timer.cancel();
        });
      });
    }
    jobs_cv_.Signal();
    while (!shared->done) {
      co_await shared->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    co_return std::move(shared->response);
  }

  Response CallHandler(Request& request) {
    try {
      return handler_(request);
    } catch (const std::exception& e) {
      // Handlers return errors as values; an exception here is a bug, not a client error.
      KLUTCH_LOG(kError, "http", "handler threw for {} {}: {}", request.method, request.target,
                 e.what());
      return TransportError(500, "internal error");
    }
  }
};

core::Result<std::unique_ptr<Server>> Server::Start(ServerOptions options, Handler handler) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(handler));
  KLUTCH_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;
uint16_t Server::port() const { return impl_->port(); }
void Server::Stop() { impl_->Stop(); }
bool Server::Drain(std::chrono::milliseconds timeout) { return impl_->Drain(timeout); }

}  // namespace klutch::http
