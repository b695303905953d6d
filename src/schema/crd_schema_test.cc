#include "schema/crd_schema.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test/support/param_name.h"

namespace klutch::schema::crd_schema_test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Check(const Json& schema, const Json* old = nullptr) {
  std::vector<core::Cause> causes;
  ValidateCrdSchema(schema, "spec.versions[0].schema.openAPIV3Schema", CrdSchemaOptionsFor(old),
                    causes);
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(c.field + ": " + c.message);
  return out;
}

// A root schema with `spec` set to the given schema.
Json WithSpec(const char* spec) {
  return {{"type", "object"}, {"properties", {{"spec", Json::parse(spec)}}}};
}

const std::string kRoot = "spec.versions[0].schema.openAPIV3Schema";
const std::string kSpec = kRoot + ".properties[spec]";

struct Case {
  const char* name;
  const char* spec;
  std::vector<std::string> want;  // without the kSpec prefix added below
};

class CrdSchemaCase : public ::testing::TestWithParam<Case> {};

TEST_P(CrdSchemaCase, ReportsAsKubeApiserver) {
  const Case& c = GetParam();
  std::vector<std::string> want;
  for (const auto& w : c.want) want.push_back(w[0] == '.' ? kSpec + w : kSpec + ": " + w);
  EXPECT_EQ(Check(WithSpec(c.spec)), want) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Table, CrdSchemaCase,
    ::testing::Values(
        Case{
            "valid", R"({"type":"object","properties":{"a":{"type":"string","maxLength":3}}})", {}},
        Case{"missing type",
             R"({"properties":{"a":{"type":"string"}}})",
             {".type: Required value: must not be empty for specified object fields"}},
        Case{"missing item type",
             R"({"type":"array","items":{"minLength":1}})",
             {".items.type: Required value: must not be empty for specified array items"}},
        Case{"array without items",
             R"({"type":"array"})",
             {".items: Required value: must be specified"}},
        Case{"type in allOf",
             R"({"type":"string","allOf":[{"type":"string","description":"x"}]})",
             {".allOf[0].description: Forbidden: must be empty to be structural",
              ".allOf[0].type: Forbidden: must be empty to be structural"}},
        Case{"default, nullable and extensions in anyOf",
             R"({"type":"string","anyOf":[{"default":"a","nullable":true,
                 "x-kubernetes-preserve-unknown-fields":true}]})",
             {".anyOf[0].default: Forbidden: must be undefined to be structural",
              ".anyOf[0].nullable: Forbidden: must be false to be structural",
              ".anyOf[0].x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be "
              "structural"}},
        Case{"value validation property missing outside",
             R"({"type":"object","properties":{"a":{"type":"string"}},
                 "oneOf":[{"required":["a"]},{"properties":{"b":{"minLength":1}}}]})",
             {".properties[b]: Required value: because it is defined in "
              "spec.versions[0].schema.openAPIV3Schema.properties[spec].oneOf[1].properties[b]"}},
        Case{
            "int-or-string pattern is allowed",
            R"({"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]})",
            {}},
        Case{
            "embedded resource needs type object",
            R"({"x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true})",
            {".type: Required value: must be object if x-kubernetes-embedded-resource is true"}},
        Case{"embedded resource needs properties or preserve",
             R"({"type":"object","x-kubernetes-embedded-resource":true})",
             {".properties: Required value: must not be empty if x-kubernetes-embedded-resource "
              "is true without x-kubernetes-preserve-unknown-fields"}},
        Case{"uniqueItems",
             R"({"type":"array","items":{"type":"string"},"uniqueItems":true})",
             {".uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime "
              "complexity becomes quadratic"}},
        Case{"additionalProperties beside properties",
             R"({"type":"object","properties":{"a":{"type":"string"}},
                 "additionalProperties":{"type":"string"}})",
             {".additionalProperties: Forbidden: additionalProperties and properties are mutual "
              "exclusive"}},
        Case{"$ref",
             R"({"type":"object","$ref":"#/definitions/x"})",
             {".$ref: Forbidden: $ref is not supported"}},
        Case{"invalid pattern",
             R"({"type":"string","pattern":"(a"})",
             {".pattern: Invalid value: \"(a\": must be a valid regular expression, but isn't: "
              "error parsing regexp: missing closing ): `(a`"}},
        Case{"list-type on a non-array",
             R"({"type":"string","x-kubernetes-list-type":"set"})",
             {".type: Invalid value: \"string\": must be array if x-kubernetes-list-type is "
              "specified"}},
        Case{"list-map-keys without list-type map",
             R"({"type":"array","x-kubernetes-list-type":"set","x-kubernetes-list-map-keys":["a"],
                 "items":{"type":"string"}})",
             {".x-kubernetes-list-type: Invalid value: \"set\": must be map if "
              "x-kubernetes-list-map-keys is non-empty"}},
        Case{
            "list-map key neither required nor defaulted",
            R"({"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
                 "items":{"type":"object","properties":{"name":{"type":"string"}}}})",
            {".items.properties[name].default: Required value: this property is in "
             "x-kubernetes-list-map-keys, so it must have a default or be a required property"}},
        Case{"list-map key not a property",
             R"({"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["id"],
                 "items":{"type":"object","properties":{"name":{"type":"string"}}}})",
             {".x-kubernetes-list-map-keys: Invalid value: []interface {}{\"id\"}: entries must "
              "all be names of item properties"}},
        Case{"set of granular objects",
             R"({"type":"array","x-kubernetes-list-type":"set",
                 "items":{"type":"object","properties":{"a":{"type":"string"}}}})",
             {".items.x-kubernetes-map-type: Invalid value: \"null\": must be atomic as item of a "
              "list with x-kubernetes-list-type=set"}},
        Case{"map-type value",
             R"({"type":"object","x-kubernetes-map-type":"merge"})",
             {".x-kubernetes-map-type: Unsupported value: \"merge\": supported values: "
              "\"atomic\", \"granular\""}},
        Case{"default of the wrong type",
             R"({"type":"object","properties":{"n":{"type":"integer","default":"x"}}})",
             {".properties[n].default: Invalid value: \"string\":  in body must be of type "
              "integer: \"string\""}},
        Case{"default with unknown fields",
             R"({"type":"object","properties":{"o":{"type":"object","default":{"a":1,"zz":2},
                 "properties":{"a":{"type":"integer"}}}}})",
             {".properties[o].default: Invalid value: map[string]interface {}{\"a\":1, \"zz\":2}: "
              "must not have unknown fields"}},
        Case{"preserve-unknown-fields false",
             R"({"type":"object","x-kubernetes-preserve-unknown-fields":false})",
             {".x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or "
              "undefined"}},
        Case{"unknown type",
             R"({"type":"any"})",
             {".type: Unsupported value: \"any\": supported values: \"array\", \"boolean\", "
              "\"integer\", \"number\", \"object\", \"string\""}}),
    [](const ::testing::TestParamInfo<Case>& info) { return fixture::ParamName(info.param.name); });

