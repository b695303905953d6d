#include "client/rest_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "client/dynamic.h"
#include "http/server.h"

namespace klutch::client::rest_client_test {
namespace {

// A plain-HTTP server whose answers the test scripts, counting what it saw.
class ScriptedServer {
 public:
  using Script = std::function<http::Response(const http::Request&, int call)>;
  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    auto s = http::Server::Start({}, [this](http::Request& req) {
      int n;
      {
        std::lock_guard<std::mutex> lock(mu_);
        n = calls_++;
        seen_.push_back(req.method + " " + req.target +
                        " auth=" + std::string(req.headers.Get("Authorization")) +
                        " ua=" + std::string(req.headers.Get("User-Agent")));
      }
      return script_(req, n);
    });
    EXPECT_TRUE(s.ok());
    server_ = std::move(*s);
  }
  RestConfig Config() const {
    RestConfig c;
    c.server = "http://127.0.0.1:" + std::to_string(server_->port());
    c.qps = 0;
    c.user_agent = "klutch-test/1";
    return c;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  Script script_;
  std::mutex mu_;
  int calls_ = 0;
  std::vector<std::string> seen_;
  std::unique_ptr<http::Server> server_;
};

http::Response Json200(const std::string& body) {
  http::Response r;
  r.headers.Set("Content-Type", "application/json");
  r.body = body;
  return r;
}

http::Response Error(int code, const std::string& reason, const std::string& message,
                     int retry_after = 0) {
  http::Response r;
  r.status = code;
  r.headers.Set("Content-Type", "application/json");
  if (retry_after > 0) r.headers.Set("Retry-After", std::to_string(retry_after));
  r.body = Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                {"reason", reason}, {"message", message}, {"code", code}}
               .dump();
  return r;
}

RestClientOptions FastRetries() {
  return {.max_retries = 3,
          .initial_backoff = std::chrono::milliseconds(1),
          .max_backoff = std::chrono::milliseconds(5)};
}

TEST(RestClient, ReturnsTheServersStatusAsAnError) {
  ScriptedServer server([](const http::Request&, int) {
    return Error(404, "NotFound", "configmaps \"x\" not found");
  });
  auto rest = RestClient::New(server.Config(), FastRetries());
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  auto r = ResourceClient(**rest, resources::kConfigMaps, "default").Get("x");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(core::IsNotFound(r.status()));
  EXPECT_EQ(r.status().message(), "configmaps \"x\" not found");
  EXPECT_EQ(server.calls(), 1);  // a 404 is not retried
  EXPECT_EQ(server.seen()[0], "GET /api/v1/namespaces/default/configmaps/x auth= ua=klutch-test/1");
}

TEST(RestClient, RetriesTooManyRequestsForEveryVerb) {
  ScriptedServer server([](const http::Request&, int call) {
    return call < 2 ? Error(429, "TooManyRequests", "slow down") : Json200("{\"ok\":true}");
  });
  auto rest = RestClient::New(server.Config(), FastRetries());
  ASSERT_TRUE(rest.ok());
  auto r = (*rest)->DoJson({.verb = "POST", .path = "/x", .body = "{}"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["ok"], true);
  EXPECT_EQ(server.calls(), 3);
}

TEST(RestClient, RetriesServerErrorsOnlyForReadsUnlessRetryAfterIsSet) {
  ScriptedServer server([](const http::Request& req, int) {
    if (req.path == "/with-retry-after") return Error(503, "ServiceUnavailable", "busy", 1);
    return Error(500, "InternalError", "boom");
  });
  RestClientOptions options = FastRetries();
  auto rest = RestClient::New(server.Config(), options);
  ASSERT_TRUE(rest.ok());
  auto get = (*rest)->Do({.verb = "GET", .path = "/read"});
  EXPECT_FALSE(get.ok());
  EXPECT_EQ(server.calls(), 1 + options.max_retries);
  auto post = (*rest)->Do({.verb = "POST", .path = "/write", .body = "{}"});
  EXPECT_FALSE(post.ok());
  EXPECT_EQ(post.status().code(), 500);
  EXPECT_EQ(server.calls(), 2 + options.max_retries);  // the POST was sent once
  // With Retry-After the server says it did not act: a POST is sent again too.
  auto later = (*rest)->Do({.verb = "POST", .path = "/with-retry-after", .body = "{}"});
  EXPECT_FALSE(later.ok());
  EXPECT_EQ(later.status().code(), 503);
  EXPECT_EQ(server.calls(), 2 + options.max_retries + 1 + options.max_retries);
}

TEST(RestClient, GivesAClearErrorForNonStatusBodies) {
  ScriptedServer server([](const http::Request&, int) {
    http::Response r;
    r.status = 502;
    r.body = "<html>bad gateway</html>";
    return r;
  });
  auto rest = RestClient::New(server.Config(), FastRetries());
  ASSERT_TRUE(rest.ok());
  auto r = (*rest)->Do({.verb = "POST", .path = "/x"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), 502);
  EXPECT_NE(r.status().message().find("POST /x: the server responded with 502"), std::string::npos)
      << r.status().message();
}

TEST(RestClient, RejectsAGarbageJsonBody) {
  ScriptedServer server([](const http::Request&, int) { return Json200("{\"truncated\":"); });
  auto rest = RestClient::New(server.Config(), FastRetries());
  ASSERT_TRUE(rest.ok());
  auto r = (*rest)->DoJson({.path = "/x"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not JSON"), std::string::npos);
}

TEST(RestClient, UnreachableServerIsAnErrorAfterRetries) {
  RestConfig config;
  config.server = "http://127.0.0.1:1";  // nothing listens on port 1
  config.qps = 0;
  auto rest = RestClient::New(config, FastRetries());
  ASSERT_TRUE(rest.ok());
  auto r = (*rest)->Do({.path = "/x"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kServiceUnavailable);
  EXPECT_NE(r.status().message().find("connect 127.0.0.1:1"), std::string::npos)
      << r.status().message();
}

TEST(RestClient, RejectsBadServerUrls) {
  for (std::string url : {"ftp://x", "https://", "https://host:99999", "https://[::1"}) {
    RestConfig config;
    config.server = url;
    auto rest = RestClient::New(config);
    ASSERT_FALSE(rest.ok()) << url;
    EXPECT_NE(rest.status().message().find(url), std::string::npos) << rest.status().message();
  }
}

TEST(RestClient, ReReadsARotatedTokenFileAfterA401) {
  auto dir = std::filesystem::temp_directory_path() / ("klutch-rest-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "token") << "old";
  std::atomic<bool> rotated{false};
  ScriptedServer server([&](const http::Request& req, int) {
    if (req.headers.Get("Authorization") == "Bearer new") return Json200("{}");
    if (!rotated.exchange(true)) std::ofstream(dir / "token") << "new";
    return Error(401, "Unauthorized", "Unauthorized");
  });
  RestConfig config = server.Config();
  config.bearer_token_file = (dir / "token").string();
  auto rest = RestClient::New(config, FastRetries());
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  auto r = (*rest)->Do({.path = "/x"});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  auto seen = server.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_NE(seen[0].find("auth=Bearer old"), std::string::npos);
  EXPECT_NE(seen[1].find("auth=Bearer new"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(RestClient, WatchReportsGoneAndDecodingErrors) {
  ScriptedServer server([](const http::Request& req, int) {
    http::Response r;
    auto rv = req.Query("resourceVersion");
    std::string body =
        rv && *rv == "1"
            ? "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
              "\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410,"
              "\"message\":\"too old resource version: 1 (5)\"}}\n"
            : "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\","
              "\"resourceVersion\":\"7\"}}}\ngarbage\n";
    r.stream = [body](std::shared_ptr<http::ResponseStream> s) {
      s->Write(body);
      s->Close();
    };
    return r;
  });
  auto rest = RestClient::New(server.Config(), FastRetries());
  ASSERT_TRUE(rest.ok());
  ResourceClient cms(**rest, resources::kConfigMaps, "default");
  auto gone = cms.Watch({.resource_version = "1"}, [](const WatchEvent&) { return true; });
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_TRUE(gone->gone);
  int events = 0;
  auto bad = cms.Watch({.resource_version = "5"}, [&](const WatchEvent&) {
    ++events;
    return true;
  });
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(events, 1);
  EXPECT_FALSE(bad->complete);
  EXPECT_EQ(bad->last_resource_version, "7");
  EXPECT_NE(bad->error.find("not valid JSON"), std::string::npos) << bad->error;
}

}  // namespace
}  // namespace klutch::client::rest_client_test
