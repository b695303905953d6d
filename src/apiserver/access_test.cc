// What a request's headers and writes do to the access layer, in process on the memory
// store: the field manager derived from a User-Agent, audit events for headers that are not
// UTF-8, and read-your-writes for RBAC when the authorization cache falls behind (its feed
// held back through the test seam, so the timeout is reached deterministically).
#include "apiserver/access.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "apiserver/builtin_resources.h"
#include "apiserver/handler.h"
#include "apiserver/openapi.h"
#include "apiserver/request_info.h"
#include "apiserver/watch.h"
#include "storage/memory/memory_store.h"

namespace klutch::apiserver::access_test {
namespace {

namespace fs = std::filesystem;

TEST(DefaultFieldManager, IsTheUserAgentsPrintablePrefixAsKubeApiserverDerivesIt) {
  EXPECT_EQ(DefaultFieldManager("kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07"), "kubectl");
  EXPECT_EQ(DefaultFieldManager("kubectl-client-side-apply"), "kubectl-client-side-apply");
  // Each invalid byte reads as U+FFFD, which is printable.
  EXPECT_EQ(DefaultFieldManager("bad\xff\xfe"
                                "agent/1.0"),
            "bad\xef\xbf\xbd\xef\xbf\xbd"
            "agent");
  // Controls, format characters and spaces other than ' ' are left out.
  EXPECT_EQ(DefaultFieldManager("a\tb\x01 c\xc2\xa0\xe2\x80\x8b"
                                "d"),
            "ab cd");
  EXPECT_EQ(DefaultFieldManager("gr\xc3\xb6\xc3\x9f"
                                "e/2"),
            "gr\xc3\xb6\xc3\x9f"
            "e");
  // At most 128 bytes, whole runes only.
  EXPECT_EQ(DefaultFieldManager(std::string(200, 'a')), std::string(128, 'a'));
  EXPECT_EQ(DefaultFieldManager(std::string(127, 'a') + "\xc3\xa9"), std::string(127, 'a'));
  EXPECT_EQ(DefaultFieldManager(""), "");
}

class AccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/klutch-access-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    registry_.SetOwner("builtin", BuiltinResources());
    AccessOptions options;
    options.audit_log_path = (dir_ / "audit.log").string();
    // Short, because the feed is held back on purpose whenever a test reaches it.
    options.settle_timeout = std::chrono::milliseconds(20);
    auto access = AccessControl::Start(options, dir_.string(), rest_);
    ASSERT_TRUE(access.ok()) << access.status().ToString();
    access_ = std::move(*access);
    handler_ = std::make_unique<ApiHandler>(rest_, registry_, openapi_, watches_, *access_,
                                            HandlerOptions{});
    admin_.user.name = "admin";
    admin_.user.groups = {auth::kMastersGroup};
  }

