#include "apiserver/request_info.h"

#include <gtest/gtest.h>

namespace klutch::apiserver::request_info_test {
namespace {

http::Request Req(std::string method, std::string target) {
  http::Request r;
  r.method = std::move(method);
  r.SetTarget(std::move(target));
  return r;
}

struct Case {
  const char* method;
  const char* target;
  bool resource;
  const char* verb;
  const char* group;
  const char* ns;
  const char* resource_name;
  const char* subresource;
  const char* name;
};

// Expectations follow kube-apiserver's request-info factory.
TEST(ParseRequestInfo, ReadsVerbsAndResourcesAsKubeApiserver) {
  const Case cases[] = {
      {"GET", "/api/v1/namespaces/ns/configmaps", true, "list", "", "ns", "configmaps", "", ""},
      {"GET", "/api/v1/namespaces/ns/configmaps/c", true, "get", "", "ns", "configmaps", "", "c"},
      {"HEAD", "/api/v1/namespaces/ns/configmaps/c", true, "get", "", "ns", "configmaps", "", "c"},
      {"GET", "/api/v1/namespaces/ns/configmaps?watch=true", true, "watch", "", "ns", "configmaps",
       "", ""},
      {"GET", "/api/v1/namespaces/ns/configmaps?watch=True", true, "watch", "", "ns", "configmaps",
       "", ""},
      {"GET", "/api/v1/namespaces/ns/configmaps?watch=0", true, "list", "", "ns", "configmaps", "",
       ""},
      {"GET", "/api/v1/namespaces/ns/configmaps?watch=false", true, "list", "", "ns", "configmaps",
       "", ""},
      {"GET", "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dc", true, "list", "",
       "ns", "configmaps", "", "c"},
      {"GET", "/api/v1/watch/namespaces/ns/configmaps", true, "watch", "", "ns", "configmaps", "",
       ""},
      {"GET", "/api/v1/watch/namespaces/ns/configmaps/c", true, "watch", "", "ns", "configmaps", "",
       "c"},
      {"GET", "/api/v1/watch/namespaces", true, "watch", "", "", "namespaces", "", ""},
      {"GET", "/api/v1/watch/namespaces/ns", true, "watch", "", "ns", "namespaces", "", "ns"},
      {"GET", "/apis/apps/v1/watch/deployments?fieldSelector=metadata.name%3Dd", true, "watch",
       "apps", "", "deployments", "", "d"},
      {"POST", "/api/v1/namespaces/ns/configmaps", true, "create", "", "ns", "configmaps", "", ""},
      {"PUT", "/api/v1/namespaces/ns/configmaps/c", true, "update", "", "ns", "configmaps", "",
       "c"},
      {"PATCH", "/api/v1/namespaces/ns/configmaps/c", true, "patch", "", "ns", "configmaps", "",
       "c"},
      {"DELETE", "/api/v1/namespaces/ns/configmaps/c", true, "delete", "", "ns", "configmaps", "",
       "c"},
      {"DELETE", "/api/v1/namespaces/ns/configmaps", true, "deletecollection", "", "ns",
       "configmaps", "", ""},
      {"GET", "/api/v1/namespaces/ns", true, "get", "", "ns", "namespaces", "", "ns"},
      {"PUT", "/api/v1/namespaces/ns/status", true, "update", "", "ns", "namespaces", "status",
       "ns"},
      {"PUT", "/api/v1/namespaces/ns/finalize", true, "update", "", "ns", "namespaces", "finalize",
       "ns"},
      {"GET", "/apis/example.com/v1/namespaces/ns/status", true, "get", "example.com", "ns",
       "namespaces", "status", "ns"},
      {"POST", "/api/v1/namespaces/ns/serviceaccounts/robot/token", true, "create", "", "ns",
       "serviceaccounts", "token", "robot"},
      {"GET", "/apis/apps/v1/deployments", true, "list", "apps", "", "deployments", "", ""},
      {"PUT", "/apis/apps/v1/namespaces/ns/deployments/d/scale", true, "update", "apps", "ns",
       "deployments", "scale", "d"},
      {"GET", "/api", false, "get", "", "", "", "", ""},
      {"GET", "/api/v1", false, "get", "", "", "", "", ""},
      {"GET", "/apis/apps/v1", false, "get", "", "", "", "", ""},
      {"GET", "/healthz", false, "get", "", "", "", "", ""},
      {"POST", "/version", false, "post", "", "", "", "", ""},
  };
  for (const auto& c : cases) {
    RequestInfo info = ParseRequestInfo(Req(c.method, c.target));
    SCOPED_TRACE(std::string(c.method) + " " + c.target);
    EXPECT_EQ(info.resource_request, c.resource);
    EXPECT_EQ(info.verb, c.verb);
    EXPECT_EQ(info.api_group, c.group);
    EXPECT_EQ(info.ns, c.ns);
    EXPECT_EQ(info.resource, c.resource_name);
    EXPECT_EQ(info.subresource, c.subresource);
    EXPECT_EQ(info.name, c.name);
  }
}

TEST(ParseRequestInfo, MarksWhereTheNameAndTheWatchCameFrom) {
  RequestInfo selected = ParseRequestInfo(
      Req("GET", "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dc"));
  EXPECT_TRUE(selected.name_from_field_selector);
  EXPECT_FALSE(selected.watch_path);
  RequestInfo watched = ParseRequestInfo(Req("GET", "/api/v1/watch/namespaces/ns/configmaps/c"));
  EXPECT_FALSE(watched.name_from_field_selector);
  EXPECT_TRUE(watched.watch_path);
  EXPECT_FALSE(watched.extra_segments);
  EXPECT_TRUE(
      ParseRequestInfo(Req("GET", "/api/v1/namespaces/ns/configmaps/c/status/x")).extra_segments);
  EXPECT_FALSE(
      ParseRequestInfo(Req("GET", "/api/v1/namespaces/ns/configmaps/c/status")).extra_segments);
}

TEST(QueryBool, FollowsKubernetesConversion) {
  EXPECT_FALSE(QueryBool(std::nullopt));
  EXPECT_FALSE(QueryBool("0"));
  EXPECT_FALSE(QueryBool("false"));
  EXPECT_FALSE(QueryBool("FALSE"));
  EXPECT_TRUE(QueryBool("true"));
  EXPECT_TRUE(QueryBool("1"));
  EXPECT_TRUE(QueryBool("True"));
  EXPECT_TRUE(QueryBool("yes"));
  EXPECT_TRUE(QueryBool(""));
}

}  // namespace
}  // namespace klutch::apiserver::request_info_test
