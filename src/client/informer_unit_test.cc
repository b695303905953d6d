// Informer timing on the in-process test cluster, in simulated time: resync and list backoff.
#include <gtest/gtest.h>

#include <atomic>

#include "client/informer.h"
#include "test/support/cluster_fixture.h"

namespace klutch::client {
namespace {

class InformerTiming : public testing::ClusterTest {
 protected:
  void SetUp() override { StartCluster({.builtin_controllers = false}); }
};

TEST_F(InformerTiming, ResyncRedeliversEveryObjectEachPeriodOfSimulatedTime) {
  Create(resources::kConfigMaps, ConfigMap("default", "a"));
  Informer informer(cluster_->admin(), resources::kConfigMaps,
                    {.ns = "default", .resync_period = std::chrono::minutes(1), .clock = &clock_});
  std::atomic<int> resyncs{0};
  informer.AddEventHandler({.on_update = [&](const ObjectPtr& old, const ObjectPtr& now) {
    if (old == now) ++resyncs;
  }});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  // The reflector resyncs between watches: a watch ends at its first event or bookmark after
  // a resync fell due. An event is the quickest way to hand it that turn in a test.
  clock_.Advance(std::chrono::seconds(59));
  Create(resources::kConfigMaps, ConfigMap("default", "poke-1"));
  ASSERT_TRUE(testing::Eventually([&] { return informer.indexer().Size() == 2; }));
  EXPECT_EQ(resyncs.load(), 0) << "resynced before the period passed";
  clock_.Advance(std::chrono::seconds(1));
  Create(resources::kConfigMaps, ConfigMap("default", "poke-2"));
  EXPECT_TRUE(testing::Eventually([&] { return resyncs.load() >= 3; }))
      << "every cached object is re-delivered once the period passed";
}

TEST_F(InformerTiming, AFailingListBacksOffOnTheClockAndSyncsOnceItCan) {
  const GroupVersionResource widgets{"example.com", "v1", "widgets"};
  Informer informer(cluster_->admin(), widgets,
                    {.min_backoff = std::chrono::seconds(1),
                     .max_backoff = std::chrono::seconds(8),
                     .clock = &clock_});
  informer.Start();
  // Not served: the list fails (404) and the reflector waits 1 s, 2 s, 4 s ... of simulated
  // time between attempts; without the clock moving it stays unsynced.
  ASSERT_TRUE(clock_.WaitForWaiters(1));
  EXPECT_FALSE(informer.HasSynced());
  Json schema = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  Create(resources::kCustomResourceDefinitions,
         Json{{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", "widgets.example.com"}}},
              {"spec",
               {{"group", "example.com"},
                {"scope", "Namespaced"},
                {"names", {{"plural", "widgets"}, {"kind", "Widget"}}},
                {"versions", Json::array({{{"name", "v1"},
                                           {"served", true},
                                           {"storage", true},
                                           {"schema", {{"openAPIV3Schema", schema}}}}})}}}});
  // This cluster runs no CRD controller: serve the CRD by hand, as that controller would.
  auto crd = Resource(resources::kCustomResourceDefinitions).Get("widgets.example.com");
  ASSERT_TRUE(crd.ok());
  ASSERT_TRUE(cluster_->server().RegisterCrd(*crd).ok());
  EXPECT_FALSE(informer.HasSynced()) << "retried before its backoff elapsed";
  EXPECT_TRUE(AdvanceUntil([&] { return informer.HasSynced(); }, std::chrono::seconds(1)));
}

}  // namespace
}  // namespace klutch::client
