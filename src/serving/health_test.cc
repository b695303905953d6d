#include "serving/health.h"

#include <gtest/gtest.h>

namespace klutch::serving::health_test {
namespace {

class HealthTest : public ::testing::Test {
 protected:
  HealthTest() {
    health_.AddLiveness("log", [] { return core::Status::Ok(); });
    health_.AddReadiness("etcd", [this] {
      return storage_ok_ ? core::Status::Ok() : core::Unavailable("storage down");
    });
    health_.AddRoutes(router_);
  }
  std::pair<int, std::string> Get(std::string target) {
    http::Request r;
    r.method = "GET";
    r.SetTarget(std::move(target));
    http::Response resp = router_.Serve(r);
    return {resp.status, resp.body};
  }
  HealthChecks health_;
  http::Router router_;
  bool storage_ok_ = true;
};

TEST_F(HealthTest, AnswersOkOrTheVerboseListAsKubeApiserver) {
  EXPECT_EQ(Get("/readyz"), std::make_pair(200, std::string("ok")));
  EXPECT_EQ(Get("/readyz?verbose"),
            std::make_pair(200, std::string("[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]shutdown ok\n"
                                            "readyz check passed\n")));
  EXPECT_EQ(Get("/livez?verbose"),
            std::make_pair(200, std::string("[+]ping ok\n[+]log ok\nlivez check passed\n")));
}

TEST_F(HealthTest, AFailingCheckFailsReadinessButNotLiveness) {
  storage_ok_ = false;
  EXPECT_EQ(
      Get("/readyz"),
      std::make_pair(500, std::string("[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n"
                                      "[+]shutdown ok\nreadyz check failed\n")));
  EXPECT_EQ(Get("/livez").first, 200);
  EXPECT_EQ(Get("/healthz").first, 500);
  EXPECT_EQ(Get("/readyz/etcd"), std::make_pair(500, std::string("internal server error: storage "
                                                                 "down\n")));
  EXPECT_EQ(Get("/readyz/log"), std::make_pair(200, std::string("ok")));
  EXPECT_EQ(Get("/readyz?exclude=etcd&verbose").first, 200);
  EXPECT_EQ(Get("/readyz/nope").first, 404);
  EXPECT_EQ(Get("/livez/etcd").first, 404) << "readiness checks are not liveness checks";
}

TEST_F(HealthTest, ShuttingDownFailsReadiness) {
  health_.SetShuttingDown();
  EXPECT_EQ(Get("/readyz").first, 500);
  EXPECT_EQ(Get("/livez").first, 200);
  // As kube-apiserver's: a draining process is healthy, /healthz has no shutdown check.
  EXPECT_EQ(Get("/healthz?verbose"),
            std::make_pair(200, std::string("[+]ping ok\n[+]log ok\n[+]etcd ok\n"
                                            "healthz check passed\n")));
}

}  // namespace
}  // namespace klutch::serving::health_test
