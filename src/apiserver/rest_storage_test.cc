// RestStorage semantics on the memory store: what every write path must guarantee.
#include "apiserver/rest_storage.h"

#include <gtest/gtest.h>

#include "apiserver/builtin_resources.h"
#include "apiserver/crd.h"
#include "core/strings.h"
#include "storage/memory/memory_store.h"

namespace klutch::apiserver::rest_storage_test {
namespace {

class RestStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.SetOwner("builtin", BuiltinResources());
    for (const char* ns : {"default", "demo"}) {
      ASSERT_TRUE(
          rest_.Create(*Res("namespaces"), "", Json{{"metadata", {{"name", ns}}}}, Opts()).ok());
    }
  }
  ResourcePtr Res(std::string_view plural, std::string_view group = "",
                  std::string_view version = "v1") {
    return registry_.Find(group, version, plural);
  }
  static WriteOptions Opts(std::string manager = "test") {
    WriteOptions o;
    o.field_manager = std::move(manager);
    return o;
  }
  static Json Cm(const std::string& name, Json data = Json::object()) {
    return {{"apiVersion", "v1"},
            {"kind", "ConfigMap"},
            {"metadata", {{"name", name}}},
            {"data", std::move(data)}};
  }
  int64_t Rv(const Json& o) { return std::stoll(machinery::ResourceVersion(o)); }

  storage::MemoryStore store_;
  Registry registry_;
  RestStorage rest_{store_, registry_, core::RealClock::Get()};
};

TEST_F(RestStorageTest, CreateSetsServerOwnedMetadataAndManagedFields) {
  Json in = Cm("a", {{"k", "v"}});
  in["metadata"]["uid"] = "client-chosen";
  in["metadata"]["resourceVersion"] = "42";
  auto out = rest_.Create(*Res("configmaps"), "demo", in, Opts("creator"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->created);
  const Json& m = out->object["metadata"];
  EXPECT_NE(m["uid"], "client-chosen");
  EXPECT_EQ(m["namespace"], "demo");
  EXPECT_FALSE(m.contains("generation"));  // ConfigMaps have no spec to count
  EXPECT_EQ(Rv(out->object), store_.Revision());
  ASSERT_EQ(m["managedFields"].size(), 1u);
  EXPECT_EQ(m["managedFields"][0]["manager"], "creator");
  EXPECT_EQ(m["managedFields"][0]["operation"], "Update");
}

TEST_F(RestStorageTest, GenerateNameAddsFiveCharacters) {
  Json in = Cm("");
  in["metadata"].erase("name");
  in["metadata"]["generateName"] = "gen-";
  auto out = rest_.Create(*Res("configmaps"), "demo", in, Opts());
  ASSERT_TRUE(out.ok());
  std::string name = machinery::Name(out->object);
  EXPECT_EQ(name.size(), 9u);
  EXPECT_TRUE(name.starts_with("gen-"));
}

TEST_F(RestStorageTest, DryRunWritesNothing) {
  int64_t before = store_.Revision();
  WriteOptions o = Opts();
  o.dry_run = true;
  auto out = rest_.Create(*Res("configmaps"), "demo", Cm("dry"), o);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(store_.Revision(), before);
  EXPECT_TRUE(core::IsNotFound(rest_.Get(*Res("configmaps"), "demo", "dry").status()));
}

TEST_F(RestStorageTest, NoOpUpdateKeepsResourceVersion) {
  auto created = rest_.Create(*Res("configmaps"), "demo", Cm("a", {{"k", "v"}}), Opts());
  ASSERT_TRUE(created.ok());
  int64_t before = store_.Revision();
  auto same = rest_.Update(*Res("configmaps"), "demo", "a", created->object, Opts());
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(store_.Revision(), before);
  EXPECT_EQ(machinery::ResourceVersion(same->object), machinery::ResourceVersion(created->object));
}

TEST_F(RestStorageTest, StaleResourceVersionConflicts) {
  auto created = rest_.Create(*Res("configmaps"), "demo", Cm("a", {{"k", "1"}}), Opts());
  ASSERT_TRUE(created.ok());
  Json v2 = created->object;
  v2["data"]["k"] = "2";
  ASSERT_TRUE(rest_.Update(*Res("configmaps"), "demo", "a", v2, Opts()).ok());
  Json stale = created->object;
  stale["data"]["k"] = "3";
  auto r = rest_.Update(*Res("configmaps"), "demo", "a", stale, Opts());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), 409);
  EXPECT_EQ(rest_.Get(*Res("configmaps"), "demo", "a")->at("data")["k"], "2");
}

