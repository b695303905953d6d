#include "schema/structural.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace klutch::schema {
namespace {

const Json kWidget = Json::parse(R"({
  "type": "object",
  "properties": {
    "spec": {"type": "object", "required": ["size"], "properties": {
      "size": {"type": "integer", "minimum": 1, "maximum": 10},
      "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
      "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
      "labels": {"type": "object", "additionalProperties": {"type": "string"}},
      "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
      "port": {"x-kubernetes-int-or-string": true},
      "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"}
    }},
    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
  }
})");

TEST(PruneUnknownFields, DropsUndeclaredFieldsAndReportsPaths) {
  Json obj = Json::parse(R"({"apiVersion":"example.com/v1","kind":"Widget",
    "metadata":{"name":"w"},
    "spec":{"size":1,"shape":"round","free":{"x":1},"labels":{"a":"b"},"tags":["a"]},
    "extra":true})");
  std::vector<std::string> pruned;
  PruneUnknownFields(obj, SchemaCursor(&kWidget, nullptr), {}, pruned);
  EXPECT_EQ(pruned, (std::vector<std::string>{"spec.shape", "extra"}));
  EXPECT_FALSE(obj["spec"].contains("shape"));
  EXPECT_EQ(obj["spec"]["free"]["x"], 1);
  EXPECT_EQ(obj["kind"], "Widget");
  EXPECT_EQ(obj["metadata"]["name"], "w");
}

TEST(ApplyDefaults, FillsAbsentProperties) {
  Json obj = Json::parse(R"({"spec":{"size":2}})");
  ApplyDefaults(obj, SchemaCursor(&kWidget, nullptr));
  EXPECT_EQ(obj["spec"]["color"], "red");
}

std::vector<std::string> Messages(const Json& obj) {
  std::vector<core::Cause> causes;
  Validate(obj, SchemaCursor(&kWidget, nullptr), causes);
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(c.field + ": " + c.message);
  return out;
}

TEST(Validate, ReportsTypeErrorsAsKubeApiserver) {
  auto m = Messages(Json::parse(R"({"spec":{"size":"string"}})"));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0],
            "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: "
            "\"string\"");
}

TEST(ValidateTypes, AcceptsNullLikeGoDecodingButRejectsWrongTypes) {
  // Built-in kinds: null reads as the zero value (kubectl 1.27 sends creationTimestamp: null).
  std::vector<core::Cause> causes;
  ValidateTypes(Json::parse(R"({"spec":{"size":null,"name":null}})"),
                SchemaCursor(&kWidget, nullptr), causes);
  EXPECT_TRUE(causes.empty());
  ValidateTypes(Json::parse(R"({"spec":{"size":"x"}})"), SchemaCursor(&kWidget, nullptr), causes);
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].field, "spec.size");
  // Custom resources: null in a non-nullable field is an error.
  EXPECT_EQ(Messages(Json::parse(R"({"spec":{"size":null}})")).size(), 1u);
}

TEST(Validate, ReportsBoundsEnumRequiredAndPattern) {
  auto m = Messages(Json::parse(
      R"({"spec":{"size":11,"color":"green","name":"ABCDEFG","tags":["a","a"],"port":1.5}})"));
  EXPECT_EQ(m, (std::vector<std::string>{
                   "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\"",
                   "spec.name: Too long: may not be more than 5 bytes",
                   "spec.name: Invalid value: \"ABCDEFG\": spec.name in body should match "
                   "'^[a-z]+$'",
                   "spec.port: Invalid value: \"number\": spec.port in body must be of type "
                   "integer-or-string: \"number\"",
                   "spec.size: Invalid value: 11.0: spec.size in body should be less than or "
                   "equal to 10",
                   "spec.tags[1]: Duplicate value: \"a\""}));
  auto missing = Messages(Json::parse(R"({"spec":{}})"));
  EXPECT_EQ(missing, (std::vector<std::string>{"spec.size: Required value"}));
  EXPECT_TRUE(Messages(Json::parse(R"({"spec":{"size":3,"port":"http"}})")).empty());
}

}  // namespace
}  // namespace klutch::schema
