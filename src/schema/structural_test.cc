#include "schema/structural.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "schema/field_error.h"
#include "test/support/param_name.h"

namespace klutch::schema::structural_test {
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

std::vector<std::string> Messages(const Json& obj, const Json& schema = kWidget) {
  std::vector<core::Cause> causes;
  Validate(obj, SchemaCursor(&schema, nullptr), causes);
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(c.field + ": " + c.message + " [" + c.reason + "]");
  return out;
}

TEST(Validate, ReportsTypeErrorsAsKubeApiserver) {
  auto m = Messages(Json::parse(R"({"spec":{"size":"string"}})"));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0],
            "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: "
            "\"string\" [FieldValueTypeInvalid]");
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
  EXPECT_EQ(Messages(Json::parse(R"({"spec":{"size":null}})")),
            (std::vector<std::string>{"spec.size: Invalid value: \"null\": spec.size in body must "
                                      "be of type integer: \"null\" [FieldValueTypeInvalid]"}));
}

TEST(Validate, ReportsBoundsEnumRequiredAndPatternInKubeOrder) {
  auto m = Messages(Json::parse(
      R"({"spec":{"size":11,"color":"green","name":"ABCDEFG","tags":["a","a"],"port":1.5}})"));
  EXPECT_EQ(m, (std::vector<std::string>{
                   "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\" "
                   "[FieldValueNotSupported]",
                   // Only the first failing string check is reported (maxLength before pattern).
                   "spec.name: Too long: may not be more than 5 bytes [FieldValueTooLong]",
                   "spec.port: Invalid value: \"number\": spec.port in body must be of type "
                   "integer,string: \"number\" [FieldValueTypeInvalid]",
                   "spec.size: Invalid value: 11: spec.size in body should be less than or "
                   "equal to 10 [FieldValueInvalid]",
                   "spec.tags[1]: Duplicate value: \"a\" [FieldValueDuplicate]"}));
  EXPECT_EQ(Messages(Json::parse(R"({"spec":{}})")),
            (std::vector<std::string>{"spec.size: Required value [FieldValueRequired]"}));
  EXPECT_TRUE(Messages(Json::parse(R"({"spec":{"size":3,"port":"http"}})")).empty());
}

struct Case {
  const char* name;
  const char* schema;  // the schema of spec.v
  const char* value;   // the value of spec.v
  std::vector<std::string> want;
};

class ValidateValueCase : public ::testing::TestWithParam<Case> {};

