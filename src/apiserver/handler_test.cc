// Routing of the API server's handler, through the in-process test cluster (the same Serve
// path as HTTPS: RequestInfo, authentication, authorization, handler).
#include "apiserver/handler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "client/dynamic.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "test/support/process.h"
#include "test/support/test_cluster.h"

namespace klutch::apiserver {
namespace {

using client::Json;

class HandlerRouting : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = testing::TestCluster::Start({.builtin_controllers = false});
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = std::move(*cluster);
    client::ResourceClient cms(cluster_->admin(), client::resources::kConfigMaps, "default");
    for (const char* name : {"a", "b"}) {
      auto r = cms.Create(
          Json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }

  // "TYPE name" of the first `n` events a watch request answers with (initial events come
  // in name order, so a filtered watch shows what it left out by what comes first).
  std::vector<std::string> Events(const std::string& path, size_t n) {
    client::Request req;
    req.path = path;
    std::string body;
    auto end = cluster_->admin().Stream(req, [&](std::string_view data) {
      body.append(data);
      return static_cast<size_t>(std::count(body.begin(), body.end(), '\n')) < n;
    });
    EXPECT_TRUE(end.ok()) << end.status().ToString();
    if (end.ok()) {
      EXPECT_EQ(end->status, 200) << end->body;
    }
    std::vector<std::string> events;
    for (auto line : core::SplitNonEmpty(body, '\n')) {
      Json e = Json::parse(line, nullptr, false);
      events.push_back(machinery::GetString(e, {"type"}) + " " +
                       machinery::Name(e.value("object", Json::object())));
    }
    return events;
  }

  core::Status Get(const std::string& path) {
    client::Request req;
    req.path = path;
    return cluster_->admin().Do(req).status();
  }

  std::unique_ptr<testing::TestCluster> cluster_;
};

TEST_F(HandlerRouting, DeprecatedWatchPathsWatchACollectionOrOneObject) {
  EXPECT_EQ(Events("/api/v1/watch/namespaces/default/configmaps?resourceVersion=0", 2),
            (std::vector<std::string>{"ADDED a", "ADDED b"}));
  EXPECT_EQ(Events("/api/v1/watch/namespaces/default/configmaps/b?resourceVersion=0", 1),
            (std::vector<std::string>{"ADDED b"}));
  EXPECT_EQ(Events("/api/v1/watch/namespaces/kube-system?resourceVersion=0", 1),
            (std::vector<std::string>{"ADDED kube-system"}))
      << "a namespace by name (default sorts before kube-system)";
}

TEST_F(HandlerRouting, AWatchPathRefusesASelectorNamingAnotherObject) {
  core::Status st =
      Get("/api/v1/watch/namespaces/default/configmaps/"
          "b?fieldSelector=metadata.name%3Da&timeoutSeconds=1");
  EXPECT_EQ(st.reason(), core::Reason::kBadRequest) << st.ToString();
  EXPECT_NE(st.message().find("fieldSelector metadata.name doesn't match requested name"),
            std::string::npos)
      << st.message();
}

TEST_F(HandlerRouting, PathsBeyondASubresourceAndUnknownVersionsAre404) {
  EXPECT_TRUE(core::IsNotFound(Get("/api/v1/namespaces/default/configmaps/a/status/x")));
  EXPECT_TRUE(core::IsNotFound(Get("/api/v2")));
  EXPECT_TRUE(core::IsNotFound(Get("/apis/nope.example.com")));
  EXPECT_TRUE(Get("/api/v1").ok());
  EXPECT_TRUE(Get("/apis/apps/v1").ok());
}

TEST_F(HandlerRouting, DiscoveryPathsRefuseWritesWith405) {
  client::Request req;
  req.verb = "POST";
  req.path = "/apis";
  req.body = "{}";
  core::Status st = cluster_->admin().Do(req).status();
  EXPECT_EQ(st.reason(), core::Reason::kMethodNotAllowed) << st.ToString();
  EXPECT_EQ(st.message(), "the server does not allow this method on the requested resource");
}

TEST_F(HandlerRouting, MetricsReportRequestsStoredObjectsStorageLatencyAndWatches) {
  ASSERT_TRUE(Get("/api/v1/namespaces/default/configmaps").ok());
  // Names the server does not serve never become labels: a client cannot grow the series.
  client::Request invented;
  invented.path = "/apis/made.up/v1/widgets";
  (void)cluster_->admin().Do(invented);
  invented.path = "/api/v1/namespaces/default/configmaps/a/bogus";
  (void)cluster_->admin().Do(invented);
  // A watch held open while the metrics are read.
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    client::Request req;
    req.path = "/api/v1/namespaces/default/configmaps";
    req.query = {{"watch", "true"}, {"resourceVersion", "0"}};
    (void)cluster_->admin().Stream(req, [&](std::string_view) { return !stop.load(); });
  });
  std::string text;
  for (int i = 0; i < 500; ++i) {
    client::Request req;
    req.path = "/metrics";
    auto r = cluster_->admin().Do(req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    text = r->body;
    if (text.find("apiserver_longrunning_requests{component=\"apiserver\",group=\"\",resource="
                  "\"configmaps\",verb=\"WATCH\"} 1") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  // Unblocks the watcher: its next event makes on_data return false.
  client::ResourceClient cms(cluster_->admin(), client::resources::kConfigMaps, "default");
  ASSERT_TRUE(
      cms.Create(Json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "z"}}}})
          .ok());
  watcher.join();
  EXPECT_NE(text.find("apiserver_longrunning_requests{component=\"apiserver\",group=\"\","
                      "resource=\"configmaps\",verb=\"WATCH\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run="
                      "\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\","
                      "subresource=\"\",verb=\"LIST\",version=\"v1\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run="
                      "\"\",group=\"\",resource=\"configmaps\",scope=\"resource\","
                      "subresource=\"\",verb=\"POST\",version=\"v1\"} 2"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("made.up"), std::string::npos) << text;
  EXPECT_EQ(text.find("widgets"), std::string::npos) << text;
  EXPECT_EQ(text.find("bogus"), std::string::npos) << text;
  EXPECT_NE(text.find("apiserver_request_total{code=\"404\",component=\"apiserver\",dry_run="
                      "\"\",group=\"\",resource=\"\",scope=\"cluster\",subresource=\"\","
                      "verb=\"LIST\",version=\"\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("apiserver_request_total{code=\"404\",component=\"apiserver\",dry_run="
                      "\"\",group=\"\",resource=\"configmaps\",scope=\"resource\","
                      "subresource=\"\",verb=\"GET\",version=\"v1\"}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("apiserver_storage_objects{resource=\"configmaps\"} 2"), std::string::npos)
      << text;
  EXPECT_NE(text.find("apiserver_request_duration_seconds_count{component=\"apiserver\","
                      "dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\","
                      "subresource=\"\",verb=\"LIST\",version=\"v1\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("etcd_request_duration_seconds_count{operation=\"create\",type="
                      "\"configmaps\"}"),
            std::string::npos)
      << text;
}

// A custom resource is not validated against the scale paths: a selector object whose values
// are not strings is read as far as it goes instead of failing the request.
TEST_F(HandlerRouting, ScaleOfACustomResourceWithAMalformedSelectorIsServed) {
  Json crd = Json::parse(R"({
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "pools.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"kind": "Pool", "plural": "pools"},
             "versions": [{"name": "v1", "served": true, "storage": true,
                           "schema": {"openAPIV3Schema": {"type": "object",
                               "x-kubernetes-preserve-unknown-fields": true}},
                           "subresources": {"scale": {
                               "specReplicasPath": ".spec.replicas",
                               "statusReplicasPath": ".status.replicas",
                               "labelSelectorPath": ".status.selector"}}}]}})");
  client::ResourceClient crds(cluster_->admin(),
                              {"apiextensions.k8s.io", "v1", "customresourcedefinitions"});
  ASSERT_TRUE(crds.Create(crd).ok());
  ASSERT_TRUE(cluster_->server().RegisterCrd(crd).ok());
  client::ResourceClient pools(cluster_->admin(), {"example.com", "v1", "pools"}, "default");
  auto created = pools.Create(Json::parse(R"({
    "apiVersion": "example.com/v1", "kind": "Pool", "metadata": {"name": "p"},
    "spec": {"replicas": 3},
    "status": {"replicas": 2, "selector": {
        "matchLabels": {"app": "db", "tier": 7},
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", 1, "b"]},
                             "not an expression"]}}})"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  client::Request req;
  req.path = "/apis/example.com/v1/namespaces/default/pools/p/scale";
  auto scale = cluster_->admin().Do(req);
  ASSERT_TRUE(scale.ok()) << scale.status().ToString();
  Json body = Json::parse(scale->body, nullptr, false);
  EXPECT_EQ(machinery::GetString(body, {"status", "selector"}), "app=db,zone in (a,b)")
      << scale->body;
}

