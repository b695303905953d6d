// The namespace controllers on the in-process test cluster, in simulated time.
#include "controllers/namespace_reconciler.h"

#include <gtest/gtest.h>

#include "client/dynamic.h"
#include "machinery/object.h"
#include "test/support/cluster_fixture.h"

namespace klutch::controllers::namespace_reconciler_test {
namespace {

using client::Json;
using client::ResourceClient;
using testing::Eventually;
namespace resources = client::resources;

class NamespaceControllers : public testing::ClusterTest {
 protected:
  ResourceClient Namespaces() { return Resource(resources::kNamespaces); }
  ResourceClient In(const client::GroupVersionResource& gvr, const std::string& ns) {
    return Resource(gvr, ns);
  }
  void CreateNamespace(const std::string& name) {
    Create(resources::kNamespaces,
           Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  }
  bool Exists(const ResourceClient& r, const std::string& name) { return r.Get(name).ok(); }
};

TEST_F(NamespaceControllers, EveryNamespaceGetsItsDefaultsBackAfterTheyAreRemovedOrEdited) {
  CreateNamespace("team-a");
  ResourceClient accounts = In(resources::kServiceAccounts, "team-a");
  ResourceClient config_maps = In(resources::kConfigMaps, "team-a");
  ASSERT_TRUE(Eventually([&] { return Exists(accounts, "default"); }));
  ASSERT_TRUE(Eventually([&] { return Exists(config_maps, kRootCaConfigMap); }));
  auto ca = config_maps.Get(kRootCaConfigMap);
  ASSERT_TRUE(ca.ok());
  const std::string ca_pem = machinery::GetString(*ca, {"data", "ca.crt"});
  EXPECT_NE(ca_pem.find("BEGIN CERTIFICATE"), std::string::npos) << ca->dump();

  ASSERT_TRUE(accounts.Delete("default").ok());
  EXPECT_TRUE(Eventually([&] { return Exists(accounts, "default"); }));

  Json edited = *ca;
  edited["data"]["ca.crt"] = "not a CA";
  ASSERT_TRUE(config_maps.Update(edited).ok());
  EXPECT_TRUE(Eventually([&] {
    auto now = config_maps.Get(kRootCaConfigMap);
    return now.ok() && machinery::GetString(*now, {"data", "ca.crt"}) == ca_pem;
  }));
}

TEST_F(NamespaceControllers, DeletionRemovesTheContentAndFinalizesOnlyAfterASecondEmptyPass) {
  CreateNamespace("doomed");
  ResourceClient config_maps = In(resources::kConfigMaps, "doomed");
  for (const char* name : {"a", "b"}) {
    ASSERT_TRUE(
        config_maps
            .Create(
                Json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}})
            .ok());
  }
  ASSERT_TRUE(Namespaces().Delete("doomed").ok());
  // The first pass empties the namespace, then waits 200 ms of simulated time before the
  // confirming pass: with the clock standing still the namespace stays, Terminating.
  ASSERT_TRUE(Eventually([&] {
    auto list = config_maps.List();
    return list.ok() && (*list)["items"].empty();
  }));
  ASSERT_TRUE(clock_.WaitForWaiters(1)) << "no requeue parked on the clock";
  auto ns = Namespaces().Get("doomed");
  ASSERT_TRUE(ns.ok()) << "finalized without the confirming pass";
  EXPECT_EQ(machinery::GetString(*ns, {"status", "phase"}), "Terminating");
  // WaitForWaiters counts any parked thread, so the requeue may park after this point; keep
  // moving time until the confirming pass has run.
  EXPECT_TRUE(AdvanceUntil([&] { return !Exists(Namespaces(), "doomed"); }));
}

TEST_F(NamespaceControllers, ATerminatingNamespaceRefusesNewContent) {
  CreateNamespace("closing");
  ResourceClient config_maps = In(resources::kConfigMaps, "closing");
  ASSERT_TRUE(config_maps
                  .Create(Json{{"apiVersion", "v1"},
                               {"kind", "ConfigMap"},
                               {"metadata", {{"name", "pinned"}, {"finalizers", {"test/hold"}}}}})
                  .ok());
  ASSERT_TRUE(Namespaces().Delete("closing").ok());
  auto late = config_maps.Create(
      Json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "late"}}}});
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().reason(), core::Reason::kForbidden) << late.status().ToString();
  EXPECT_NE(late.status().message().find("because it is being terminated"), std::string::npos)
      << late.status().message();
}

TEST_F(NamespaceControllers, AnObjectHeldByAFinalizerKeepsTheNamespaceUntilReleased) {
  CreateNamespace("held");
  ResourceClient config_maps = In(resources::kConfigMaps, "held");
  ASSERT_TRUE(config_maps
                  .Create(Json{{"apiVersion", "v1"},
                               {"kind", "ConfigMap"},
                               {"metadata", {{"name", "pinned"}, {"finalizers", {"test/hold"}}}}})
                  .ok());
  ASSERT_TRUE(Namespaces().Delete("held").ok());
  // Polling while the finalizer holds: simulated minutes pass, the namespace stays.
  ASSERT_TRUE(Eventually([&] {
    auto cm = config_maps.Get("pinned");
    return cm.ok() && machinery::IsBeingDeleted(*cm);
  }));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(AdvanceAndSettle(std::chrono::seconds(30)));
  EXPECT_TRUE(Exists(Namespaces(), "held"));

  ASSERT_TRUE(
      config_maps.Patch("pinned", client::PatchType::kMerge, R"({"metadata":{"finalizers":null}})")
          .ok());
  EXPECT_TRUE(AdvanceUntil([&] { return !Exists(Namespaces(), "held"); }));
}

}  // namespace
}  // namespace klutch::controllers::namespace_reconciler_test
