#include "http/router.h"

#include <gtest/gtest.h>

namespace klutch::http::router_test {
namespace {

Request Make(std::string method, std::string target) {
  Request r;
  r.method = std::move(method);
  r.SetTarget(std::move(target));
  return r;
}

// Each route answers with its own name and the parameters it captured.
RouteHandler Echo(std::string name) {
  return [name](Request&, const PathParams& p) {
    Response r;
    r.body = name;
    for (const char* key : {"id", "binding", "n", "path"}) {
      if (p.Has(key)) r.body += std::string(" ") + key + "=" + std::string(p.Get(key));
    }
    return r;
  };
}

class RouterTest : public ::testing::Test {
 protected:
  RouterTest() {
    router_.Get("/healthz", Echo("health"))
        .Get("/v2/service_instances/{id}", Echo("get-instance"))
        .Put("/v2/service_instances/{id}", Echo("put-instance"))
        .Put("/v2/service_instances/{id}/service_bindings/{binding}", Echo("put-binding"))
        .Get("/v2/service_instances/last", Echo("literal-last"))
        .Get("/items/{n:int}", Echo("item-by-number"))
        .Get("/items/{id}", Echo("item-by-name"))
        .Get("/openapi/v3/{path...}", Echo("openapi"));
  }
  std::string Body(std::string method, std::string target) {
    Request r = Make(std::move(method), std::move(target));
    Response resp = router_.Serve(r);
    return std::to_string(resp.status) + " " + resp.body;
  }
  Router router_;
};

TEST_F(RouterTest, MatchesLiteralsAndCapturesParameters) {
  EXPECT_EQ(Body("GET", "/healthz"), "200 health");
  EXPECT_EQ(Body("GET", "/healthz/"), "200 health") << "empty segments are ignored";
  EXPECT_EQ(Body("GET", "/v2/service_instances/abc?x=1"), "200 get-instance id=abc");
  EXPECT_EQ(Body("PUT", "/v2/service_instances/abc/service_bindings/b1"),
            "200 put-binding id=abc binding=b1");
  EXPECT_EQ(Body("GET", "/v2/service_instances/a%2Fb"), "200 get-instance id=a/b")
      << "parameters are decoded, one segment each";
}

TEST_F(RouterTest, TheMoreSpecificSegmentWins) {
  EXPECT_EQ(Body("GET", "/v2/service_instances/last"), "200 literal-last");
  EXPECT_EQ(Body("GET", "/items/42"), "200 item-by-number n=42");
  EXPECT_EQ(Body("GET", "/items/forty-two"), "200 item-by-name id=forty-two");
  EXPECT_EQ(Body("GET", "/items/-7"), "200 item-by-number n=-7");
}

TEST_F(RouterTest, RestParametersTakeWhatIsLeftIncludingNothing) {
  EXPECT_EQ(Body("GET", "/openapi/v3/apis/apps/v1"), "200 openapi path=apis/apps/v1");
  EXPECT_EQ(Body("GET", "/openapi/v3"), "200 openapi path=");
}

TEST_F(RouterTest, UnknownPathsAre404AndOtherMethods405WithAllow) {
  EXPECT_EQ(Body("GET", "/nope"), "404 not found");
  EXPECT_EQ(Body("GET", "/v2/service_instances/a/service_bindings"), "404 not found");
  Request r = Make("DELETE", "/v2/service_instances/abc");
  Response resp = router_.Serve(r);
  EXPECT_EQ(resp.status, 405);
  EXPECT_EQ(resp.headers.Get("Allow"), "GET, HEAD, PUT");
}

TEST_F(RouterTest, HeadIsServedByGetRoutes) { EXPECT_EQ(Body("HEAD", "/healthz"), "200 health"); }

TEST_F(RouterTest, AMethodOnALessSpecificRouteStillMatches) {
  // PUT has no literal "last" route: the parameter route serves it.
  EXPECT_EQ(Body("PUT", "/v2/service_instances/last"), "200 put-instance id=last");
}

TEST(Router, ErrorsAreFormattedByTheServer) {
  Router router([](int code, std::string message) {
    Response r;
    r.status = code;
    r.body = "{\"error\":\"" + message + "\"}";
    return r;
  });
  Request r = Make("GET", "/x");
  EXPECT_EQ(router.Serve(r).body, "{\"error\":\"not found\"}");
}

TEST(Router, RefusesMalformedAndDuplicatePatterns) {
  Router router;
  auto noop = [](Request&, const PathParams&) { return Response{}; };
  EXPECT_FALSE(router.Add("GET", "healthz", noop).ok()) << "relative";
  EXPECT_FALSE(router.Add("GET", "/a/{b", noop).ok()) << "unclosed";
  EXPECT_FALSE(router.Add("GET", "/a/{b:uuid}", noop).ok()) << "unknown type";
  EXPECT_FALSE(router.Add("GET", "/a/{rest...}/b", noop).ok()) << "rest not last";
  EXPECT_FALSE(router.Add("GET", "/a/{x}/{x}", noop).ok()) << "name twice";
  EXPECT_FALSE(router.Add("GET", "/a/b}c", noop).ok()) << "stray brace";
  ASSERT_TRUE(router.Add("GET", "/a/{x}", noop).ok());
  core::Status dup = router.Add("GET", "/a/{y}", noop);
  EXPECT_FALSE(dup.ok()) << "same shape under another name";
  EXPECT_NE(dup.message().find("already routed"), std::string::npos) << dup.message();
  EXPECT_TRUE(router.Add("POST", "/a/{y}", noop).ok());
  EXPECT_TRUE(router.Matches("/a/1"));
  EXPECT_FALSE(router.Matches("/b"));
}

}  // namespace
}  // namespace klutch::http::router_test
