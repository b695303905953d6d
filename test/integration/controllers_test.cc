// The API server's own controllers, driven over HTTP against a real server process: the
// garbage collector with several owners, namespace deletion, and CRDs that try to take over
// a resource somebody else serves.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/server_fixture.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

using machinery::Json;

class Controllers : public ServerTest {
 protected:
  http::ClientResponse Must(std::string_view method, std::string_view path,
                            const Json& body = nullptr) {
    auto r = Call(*http_, method, path, body.is_null() ? std::string() : body.dump());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : http::ClientResponse{};
  }

  Json Create(const std::string& path, const Json& body) {
    auto r = Must("POST", path, body);
    EXPECT_EQ(r.status, 201) << r.body;
    return Json::parse(r.body, nullptr, false);
  }

  int Status(const std::string& path) { return Must("GET", path).status; }

  static Json OwnerRef(const Json& owner) {
    return Json{{"apiVersion", "v1"},
                {"kind", owner["kind"]},
                {"name", machinery::Name(owner)},
                {"uid", machinery::Uid(owner)}};
  }

  static Json ConfigMap(const std::string& name, Json owners = Json::array()) {
    Json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}};
    if (!owners.empty()) cm["metadata"]["ownerReferences"] = std::move(owners);
    return cm;
  }
};

constexpr const char* kCms = "/api/v1/namespaces/default/configmaps";

TEST_F(Controllers, ForegroundDeletionKeepsDependentsThatAnotherOwnerHolds) {
  Json a = Create(kCms, ConfigMap("owner-a"));
  Json b = Create(kCms, ConfigMap("owner-b"));
  Create(kCms, ConfigMap("shared", Json::array({OwnerRef(a), OwnerRef(b)})));
  Create(kCms, ConfigMap("only-a", Json::array({OwnerRef(a)})));

  auto del = Must(
      "DELETE", std::string(kCms) + "/owner-a",
      Json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", "Foreground"}});
  ASSERT_EQ(del.status, 200) << del.body;

  std::string base = kCms;
  EXPECT_TRUE(Eventually([&] { return Status(base + "/owner-a") == 404; }));
  EXPECT_TRUE(Eventually([&] { return Status(base + "/only-a") == 404; }));
  // The shared dependent stays, holding only its live owner.
  auto shared = Must("GET", base + "/shared");
  ASSERT_EQ(shared.status, 200) << shared.body;
  Json refs = Json::parse(shared.body)["metadata"]["ownerReferences"];
  ASSERT_EQ(refs.size(), 1u) << refs.dump();
  EXPECT_EQ(refs[0]["name"], "owner-b");
  EXPECT_EQ(Status(base + "/owner-b"), 200);
}

TEST_F(Controllers, BackgroundDeletionCollectsDependentsOnceTheLastOwnerIsGone) {
  Json a = Create(kCms, ConfigMap("owner-a"));
  Json b = Create(kCms, ConfigMap("owner-b"));
  Create(kCms, ConfigMap("shared", Json::array({OwnerRef(a), OwnerRef(b)})));
  std::string base = kCms;
  ASSERT_EQ(Must("DELETE", base + "/owner-a").status, 200);
  // One owner left: the dependent stays and drops the dangling reference.
  EXPECT_TRUE(Eventually([&] {
    auto r = Must("GET", base + "/shared");
    return r.status == 200 && Json::parse(r.body)["metadata"]["ownerReferences"].size() == 1;
  }));
  ASSERT_EQ(Must("DELETE", base + "/owner-b").status, 200);
  EXPECT_TRUE(Eventually([&] { return Status(base + "/shared") == 404; }));
}

TEST_F(Controllers, OrphanDeletionKeepsDependentsWithoutTheReference) {
  Json a = Create(kCms, ConfigMap("owner"));
  Create(kCms, ConfigMap("child", Json::array({OwnerRef(a)})));
  std::string base = kCms;
  auto del =
      Must("DELETE", base + "/owner",
           Json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", "Orphan"}});
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_TRUE(Eventually([&] { return Status(base + "/owner") == 404; }));
  auto child = Must("GET", base + "/child");
  ASSERT_EQ(child.status, 200);
  EXPECT_FALSE(Json::parse(child.body)["metadata"].contains("ownerReferences")) << child.body;
}

TEST_F(Controllers, DeletingANamespaceRemovesItsContentThenTheNamespace) {
  Create("/api/v1/namespaces",
         Json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "gone"}}}});
  for (int i = 0; i < 5; ++i) {
    Create("/api/v1/namespaces/gone/configmaps", ConfigMap("cm-" + std::to_string(i)));
  }
  ASSERT_EQ(Must("DELETE", "/api/v1/namespaces/gone").status, 200);
  // While it terminates, nothing new may be created in it.
  auto late = Must("POST", "/api/v1/namespaces/gone/configmaps", ConfigMap("late"));
  if (late.status != 404) {  // unless it is already gone
    EXPECT_EQ(late.status, 403) << late.body;
    EXPECT_NE(late.body.find("because it is being terminated"), std::string::npos) << late.body;
  }
  EXPECT_TRUE(Eventually([&] { return Status("/api/v1/namespaces/gone") == 404; }));
  auto list = Must("GET", "/api/v1/namespaces/gone/configmaps");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_TRUE(Json::parse(list.body)["items"].empty()) << list.body;
}

