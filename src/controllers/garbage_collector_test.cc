// The garbage collector on the in-process test cluster: background, foreground and orphan
// deletion with one and several owners, across built-in kinds and custom resources.
#include "controllers/garbage_collector.h"

#include <gtest/gtest.h>

#include <thread>

#include "test/support/cluster_fixture.h"

namespace klutch::controllers::garbage_collector_test {
namespace {

using client::Json;
namespace resources = client::resources;

class GarbageCollection : public testing::ClusterTest {
 protected:
  client::ResourceClient ConfigMaps() { return Resource(resources::kConfigMaps, "default"); }
  Json MakeConfigMap(const std::string& name, Json owners = Json::array()) {
    return Create(resources::kConfigMaps, ConfigMap("default", name, std::move(owners)));
  }
  bool Gone(const std::string& name) { return !ConfigMaps().Get(name).ok(); }
  size_t Owners(const std::string& name) {
    auto cm = ConfigMaps().Get(name);
    if (!cm.ok()) return 0;
    const Json* refs = machinery::Find(*cm, {"metadata", "ownerReferences"});
    return refs && refs->is_array() ? refs->size() : 0;
  }
};

TEST_F(GarbageCollection, ForegroundDeletionKeepsDependentsThatAnotherOwnerHolds) {
  Json a = MakeConfigMap("owner-a");
  Json b = MakeConfigMap("owner-b");
  MakeConfigMap("shared", Json::array({OwnerRef(a), OwnerRef(b)}));
  MakeConfigMap("only-a", Json::array({OwnerRef(a)}));
  ASSERT_TRUE(ConfigMaps().Delete("owner-a", {.propagation_policy = "Foreground"}).ok());
  EXPECT_TRUE(AdvanceUntil([&] { return Gone("owner-a") && Gone("only-a"); }));
  // The shared dependent stays, holding only its live owner.
  auto shared = ConfigMaps().Get("shared");
  ASSERT_TRUE(shared.ok());
  const Json& refs = (*shared)["metadata"]["ownerReferences"];
  ASSERT_EQ(refs.size(), 1u) << refs.dump();
  EXPECT_EQ(refs[0]["name"], "owner-b");
  EXPECT_FALSE(Gone("owner-b"));
}

TEST_F(GarbageCollection, ForegroundDeletionWaitsForDependentsHeldByFinalizers) {
  Json owner = MakeConfigMap("owner");
  Json child = ConfigMap("default", "child", Json::array({OwnerRef(owner)}));
  child["metadata"]["finalizers"] = {"test/hold"};
  Create(resources::kConfigMaps, child);
  ASSERT_TRUE(ConfigMaps().Delete("owner", {.propagation_policy = "Foreground"}).ok());
  // The owner stays (foregroundDeletion) while its dependent is held, however long.
  ASSERT_TRUE(AdvanceUntil([&] {
    auto c = ConfigMaps().Get("child");
    return c.ok() && machinery::IsBeingDeleted(*c);
  }));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(AdvanceAndSettle(std::chrono::seconds(1)));
  auto held = ConfigMaps().Get("owner");
  ASSERT_TRUE(held.ok()) << "the owner went before its dependent";
  EXPECT_EQ(machinery::Strings(machinery::Find(*held, {"metadata", "finalizers"})),
            std::vector<std::string>{"foregroundDeletion"});
  ASSERT_TRUE(ConfigMaps()
                  .Patch("child", client::PatchType::kMerge, R"({"metadata":{"finalizers":null}})")
                  .ok());
  EXPECT_TRUE(AdvanceUntil([&] { return Gone("child") && Gone("owner"); }));
}

TEST_F(GarbageCollection, BackgroundDeletionCollectsDependentsOnceTheLastOwnerIsGone) {
  Json a = MakeConfigMap("owner-a");
  Json b = MakeConfigMap("owner-b");
  MakeConfigMap("shared", Json::array({OwnerRef(a), OwnerRef(b)}));
  ASSERT_TRUE(ConfigMaps().Delete("owner-a").ok());
  // One owner left: the dependent stays and drops the dangling reference.
  EXPECT_TRUE(AdvanceUntil([&] { return Owners("shared") == 1; }));
  ASSERT_TRUE(ConfigMaps().Delete("owner-b").ok());
  EXPECT_TRUE(AdvanceUntil([&] { return Gone("shared"); }));
}

TEST_F(GarbageCollection, OrphanDeletionKeepsDependentsWithoutTheReference) {
  Json a = MakeConfigMap("owner");
  MakeConfigMap("child", Json::array({OwnerRef(a)}));
  ASSERT_TRUE(ConfigMaps().Delete("owner", {.propagation_policy = "Orphan"}).ok());
  EXPECT_TRUE(AdvanceUntil([&] { return Gone("owner"); }));
  EXPECT_TRUE(AdvanceUntil([&] { return !Gone("child") && Owners("child") == 0; }));
}

TEST_F(GarbageCollection, ADependentWhoseOwnerNeverExistedIsCollected) {
  Json ghost = {{"apiVersion", "v1"},
                {"kind", "ConfigMap"},
                {"name", "never-was"},
                {"uid", "00000000-0000-0000-0000-000000000001"}};
  MakeConfigMap("stray", Json::array({ghost}));
  EXPECT_TRUE(AdvanceUntil([&] { return Gone("stray"); }));
}

TEST_F(GarbageCollection, AnOwnerOfAKindNobodyServesKeepsTheDependent) {
  Json unknown = {{"apiVersion", "example.com/v1"},
                  {"kind", "NotServed"},
                  {"name", "x"},
                  {"uid", "00000000-0000-0000-0000-000000000002"}};
  MakeConfigMap("kept", Json::array({unknown}));
  MakeConfigMap("probe", Json::array({{{"apiVersion", "v1"},
                                       {"kind", "ConfigMap"},
                                       {"name", "never-was"},
                                       {"uid", "00000000-0000-0000-0000-000000000003"}}}));
  ASSERT_TRUE(AdvanceUntil([&] { return Gone("probe"); })) << "the collector runs";
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(AdvanceAndSettle(std::chrono::seconds(1)));
  EXPECT_FALSE(Gone("kept")) << "kube's collector retries an unresolvable kind, never deletes";
}

TEST_F(GarbageCollection, ANamespacedOwnerOfAClusterScopedObjectIsIgnored) {
  // A cluster-scoped object naming a namespaced owner (as a CRD owned by a namespaced
  // APIServiceBinding): kube treats the reference as invalid and keeps the object.
  Json owner = {{"apiVersion", "v1"},
                {"kind", "ConfigMap"},
                {"name", "owner"},
                {"uid", "00000000-0000-0000-0000-000000000004"}};
  Json ns = {{"apiVersion", "v1"},
             {"kind", "Namespace"},
             {"metadata", {{"name", "owned-ns"}, {"ownerReferences", Json::array({owner})}}}};
  Create(resources::kNamespaces, ns);
  MakeConfigMap("probe", Json::array({{{"apiVersion", "v1"},
                                       {"kind", "ConfigMap"},
                                       {"name", "never-was"},
                                       {"uid", "00000000-0000-0000-0000-000000000005"}}}));
  ASSERT_TRUE(AdvanceUntil([&] { return Gone("probe"); })) << "the collector runs";
  for (int i = 0; i < 20; ++i) {
    clock_.Advance(std::chrono::seconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto kept = Resource(resources::kNamespaces).Get("owned-ns");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_FALSE(machinery::IsBeingDeleted(*kept));
}

TEST_F(GarbageCollection, FollowsCustomResourcesOfACrdCreatedAfterStart) {
  Create(resources::kCustomResourceDefinitions, Crd("example.com", "widgets", "Widget"));
  const client::GroupVersionResource widgets_gvr{"example.com", "v1", "widgets"};
  client::ResourceClient widgets = Resource(widgets_gvr, "default");
  ASSERT_TRUE(AdvanceUntil([&] { return widgets.List().ok(); })) << "the CRD is never served";
  // A widget owned by a ConfigMap, and a ConfigMap owned by a widget.
  Json owner = MakeConfigMap("cm-owner");
  Create(
      widgets_gvr,
      Json{{"apiVersion", "example.com/v1"},
           {"kind", "Widget"},
           {"metadata",
            {{"name", "w1"}, {"namespace", "default"}, {"ownerReferences", {OwnerRef(owner)}}}}});
  Json w2 = Create(widgets_gvr, Json{{"apiVersion", "example.com/v1"},
                                     {"kind", "Widget"},
                                     {"metadata", {{"name", "w2"}, {"namespace", "default"}}}});
  MakeConfigMap("cm-of-widget", Json::array({OwnerRef(w2)}));
  ASSERT_TRUE(ConfigMaps().Delete("cm-owner").ok());
  EXPECT_TRUE(AdvanceUntil([&] { return !widgets.Get("w1").ok(); }));
  ASSERT_TRUE(widgets.Delete("w2").ok());
  EXPECT_TRUE(AdvanceUntil([&] { return Gone("cm-of-widget"); }));
}

}  // namespace
}  // namespace klutch::controllers::garbage_collector_test