  void TearDown() override {
    handler_.reset();
    access_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  http::Response Post(const std::string& path, const Json& body, std::string user_agent = "test") {
    http::Request req;
    req.method = "POST";
    req.target = path;
    req.path = path;
    req.headers.Set("Content-Type", "application/json");
    req.headers.Set("Accept", "application/json");
    req.headers.Set("User-Agent", std::move(user_agent));
    req.body = body.dump();
    return handler_->Handle(req, ParseRequestInfo(req), admin_);
  }

  static Json ClusterRole(const std::string& name) {
    return {
        {"apiVersion", "rbac.authorization.k8s.io/v1"},
        {"kind", "ClusterRole"},
        {"metadata", {{"name", name}}},
        {"rules",
         Json::array({{{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"verbs", {"get"}}}})}};
  }

  static std::vector<std::string> Warnings(const http::Response& resp) {
    std::vector<std::string> out;
    for (const auto& [name, value] : resp.headers.items()) {
      if (name == "Warning") out.push_back(value);
    }
    return out;
  }

  fs::path dir_;
  storage::MemoryStore store_;
  Registry registry_;
  RestStorage rest_{store_, registry_, core::RealClock::Get()};
  OpenApi openapi_{registry_};
  WatchManager watches_{rest_, std::chrono::seconds(60), std::chrono::seconds(60)};
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<ApiHandler> handler_;
  Caller admin_;
};

TEST_F(AccessTest, WaitForRevisionReportsATimeoutWhileTheFeedIsHeldBack) {
  const int64_t before = store_.Revision();
  EXPECT_TRUE(access_->WaitForRevision(before).ok());
  access_->HoldFeedForTesting(true);
  auto created = rest_.Create(*registry_.Find("rbac.authorization.k8s.io", "v1", "clusterroles"),
                              "", ClusterRole("held"), WriteOptions{.field_manager = "test"});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const int64_t revision = store_.Revision();
  ASSERT_GT(revision, before);

  core::Status st = access_->WaitForRevision(revision);
  EXPECT_EQ(st.reason(), core::Reason::kTimeout) << st.ToString();
  EXPECT_NE(st.message().find("(revision " + std::to_string(revision) + ")"), std::string::npos)
      << st.message();
  EXPECT_EQ(access_->settle_timeouts(), 1u);
  // Releasing applies what the feed kept before it returns: no waiting after that.
  access_->HoldFeedForTesting(false);
  EXPECT_TRUE(access_->WaitForRevision(revision).ok());
  EXPECT_EQ(access_->settle_timeouts(), 1u);
}

TEST_F(AccessTest, RbacWritesCarryAWarningWhenTheAuthorizationCacheHasNotCaughtUp) {
  const std::string path = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
  access_->HoldFeedForTesting(true);
  http::Response resp = Post(path, ClusterRole("lagging"));
  ASSERT_EQ(resp.status, 201) << resp.body;
  const std::string revision =
      Json::parse(resp.body)["metadata"]["resourceVersion"].get<std::string>();
  EXPECT_EQ(
      Warnings(resp),
      std::vector<std::string>{
          "299 - \"the authorization cache has not caught up with this write (revision " +
          revision + ") yet: requests made right after it may still be authorized as before it\""});
  EXPECT_EQ(access_->settle_timeouts(), 1u);

  // Writes the caches do not depend on never wait for them.
  resp = Post("/api/v1/namespaces",
              Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "team"}}}});
  ASSERT_EQ(resp.status, 201) << resp.body;
  EXPECT_TRUE(Warnings(resp).empty());
  EXPECT_EQ(access_->settle_timeouts(), 1u);

  access_->HoldFeedForTesting(false);
  resp = Post(path, ClusterRole("caught-up"));
  ASSERT_EQ(resp.status, 201) << resp.body;
  EXPECT_TRUE(Warnings(resp).empty());
  EXPECT_EQ(access_->settle_timeouts(), 1u);
}

TEST_F(AccessTest, HeadersThatAreNotUtf8StillGetTheirAuditEvent) {
  http::Request req;
  req.method = "GET";
  req.target = "/api/v1/namespaces/default/configmaps?x=\xff";
  req.path = "/api/v1/namespaces/default/configmaps";
  req.remote_address = "127.0.0.1:1234";
  req.headers.Set("User-Agent",
                  "bad\xff\xfe"
                  "agent/1.0");
  RequestInfo info;
  info.verb = "list";
  access_->Audit(req, info, &admin_, 200, "allow", "");
  req.headers.Set("User-Agent", std::string(2000, 'u'));
  access_->Audit(req, info, &admin_, 200, "allow", "");

  std::ifstream in(dir_ / "audit.log");
  std::vector<Json> events;
  for (std::string line; std::getline(in, line);) {
    events.push_back(Json::parse(line, nullptr, false));
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["userAgent"],
            "bad\xef\xbf\xbd\xef\xbf\xbd"
            "agent/1.0");
  EXPECT_EQ(events[0]["requestURI"], "/api/v1/namespaces/default/configmaps?x=\xef\xbf\xbd");
  EXPECT_EQ(events[1]["userAgent"], std::string(1024, 'u') + "...TRUNCATED");
}

}  // namespace
}  // namespace klutch::apiserver::access_test
