#include "machinery/object.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "machinery/jsonpath.h"
#include "machinery/validation.h"

namespace klutch::machinery::object_test {
namespace {

TEST(StatusJson, InvalidObjectMatchesKubeApiserverWording) {
  auto s = InvalidObject("", "ConfigMap", "Bad_Name",
                         {FieldInvalid("metadata.name", "Bad_Name", "bad"),
                          FieldInvalid("data[bad key!]", "bad key!", "worse")});
  EXPECT_EQ(s.code(), 422);
  EXPECT_EQ(s.message(),
            "ConfigMap \"Bad_Name\" is invalid: [metadata.name: Invalid value: \"Bad_Name\": bad, "
            "data[bad key!]: Invalid value: \"bad key!\": worse]");
  Json j = StatusToJson(s);
  EXPECT_EQ(j["reason"], "Invalid");
  EXPECT_EQ(j["details"]["kind"], "ConfigMap");
  EXPECT_EQ(j["details"]["causes"][1]["field"], "data[bad key!]");
  core::Status back = StatusFromJson(j);
  EXPECT_EQ(back.reason(), core::Reason::kInvalid);
  EXPECT_EQ(back.details()->causes.size(), 2u);
}

TEST(StatusJson, SingleCauseIsInline) {
  auto s = InvalidObject("example.com", "Widget", "w", {FieldRequired("spec.size")});
  EXPECT_EQ(s.message(), "Widget.example.com \"w\" is invalid: spec.size: Required value");
}

TEST(Validation, NamesAndLabels) {
  EXPECT_TRUE(IsDns1123Subdomain("a.b-c").empty());
  EXPECT_FALSE(IsDns1123Subdomain("Bad_Name").empty());
  EXPECT_FALSE(IsDns1123Label("a.b").empty());
  EXPECT_TRUE(IsQualifiedName("example.com/app").empty());
  EXPECT_FALSE(IsQualifiedName("-bad").empty());
  EXPECT_TRUE(IsValidLabelValue("").empty());
  EXPECT_FALSE(IsValidLabelValue("bad value").empty());
  EXPECT_TRUE(IsConfigMapKey(".env").empty());
  EXPECT_FALSE(IsConfigMapKey("bad key!").empty());
}

TEST(Validation, ObjectMetaCausesCarryFieldPaths) {
  std::vector<core::Cause> causes;
  ValidateObjectMeta(Json::parse(R"({"name":"ok","labels":{"bad key":"v"},
      "finalizers":["example.com/f", "bad finalizer"]})"),
                     true, NameRule::kDns1123Subdomain, causes);
  ASSERT_EQ(causes.size(), 3u);
  EXPECT_EQ(causes[0].field, "metadata.namespace");
  EXPECT_EQ(causes[1].field, "metadata.labels");
  EXPECT_EQ(causes[2].field, "metadata.finalizers");  // unindexed, as kube-apiserver reports it
}

TEST(JsonPath, SelectsFieldsIndexesAndFilters) {
  Json doc = Json::parse(R"({"spec":{"size":3,"tags":["a","b"]},
    "status":{"conditions":[{"type":"Synced","status":"False"},{"type":"Ready","status":"True"}]}})");
  auto eval = [&](const char* expr) {
    auto p = JsonPath::Compile(expr);
    EXPECT_TRUE(p.ok()) << expr << ": " << p.status().ToString();
    std::vector<Json> out;
    for (const Json* v : p->Evaluate(doc)) out.push_back(*v);
    return out;
  };
  EXPECT_EQ(eval(".spec.size"), std::vector<Json>{3});
  EXPECT_EQ(eval("{.spec.tags[1]}"), std::vector<Json>{"b"});
  EXPECT_EQ(eval(".spec.tags[*]"), (std::vector<Json>{"a", "b"}));
  EXPECT_EQ(eval(".status.conditions[?(@.type==\"Ready\")].status"), std::vector<Json>{"True"});
  EXPECT_EQ(eval("..status").size(), 3u);
  EXPECT_TRUE(eval(".spec.missing").empty());
  EXPECT_FALSE(JsonPath::Compile(".spec[").ok());
  EXPECT_FALSE(JsonPath::Compile("[-").ok());  // found by fuzz_jsonpath
  EXPECT_FALSE(JsonPath::Compile("[99999999999999999999]").ok());
}

}  // namespace
}  // namespace klutch::machinery::object_test
