#include "client/watch.h"

#include <gtest/gtest.h>

#include "client/dynamic.h"

namespace klutch::client::watch_test {
namespace {

std::vector<std::string> Decode(WatchDecoder& d, std::string_view data,
                                core::Status* st = nullptr) {
  std::vector<std::string> out;
  core::Status s = d.Feed(data, [&](WatchEvent e) {
    out.push_back(std::string(EventTypeName(e.type)) + ":" + e.object->value("n", ""));
    return true;
  });
  if (st) *st = s;
  return out;
}

TEST(WatchDecoder, YieldsEventsSplitAnywhere) {
  const std::string stream =
      "{\"type\":\"ADDED\",\"object\":{\"n\":\"a\"}}\n"
      "{\"type\":\"MODIFIED\",\"object\":{\"n\":\"b\\n\"}}\r\n"
      "\n"
      "{\"type\":\"BOOKMARK\",\"object\":{\"n\":\"c\"}}\n"
      "{\"type\":\"DELETED\",\"object\":{\"n\":\"d\"}}\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    WatchDecoder d;
    std::vector<std::string> got;
    for (size_t i = 0; i < stream.size(); i += piece) {
      auto part = Decode(d, std::string_view(stream).substr(i, piece));
      got.insert(got.end(), part.begin(), part.end());
    }
    EXPECT_EQ(got, (std::vector<std::string>{"ADDED:a", "MODIFIED:b\n", "BOOKMARK:c", "DELETED:d"}))
        << "piece " << piece;
    EXPECT_EQ(d.pending_bytes(), 0u);
  }
}

TEST(WatchDecoder, KeepsATruncatedEventPending) {
  WatchDecoder d;
  EXPECT_TRUE(Decode(d, "{\"type\":\"ADDED\",\"obj").empty());
  EXPECT_GT(d.pending_bytes(), 0u);
}

TEST(WatchDecoder, RejectsGarbageAndStaysFailed) {
  struct Case {
    std::string input;
    std::string message;
  };
  std::vector<Case> cases = {
      {"not json\n", "not valid JSON"},
      {"[1,2]\n", "not a JSON object"},
      {"{\"object\":{}}\n", "no string \"type\""},
      {"{\"type\":\"ADDED\",\"object\":3}\n", "no \"object\" object"},
      {"{\"type\":\"EXPLODED\",\"object\":{}}\n", "unknown event type \"EXPLODED\""},
  };
  for (const auto& c : cases) {
    WatchDecoder d;
    core::Status st;
    Decode(d, c.input, &st);
    EXPECT_FALSE(st.ok()) << c.input;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
    // Sticky: a good event afterwards is not decoded.
    EXPECT_TRUE(Decode(d, "{\"type\":\"ADDED\",\"object\":{}}\n", &st).empty());
    EXPECT_FALSE(st.ok());
  }
}

TEST(WatchDecoder, BoundsTheSizeOfOneEvent) {
  WatchDecoder d(/*max_event_bytes=*/64);
  core::Status st;
  Decode(d, std::string(100, 'x'), &st);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("exceeds 64 bytes"), std::string::npos);
}

TEST(WatchDecoder, StopsWhenTheHandlerSaysSoAndResumesLater) {
  WatchDecoder d;
  int seen = 0;
  const std::string two =
      "{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADDED\",\"object\":{}}\n";
  ASSERT_TRUE(d.Feed(two, [&](WatchEvent) { return ++seen < 1; }).ok());
  EXPECT_EQ(seen, 1);
  ASSERT_TRUE(d.Feed("", [&](WatchEvent) { return ++seen > 0; }).ok());
  EXPECT_EQ(seen, 2);
}

TEST(ParseWithoutManagedFields, DropsOnlyTheObjectsOwnManagedFields) {
  Json list = ParseWithoutManagedFields(
      R"({"metadata":{"managedFields":"list-level stays"},"items":[
           {"metadata":{"name":"a","managedFields":[{"manager":"m"}]},
            "data":{"managedFields":"user data stays"}},
           {"metadata":{"name":"b"},"spec":{"metadata":{"managedFields":1}}}]})",
      3);
  ASSERT_FALSE(list.is_discarded());
  EXPECT_EQ(list["metadata"]["managedFields"], "list-level stays");
  EXPECT_FALSE(list["items"][0]["metadata"].contains("managedFields"));
  EXPECT_EQ(list["items"][0]["metadata"]["name"], "a");
  EXPECT_EQ(list["items"][0]["data"]["managedFields"], "user data stays");
  EXPECT_EQ(list["items"][1]["spec"]["metadata"]["managedFields"], 1);

  WatchDecoder d(WatchDecoder::kDefaultMaxEventBytes, /*skip_managed_fields=*/true);
  std::vector<WatchEvent> events;
  ASSERT_TRUE(d.Feed(R"({"type":"ADDED","object":{"metadata":{"name":"x","managedFields":[]}}})"
                     "\n",
                     [&](WatchEvent e) {
                       events.push_back(std::move(e));
                       return true;
                     })
                  .ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].object->dump(), R"({"metadata":{"name":"x"}})");
  EXPECT_TRUE(ParseWithoutManagedFields("{broken", 1).is_discarded());
}

TEST(ResourcePath, BuildsCoreGroupNamespacedAndSubresourcePaths) {
  EXPECT_EQ(ResourcePath(resources::kNamespaces, ""), "/api/v1/namespaces");
  EXPECT_EQ(ResourcePath(resources::kConfigMaps, "ns", "a b"),
            "/api/v1/namespaces/ns/configmaps/a%20b");
  EXPECT_EQ(ResourcePath(resources::kDeployments, "x", "web", "scale"),
            "/apis/apps/v1/namespaces/x/deployments/web/scale");
  EXPECT_EQ(ResourcePath(resources::kClusterRoles, "", "admin"),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin");
}

}  // namespace
}  // namespace klutch::client::watch_test