Json Crd(const std::string& group, const std::string& plural, const std::string& kind) {
  Json schema = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  return Json{{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata",
               {{"name", plural + "." + group},
                {"annotations", {{"api-approved.kubernetes.io", "unapproved, test"}}}}},
              {"spec",
               {{"group", group},
                {"scope", "Namespaced"},
                {"names", {{"plural", plural}, {"kind", kind}}},
                {"versions", Json::array({{{"name", "v1"},
                                           {"served", true},
                                           {"storage", true},
                                           {"schema", {{"openAPIV3Schema", schema}}}}})}}}};
}

std::string Condition(const Json& crd, const std::string& type) {
  if (!crd.is_object() || crd.value("kind", "") != "CustomResourceDefinition") return "";
  const Json* conds = machinery::Find(crd, {"status", "conditions"});
  if (!conds || !conds->is_array()) return "";
  for (const auto& c : *conds) {
    if (machinery::GetString(c, {"type"}) == type) return machinery::GetString(c, {"status"});
  }
  return "";
}

TEST_F(Controllers, CollectsCustomResourcesOfACrdCreatedAfterStart) {
  constexpr const char* kCrds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  Json crd = Crd("example.com", "widgets", "Widget");
  crd["metadata"].erase("annotations");
  Create(kCrds, crd);
  std::string crd_path = std::string(kCrds) + "/widgets.example.com";
  ASSERT_TRUE(Eventually([&] {
    auto r = Must("GET", crd_path);
    return r.status == 200 && Condition(Json::parse(r.body), "Established") == "True";
  }));
  const std::string widgets = "/apis/example.com/v1/namespaces/default/widgets";
  // A widget owned by a ConfigMap, and a ConfigMap owned by a widget.
  Json owner = Create(kCms, ConfigMap("cm-owner"));
  Create(widgets, Json{{"apiVersion", "example.com/v1"},
                       {"kind", "Widget"},
                       {"metadata", {{"name", "w1"}, {"ownerReferences", {OwnerRef(owner)}}}}});
  Json w2 = Create(
      widgets,
      Json{{"apiVersion", "example.com/v1"}, {"kind", "Widget"}, {"metadata", {{"name", "w2"}}}});
  Json ref = {{"apiVersion", "example.com/v1"},
              {"kind", "Widget"},
              {"name", "w2"},
              {"uid", machinery::Uid(w2)}};
  Create(kCms, ConfigMap("cm-of-widget", Json::array({ref})));
  std::string base = kCms;
  ASSERT_EQ(Must("DELETE", base + "/cm-owner").status, 200);
  EXPECT_TRUE(Eventually([&] { return Status(widgets + "/w1") == 404; }));
  ASSERT_EQ(Must("DELETE", widgets + "/w2").status, 200);
  EXPECT_TRUE(Eventually([&] { return Status(base + "/cm-of-widget") == 404; }));
}

TEST_F(Controllers, ACrdCannotTakeOverABuiltInResource) {
  constexpr const char* kCrds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  Create(kCrds, Crd("rbac.authorization.k8s.io", "roles", "Role"));
  std::string path = std::string(kCrds) + "/roles.rbac.authorization.k8s.io";
  Json crd;
  ASSERT_TRUE(Eventually([&] {
    auto r = Must("GET", path);
    crd = Json::parse(r.body, nullptr, false);
    return r.status == 200 && !Condition(crd, "NamesAccepted").empty();
  }));
  EXPECT_EQ(Condition(crd, "NamesAccepted"), "False") << crd.dump();
  EXPECT_EQ(Condition(crd, "Established"), "False") << crd.dump();

  // Roles are still the built-in kind, and deleting the CRD leaves them alone.
  Json role = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
               {"kind", "Role"},
               {"metadata", {{"name", "reader"}}},
               {"rules", Json::array()}};
  Create("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", role);
  ASSERT_EQ(Must("DELETE", path).status, 200);
  EXPECT_TRUE(Eventually([&] { return Status(path) == 404; }));
  EXPECT_EQ(Status("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/reader"), 200);
}

}  // namespace
}  // namespace klutch::testing