TEST(ValidateCrdSchema, MetadataMayOnlyRestrictNameAndGenerateName) {
  Json ok = Json::parse(R"({"type":"object","properties":{"metadata":{"type":"object",
      "properties":{"name":{"type":"string","maxLength":20}}}}})");
  EXPECT_TRUE(Check(ok).empty());
  Json bad = Json::parse(R"({"type":"object","properties":{"metadata":{"type":"object",
      "properties":{"labels":{"type":"object"}}}}})");
  EXPECT_EQ(Check(bad), (std::vector<std::string>{
                            kRoot + ".properties[metadata]: Forbidden: must not specify anything "
                                    "other than name and generateName, but metadata is "
                                    "implicitly specified"}));
  Json def = Json::parse(R"({"type":"object","properties":{"metadata":{"type":"object",
      "default":{"name":"x"}}}})");
  EXPECT_EQ(Check(def),
            (std::vector<std::string>{kRoot + ".properties[metadata].default: Forbidden: "
                                              "must not be set in top-level metadata"}));
}

TEST(ValidateCrdSchema, RootRules) {
  EXPECT_EQ(Check(Json::parse(R"({"type":"object","nullable":true})")),
            (std::vector<std::string>{kRoot + ".nullable: Forbidden: nullable cannot be true at "
                                              "the root"}));
  EXPECT_EQ(Check(Json::parse(R"({"type":"object","additionalProperties":{"type":"string"}})")),
            (std::vector<std::string>{kRoot + ".additionalProperties: Forbidden: must not be used "
                                              "at the root"}));
}

TEST(ValidateCrdSchema, UpdatesKeepRulesTheStoredSchemaAlreadyBreaks) {
  Json non_structural = WithSpec(R"({"properties":{"a":{"type":"string"}}})");
  EXPECT_FALSE(Check(non_structural).empty());
  EXPECT_TRUE(Check(non_structural, &non_structural).empty());
  Json structural = WithSpec(R"({"type":"object"})");
  EXPECT_FALSE(Check(non_structural, &structural).empty());
}

// Every CRD Klutch ships must be accepted unchanged.
TEST(ValidateCrdSchema, AcceptsKlutchCrds) {
  const fs::path root = fs::path(KLUTCH_SHARED_DIR) / "conformance" / "klutch";
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  int crds = 0;
  int versions = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    std::string all = text.str();
    if (all.find("kind: CustomResourceDefinition") == std::string::npos) continue;
    // Split documents on separator lines.
    std::vector<std::string> docs(1);
    std::istringstream lines(all);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("---", 0) == 0) {
        docs.emplace_back();
      } else {
        docs.back() += line + "\n";
      }
    }
    for (const auto& doc : docs) {
      if (doc.find("kind: CustomResourceDefinition") == std::string::npos) continue;
      auto crd = machinery::ParseYaml(doc);
      ASSERT_TRUE(crd.ok()) << f << ": " << crd.status().message();
      if ((*crd)["kind"] != "CustomResourceDefinition") continue;
      ++crds;
      const Json& vs = (*crd)["spec"]["versions"];
      for (size_t i = 0; i < vs.size(); ++i) {
        ++versions;
        std::vector<core::Cause> causes;
        ValidateCrdSchema(vs[i]["schema"]["openAPIV3Schema"],
                          "spec.versions[" + std::to_string(i) + "].schema.openAPIV3Schema",
                          CrdSchemaOptions{}, causes);
        for (const auto& c : causes) ADD_FAILURE() << f << ": " << c.field << ": " << c.message;
      }
    }
  }
  EXPECT_GE(crds, 14);
  EXPECT_GE(versions, crds);
  std::cout << "klutch CRDs checked: " << crds << " (" << versions << " versions)\n";
}

}  // namespace
}  // namespace klutch::schema::crd_schema_test