TEST_F(HandlerRouting, HealthEndpointsListTheirChecks) {
  client::Request req;
  req.path = "/readyz";
  req.query = {{"verbose", ""}};
  auto r = cluster_->admin().Do(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body,
            "[+]ping ok\n[+]etcd ok\n[+]informer-sync ok\n[+]shutdown ok\nreadyz check passed\n");
  req.path = "/livez/etcd";
  req.query.clear();
  r = cluster_->admin().Do(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "ok");
}

// Audit events say who did what: the User-Agent of every request, and for creates the name of
// the object (from the body, or the one generateName gave it).
TEST(HandlerAudit, EventsRecordTheUserAgentAndTheNameOfCreatedObjects) {
  testing::TempDir dir("klutch-audit-test");
  const std::string log = (dir.path() / "audit.log").string();
  auto cluster = testing::TestCluster::Start(
      {.builtin_controllers = false, .access = {.audit_log_path = log}});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  client::ResourceClient cms((*cluster)->admin(), client::resources::kConfigMaps, "default");
  ASSERT_TRUE(
      cms.Create(
             Json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "named"}}}})
          .ok());
  auto generated = cms.Create(
      Json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"generateName", "gen-"}}}});
  ASSERT_TRUE(generated.ok()) << generated.status().ToString();
  // A refused create still names the object it was for.
  ASSERT_FALSE(
      cms.Create(
             Json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "named"}}}})
          .ok());

  std::ifstream in(log);
  std::vector<Json> creates;
  size_t events = 0;
  for (std::string line; std::getline(in, line);) {
    Json e = Json::parse(line, nullptr, false);
    ++events;
    EXPECT_EQ(e.value("userAgent", ""), "klutch-test") << line;  // the test cluster's clients
    if (e.value("verb", "") == "create" && e["objectRef"].value("resource", "") == "configmaps") {
      creates.push_back(e);
    }
  }
  EXPECT_GE(events, 3u);
  ASSERT_EQ(creates.size(), 3u);
  EXPECT_EQ(creates[0]["objectRef"].value("name", ""), "named");
  EXPECT_EQ(creates[0]["responseStatus"]["code"], 201);
  EXPECT_EQ(creates[1]["objectRef"].value("name", ""), machinery::Name(*generated));
  EXPECT_TRUE(creates[1]["objectRef"].value("name", "").starts_with("gen-"));
  EXPECT_EQ(creates[2]["objectRef"].value("name", ""), "named");
  EXPECT_EQ(creates[2]["responseStatus"]["code"], 409);
}

}  // namespace
}  // namespace klutch::apiserver
