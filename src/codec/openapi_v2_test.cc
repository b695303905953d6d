#include "codec/openapi_v2.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "machinery/json.h"

namespace klutch::codec::openapi_v2_test {
namespace {

using machinery::Json;
using machinery::ParseYaml;

// ---- A generic protobuf wire walker, for reading what the encoder wrote. ----

struct WireField {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t varint = 0;  // wire types 0 and 1 (the raw 64 bits)
  std::string bytes;    // wire type 2
};

// Splits one message into its fields; nullopt when the bytes are not a well-formed message.
std::optional<std::vector<WireField>> Walk(std::string_view data) {
  std::vector<WireField> fields;
  size_t pos = 0;
  auto varint = [&](uint64_t& out) {
    out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= data.size()) return false;
      auto b = static_cast<uint8_t>(data[pos++]);
      out |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  };
  while (pos < data.size()) {
    uint64_t key = 0;
    if (!varint(key) || (key >> 3) == 0) return std::nullopt;
    WireField f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    if (f.wire == 0) {
      if (!varint(f.varint)) return std::nullopt;
    } else if (f.wire == 1) {
      if (data.size() - pos < 8) return std::nullopt;
      for (int i = 0; i < 8; ++i) {
        f.varint |= uint64_t{static_cast<uint8_t>(data[pos + i])} << (8 * i);
      }
      pos += 8;
    } else if (f.wire == 2) {
      uint64_t len = 0;
      if (!varint(len) || len > data.size() - pos) return std::nullopt;
      f.bytes = std::string(data.substr(pos, len));
      pos += len;
    } else {
      return std::nullopt;
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

std::vector<WireField> Fields(std::string_view message) {
  auto fields = Walk(message);
  EXPECT_TRUE(fields.has_value()) << "malformed message";
  return fields ? *fields : std::vector<WireField>{};
}

// Every occurrence of field `number`, in order.
std::vector<WireField> All(std::string_view message, uint32_t number) {
  std::vector<WireField> out;
  for (auto& f : Fields(message)) {
    if (f.number == number) out.push_back(f);
  }
  return out;
}

// The only occurrence of field `number` (a failure, and an empty field, when not exactly one).
WireField One(std::string_view message, uint32_t number) {
  auto all = All(message, number);
  EXPECT_EQ(all.size(), 1u) << "occurrences of field " << number;
  return all.size() == 1 ? all[0] : WireField{};
}

std::string Str(std::string_view message, uint32_t number) {
  WireField f = One(message, number);
  EXPECT_EQ(f.wire, 2u) << "field " << number;
  return f.bytes;
}

std::vector<std::string> Strs(std::string_view message, uint32_t number) {
  std::vector<std::string> out;
  for (auto& f : All(message, number)) out.push_back(f.bytes);
  return out;
}

// The value (field 2) of the Named* entry in field `number` whose name (field 1) is `name`.
std::string Named(std::string_view message, uint32_t number, std::string_view name) {
  for (auto& entry : All(message, number)) {
    auto names = All(entry.bytes, 1);
    if (names.size() == 1 && names[0].bytes == name) return Str(entry.bytes, 2);
  }
  ADD_FAILURE() << "no entry named " << name << " in field " << number;
  return {};
}

std::vector<std::string> Names(std::string_view message, uint32_t number) {
  std::vector<std::string> out;
  for (auto& entry : All(message, number)) out.push_back(Str(entry.bytes, 1));
  return out;
}

double DoubleOf(const WireField& f) {
  double d = 0;
  std::memcpy(&d, &f.varint, sizeof d);
  return d;
}

// The value of an Any message (its `yaml` text, field 2), parsed back as YAML.
Json AnyValue(std::string_view any) {
  auto parsed = ParseYaml(Str(any, 2));
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : Json();
}

std::string Encode(const Json& doc) {
  auto bytes = EncodeOpenApiV2Protobuf(doc);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

// "0a 03 32" -> the bytes.
std::string Hex(std::string_view text) {
  std::string out;
  for (size_t i = 0; i + 1 < text.size();) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    out.push_back(static_cast<char>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
    i += 2;
  }
  return out;
}

std::string ToHex(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    auto b = static_cast<uint8_t>(c);
    if (!out.empty()) out += ' ';
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

// ---- Exact bytes ----

TEST(EncodeOpenApiV2Protobuf, WritesExactWireBytesOfATinyDocument) {
  Json doc = Json::parse(R"({
    "swagger": "2.0",
    "info": {"title": "T", "version": "v1"},
    "paths": {"/a": {"get": {"operationId": "x"}}},
    "definitions": {"D": {"type": "object", "additionalProperties": false, "minimum": 1.5,
                          "maxLength": 3, "x-a": 1}},
    "not-swagger": true
  })");
  // Worked out by hand from gnostic's field numbers; key byte = number << 3 | wire type.
  std::string want = Hex(
      // Document.swagger (1, string) = "2.0"
      "0a 03 32 2e 30"
      // Document.info (2) = Info {title (1) = "T", version (2) = "v1"}: 7 bytes
      "12 07  0a 01 54  12 02 76 31"
      // Document.paths (8) = Paths {path (2) = NamedPathItem {name (1) = "/a",
      //   value (2) = PathItem {get (2) = Operation {operation_id (5) = "x"}}}}
      "42 0d  12 0b  0a 02 2f 61  12 05  12 03  2a 01 78"
      // Document.definitions (9) = Definitions {additional_properties (1) = NamedSchema {
      //   name (1) = "D", value (2) = Schema (40 bytes)}}
      "4a 2f  0a 2d  0a 01 44  12 28"
      // Schema.minimum (9, double, wire type 1) = 1.5
      "49 00 00 00 00 00 00 f8 3f"
      // Schema.max_length (11, varint) = 3
      "58 03"
      // Schema.additional_properties (21: key 0xaa 0x01) = {boolean (2) = false}: a oneof
      // member is written even when false
      "aa 01 02  10 00"
      // Schema.type (22: b2 01) = TypeItem {value (1) = "object"}
      "b2 01 08  0a 06 6f 62 6a 65 63 74"
      // Schema.vendor_extension (31: fa 01) = NamedAny {name (1) = "x-a",
      //   value (2) = Any {yaml (2) = "1"}}
      "fa 01 0a  0a 03 78 2d 61  12 03  12 01 31");
  EXPECT_EQ(ToHex(Encode(doc)), ToHex(want));
}

TEST(EncodeOpenApiV2Protobuf, OmitsProto3DefaultsButKeepsPresentObjects) {
  EXPECT_EQ(Encode(Json::object()), "");
  EXPECT_EQ(Encode(Json::parse(R"({"swagger": "", "host": null})")), "");
  std::string doc = Encode(Json::parse(
      R"({"definitions": {"D": {"uniqueItems": false, "maxLength": 0, "minimum": 0,
                                "description": "", "properties": {}}}})"));
  std::string schema = Named(Str(doc, 9), 1, "D");
  // Only properties (25) remains: present and empty, which readers tell from absent.
  auto fields = Fields(schema);
  ASSERT_EQ(fields.size(), 1u);
  EXPECT_EQ(fields[0].number, 25u);
  EXPECT_EQ(fields[0].bytes, "");
}

TEST(EncodeOpenApiV2Protobuf, IgnoresUnknownKeysAndNulls) {
  Json plain = Json::parse(R"({"swagger": "2.0", "definitions": {"D": {"type": "string"}}})");
  Json noisy = Json::parse(R"({"swagger": "2.0", "openapi": 3, "components": {},
      "definitions": {"D": {"type": "string", "nullable": true, "oneOf": [], "title": null}}})");
  EXPECT_EQ(Encode(noisy), Encode(plain));
}

// ---- A realistic Kubernetes document, read back field by field ----

Json KubernetesDocument() {
  return Json::parse(R"json({
    "swagger": "2.0",
    "info": {"title": "Kubernetes", "version": "v1.27.0"},
    "paths": {
      "/api/v1/namespaces/{namespace}/configmaps/{name}": {
        "parameters": [
          {"uniqueItems": true, "type": "string", "description": "name of the ConfigMap",
           "name": "name", "in": "path", "required": true},
          {"$ref": "#/parameters/namespace-vgWSWtn3"}
        ],
        "patch": {
          "description": "partially update the specified ConfigMap",
          "consumes": ["application/json-patch+json", "application/merge-patch+json",
                       "application/strategic-merge-patch+json", "application/apply-patch+yaml"],
          "produces": ["application/json", "application/yaml",
                       "application/vnd.kubernetes.protobuf"],
          "schemes": ["https"],
          "tags": ["core_v1"],
          "operationId": "patchCoreV1NamespacedConfigMap",
          "parameters": [
            {"name": "body", "in": "body", "required": true,
             "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}},
            {"uniqueItems": true, "type": "string",
             "description": "fieldValidation instructs the server on how to handle objects in the request",
             "name": "fieldValidation", "in": "query"},
            {"uniqueItems": true, "type": "boolean", "description": "Force is going to force Apply requests.",
             "name": "force", "in": "query"}
          ],
          "responses": {
            "200": {"description": "OK",
                    "schema": {"$ref": "#/definitions/io.k8s.api.core.v1.ConfigMap"}},
            "401": {"description": "Unauthorized"}
          },
          "x-kubernetes-action": "patch",
          "x-kubernetes-group-version-kind": {"group": "", "version": "v1", "kind": "ConfigMap"}
        }
      },
      "x-paths-note": "not a path"
    },
    "definitions": {
      "io.k8s.api.core.v1.ConfigMap": {
        "description": "ConfigMap holds configuration data for pods to consume.",
        "type": "object",
        "required": ["metadata"],
        "properties": {
          "apiVersion": {"description": "APIVersion defines the versioned schema", "type": "string"},
          "binaryData": {"description": "BinaryData contains the binary data.", "type": "object",
                         "additionalProperties": {"type": "string", "format": "byte"}},
          "data": {"description": "Data contains the configuration data.", "type": "object",
                   "additionalProperties": {"type": "string", "default": ""}},
          "immutable": {"type": "boolean"},
          "kind": {"type": "string", "enum": ["ConfigMap"]},
          "metadata": {"description": "Standard object's metadata.", "default": {},
                       "allOf": [{"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]}
        },
        "x-kubernetes-group-version-kind": [{"group": "", "kind": "ConfigMap", "version": "v1"}]
      },
      "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
        "type": "object",
        "properties": {
          "finalizers": {"type": "array", "items": {"type": "string", "default": ""},
                         "x-kubernetes-patch-strategy": "merge", "x-kubernetes-list-type": "set"},
          "generation": {"type": "integer", "format": "int64", "minimum": -1.5, "maximum": 10}
        }
      },
      "io.k8s.apimachinery.pkg.apis.meta.v1.Patch": {"type": "object"}
    },
    "parameters": {
      "namespace-vgWSWtn3": {"uniqueItems": true, "type": "string", "name": "namespace",
                             "in": "path", "required": true,
                             "description": "object name and auth scope"}
    },
    "securityDefinitions": {
      "BearerToken": {"description": "Bearer Token authentication", "type": "apiKey",
                      "name": "authorization", "in": "header"}
    },
    "security": [{"BearerToken": []}]
  })json");
}

TEST(EncodeOpenApiV2Protobuf, PlacesAKubernetesPathInGnosticFields) {
  std::string doc = Encode(KubernetesDocument());
  EXPECT_EQ(Str(doc, 1), "2.0");
  std::string info = Str(doc, 2);
  EXPECT_EQ(Str(info, 1), "Kubernetes");
  EXPECT_EQ(Str(info, 2), "v1.27.0");

  std::string paths = Str(doc, 8);
  // Paths: the "x-" key is a vendor extension (1), written before the paths (2).
  auto paths_fields = Fields(paths);
  ASSERT_EQ(paths_fields.size(), 2u);
  EXPECT_EQ(paths_fields[0].number, 1u);
  EXPECT_EQ(Str(paths_fields[0].bytes, 1), "x-paths-note");
  EXPECT_EQ(AnyValue(Str(paths_fields[0].bytes, 2)), "not a path");
  EXPECT_EQ(Names(paths, 2),
            std::vector<std::string>{"/api/v1/namespaces/{namespace}/configmaps/{name}"});
  std::string item = Named(paths, 2, "/api/v1/namespaces/{namespace}/configmaps/{name}");

  // PathItem.parameters (9): a path parameter, then a JsonReference.
  auto shared = All(item, 9);
  ASSERT_EQ(shared.size(), 2u);
  std::string path_param = Str(Str(Str(shared[0].bytes, 1), 2), 4);  // Parameter, NonBody, Path
  EXPECT_TRUE(One(path_param, 1).varint);                            // required
  EXPECT_EQ(Str(path_param, 2), "path");
  EXPECT_EQ(Str(path_param, 4), "name");
  EXPECT_EQ(Str(path_param, 5), "string");
  EXPECT_EQ(One(path_param, 19).varint, 1u);  // unique_items
  EXPECT_EQ(Str(Str(shared[1].bytes, 2), 1), "#/parameters/namespace-vgWSWtn3");

  // PathItem.patch (8) = Operation.
  std::string patch = Str(item, 8);
  EXPECT_TRUE(All(item, 2).empty());  // no get
  EXPECT_EQ(Strs(patch, 1), std::vector<std::string>{"core_v1"});
  EXPECT_EQ(Str(patch, 3), "partially update the specified ConfigMap");
  EXPECT_EQ(Str(patch, 5), "patchCoreV1NamespacedConfigMap");
  EXPECT_EQ(Strs(patch, 6).size(), 3u);
  EXPECT_EQ(Strs(patch, 7).at(3), "application/apply-patch+yaml");
  EXPECT_EQ(Strs(patch, 10), std::vector<std::string>{"https"});

  auto params = All(patch, 8);
  ASSERT_EQ(params.size(), 3u);
  // ParametersItem.parameter (1) -> Parameter.body_parameter (1).
  std::string body = Str(Str(params[0].bytes, 1), 1);
  EXPECT_EQ(Str(body, 2), "body");
  EXPECT_EQ(Str(body, 3), "body");
  EXPECT_EQ(One(body, 4).varint, 1u);
  EXPECT_EQ(Str(Str(body, 5), 1), "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch");
  // ParametersItem.parameter (1) -> Parameter.non_body_parameter (2) ->
  // NonBodyParameter.query_parameter_sub_schema (3): what kubectl looks for.
  std::string field_validation = Str(Str(Str(params[1].bytes, 1), 2), 3);
  EXPECT_EQ(Str(field_validation, 2), "query");
  EXPECT_EQ(Str(field_validation, 4), "fieldValidation");
  EXPECT_EQ(Str(field_validation, 6), "string");
  EXPECT_EQ(One(field_validation, 20).varint, 1u);  // unique_items
  EXPECT_TRUE(All(field_validation, 1).empty());    // required: false is not written
  EXPECT_EQ(Str(Str(Str(Str(params[2].bytes, 1), 2), 3), 6), "boolean");

  // Operation.responses (9) = Responses {response_code (1): NamedResponseValue}.
  std::string responses = Str(patch, 9);
  EXPECT_EQ(Names(responses, 1), (std::vector<std::string>{"200", "401"}));
  std::string ok = Str(Named(responses, 1, "200"), 1);  // ResponseValue.response
  EXPECT_EQ(Str(ok, 1), "OK");
  // Response.schema (2) = SchemaItem.schema (1) = Schema {_ref (1)}.
  EXPECT_EQ(Str(Str(Str(ok, 2), 1), 1), "#/definitions/io.k8s.api.core.v1.ConfigMap");
  EXPECT_TRUE(All(Str(Named(responses, 1, "401"), 1), 2).empty());

  // Operation.vendor_extension (13).
  EXPECT_EQ(Names(patch, 13),
            (std::vector<std::string>{"x-kubernetes-action", "x-kubernetes-group-version-kind"}));
  EXPECT_EQ(AnyValue(Named(patch, 13, "x-kubernetes-action")), "patch");
  EXPECT_EQ(AnyValue(Named(patch, 13, "x-kubernetes-group-version-kind")),
            Json::parse(R"({"group": "", "version": "v1", "kind": "ConfigMap"})"));
}

TEST(EncodeOpenApiV2Protobuf, PlacesKubernetesDefinitionsInGnosticFields) {
  std::string doc = Encode(KubernetesDocument());
  std::string definitions = Str(doc, 9);
  EXPECT_EQ(Names(definitions, 1),
            (std::vector<std::string>{"io.k8s.api.core.v1.ConfigMap",
                                      "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                                      "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}));
  std::string cm = Named(definitions, 1, "io.k8s.api.core.v1.ConfigMap");
  EXPECT_EQ(Str(cm, 4), "ConfigMap holds configuration data for pods to consume.");
  EXPECT_EQ(Strs(cm, 19), std::vector<std::string>{"metadata"});
  EXPECT_EQ(Strs(Str(cm, 22), 1), std::vector<std::string>{"object"});
  EXPECT_EQ(AnyValue(Named(cm, 31, "x-kubernetes-group-version-kind")),
            Json::parse(R"([{"group": "", "kind": "ConfigMap", "version": "v1"}])"));

  // Schema.properties (25) = Properties {additional_properties (1): NamedSchema}.
  std::string props = Str(cm, 25);
  EXPECT_EQ(Names(props, 1), (std::vector<std::string>{"apiVersion", "binaryData", "data",
                                                       "immutable", "kind", "metadata"}));
  std::string data = Named(props, 1, "data");
  EXPECT_EQ(Str(data, 4), "Data contains the configuration data.");
  // additionalProperties (21) = AdditionalPropertiesItem.schema (1).
  std::string value_schema = Str(Str(data, 21), 1);
  EXPECT_EQ(Strs(Str(value_schema, 22), 1), std::vector<std::string>{"string"});
  EXPECT_EQ(AnyValue(Str(value_schema, 5)), "");  // default ""
  EXPECT_EQ(Str(Str(Str(Named(props, 1, "binaryData"), 21), 1), 2), "byte");
  auto kind_enum = All(Named(props, 1, "kind"), 20);
  ASSERT_EQ(kind_enum.size(), 1u);
  EXPECT_EQ(AnyValue(kind_enum[0].bytes), "ConfigMap");

  std::string metadata = Named(props, 1, "metadata");
  EXPECT_EQ(AnyValue(Str(metadata, 5)), Json::object());
  auto all_of = All(metadata, 24);
  ASSERT_EQ(all_of.size(), 1u);
  EXPECT_EQ(Str(all_of[0].bytes, 1),
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");

  std::string meta_props =
      Str(Named(definitions, 1, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"), 25);
  std::string finalizers = Named(meta_props, 1, "finalizers");
  // items (23) = ItemsItem {schema (1)}; an object is one schema.
  auto items = All(Str(finalizers, 23), 1);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(Strs(Str(items[0].bytes, 22), 1), std::vector<std::string>{"string"});
  EXPECT_EQ(Names(finalizers, 31),
            (std::vector<std::string>{"x-kubernetes-list-type", "x-kubernetes-patch-strategy"}));
  std::string generation = Named(meta_props, 1, "generation");
  EXPECT_EQ(Str(generation, 2), "int64");
  EXPECT_EQ(DoubleOf(One(generation, 9)), -1.5);  // minimum
  EXPECT_EQ(DoubleOf(One(generation, 7)), 10.0);  // maximum, an integer in JSON
  // An object without properties still has its type, and no properties field.
  std::string patch_def = Named(definitions, 1, "io.k8s.apimachinery.pkg.apis.meta.v1.Patch");
  EXPECT_TRUE(All(patch_def, 25).empty());
}

TEST(EncodeOpenApiV2Protobuf, PlacesTopLevelParametersAndSecurity) {
  std::string doc = Encode(KubernetesDocument());
  // parameters (10) = ParameterDefinitions {NamedParameter (1)}: Parameter -> NonBody -> Path.
  std::string ns = Str(Str(Named(Str(doc, 10), 1, "namespace-vgWSWtn3"), 2), 4);
  EXPECT_EQ(Str(ns, 4), "namespace");
  EXPECT_EQ(Str(ns, 3), "object name and auth scope");
  // securityDefinitions (13) = SecurityDefinitions {NamedSecurityDefinitionsItem (1)}:
  // SecurityDefinitionsItem.api_key_security (2).
  std::string api_key = Str(Named(Str(doc, 13), 1, "BearerToken"), 2);
  EXPECT_EQ(Str(api_key, 1), "apiKey");
  EXPECT_EQ(Str(api_key, 2), "authorization");
  EXPECT_EQ(Str(api_key, 3), "header");
  EXPECT_EQ(Str(api_key, 4), "Bearer Token authentication");
  // security (12) = SecurityRequirement {NamedStringArray (1) {name, StringArray {}}}.
  auto security = All(doc, 12);
  ASSERT_EQ(security.size(), 1u);
  EXPECT_EQ(Named(security[0].bytes, 1, "BearerToken"), "");
}

TEST(EncodeOpenApiV2Protobuf, ChoosesOneofMembersFromTheValue) {
  std::string doc = Encode(Json::parse(R"({
    "paths": {"/p": {"post": {
      "parameters": [
        {"name": "h", "in": "header", "type": "string"},
        {"name": "f", "in": "formData", "type": "file", "allowEmptyValue": true},
        {"name": "tags", "in": "query", "type": "array", "collectionFormat": "csv",
         "items": {"type": "string", "enum": ["a", "b"]}}
      ],
      "responses": {"200": {"$ref": "#/responses/ok"},
                    "default": {"description": "d", "schema": {"type": "file"},
                                "headers": {"X-Rate": {"type": "integer", "description": "r"}},
                                "examples": {"application/json": {"a": [1, 2.5, null]}}},
                    "x-r": true}
    }}},
    "definitions": {"D": {"type": ["string", "null"],
                          "items": [{"type": "integer"}, {"type": "boolean"}],
                          "additionalProperties": {"type": "integer"}, "xml": {"wrapped": true}}},
    "securityDefinitions": {
      "basic": {"type": "basic"},
      "code": {"type": "oauth2", "flow": "accessCode", "authorizationUrl": "https://a",
               "tokenUrl": "https://t", "scopes": {"read": "Read access", "none": ""}}
    }
  })"));
  std::string op = Str(Named(Str(doc, 8), 2, "/p"), 4);
  auto params = All(op, 8);
  ASSERT_EQ(params.size(), 3u);
  std::string header = Str(Str(Str(params[0].bytes, 1), 2), 1);
  EXPECT_EQ(Str(header, 5), "string");
  std::string form = Str(Str(Str(params[1].bytes, 1), 2), 2);
  EXPECT_EQ(Str(form, 6), "file");
  EXPECT_EQ(One(form, 5).varint, 1u);
  std::string query = Str(Str(Str(params[2].bytes, 1), 2), 3);
  EXPECT_EQ(Str(query, 9), "csv");
  std::string primitive_items = Str(query, 8);
  EXPECT_EQ(Str(primitive_items, 1), "string");
  EXPECT_EQ(All(primitive_items, 16).size(), 2u);

  std::string responses = Str(op, 9);
  EXPECT_EQ(Names(responses, 1), (std::vector<std::string>{"200", "default"}));
  EXPECT_EQ(Names(responses, 2), std::vector<std::string>{"x-r"});
  EXPECT_EQ(Str(Str(Named(responses, 1, "200"), 2), 1), "#/responses/ok");
  std::string response = Str(Named(responses, 1, "default"), 1);
  EXPECT_EQ(Str(Str(Str(response, 2), 2), 6), "file");  // SchemaItem.file_schema
  std::string rate = Named(Str(response, 3), 1, "X-Rate");
  EXPECT_EQ(Str(rate, 1), "integer");
  EXPECT_EQ(Str(rate, 18), "r");
  EXPECT_EQ(AnyValue(Named(Str(response, 4), 1, "application/json")),
            Json::parse(R"({"a": [1, 2.5, null]})"));

  std::string schema = Named(Str(doc, 9), 1, "D");
  EXPECT_EQ(Strs(Str(schema, 22), 1), (std::vector<std::string>{"string", "null"}));
  EXPECT_EQ(All(Str(schema, 23), 1).size(), 2u);
  EXPECT_EQ(Strs(Str(Str(Str(schema, 21), 1), 22), 1), std::vector<std::string>{"integer"});
  EXPECT_EQ(One(Str(schema, 28), 5).varint, 1u);

  std::string security = Str(doc, 13);
  EXPECT_EQ(Str(Str(Named(security, 1, "basic"), 1), 1), "basic");
  std::string code = Str(Named(security, 1, "code"), 6);
  EXPECT_EQ(Str(code, 2), "accessCode");
  EXPECT_EQ(Str(code, 4), "https://a");
  EXPECT_EQ(Str(code, 5), "https://t");
  std::string scopes = Str(code, 3);
  EXPECT_EQ(Names(scopes, 1), (std::vector<std::string>{"none", "read"}));
  EXPECT_EQ(Named(scopes, 1, "read"), "Read access");
  EXPECT_TRUE(All(All(scopes, 1)[0].bytes, 2).empty());  // "" is a proto3 default
}

TEST(EncodeOpenApiV2Protobuf, AnyTextReadsBackAsTheSameValue) {
  Json values = Json::parse(R"([
    "plain", "", "yes", "1.5", "multi\nline \"quoted\" \\ tab\t", "ünïcödé ✓", "#comment",
    0, -3, 18446744073709551615, 1.25, 1e300, true, false, null,
    {}, [], {"nested": {"list": [1, "two", {"three": null}]}, "key: with colon": "- dash"}
  ])");
  for (const Json& v : values) {
    Json doc = {{"x-v", v}};
    std::string any = Named(Encode(doc), 16, "x-v");
    EXPECT_EQ(AnyValue(any), v) << Str(any, 2);
  }
}

// ---- Errors ----

struct ErrorCase {
  std::string json;
  std::string message;
};

TEST(EncodeOpenApiV2Protobuf, RejectsWrongTypesNamingTheJsonPath) {
  const std::vector<ErrorCase> cases = {
      {R"([])", "invalid Swagger 2.0 document: expected an object, got array"},
      {R"({"swagger": 2})", "invalid Swagger 2.0 document: swagger: expected a string, got number"},
      {R"({"paths": []})", "paths: expected an object, got array"},
      {R"({"consumes": "application/json"})", "consumes: expected an array, got string"},
      {R"({"consumes": ["a", 1]})", "consumes[1]: expected a string, got number"},
      {R"({"info": {"contact": {"email": false}}})",
       "info.contact.email: expected a string, got boolean"},
      {R"({"definitions": {"io.k8s.api.core.v1.ConfigMap": {"properties": {"data": {"type": 5}}}}})",
       R"(definitions["io.k8s.api.core.v1.ConfigMap"].properties.data.type: expected a string or an array of strings, got number)"},
      {R"({"definitions": {"D": {"type": ["string", 1]}}})",
       "D.type[1]: expected a string, got number"},
      {R"({"definitions": {"D": {"maxLength": 1.5}}})",
       "D.maxLength: expected an integer, got 1.5"},
      {R"({"definitions": {"D": {"maxLength": 18446744073709551615}}})",
       "D.maxLength: expected an integer, got 18446744073709551615"},
      {R"({"definitions": {"D": {"minimum": "0"}}})", "D.minimum: expected a number, got string"},
      {R"({"definitions": {"D": {"additionalProperties": "yes"}}})",
       "D.additionalProperties: expected an object or a boolean, got string"},
      {R"({"definitions": {"D": {"items": 3}}})",
       "D.items: expected an object or an array of objects, got number"},
      {R"({"definitions": {"D": {"required": "name"}}})",
       "D.required: expected an array, got string"},
      {R"({"definitions": {"D": {"readOnly": "true"}}})",
       "D.readOnly: expected a boolean, got string"},
      {R"({"definitions": {"D": null}})", "definitions.D: expected an object, got null"},
      {R"({"paths": {"/a": {"get": {"parameters": [{"name": "x", "in": "cookie"}]}}}})",
       R"(paths["/a"].get.parameters[0].in: Unsupported value: "cookie": supported values: "body", "formData", "header", "path", "query")"},
      {R"({"paths": {"/a": {"get": {"parameters": [{"name": "x"}]}}}})",
       R"(paths["/a"].get.parameters[0].in: Required value)"},
      {R"({"paths": {"/a": {"parameters": ["x"]}}})",
       R"(paths["/a"].parameters[0]: expected an object, got string)"},
      {R"({"paths": {"/a": {"get": {"responses": {"200": {"schema": []}}}}}})",
       R"(paths["/a"].get.responses.200.schema: expected an object, got array)"},
      {R"({"securityDefinitions": {"s": {"type": "oauth2", "flow": "magic"}}})",
       R"(securityDefinitions.s.flow: Unsupported value: "magic")"},
      {R"({"securityDefinitions": {"s": {"type": "mutualTLS"}}})",
       R"(securityDefinitions.s.type: Unsupported value: "mutualTLS": supported values: "apiKey", "basic", "oauth2")"},
      {R"({"security": [{"s": 5}]})",
       "security[0].s: expected a string or an array of strings, got number"},
  };
  for (const ErrorCase& c : cases) {
    auto result = EncodeOpenApiV2Protobuf(Json::parse(c.json));
    ASSERT_FALSE(result.ok()) << c.json;
    EXPECT_EQ(result.status().reason(), core::Reason::kBadRequest) << c.json;
    EXPECT_NE(result.status().message().find(c.message), std::string::npos)
        << c.json << "\n  got:  " << result.status().message() << "\n  want: " << c.message;
  }
}

TEST(EncodeOpenApiV2Protobuf, RejectsInvalidUtf8) {
  for (const Json& doc : {Json{{"swagger", "\xff"}}, Json{{"x-a", {{"k", "a\xc3"}}}},
                          Json{{"definitions", {{"\xe2\x82", Json::object()}}}}}) {
    auto result = EncodeOpenApiV2Protobuf(doc);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().reason(), core::Reason::kBadRequest);
    EXPECT_NE(result.status().message().find("invalid UTF-8"), std::string::npos)
        << result.status().message();
  }
}

TEST(EncodeOpenApiV2Protobuf, RejectsNestingDeeperThanTheJsonLimit) {
  // Built in code, so deeper than ParseJson would ever return.
  Json schema = {{"type", "string"}};
  for (int i = 0; i < 600; ++i) schema = Json{{"type", "array"}, {"items", std::move(schema)}};
  auto result = EncodeOpenApiV2Protobuf(Json{{"definitions", {{"D", schema}}}});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().reason(), core::Reason::kBadRequest);
  EXPECT_NE(result.status().message().find("nested deeper than 512 levels"), std::string::npos)
      << result.status().message().substr(0, 200);

  Json value = 1;
  for (int i = 0; i < 600; ++i) value = Json::array({std::move(value)});
  result = EncodeOpenApiV2Protobuf(Json{{"x-deep", value}});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("nested deeper than 512 levels"), std::string::npos);

  // 100 levels are fine.
  schema = {{"type", "string"}};
  for (int i = 0; i < 100; ++i) schema = Json{{"type", "array"}, {"items", std::move(schema)}};
  EXPECT_TRUE(EncodeOpenApiV2Protobuf(Json{{"definitions", {{"D", schema}}}}).ok());
}

}  // namespace
}  // namespace klutch::codec::openapi_v2_test
