// The controller framework end to end against a real `klutch apiserver`: the example echo
// controller (test/example) converges through creates, updates, deletions of what it owns
// and of its sources; its metrics are served; and with two replicas, killing the leader
// (kill -9, no release) hands the lease to the other, which then does the work.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <functional>
#include <thread>

#include "client/kubeconfig.h"
#include "http/client.h"
#include "reconcile/manager.h"
#include "test/example/echo_reconciler.h"
#include "test/support/server_fixture.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

using client::Json;

class ReconcileTest : public ServerTest {
 protected:
  client::ResourceClient ConfigMaps() {
    return client::ResourceClient(*rest_, client::resources::kConfigMaps, "default");
  }
  void CreateSource(const std::string& name, const std::string& value) {
    Json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", name}, {"labels", {{example::kEchoLabel, "true"}}}}},
               {"data", {{"v", value}}}};
    auto r = ConfigMaps().Create(cm);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // The echo's data value, "" when there is no echo.
  std::string EchoValue(const std::string& name) {
    auto r = ConfigMaps().Get(name + "-echo");
    return r.ok() ? machinery::GetString(*r, {"data", "v"}) : "";
  }
  bool Exists(const std::string& name) { return ConfigMaps().Get(name).ok(); }
};

TEST_F(ReconcileTest, ExampleControllerConvergesAndServesMetrics) {
  reconcile::Manager manager(*rest_, {.name = "echo-test", .health_port = 0});
  client::Informer& cms = manager.Informer(client::resources::kConfigMaps);
  example::EchoReconciler reconciler(*rest_, cms.indexer());
  reconcile::Controller& c = manager.AddController(example::kControllerName, reconciler, 2);
  c.For(cms, example::IsEchoSource);
  c.Owns(cms, "", "ConfigMap");
  CreateSource("before-start", "1");  // found by the first list
  ASSERT_TRUE(manager.Start().ok());
  EXPECT_TRUE(manager.Ready());

  for (int i = 0; i < 5; ++i) CreateSource("src-" + std::to_string(i), "a");
  EXPECT_TRUE(Eventually([&] { return EchoValue("before-start") == "1"; }));
  for (int i = 0; i < 5; ++i) {
    std::string name = "src-" + std::to_string(i);
    EXPECT_TRUE(Eventually([&] { return EchoValue(name) == "a"; })) << name;
  }
  // The echo is owned by its source (controller=true).
  auto echo = ConfigMaps().Get("src-0-echo");
  ASSERT_TRUE(echo.ok());
  EXPECT_EQ((*echo)["metadata"]["ownerReferences"][0]["controller"], true);
  // The source records what was echoed, and the controller settles (no write loop).
  EXPECT_TRUE(Eventually([&] {
    auto s = ConfigMaps().Get("src-0");
    return s.ok() &&
           !machinery::GetString(*s, {"metadata", "annotations", example::kEchoedAnnotation})
                .empty();
  }));

  // An update of the source reaches the echo.
  ASSERT_TRUE(ConfigMaps().Patch("src-1", client::PatchType::kMerge, R"({"data":{"v":"b"}})").ok());
  EXPECT_TRUE(Eventually([&] { return EchoValue("src-1") == "b"; }));
  // A hand edit of the echo is reverted; a deleted echo comes back (Owns()).
  ASSERT_TRUE(ConfigMaps()
                  .Patch("src-2-echo", client::PatchType::kMerge, R"({"data":{"v":"edited"}})")
                  .ok());
  EXPECT_TRUE(Eventually([&] { return EchoValue("src-2") == "a"; }));
  ASSERT_TRUE(ConfigMaps().Delete("src-3-echo").ok());
  EXPECT_TRUE(Eventually([&] { return EchoValue("src-3") == "a"; }));
  // Removing the label removes the echo; deleting a source lets the GC take its echo.
  ASSERT_TRUE(ConfigMaps()
                  .Patch("src-4", client::PatchType::kMerge,
                         Json{{"metadata", {{"labels", {{example::kEchoLabel, nullptr}}}}}}.dump())
                  .ok());
  EXPECT_TRUE(Eventually([&] { return !Exists("src-4-echo"); }));
  ASSERT_TRUE(ConfigMaps().Delete("src-0").ok());
  EXPECT_TRUE(Eventually([&] { return !Exists("src-0-echo"); }));

  // Metrics over HTTP, in Prometheus text format.
  http::Client health({.port = manager.health_port()});
  auto metrics = health.Do("GET", "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("controller_runtime_reconcile_total{controller=\"klutch-example-"
                               "echo\",result=\"success\"}"),
            std::string::npos)
      << metrics->body.substr(0, 2000);
  EXPECT_NE(metrics->body.find("workqueue_adds_total{name=\"klutch-example-echo\"}"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("rest_client_requests_total{code=\"201\",method=\"POST\"}"),
            std::string::npos);
  auto ready = health.Do("GET", "/readyz");
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->status, 200);
  manager.Stop();
}

TEST_F(ReconcileTest, LeaderElectionHandsOverWhenTheLeaderIsKilled) {
  constexpr int kLeaseMs = 2000;
  std::vector<std::unique_ptr<ChildProcess>> replicas;
  for (std::string id : {"replica-a", "replica-b"}) {
    replicas.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{std::string(KLUTCH_BIN_DIR) + "/../tests/echo_controller",
                                 "--kubeconfig", server_->kubeconfig().string(), "--identity", id,
                                 "--lease-ms", std::to_string(kLeaseMs)},
        dir_.path() / (id + ".log")));
  }
  client::ResourceClient leases(*rest_, client::resources::kLeases, "default");
  auto holder = [&] {
    auto lease = leases.Get(example::kControllerName);
    return lease.ok() ? machinery::GetString(*lease, {"spec", "holderIdentity"}) : "";
  };
  ASSERT_TRUE(Eventually([&] { return !holder().empty(); }));
  std::string first = holder();
  CreateSource("one", "1");
  EXPECT_TRUE(Eventually([&] { return EchoValue("one") == "1"; }));

  int leader = first == "replica-a" ? 0 : 1;
  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(replicas[leader]->Signal(SIGKILL, std::chrono::seconds(10)));
  std::string second;
  ASSERT_TRUE(Eventually([&] {
    second = holder();
    return !second.empty() && second != first;
  })) << "lease still held by "
      << holder();
  auto handover = std::chrono::steady_clock::now() - killed_at;
  std::cout << "[ measure ] lease handover after kill -9: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(handover).count()
            << " ms (lease duration " << kLeaseMs << " ms)\n";
  // The new leader does the work.
  CreateSource("two", "2");
  EXPECT_TRUE(Eventually([&] { return EchoValue("two") == "2"; }));
  auto lease = leases.Get(example::kControllerName);
  ASSERT_TRUE(lease.ok());
  EXPECT_GE((*lease)["spec"].value("leaseTransitions", 0), 1);
  // A clean stop releases the lease at once.
  ASSERT_TRUE(replicas[1 - leader]->Signal(SIGTERM, std::chrono::seconds(20)));
  EXPECT_EQ(holder(), "");
}

}  // namespace
}  // namespace klutch::testing
