// The CRD controller on the in-process test cluster: conditions, serving, refusing takeovers,
// and instance cleanup on deletion.
#include "controllers/crd_reconciler.h"

#include <gtest/gtest.h>

#include "test/support/cluster_fixture.h"

namespace klutch::controllers::crd_reconciler_test {
namespace {

using client::Json;
namespace resources = client::resources;

class CrdController : public testing::ClusterTest {
 protected:
  std::string Condition(const std::string& crd_name, const std::string& type) {
    auto crd = Resource(resources::kCustomResourceDefinitions).Get(crd_name);
    if (!crd.ok()) return "";
    const Json* conds = machinery::Find(*crd, {"status", "conditions"});
    if (!conds || !conds->is_array()) return "";
    for (const auto& c : *conds) {
      if (machinery::GetString(c, {"type"}) == type) return machinery::GetString(c, {"status"});
    }
    return "";
  }
};

TEST_F(CrdController, EstablishesANewCrdAndServesItsResource) {
  Create(resources::kCustomResourceDefinitions, Crd("example.com", "widgets", "Widget"));
  EXPECT_TRUE(
      AdvanceUntil([&] { return Condition("widgets.example.com", "Established") == "True"; }));
  EXPECT_EQ(Condition("widgets.example.com", "NamesAccepted"), "True");
  EXPECT_TRUE(Resource({"example.com", "v1", "widgets"}, "default").List().ok());
}

TEST_F(CrdController, ACrdCannotTakeOverABuiltInResource) {
  Create(resources::kCustomResourceDefinitions, Crd("rbac.authorization.k8s.io", "roles", "Role"));
  const std::string name = "roles.rbac.authorization.k8s.io";
  ASSERT_TRUE(AdvanceUntil([&] { return !Condition(name, "NamesAccepted").empty(); }));
  EXPECT_EQ(Condition(name, "NamesAccepted"), "False");
  EXPECT_EQ(Condition(name, "Established"), "False");
  // Roles are still the built-in kind, and deleting the CRD leaves them alone.
  Create(resources::kRoles, Json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                                 {"kind", "Role"},
                                 {"metadata", {{"name", "reader"}, {"namespace", "default"}}},
                                 {"rules", Json::array()}});
  ASSERT_TRUE(Resource(resources::kCustomResourceDefinitions).Delete(name).ok());
  EXPECT_TRUE(
      AdvanceUntil([&] { return !Exists(resources::kCustomResourceDefinitions, "", name); }));
  EXPECT_TRUE(Exists(resources::kRoles, "default", "reader"));
}

TEST_F(CrdController, DeletingACrdDeletesItsObjectsFirst) {
  Create(resources::kCustomResourceDefinitions, Crd("example.com", "gadgets", "Gadget"));
  const client::GroupVersionResource gadgets{"example.com", "v1", "gadgets"};
  ASSERT_TRUE(AdvanceUntil([&] { return Resource(gadgets, "default").List().ok(); }));
  for (const char* name : {"g1", "g2"}) {
    Create(gadgets, Json{{"apiVersion", "example.com/v1"},
                         {"kind", "Gadget"},
                         {"metadata", {{"name", name}, {"namespace", "default"}}}});
  }
  ASSERT_TRUE(Resource(resources::kCustomResourceDefinitions).Delete("gadgets.example.com").ok());
  EXPECT_TRUE(AdvanceUntil(
      [&] { return !Exists(resources::kCustomResourceDefinitions, "", "gadgets.example.com"); }));
  // Served again by a new CRD of the same name: no object survived the old one.
  Create(resources::kCustomResourceDefinitions, Crd("example.com", "gadgets", "Gadget"));
  ASSERT_TRUE(AdvanceUntil([&] { return Resource(gadgets, "default").List().ok(); }));
  auto list = Resource(gadgets, "default").List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE((*list)["items"].empty()) << list->dump();
}

}  // namespace
}  // namespace klutch::controllers::crd_reconciler_test
