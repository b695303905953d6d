// Informer timing on the in-process test cluster, in simulated time: resync and list backoff.
#include <gtest/gtest.h>

#include <atomic>

#include "client/informer.h"
#include "client/multi_namespace_informer.h"
#include "test/support/cluster_fixture.h"

namespace klutch::client::informer_unit_test {
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
}  // namespace klutch::client::informer_unit_test

namespace klutch::client::informer_unit_test {
namespace {

class InformerSets : public testing::ClusterTest {
 protected:
  void SetUp() override { StartCluster({.builtin_controllers = false}); }
  void Namespace(const std::string& name) {
    Create(resources::kNamespaces,
           Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  }
};

TEST_F(InformerSets, RemovedHandlerIsNeverCalledAgain) {
  Informer informer(cluster_->admin(), resources::kConfigMaps, {.ns = "default", .clock = &clock_});
  std::atomic<int> kept{0}, removed{0};
  informer.AddEventHandler({.on_add = [&](const ObjectPtr&) { ++kept; }});
  Informer::HandlerId id =
      informer.AddEventHandler({.on_add = [&](const ObjectPtr&) { ++removed; }});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  Create(resources::kConfigMaps, ConfigMap("default", "a"));
  ASSERT_TRUE(testing::Eventually([&] { return kept == 1 && removed == 1; }));
  informer.RemoveEventHandler(id);
  Create(resources::kConfigMaps, ConfigMap("default", "b"));
  ASSERT_TRUE(testing::Eventually([&] { return kept == 2; }));
  EXPECT_EQ(removed.load(), 1);
}

TEST_F(InformerSets, MultiNamespaceInformerFollowsItsNamespaceSet) {
  for (const char* ns : {"a", "b", "c"}) {
    Namespace(ns);
    Create(resources::kConfigMaps, ConfigMap(ns, std::string("in-") + ns));
  }
  MultiNamespaceInformer informer(cluster_->admin(), resources::kConfigMaps, {.clock = &clock_});
  core::Mutex mu;
  std::vector<std::string> added, synced;
  informer.AddEventHandler({.on_add = [&](const ObjectPtr& o) {
    core::MutexLock lock(mu);
    added.push_back(ObjectKey(*o));
  }});
  informer.OnSynced([&](const std::string& ns) {
    core::MutexLock lock(mu);
    synced.push_back(ns);
  });
  informer.AddNamespace("a");
  informer.Start();
  ASSERT_TRUE(testing::Eventually([&] { return informer.HasSynced("a"); }));
  EXPECT_TRUE(informer.Get("a/in-a"));
  EXPECT_FALSE(informer.Get("b/in-b")) << "b is not watched";
  EXPECT_FALSE(informer.HasSynced("b"));

  informer.AddNamespace("b");  // after Start: starts at once, lists as adds
  ASSERT_TRUE(testing::Eventually([&] { return informer.HasSynced("b"); }));
  EXPECT_TRUE(informer.Get("b/in-b"));
  Create(resources::kConfigMaps, ConfigMap("b", "later"));
  ASSERT_TRUE(testing::Eventually([&] { return informer.Get("b/later") != nullptr; }));
  {
    core::MutexLock lock(mu);
    EXPECT_EQ(synced, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(std::count(added.begin(), added.end(), "b/later"), 1);
    EXPECT_EQ(std::count(added.begin(), added.end(), "c/in-c"), 0);
  }
  informer.RemoveNamespace("a");
  EXPECT_FALSE(informer.Get("a/in-a"));
  EXPECT_FALSE(informer.HasSynced("a"));
  EXPECT_EQ(informer.Namespaces(), std::vector<std::string>{"b"});
  EXPECT_EQ(informer.List("b").size(), 2u);
  informer.Stop();
  EXPECT_TRUE(informer.Namespaces().empty());
}

TEST_F(InformerSets, CompactCacheReadsBackWhatItCached) {
  Namespace("a");
  Create(resources::kConfigMaps, ConfigMap("a", "x"));
  Informer informer(cluster_->admin(), resources::kConfigMaps, {.compact = true, .clock = &clock_});
  ASSERT_TRUE(
      informer.indexer()
          .AddIndex("byData",
                    [](const Json& o) {
                      return std::vector<std::string>{machinery::GetString(o, {"data", "k"})};
                    })
          .ok());
  core::Mutex mu;
  std::string old_value;
  informer.AddEventHandler({.on_update = [&](const ObjectPtr& old, const ObjectPtr&) {
    core::MutexLock lock(mu);
    old_value = machinery::GetString(*old, {"data", "k"});
  }});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(30)));
  ASSERT_TRUE(Resource(resources::kConfigMaps, "a")
                  .Patch("x", client::PatchType::kMerge, R"({"data":{"k":"v1"}})")
                  .ok());
  ASSERT_TRUE(
      testing::Eventually([&] { return informer.indexer().ByIndex("byData", "v1").size() == 1; }));
  auto live = Resource(resources::kConfigMaps, "a").Get("x");
  ASSERT_TRUE(live.ok());
  ObjectPtr cached = informer.indexer().Get("a/x");
  ASSERT_TRUE(cached);
  EXPECT_EQ(machinery::ResourceVersion(*cached), machinery::ResourceVersion(*live));
  EXPECT_EQ((*cached)["data"], (*live)["data"]);
  EXPECT_EQ(informer.indexer().List().size(), 1u);
  ASSERT_TRUE(Resource(resources::kConfigMaps, "a")
                  .Patch("x", client::PatchType::kMerge, R"({"data":{"k":"v2"}})")
                  .ok());
  ASSERT_TRUE(
      testing::Eventually([&] { return informer.indexer().ByIndex("byData", "v2").size() == 1; }));
  EXPECT_TRUE(informer.indexer().ByIndex("byData", "v1").empty()) << "the old value unindexed";
  // Handlers run after the cache is updated: wait for this update's call, not only the index
  // (checking at once read the first update's "" now and then).
  EXPECT_TRUE(testing::Eventually([&] {
    core::MutexLock lock(mu);
    return old_value == "v1";
  })) << "update handlers get the previous object";
}

}  // namespace
}  // namespace klutch::client::informer_unit_test