TEST_P(ValidateValueCase, MatchesKubeApiserver) {
  const Case& c = GetParam();
  Json schema = {
      {"type", "object"},
      {"properties",
       {{"spec", {{"type", "object"}, {"properties", {{"v", Json::parse(c.schema)}}}}}}}};
  Json obj = {{"spec", {{"v", Json::parse(c.value)}}}};
  EXPECT_EQ(Messages(obj, schema), c.want) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ValidateValueCase,
    ::testing::Values(
        Case{"nullable", R"({"type":"string","nullable":true})", "null", {}},
        Case{"float maximum",
             R"({"type":"number","maximum":10})",
             "10.5",
             {"spec.v: Invalid value: 10.5: spec.v in body should be less than or equal to 10 "
              "[FieldValueInvalid]"}},
        Case{"exclusive minimum",
             R"({"type":"integer","minimum":3,"exclusiveMinimum":true})",
             "3",
             {"spec.v: Invalid value: 3: spec.v in body should be greater than 3 "
              "[FieldValueInvalid]"}},
        Case{"integral float is an integer", R"({"type":"integer"})", "2.0", {}},
        Case{"multipleOf",
             R"({"type":"integer","multipleOf":5})",
             "7",
             {"spec.v: Invalid value: 7: spec.v in body should be a multiple of 5 "
              "[FieldValueInvalid]"}},
        Case{"minLength",
             R"({"type":"string","minLength":3})",
             R"("ab")",
             {"spec.v: Invalid value: \"ab\": spec.v in body should be at least 3 chars long "
              "[FieldValueInvalid]"}},
        Case{"pattern is RE2, unanchored",
             R"({"type":"string","pattern":"^[a-z]+\\d$"})",
             R"("abc")",
             {"spec.v: Invalid value: \"abc\": spec.v in body should match '^[a-z]+\\d$' "
              "[FieldValueInvalid]"}},
        Case{"maxItems",
             R"({"type":"array","items":{"type":"string"},"maxItems":2})",
             R"(["a","b","c"])",
             {"spec.v: Too many: 3: must have at most 2 items [FieldValueTooMany]"}},
        Case{"minItems and item types",
             R"({"type":"array","items":{"type":"string"},"minItems":2})",
             "[1]",
             {"spec.v[0]: Invalid value: \"integer\": spec.v[0] in body must be of type string: "
              "\"integer\" [FieldValueTypeInvalid]",
              "spec.v: Invalid value: 1: spec.v in body should have at least 2 items "
              "[FieldValueInvalid]"}},
        Case{"maxProperties",
             R"({"type":"object","maxProperties":1,"additionalProperties":{"type":"string"}})",
             R"({"a":"x","b":"y"})",
             {"spec.v: Too many: 2: must have at most 1 items [FieldValueTooMany]"}},
        Case{"minProperties",
             R"({"type":"object","minProperties":1})",
             "{}",
             {"spec.v: Invalid value: 0: spec.v in body should have at least 1 properties "
              "[FieldValueInvalid]"}},
        Case{"map values use dots",
             R"({"type":"object","additionalProperties":{"type":"string"}})",
             R"({"a":1})",
             {"spec.v.a: Invalid value: \"integer\": spec.v.a in body must be of type string: "
              "\"integer\" [FieldValueTypeInvalid]"}},
        Case{"uuid format",
             R"({"type":"string","format":"uuid"})",
             R"("abc")",
             {"spec.v: Invalid value: \"abc\": spec.v in body must be of type uuid: \"abc\" "
              "[FieldValueTypeInvalid]"}},
        Case{"date-time format",
             R"({"type":"string","format":"date-time"})",
             R"("2024-02-30T10:00:00Z")",
             {"spec.v: Invalid value: \"2024-02-30T10:00:00Z\": spec.v in body must be of type "
              "date-time: \"2024-02-30T10:00:00Z\" [FieldValueTypeInvalid]"}},
        Case{"unknown formats are stripped", R"({"type":"string","format":"color"})", R"("x")", {}},
        Case{"int32 is not range-checked",
             R"({"type":"integer","format":"int32"})",
             "99999999999",
             {}},
        Case{"enum compares numbers by value", R"({"type":"number","enum":[1,2.5]})", "1.0", {}},
        Case{"enum of numbers",
             R"({"type":"integer","enum":[1,2]})",
             "3",
             {"spec.v: Unsupported value: 3: supported values: \"1\", \"2\" "
              "[FieldValueNotSupported]"}},
        Case{"anyOf reports the composite at <nil> and the first best branch",
             R"({"type":"integer","anyOf":[{"minimum":5},{"maximum":1}]})",
             "3",
             {"<nil>: Invalid value: \"\": \"spec.v\" must validate at least one schema (anyOf) "
              "[FieldValueInvalid]",
              "spec.v: Invalid value: 3: spec.v in body should be greater than or equal to 5 "
              "[FieldValueInvalid]"}},
        Case{"oneOf with two matches",
             R"({"type":"integer","oneOf":[{"minimum":1},{"maximum":9}]})",
             "3",
             {"<nil>: Invalid value: \"\": \"spec.v\" must validate one and only one schema "
              "(oneOf). Found 2 valid alternatives [FieldValueInvalid]"}},
        Case{"allOf",
             R"({"type":"string","allOf":[{"maxLength":2},{"pattern":"^a"}]})",
             R"("abc")",
             {"spec.v: Too long: may not be more than 2 bytes [FieldValueTooLong]",
              "<nil>: Invalid value: \"\": \"spec.v\" must validate all the schemas (allOf) "
              "[FieldValueInvalid]"}},
        Case{"not",
             R"({"type":"string","not":{"enum":["x"]}})",
             R"("x")",
             {"<nil>: Invalid value: \"\": \"spec.v\" must not validate the schema (not) "
              "[FieldValueInvalid]"}},
        Case{
            "int-or-string",
            R"({"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]})",
            "true",
            {"spec.v: Invalid value: \"boolean\": spec.v in body must be of type "
             "integer,string: \"boolean\" [FieldValueTypeInvalid]",
             "<nil>: Invalid value: \"\": \"spec.v\" must validate at least one schema (anyOf) "
             "[FieldValueInvalid]",
             "spec.v: Invalid value: \"boolean\": spec.v in body must be of type integer: "
             "\"boolean\" [FieldValueTypeInvalid]"}},
        Case{
            "list-type map, one key",
            R"({"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
                 "items":{"type":"object","properties":{"name":{"type":"string"},"port":{"type":"integer"}}}})",
            R"([{"name":"http","port":80},{"name":"http","port":81},{"port":1},{"port":2}])",
            {"spec.v[1]: Duplicate value: map[string]interface {}{\"name\":\"http\"} "
             "[FieldValueDuplicate]",
             "spec.v[3]: Duplicate value: map[string]interface {}{} [FieldValueDuplicate]"}},
        Case{
            "list-type map, two keys",
            R"({"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name","proto"],
                 "items":{"type":"object","properties":{"name":{"type":"string"},"proto":{"type":"string"}}}})",
            R"([{"name":"a","proto":"TCP"},{"name":"a","proto":"UDP"},{"name":"a","proto":"TCP"}])",
            {"spec.v[2]: Duplicate value: map[string]interface {}{\"name\":\"a\", "
             "\"proto\":\"TCP\"} [FieldValueDuplicate]"}},
        Case{
            "list-type map items must be objects",
            R"({"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
                 "items":{"x-kubernetes-preserve-unknown-fields":true}})",
            R"([{"name":"a"},"b"])",
            {"spec.v[1]: Invalid value: \"b\": must be an object for an array of list-type map "
             "[FieldValueInvalid]"}},
        Case{"list-type set of numbers compares Go types",
             R"({"type":"array","x-kubernetes-list-type":"set","items":{"type":"number"}})",
             "[1, 1.0, 1, 1]",
             {"spec.v[2]: Duplicate value: 1 [FieldValueDuplicate]"}},
        Case{"embedded resource",
             R"({"type":"object","x-kubernetes-embedded-resource":true,
                 "x-kubernetes-preserve-unknown-fields":true})",
             R"({"metadata":{"name":"a/b"}})",
             {"spec.v.apiVersion: Required value [FieldValueRequired]",
              "spec.v.kind: Required value [FieldValueRequired]",
              "spec.v.metadata.name: Invalid value: \"a/b\": may not contain '/' "
              "[FieldValueInvalid]"}},
        Case{"embedded resource kind",
             R"({"type":"object","x-kubernetes-embedded-resource":true,
                 "x-kubernetes-preserve-unknown-fields":true})",
             R"({"apiVersion":"a/b/c","kind":"9Pod"})",
             {"spec.v.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: "
              "a/b/c [FieldValueInvalid]",
              "spec.v.kind: Invalid value: \"9Pod\": may have mixed case, but should otherwise "
              "match: a DNS-1035 label must consist of lower case alphanumeric characters or "
              "'-', start with an alphabetic character, and end with an alphanumeric character "
              "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
              "'[a-z]([-a-z0-9]*[a-z0-9])?') [FieldValueInvalid]"}}),
    [](const ::testing::TestParamInfo<Case>& info) { return fixture::ParamName(info.param.name); });