TEST_F(RestStorageTest, FinalizersKeepDeletedObjectsUntilRemoved) {
  Json in = Cm("f");
  in["metadata"]["finalizers"] = {"example.com/x"};
  ASSERT_TRUE(rest_.Create(*Res("configmaps"), "demo", in, Opts()).ok());
  auto del = rest_.Delete(*Res("configmaps"), "demo", "f", {});
  ASSERT_TRUE(del.ok());
  EXPECT_FALSE(del->deleted);
  EXPECT_TRUE(machinery::IsBeingDeleted(del->object));
  auto add = rest_.Mutate(
      *Res("configmaps"), "demo", "f",
      [](Json& o) {
        o["metadata"]["finalizers"].push_back("example.com/y");
        return core::Status::Ok();
      },
      Opts());
  EXPECT_EQ(add.status().code(), 422);
  auto clear = rest_.Mutate(
      *Res("configmaps"), "demo", "f",
      [](Json& o) {
        o["metadata"].erase("finalizers");
        return core::Status::Ok();
      },
      Opts());
  ASSERT_TRUE(clear.ok()) << clear.status().ToString();
  EXPECT_TRUE(core::IsNotFound(rest_.Get(*Res("configmaps"), "demo", "f").status()));
}

TEST_F(RestStorageTest, TerminatingNamespaceRefusesNewContent) {
  ASSERT_TRUE(rest_.Delete(*Res("namespaces"), "", "demo", {}).ok());
  auto ns = rest_.Get(*Res("namespaces"), "", "demo");
  ASSERT_TRUE(ns.ok());
  EXPECT_EQ((*ns)["status"]["phase"], "Terminating");
  auto r = rest_.Create(*Res("configmaps"), "demo", Cm("late"), Opts());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), 403);
  ASSERT_TRUE(r.status().details());
  EXPECT_EQ(r.status().details()->causes[0].reason, "NamespaceTerminating");
}

TEST_F(RestStorageTest, ContinueTokensReadOneSnapshot) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(rest_.Create(*Res("configmaps"), "demo", Cm("c" + std::to_string(i)), Opts()).ok());
  }
  ListOptions first;
  first.limit = 2;
  auto page1 = rest_.List(*Res("configmaps"), "demo", first);
  ASSERT_TRUE(page1.ok());
  ASSERT_EQ(page1->items.size(), 2u);
  ASSERT_FALSE(page1->continue_token.empty());
  // Changes after the first page do not show up in later pages.
  ASSERT_TRUE(rest_.Create(*Res("configmaps"), "demo", Cm("c2a"), Opts()).ok());
  ASSERT_TRUE(rest_.Delete(*Res("configmaps"), "demo", "c4", {}).ok());
  std::vector<std::string> names;
  for (auto& i : page1->items) names.push_back(machinery::Name(i.Object()));
  std::string token = page1->continue_token;
  while (!token.empty()) {
    ListOptions next;
    next.limit = 2;
    next.continue_token = token;
    auto page = rest_.List(*Res("configmaps"), "demo", next);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (auto& i : page->items) names.push_back(machinery::Name(i.Object()));
    EXPECT_EQ(page->resource_version, page1->resource_version);
    token = page->continue_token;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"c0", "c1", "c2", "c3", "c4"}));
}

TEST_F(RestStorageTest, ServerSideApplyCreatesThenDetectsConflicts) {
  PatchRequest apply;
  apply.type = PatchType::kApply;
  apply.body = Cm("ssa", {{"a", "1"}}).dump();
  WriteOptions o = Opts("applier");
  auto created = rest_.Patch(*Res("configmaps"), "demo", "ssa", apply, o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(created->created);
  PatchRequest merge;
  merge.type = PatchType::kMerge;
  merge.body = R"({"data":{"a":"2"}})";
  ASSERT_TRUE(rest_.Patch(*Res("configmaps"), "demo", "ssa", merge, Opts("other")).ok());
  apply.body = Cm("ssa", {{"a", "3"}}).dump();
  auto conflict = rest_.Patch(*Res("configmaps"), "demo", "ssa", apply, o);
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.status().code(), 409);
  EXPECT_EQ(conflict.status().message(),
            "Apply failed with 1 conflict: conflict with \"other\" using v1: .data.a");
  apply.force = true;
  auto forced = rest_.Patch(*Res("configmaps"), "demo", "ssa", apply, o);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->object["data"]["a"], "3");
}

TEST_F(RestStorageTest, StrictFieldValidationRejectsAndWarnReports) {
  Json in = Cm("s");
  in["bogus"] = true;
  WriteOptions strict = Opts();
  strict.field_validation = FieldValidation::kStrict;
  auto r = rest_.Create(*Res("configmaps"), "demo", in, strict);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), 400);
  EXPECT_EQ(r.status().message(),
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: "
            "unknown field \"bogus\"");
  WriteOptions warn = Opts();
  auto w = rest_.Create(*Res("configmaps"), "demo", in, warn);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->warnings, (std::vector<std::string>{"unknown field \"bogus\""}));
  EXPECT_FALSE(w->object.contains("bogus"));
}

