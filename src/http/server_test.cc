#include "http/server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "core/sync.h"
#include "http/certs.h"
#include "http/client.h"

namespace klutch::http::server_test {
namespace {

Response Echo(Request& req) {
  Response r;
  r.headers.Set("Content-Type", "text/plain");
  std::string who = req.client_certificate ? req.client_certificate->common_name : "anonymous";
  for (const auto& o : req.client_certificate ? req.client_certificate->organizations
                                              : std::vector<std::string>{}) {
    who += "/" + o;
  }
  auto q = req.Query("q");
  r.body = req.method + " " + req.path + " q=" + std::string(q ? *q : "-") + " body=" + req.body +
           " who=" + who;
  return r;
}

TEST(Server, ServesPlainRequestsWithKeepAlive) {
  auto server = Server::Start({}, Echo);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client client({.port = (*server)->port()});
  for (int i = 0; i < 3; ++i) {
    auto r = client.Do("POST", "/a%2Fb/c?q=x%20y&z", {}, "hello");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "POST /a/b/c q=x y body=hello who=anonymous");
  }
}

TEST(Server, AnswersHeadWithTheHeadersOfGetAndNoBody) {
  auto server = Server::Start({}, Echo);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Client client({.port = (*server)->port()});
  // Twice over one kept-alive connection: a body after the HEAD answer would be read as the
  // start of the next response.
  for (int i = 0; i < 2; ++i) {
    auto head = client.Do("HEAD", "/x", {}, "");
    ASSERT_TRUE(head.ok()) << head.status().ToString();
    EXPECT_EQ(head->status, 200);
    EXPECT_EQ(head->body, "");
    EXPECT_EQ(head->headers.Get("Content-Length"),
              std::to_string(std::string("HEAD /x q=- body= who=anonymous").size()));
    auto get = client.Do("GET", "/x", {}, "");
    ASSERT_TRUE(get.ok()) << get.status().ToString();
    EXPECT_EQ(get->body, "GET /x q=- body= who=anonymous");
  }
}

TEST(Server, DrainAnswersRequestsInFlightAndRefusesNewConnections) {
  core::Notification entered, release;
  auto server = Server::Start({}, [&](Request& req) {
    Response r;
    if (req.path == "/new") return r;
    entered.Notify();
    release.Wait();
    r.body = "answered";
    return r;
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const uint16_t port = (*server)->port();
  std::optional<core::Result<ClientResponse>> slow;
  std::thread request([&] { slow = Client({.port = port}).Do("GET", "/slow", {}, ""); });
  entered.Wait();
  std::atomic<bool> drained{false};
  std::thread drain([&] { drained = (*server)->Drain(std::chrono::seconds(30)); });
  // The listening socket closes while the request is still running.
  bool refused = false;
  for (int i = 0; i < 500 && !refused; ++i) {
    Client fresh({.port = port, .timeout = std::chrono::seconds(2)});
    refused = !fresh.Do("GET", "/new", {}, "").ok();
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(refused) << "a new connection was still accepted while draining";
  EXPECT_FALSE(drained.load());
  release.Notify();
  drain.join();
  request.join();
  EXPECT_TRUE(drained.load());
  ASSERT_TRUE(slow && slow->ok()) << (slow ? slow->status().ToString() : "no answer");
  EXPECT_EQ((*slow)->status, 200);
  EXPECT_EQ((*slow)->body, "answered");
  (*server)->Stop();
}

TEST(Server, DrainGivesUpAfterItsTimeout) {
  core::Notification entered, release;
  auto server = Server::Start({}, [&](Request&) {
    entered.Notify();
    release.Wait();
    return Response{};
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::thread request(
      [&, port = (*server)->port()] { (void)Client({.port = port}).Do("GET", "/slow", {}, ""); });
  entered.Wait();
  EXPECT_FALSE((*server)->Drain(std::chrono::milliseconds(50)));
  release.Notify();
  request.join();
  (*server)->Stop();
}

TEST(Server, RejectsOversizedBodiesWith413) {
  ServerOptions options;
  options.max_body_bytes = 1024;
  bool called = false;
  auto server = Server::Start(options, [&](Request&) {
    called = true;
    return Response{};
  });
  ASSERT_TRUE(server.ok());
  Client client({.port = (*server)->port()});
  auto r = client.Do("POST", "/x", {}, std::string(4096, 'a'));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 413);
  EXPECT_FALSE(called);
}

// Sends `bytes` on a fresh loopback connection and returns all the server answers until it
// closes the connection (or 10 s pass).
std::string RawExchange(uint16_t port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "socket failed";
  timeval tv{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Beast's field list cannot hold a field over 64 KiB and threw std::length_error out of the
// I/O thread, ending the process: one request header could take every Klutch server down.
TEST(Server, AnswersFieldsTooLargeWith431AndKeepsServing) {
  bool called = false;
  auto server = Server::Start({}, [&](Request&) {
    called = true;
    return Response{};
  });
  ASSERT_TRUE(server.ok());
  const uint16_t port = (*server)->port();
  const std::string big(65534, 'a');
  struct Case {
    const char* name;
    std::string request;
  };
  const Case cases[] = {
      {"header value", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + big + "\r\n\r\n"},
      {"header name", "GET / HTTP/1.1\r\nHost: x\r\n" + big + ": v\r\n\r\n"},
      {"chunked trailer",
       "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
       "1\r\na\r\n0\r\nX-Trailer: " +
           big + "\r\n\r\n"},
      // Each field within its own limit, together over 1 MiB.
      {"all headers over 1 MiB", "GET / HTTP/1.1\r\nHost: x\r\n" +
                                     [&] {
                                       std::string many;
                                       for (int i = 0; i < 20; ++i)
                                         many += fmt::format("X-{}: {}\r\n", i,
                                                             std::string(60000, 'a'));
                                       return many;
                                     }() +
                                     "\r\n"},
      // Never-ending trailer and chunk extension: Beast limits neither; the read buffer does.
      {"endless trailer", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" +
                              [] {
                                std::string lines;
                                while (lines.size() < 2 * 1024 * 1024) lines += "a: b\r\n";
                                return lines;
                              }()},
      {"endless chunk extension",
       "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;" +
           std::string(2 * 1024 * 1024, 'x')},
  };
  for (const auto& c : cases) {
    std::string answer = RawExchange(port, c.request);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 431 ")) << c.name << ": " << answer.substr(0, 80);
    EXPECT_NE(answer.find("Request header fields too large"), std::string::npos) << c.name;
  }
  EXPECT_FALSE(called);
  // Still serving, on a new connection.
  auto r = Client({.port = port}).Do("GET", "/after", {}, "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(called);
}

TEST(Server, AnswersMalformedRequestsWith400) {
  auto server = Server::Start({}, Echo);
  ASSERT_TRUE(server.ok());
  for (std::string bad :
       {"GET\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}) {
    std::string answer = RawExchange((*server)->port(), bad);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 400 ")) << bad << ": " << answer.substr(0, 80);
  }
}

TEST(Server, StreamsChunksAndNoticesClientGoingAway) {
  std::shared_ptr<ResponseStream> kept;
  core::Notification closed;
  std::mutex mu;
  std::condition_variable cv;
  auto server = Server::Start({}, [&](Request&) {
    Response r;
    r.stream = [&](std::shared_ptr<ResponseStream> s) {
      s->OnClosed([&] { closed.Notify(); });
      s->Write("one\n");
      std::lock_guard<std::mutex> lock(mu);
      kept = s;
      cv.notify_all();
    };
    return r;
  });
  ASSERT_TRUE(server.ok());
  Client client({.port = (*server)->port()});
  std::string got;
  std::thread reader([&] {
    auto r = client.Stream("GET", "/watch", {}, [&](std::string_view data) {
      got += data;
      return got.find("two\n") == std::string::npos;  // stop after the second line
    });
    EXPECT_TRUE(r.ok());
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return kept != nullptr; });
  }
  ASSERT_TRUE(kept);
  kept->Write("two\n");
  reader.join();
  EXPECT_EQ(got, "one\ntwo\n");
  EXPECT_TRUE(closed.WaitFor(std::chrono::seconds(10)));
  EXPECT_TRUE(kept->closed());
  EXPECT_FALSE(kept->Write("three\n"));
}

// A quiet stream outlives the idle and write timeouts (watches are quiet for long times).
TEST(Server, QuietStreamsOutliveTheConnectionTimeouts) {
  std::shared_ptr<ResponseStream> kept;
  std::mutex mu;
  std::condition_variable cv;
  ServerOptions options;
  options.idle_timeout = std::chrono::seconds(1);
  options.write_timeout = std::chrono::seconds(1);
  auto server = Server::Start(options, [&](Request&) {
    Response r;
    r.stream = [&](std::shared_ptr<ResponseStream> s) {
      s->Write("first\n");
      std::lock_guard<std::mutex> lock(mu);
      kept = s;
      cv.notify_all();
    };
    return r;
  });
  ASSERT_TRUE(server.ok());
  Client client({.port = (*server)->port()});
  std::string got;
  std::thread reader([&] {
    (void)client.Stream("GET", "/w", {}, [&](std::string_view d) {
      got += d;
      return got.find("late\n") == std::string::npos;
    });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return kept != nullptr; });
  }
  ASSERT_TRUE(kept);
  // Longer than both timeouts; before the fix the stream was cut after the write timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(kept->Write("late\n"));
  reader.join();
  EXPECT_EQ(got, "first\nlate\n");
}

TEST(Server, ServerCloseEndsTheStreamCleanly) {
  auto server = Server::Start({}, [&](Request&) {
    Response r;
    r.stream = [](std::shared_ptr<ResponseStream> s) {
      s->Write("only\n");
      s->Close();
    };
    return r;
  });
  ASSERT_TRUE(server.ok());
  Client client({.port = (*server)->port()});
  std::string got;
  auto r = client.Stream("GET", "/w", {}, [&](std::string_view d) {
    got += d;
    return true;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(got, "only\n");
}

TEST(Server, ServerCloseEndsTheStreamCleanlyAndMarksItComplete) {
  auto server = Server::Start({}, [&](Request&) {
    Response r;
    r.stream = [](std::shared_ptr<ResponseStream> s) { s->Close(); };
    return r;
  });
  ASSERT_TRUE(server.ok());
  Client client({.port = (*server)->port()});
  auto r = client.Stream("GET", "/w", {}, [](std::string_view) { return true; });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->complete) << r->stream_error;
}

TEST(Client, TimesOutWhenTheServerNeverAnswers) {
  core::Notification release;
  auto server = Server::Start({}, [&](Request&) {
    release.WaitFor(std::chrono::seconds(10));
    return Response{};
  });
  ASSERT_TRUE(server.ok());
  Client client({.port = (*server)->port(), .timeout = std::chrono::milliseconds(200)});
  auto r = client.Do("GET", "/slow");
  release.Notify();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("timed out after 200 ms"), std::string::npos)
      << r.status().ToString();
  // The client recovers on a new connection.
  auto again = client.Do("GET", "/fast");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
}

TEST(Client, IdleStreamLimitEndsAQuietStreamAsIncomplete) {
  std::vector<std::shared_ptr<ResponseStream>> kept;
  std::mutex mu;
  auto server = Server::Start({}, [&](Request&) {
    Response r;
    r.stream = [&](std::shared_ptr<ResponseStream> s) {
      s->Write("hello\n");
      std::lock_guard<std::mutex> lock(mu);
      kept.push_back(s);  // keep it open and quiet
    };
    return r;
  });
  ASSERT_TRUE(server.ok());
  Client client({.port = (*server)->port(), .stream_idle_timeout = std::chrono::milliseconds(300)});
  std::string got;
  auto r = client.Stream("GET", "/w", {}, [&](std::string_view d) {
    got += d;
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(got, "hello\n");
  EXPECT_FALSE(r->complete);
  EXPECT_NE(r->stream_error.find("no data for 300 ms"), std::string::npos) << r->stream_error;
}

TEST(Client, DisconnectFromAnotherThreadCutsARunningStream) {
  std::vector<std::shared_ptr<ResponseStream>> kept;
  std::mutex mu;
  core::Notification first_data;
  auto server = Server::Start({}, [&](Request&) {
    Response r;
    r.stream = [&](std::shared_ptr<ResponseStream> s) {
      s->Write("x\n");
      std::lock_guard<std::mutex> lock(mu);
      kept.push_back(s);
    };
    return r;
  });
  ASSERT_TRUE(server.ok());
  Client client({.port = (*server)->port()});
  core::Result<ClientResponse> result = core::Internal("not run");
  std::thread reader([&] {
    result = client.Stream("GET", "/w", {}, [&](std::string_view) {
      first_data.Notify();
      return true;
    });
  });
  ASSERT_TRUE(first_data.WaitFor(std::chrono::seconds(10)));
  client.Disconnect();
  reader.join();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_FALSE(result->complete);
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("klutch-http-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    auto ca = GenerateCertificateAuthority("test-ca", std::chrono::hours(1));
    ASSERT_TRUE(ca.ok());
    ca_ = *ca;
    auto serving = IssueCertificate(ca_, {.common_name = "localhost",
                                          .dns_names = {"localhost"},
                                          .ip_addresses = {"127.0.0.1"},
                                          .server = true});
    ASSERT_TRUE(serving.ok()) << serving.status().ToString();
    Write("ca.crt", ca_.certificate);
    Write("tls.crt", serving->certificate);
    Write("tls.key", serving->private_key);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& data) {
    std::ofstream(dir_ / name) << data;
  }
  TlsOptions Tls() {
    return {(dir_ / "tls.crt").string(), (dir_ / "tls.key").string(), (dir_ / "ca.crt").string()};
  }
  std::filesystem::path dir_;
  Pem ca_;
};

TEST_F(TlsTest, VerifiesServerAndReadsClientCertificate) {
  auto server = Server::Start({.tls = Tls()}, Echo);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto user = IssueCertificate(
      ca_, {.common_name = "alice", .organizations = {"system:masters", "dev"}, .client = true});
  ASSERT_TRUE(user.ok());
  Client client({.port = (*server)->port(),
                 .tls = true,
                 .ca_pem = ca_.certificate,
                 .cert_pem = user->certificate,
                 .key_pem = user->private_key});
  auto r = client.Do("GET", "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "GET /x q=- body= who=alice/system:masters/dev");

  Client anonymous({.port = (*server)->port(), .tls = true, .ca_pem = ca_.certificate});
  auto a = anonymous.Do("GET", "/y");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->body, "GET /y q=- body= who=anonymous");
}

TEST_F(TlsTest, CertificateOfAnotherCaReachesTheHandlerAsRejected) {
  auto server = Server::Start({.tls = Tls()}, [](Request& req) {
    Response r;
    r.body = fmt::format("cert={} rejected={}", req.client_certificate.has_value(),
                         req.client_certificate_rejected);
    return r;
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto other = GenerateCertificateAuthority("other", std::chrono::hours(1));
  ASSERT_TRUE(other.ok());
  auto mallory = IssueCertificate(
      *other, {.common_name = "alice", .organizations = {"system:masters"}, .client = true});
  ASSERT_TRUE(mallory.ok());
  Client client({.port = (*server)->port(),
                 .tls = true,
                 .ca_pem = ca_.certificate,
                 .cert_pem = mallory->certificate,
                 .key_pem = mallory->private_key});
  auto r = client.Do("GET", "/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "cert=false rejected=true");
  Client none({.port = (*server)->port(), .tls = true, .ca_pem = ca_.certificate});
  auto n = none.Do("GET", "/x");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->body, "cert=false rejected=false");
}

TEST_F(TlsTest, ClientRefusesServerFromAnotherCa) {
  auto server = Server::Start({.tls = Tls()}, Echo);
  ASSERT_TRUE(server.ok());
  auto other = GenerateCertificateAuthority("other", std::chrono::hours(1));
  Client client({.port = (*server)->port(), .tls = true, .ca_pem = other->certificate});
  auto r = client.Do("GET", "/x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("TLS handshake"), std::string::npos);
}

}  // namespace
}  // namespace klutch::http::server_test