TEST(ValidateValue, RootsCausesAtTheGivenPathLikeDefaultValidation) {
  std::vector<core::Cause> causes;
  ValidateValue(Json("abc"), Json::parse(R"({"type":"integer"})"), "x.default", causes);
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].field, "x.default");
  EXPECT_EQ(causes[0].message,
            "Invalid value: \"string\":  in body must be of type integer: \"string\"");
}

TEST(FieldError, RendersValuesLikeGo) {
  EXPECT_EQ(GoFloat(10), "10");
  EXPECT_EQ(GoFloat(1.5), "1.5");
  EXPECT_EQ(GoFloat(1e6), "1e+06");
  EXPECT_EQ(GoFloat(123456), "123456");
  EXPECT_EQ(GoFloat(0.0001), "0.0001");
  EXPECT_EQ(GoFloat(0.00001), "1e-05");
  EXPECT_EQ(GoJson(Json::parse("1.0")), "1");
  EXPECT_EQ(GoJson(Json::parse("1e21")), "1e+21");
  EXPECT_EQ(GoJson(Json::parse("1e-7")), "1e-7");
  EXPECT_EQ(GoValue(Json::parse(R"({"b":[1,"x"],"a":null})")),
            "map[string]interface {}{\"a\":interface {}(nil), \"b\":[]interface {}{1, \"x\"}}");
  EXPECT_EQ(GoValue(Json()), "\"null\"");
  EXPECT_EQ(TooLong("f", 1).message, "Too long: may not be more than 1 byte");
  EXPECT_TRUE(IsBlocking(TooMany("f", 3, 2)));
  EXPECT_FALSE(IsBlocking(Invalid("f", Json(1), "x")));
}

}  // namespace
}  // namespace klutch::schema::structural_test
