// libFuzzer target for custom resource validation and CRD schema checks.
//
// Input: a JSON document. It is validated as an object against a fixed schema using every
// keyword and extension Validate supports; when the input is an object with a "schema" and
// a "value" member, the value is also validated against that schema and the schema goes
// through ValidateCrdSchema. Nothing may crash; every cause must name a CauseType.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "schema/crd_schema.h"
#include "schema/structural.h"

namespace {

using klutch::machinery::Json;

const Json& FixedSchema() {
  static const Json kSchema = Json::parse(R"({
    "type": "object",
    "properties": {
      "apiVersion": {"type": "string"},
      "kind": {"type": "string"},
      "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
      "spec": {"type": "object", "required": ["plan"], "maxProperties": 12, "properties": {
        "plan": {"type": "string", "enum": ["small", "medium", "large"]},
        "size": {"type": "integer", "minimum": 1, "maximum": 100, "multipleOf": 2},
        "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0.5, "nullable": true},
        "name": {"type": "string", "minLength": 2, "maxLength": 8, "pattern": "^[a-z][a-z0-9-]*$"},
        "id": {"type": "string", "format": "uuid"},
        "when": {"type": "string", "format": "date-time"},
        "port": {"x-kubernetes-int-or-string": true,
                 "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "labels": {"type": "object", "additionalProperties": {"type": "string"},
                   "x-kubernetes-map-type": "granular", "minProperties": 0},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5,
                 "x-kubernetes-list-type": "set"},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name", "protocol"],
                  "items": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "protocol": {"type": "string", "default": "TCP"},
                    "number": {"type": "integer"}}}},
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "x-kubernetes-preserve-unknown-fields": true},
        "choice": {"type": "object",
                   "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                   "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                   "not": {"required": ["c"]},
                   "allOf": [{"properties": {"a": {"maxLength": 3}}}]}
      }}
    }
  })");
  return kSchema;
}

void CheckCauses(const std::vector<klutch::core::Cause>& causes) {
  for (const auto& c : causes) {
    if (c.reason.empty() || c.message.empty()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Json input = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (input.is_discarded()) return 0;
  std::vector<klutch::core::Cause> causes;
  klutch::schema::Validate(input, klutch::machinery::SchemaCursor(&FixedSchema(), nullptr), causes);
  CheckCauses(causes);
  if (input.is_object() && input.contains("schema") && input.contains("value")) {
    causes.clear();
    klutch::schema::ValidateValue(input["value"], input["schema"], "value", causes);
    klutch::schema::ValidateListSetsAndMaps(input["value"], input["schema"], "value", causes);
    klutch::schema::ValidateEmbeddedResources(input["value"], input["schema"], "value", false,
                                              causes);
    klutch::schema::ValidateCrdSchema(
        input["schema"], "schema", klutch::schema::CrdSchemaOptionsFor(&input["schema"]), causes);
    CheckCauses(causes);
    Json copy = input["value"];
    klutch::schema::PruneValue(copy, input["schema"], true);
  }
  return 0;
}