TEST_F(RestStorageTest, CustomResourcesNeedResourceVersionOnUpdateAndTrackGeneration) {
  Json crd =
      Json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"widgets.example.com"},
    "spec":{"group":"example.com","scope":"Namespaced",
      "names":{"plural":"widgets","kind":"Widget"},
      "versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
        "schema":{"openAPIV3Schema":{"type":"object","properties":{
          "spec":{"type":"object","properties":{"size":{"type":"integer","default":1}}},
          "status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}})");
  auto resources = ResourcesForCrd(crd);
  ASSERT_TRUE(resources.ok());
  registry_.SetOwner("widgets.example.com", *resources);
  auto w = Res("widgets", "example.com", "v1");
  auto created =
      rest_.Create(*w, "demo", Json::parse(R"({"apiVersion":"example.com/v1","kind":"Widget",
                                "metadata":{"name":"w"},"spec":{},"status":{"x":1}})"),
                   Opts());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->object["spec"]["size"], 1);     // defaulted
  EXPECT_FALSE(created->object.contains("status"));  // status subresource
  EXPECT_EQ(created->object["metadata"]["generation"], 1);
  Json no_rv = created->object;
  no_rv["metadata"].erase("resourceVersion");
  EXPECT_EQ(rest_.Update(*w, "demo", "w", no_rv, Opts()).status().code(), 422);
  Json bigger = created->object;
  bigger["spec"]["size"] = 2;
  auto updated = rest_.Update(*w, "demo", "w", bigger, Opts());
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated->object["metadata"]["generation"], 2);
  PatchRequest smp;
  smp.type = PatchType::kStrategic;
  smp.body = "{}";
  EXPECT_EQ(rest_.Patch(*w, "demo", "w", smp, Opts()).status().code(), 415);
}

// kube-apiserver's corev1.MaxSecretSize: 1 MiB of data per ConfigMap (data and binaryData
// together) and per Secret (data, with stringData merged in), in bytes as stored decoded.
TEST_F(RestStorageTest, ConfigMapsAndSecretsHoldAtMostOneMebibyteOfData) {
  constexpr size_t kMax = 1024 * 1024;
  auto cms = Res("configmaps");
  const std::string too_big =
      R"(ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes)";
  auto expect_too_big = [&](const core::Result<WriteOutcome>& r, const std::string& message,
                            const std::string& field) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), 422);
    EXPECT_EQ(r.status().message(), message);
    ASSERT_TRUE(r.status().details().has_value());
    ASSERT_EQ(r.status().details()->causes.size(), 1u);
    EXPECT_EQ(r.status().details()->causes[0].reason, "FieldValueTooLong");
    EXPECT_EQ(r.status().details()->causes[0].field, field);
  };
  // Create: one byte over, whether in data or spread over data and binaryData.
  expect_too_big(rest_.Create(*cms, "demo", Cm("big", {{"k", std::string(kMax + 1, 'x')}}), Opts()),
                 too_big, "[]");
  Json spread = Cm("big", {{"k", std::string(kMax / 2, 'x')}});
  spread["binaryData"] = {{"b", core::Base64Encode(std::string(kMax / 2 + 1, 'y'))}};
  expect_too_big(rest_.Create(*cms, "demo", spread, Opts()), too_big, "[]");
  // Exactly 1 MiB is allowed (binaryData counts decoded, not as base64 text).
  spread["binaryData"]["b"] = core::Base64Encode(std::string(kMax / 2, 'y'));
  auto created = rest_.Create(*cms, "demo", spread, Opts());
  ASSERT_TRUE(created.ok()) << created.status().ToString();

  // Update, patch and apply cannot grow it past the limit either.
  Json grown = created->object;
  grown["data"]["more"] = "z";
  expect_too_big(rest_.Update(*cms, "demo", "big", grown, Opts()), too_big, "[]");
  PatchRequest merge;
  merge.type = PatchType::kMerge;
  merge.body = R"({"data":{"more":"z"}})";
  expect_too_big(rest_.Patch(*cms, "demo", "big", merge, Opts()), too_big, "[]");
  PatchRequest apply;
  apply.type = PatchType::kApply;
  apply.body = Json{{"apiVersion", "v1"},
                    {"kind", "ConfigMap"},
                    {"metadata", {{"name", "applied"}}},
                    {"data", {{"k", std::string(kMax + 1, 'x')}}}}
                   .dump();
  expect_too_big(
      rest_.Patch(*cms, "demo", "applied", apply, Opts("applier")),
      R"(ConfigMap "applied" is invalid: []: Too long: may not be more than 1048576 bytes)", "[]");
  EXPECT_TRUE(core::IsNotFound(rest_.Get(*cms, "demo", "applied").status()));

  // Secrets: data counts decoded; stringData is merged into data first.
  auto secrets = Res("secrets");
  const std::string secret_too_big =
      R"(Secret "s" is invalid: data: Too long: may not be more than 1048576 bytes)";
  Json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"name", "s"}}},
                 {"data", {{"k", core::Base64Encode(std::string(kMax + 1, 'x'))}}}};
  expect_too_big(rest_.Create(*secrets, "demo", secret, Opts()), secret_too_big, "data");
  secret["data"]["k"] = core::Base64Encode(std::string(kMax - 1, 'x'));
  secret["stringData"] = {{"s", "ab"}};
  expect_too_big(rest_.Create(*secrets, "demo", secret, Opts()), secret_too_big, "data");
  secret["stringData"] = {{"s", "a"}};
  ASSERT_TRUE(rest_.Create(*secrets, "demo", secret, Opts()).ok());
}

}  // namespace
}  // namespace klutch::apiserver::rest_storage_test
