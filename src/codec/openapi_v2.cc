#include "codec/openapi_v2.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codec/wire.h"
#include "fmt/format.h"

namespace klutch::codec {

using machinery::Json;

namespace {

using machinery::kMaxJsonDepth;

// ---------------------------------------------------------------------------------------------
// Message tables.
//
// Each message of gnostic's openapiv2/OpenAPIv2.proto that a Swagger 2.0 document can reach is
// described by its JSON shape and its fields. Field numbers and types are gnostic's; JSON keys
// are Swagger's. The message `Any` {1: google.protobuf.Any value, 2: string yaml} has no table:
// EncodeValue writes it for Kind::kAny.
// ---------------------------------------------------------------------------------------------

enum class Kind : uint8_t {
  kString,   // JSON string -> length-delimited UTF-8
  kBool,     // JSON boolean -> varint 0/1
  kInt64,    // JSON integer (or a number with an integral value) -> varint, two's complement
  kDouble,   // JSON number -> 64-bit little-endian IEEE 754
  kAny,      // any JSON value -> Any {2: the value as JSON text}
  kMessage,  // nested message described by its own table
};

struct FieldSpec {
  uint32_t number;
  std::string_view json_name;  // the JSON key in a kStruct message; informational elsewhere
  Kind kind;
  bool repeated;             // JSON array -> one occurrence per element
  std::string_view message;  // the nested message for Kind::kMessage
};

enum class Shape : uint8_t {
  kStruct,  // JSON object with fixed keys: one field per key; "x-" keys -> `extensions`
  kMap,     // JSON object with free keys: each key -> Named{1: key, 2: value} in fields[0]
  kList,    // a JSON value, or an array of them -> repeated fields[0]
  kOneof,   // exactly one of `fields`, picked from the value by `choose`
};

// A oneof's pick: the field number, or 0 and a problem (about member `key` of the value when
// set).
struct Choice {
  uint32_t number = 0;
  std::string_view key;
  std::string problem;
};
using Chooser = Choice (*)(const Json& value);

struct MessageSpec {
  std::string_view name;
  Shape shape;
  std::vector<FieldSpec> fields;
  uint32_t extensions = 0;      // number of `repeated NamedAny vendor_extension`; 0 = none
  std::string_view key_prefix;  // kMap: only keys with this prefix are entries
  Chooser choose = nullptr;     // kOneof
};

// Terse constructors so the tables read like the .proto file they transcribe.
constexpr FieldSpec Str(uint32_t n, std::string_view json) {
  return {n, json, Kind::kString, false, {}};
}
constexpr FieldSpec Strs(uint32_t n, std::string_view json) {
  return {n, json, Kind::kString, true, {}};
}
constexpr FieldSpec Bool(uint32_t n, std::string_view json) {
  return {n, json, Kind::kBool, false, {}};
}
constexpr FieldSpec Int64(uint32_t n, std::string_view json) {
  return {n, json, Kind::kInt64, false, {}};
}
constexpr FieldSpec Double(uint32_t n, std::string_view json) {
  return {n, json, Kind::kDouble, false, {}};
}
constexpr FieldSpec AnyValue(uint32_t n, std::string_view json) {
  return {n, json, Kind::kAny, false, {}};
}
constexpr FieldSpec AnyValues(uint32_t n, std::string_view json) {
  return {n, json, Kind::kAny, true, {}};
}
constexpr FieldSpec Msg(uint32_t n, std::string_view json, std::string_view type) {
  return {n, json, Kind::kMessage, false, type};
}
constexpr FieldSpec Msgs(uint32_t n, std::string_view json, std::string_view type) {
  return {n, json, Kind::kMessage, true, type};
}

MessageSpec Struct(std::string_view name, uint32_t extensions, std::vector<FieldSpec> fields) {
  return {name, Shape::kStruct, std::move(fields), extensions, {}, nullptr};
}
// `entries`: the repeated Named* field; its kind and message are those of the Named value.
MessageSpec Map(std::string_view name, FieldSpec entries, uint32_t extensions = 0,
                std::string_view key_prefix = {}) {
  return {name, Shape::kMap, {entries}, extensions, key_prefix, nullptr};
}
MessageSpec List(std::string_view name, FieldSpec elements) {
  return {name, Shape::kList, {elements}, 0, {}, nullptr};
}
MessageSpec Oneof(std::string_view name, Chooser choose, std::vector<FieldSpec> fields) {
  return {name, Shape::kOneof, std::move(fields), 0, {}, choose};
}

std::vector<FieldSpec> Concat(std::vector<FieldSpec> a, const std::vector<FieldSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The validation keywords of a non-body parameter, as PrimitivesItems, Header and the four
// parameter sub-schemas list them: always this order, numbered consecutively from `first`.
std::vector<FieldSpec> PrimitiveFields(uint32_t first) {
  return {Str(first, "type"),
          Str(first + 1, "format"),
          Msg(first + 2, "items", "PrimitivesItems"),
          Str(first + 3, "collectionFormat"),
          AnyValue(first + 4, "default"),
          Double(first + 5, "maximum"),
          Bool(first + 6, "exclusiveMaximum"),
          Double(first + 7, "minimum"),
          Bool(first + 8, "exclusiveMinimum"),
          Int64(first + 9, "maxLength"),
          Int64(first + 10, "minLength"),
          Str(first + 11, "pattern"),
          Int64(first + 12, "maxItems"),
          Int64(first + 13, "minItems"),
          Bool(first + 14, "uniqueItems"),
          AnyValues(first + 15, "enum"),
          Double(first + 16, "multipleOf")};
}

// ---- oneof choosers ----

std::string Expected(std::string_view what, const Json& value) {
  return fmt::format("expected {}, got {}", what, value.type_name());
}

std::string Quote(std::string_view s) {
  constexpr size_t kMaxShown = 100;
  std::string shown(s.substr(0, kMaxShown));
  if (s.size() > kMaxShown) shown += "...";
  return Json(shown).dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool Present(const Json& value, std::string_view key) {
  if (!value.is_object()) return false;
  auto it = value.find(key);
  return it != value.end() && !it->is_null();
}

// The string member `key`, or a problem: missing, not a string, or not one of `supported`.
Choice Pick(const Json& value, std::string_view key,
            std::initializer_list<std::pair<std::string_view, uint32_t>> supported) {
  auto it = value.find(key);
  if (it == value.end() || it->is_null()) return {0, key, "Required value"};
  if (!it->is_string()) return {0, key, Expected("a string", *it)};
  const std::string& got = it->get_ref<const std::string&>();
  std::vector<std::string_view> names;
  for (const auto& [name, number] : supported) {
    if (got == name && number != 0) return {number, {}, {}};
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::string list;
  for (std::string_view name : names) {
    if (!list.empty()) list += ", ";
    list += Quote(name);
  }
  return {0, key, fmt::format("Unsupported value: {}: supported values: {}", Quote(got), list)};
}

// ParametersItem and ResponseValue: a "$ref" makes a JsonReference.
Choice ChooseReferenceOr(const Json& value) { return {Present(value, "$ref") ? 2u : 1u, {}, {}}; }

Choice ChooseParameter(const Json& value) {
  if (!value.is_object()) return {0, {}, Expected("an object", value)};
  auto in = value.find("in");
  bool body = in != value.end() && in->is_string() && *in == "body";
  return {body ? 1u : 2u, {}, {}};
}

Choice ChooseNonBodyParameter(const Json& value) {
  // "body" is listed for the error message only: a body parameter never gets here.
  return Pick(value, "in",
              {{"header", 1}, {"formData", 2}, {"query", 3}, {"path", 4}, {"body", 0}});
}

Choice ChooseSchemaItem(const Json& value) {
  bool file = value.is_object() && value.contains("type") && value["type"] == "file";
  return {file ? 2u : 1u, {}, {}};
}

Choice ChooseAdditionalProperties(const Json& value) {
  if (value.is_boolean()) return {2, {}, {}};
  if (value.is_object()) return {1, {}, {}};
  return {0, {}, Expected("an object or a boolean", value)};
}

Choice ChooseSecurityDefinition(const Json& value) {
  if (!value.is_object()) return {0, {}, Expected("an object", value)};
  Choice c = Pick(value, "type", {{"basic", 1}, {"apiKey", 2}, {"oauth2", 3}});
  if (c.number != 3) return c;
  return Pick(value, "flow",
              {{"implicit", 3}, {"password", 4}, {"application", 5}, {"accessCode", 6}});
}

const std::vector<MessageSpec>& MessageSpecs() {
  static const std::vector<MessageSpec> specs{
      // ---- document ----
      Struct(
          "Document", 16,
          {Str(1, "swagger"), Msg(2, "info", "Info"), Str(3, "host"), Str(4, "basePath"),
           Strs(5, "schemes"), Strs(6, "consumes"), Strs(7, "produces"), Msg(8, "paths", "Paths"),
           Msg(9, "definitions", "Definitions"), Msg(10, "parameters", "ParameterDefinitions"),
           Msg(11, "responses", "ResponseDefinitions"), Msgs(12, "security", "SecurityRequirement"),
           Msg(13, "securityDefinitions", "SecurityDefinitions"), Msgs(14, "tags", "Tag"),
           Msg(15, "externalDocs", "ExternalDocs")}),
      Struct("Info", 7,
             {Str(1, "title"), Str(2, "version"), Str(3, "description"), Str(4, "termsOfService"),
              Msg(5, "contact", "Contact"), Msg(6, "license", "License")}),
      Struct("Contact", 4, {Str(1, "name"), Str(2, "url"), Str(3, "email")}),
      Struct("License", 3, {Str(1, "name"), Str(2, "url")}),
      Struct("ExternalDocs", 3, {Str(1, "description"), Str(2, "url")}),
      Struct("Tag", 4,
             {Str(1, "name"), Str(2, "description"), Msg(3, "externalDocs", "ExternalDocs")}),

      // ---- paths and operations ----
      Map("Paths", Msg(2, "path", "PathItem"), /*extensions=*/1, /*key_prefix=*/"/"),
      Struct("PathItem", 10,
             {Str(1, "$ref"), Msg(2, "get", "Operation"), Msg(3, "put", "Operation"),
              Msg(4, "post", "Operation"), Msg(5, "delete", "Operation"),
              Msg(6, "options", "Operation"), Msg(7, "head", "Operation"),
              Msg(8, "patch", "Operation"), Msgs(9, "parameters", "ParametersItem")}),
      Struct("Operation", 13,
             {Strs(1, "tags"), Str(2, "summary"), Str(3, "description"),
              Msg(4, "externalDocs", "ExternalDocs"), Str(5, "operationId"), Strs(6, "produces"),
              Strs(7, "consumes"), Msgs(8, "parameters", "ParametersItem"),
              Msg(9, "responses", "Responses"), Strs(10, "schemes"), Bool(11, "deprecated"),
              Msgs(12, "security", "SecurityRequirement")}),

      // ---- parameters ----
      Oneof("ParametersItem", ChooseReferenceOr,
            {Msg(1, "parameter", "Parameter"), Msg(2, "json_reference", "JsonReference")}),
      Oneof("Parameter", ChooseParameter,
            {Msg(1, "body_parameter", "BodyParameter"),
             Msg(2, "non_body_parameter", "NonBodyParameter")}),
      Oneof("NonBodyParameter", ChooseNonBodyParameter,
            {Msg(1, "header_parameter_sub_schema", "HeaderParameterSubSchema"),
             Msg(2, "form_data_parameter_sub_schema", "FormDataParameterSubSchema"),
             Msg(3, "query_parameter_sub_schema", "QueryParameterSubSchema"),
             Msg(4, "path_parameter_sub_schema", "PathParameterSubSchema")}),
      Struct("BodyParameter", 6,
             {Str(1, "description"), Str(2, "name"), Str(3, "in"), Bool(4, "required"),
              Msg(5, "schema", "Schema")}),
      Struct("HeaderParameterSubSchema", 22,
             Concat({Bool(1, "required"), Str(2, "in"), Str(3, "description"), Str(4, "name")},
                    PrimitiveFields(5))),
      Struct("PathParameterSubSchema", 22,
             Concat({Bool(1, "required"), Str(2, "in"), Str(3, "description"), Str(4, "name")},
                    PrimitiveFields(5))),
      Struct("QueryParameterSubSchema", 23,
             Concat({Bool(1, "required"), Str(2, "in"), Str(3, "description"), Str(4, "name"),
                     Bool(5, "allowEmptyValue")},
                    PrimitiveFields(6))),
      Struct("FormDataParameterSubSchema", 23,
             Concat({Bool(1, "required"), Str(2, "in"), Str(3, "description"), Str(4, "name"),
                     Bool(5, "allowEmptyValue")},
                    PrimitiveFields(6))),
      Struct("PrimitivesItems", 18, PrimitiveFields(1)),
      Struct("JsonReference", 0, {Str(1, "$ref"), Str(2, "description")}),
      Map("ParameterDefinitions", Msg(1, "additional_properties", "Parameter")),

      // ---- responses ----
      Map("Responses", Msg(1, "response_code", "ResponseValue"), /*extensions=*/2),
      Oneof("ResponseValue", ChooseReferenceOr,
            {Msg(1, "response", "Response"), Msg(2, "json_reference", "JsonReference")}),
      Struct("Response", 5,
             {Str(1, "description"), Msg(2, "schema", "SchemaItem"), Msg(3, "headers", "Headers"),
              Msg(4, "examples", "Examples")}),
      Oneof("SchemaItem", ChooseSchemaItem,
            {Msg(1, "schema", "Schema"), Msg(2, "file_schema", "FileSchema")}),
      Struct("FileSchema", 10,
             {Str(1, "format"), Str(2, "title"), Str(3, "description"), AnyValue(4, "default"),
              Strs(5, "required"), Str(6, "type"), Bool(7, "readOnly"),
              Msg(8, "externalDocs", "ExternalDocs"), AnyValue(9, "example")}),
      Map("Headers", Msg(1, "additional_properties", "Header")),
      Struct("Header", 19, Concat(PrimitiveFields(1), {Str(18, "description")})),
      Map("Examples", AnyValue(1, "additional_properties")),
      Map("ResponseDefinitions", Msg(1, "additional_properties", "Response")),

      // ---- schemas ----
      Map("Definitions", Msg(1, "additional_properties", "Schema")),
      Struct("Schema", 31,
             {Str(1, "$ref"),
              Str(2, "format"),
              Str(3, "title"),
              Str(4, "description"),
              AnyValue(5, "default"),
              Double(6, "multipleOf"),
              Double(7, "maximum"),
              Bool(8, "exclusiveMaximum"),
              Double(9, "minimum"),
              Bool(10, "exclusiveMinimum"),
              Int64(11, "maxLength"),
              Int64(12, "minLength"),
              Str(13, "pattern"),
              Int64(14, "maxItems"),
              Int64(15, "minItems"),
              Bool(16, "uniqueItems"),
              Int64(17, "maxProperties"),
              Int64(18, "minProperties"),
              Strs(19, "required"),
              AnyValues(20, "enum"),
              Msg(21, "additionalProperties", "AdditionalPropertiesItem"),
              Msg(22, "type", "TypeItem"),
              Msg(23, "items", "ItemsItem"),
              Msgs(24, "allOf", "Schema"),
              Msg(25, "properties", "Properties"),
              Str(26, "discriminator"),
              Bool(27, "readOnly"),
              Msg(28, "xml", "Xml"),
              Msg(29, "externalDocs", "ExternalDocs"),
              AnyValue(30, "example")}),
      Oneof("AdditionalPropertiesItem", ChooseAdditionalProperties,
            {Msg(1, "schema", "Schema"), Bool(2, "boolean")}),
      List("TypeItem", Str(1, "value")),
      List("ItemsItem", Msg(1, "schema", "Schema")),
      Map("Properties", Msg(1, "additional_properties", "Schema")),
      Struct("Xml", 6,
             {Str(1, "name"), Str(2, "namespace"), Str(3, "prefix"), Bool(4, "attribute"),
              Bool(5, "wrapped")}),

      // ---- security ----
      Map("SecurityDefinitions", Msg(1, "additional_properties", "SecurityDefinitionsItem")),
      Oneof("SecurityDefinitionsItem", ChooseSecurityDefinition,
            {Msg(1, "basic_authentication_security", "BasicAuthenticationSecurity"),
             Msg(2, "api_key_security", "ApiKeySecurity"),
             Msg(3, "oauth2_implicit_security", "Oauth2ImplicitSecurity"),
             Msg(4, "oauth2_password_security", "Oauth2PasswordSecurity"),
             Msg(5, "oauth2_application_security", "Oauth2ApplicationSecurity"),
             Msg(6, "oauth2_access_code_security", "Oauth2AccessCodeSecurity")}),
      Struct("BasicAuthenticationSecurity", 3, {Str(1, "type"), Str(2, "description")}),
      Struct("ApiKeySecurity", 5,
             {Str(1, "type"), Str(2, "name"), Str(3, "in"), Str(4, "description")}),
      Struct("Oauth2ImplicitSecurity", 6,
             {Str(1, "type"), Str(2, "flow"), Msg(3, "scopes", "Oauth2Scopes"),
              Str(4, "authorizationUrl"), Str(5, "description")}),
      Struct("Oauth2PasswordSecurity", 6,
             {Str(1, "type"), Str(2, "flow"), Msg(3, "scopes", "Oauth2Scopes"), Str(4, "tokenUrl"),
              Str(5, "description")}),
      Struct("Oauth2ApplicationSecurity", 6,
             {Str(1, "type"), Str(2, "flow"), Msg(3, "scopes", "Oauth2Scopes"), Str(4, "tokenUrl"),
              Str(5, "description")}),
      Struct("Oauth2AccessCodeSecurity", 7,
             {Str(1, "type"), Str(2, "flow"), Msg(3, "scopes", "Oauth2Scopes"),
              Str(4, "authorizationUrl"), Str(5, "tokenUrl"), Str(6, "description")}),
      Map("Oauth2Scopes", Str(1, "additional_properties")),
      Map("SecurityRequirement", Msg(1, "additional_properties", "StringArray")),
      List("StringArray", Str(1, "value")),
  };
  return specs;
}

// ---------------------------------------------------------------------------------------------
// Resolved tables: message names turned into pointers, kStruct fields sorted by number.
// ---------------------------------------------------------------------------------------------

struct Message;

struct Field {
  FieldSpec spec;
  const Message* message = nullptr;  // resolved spec.message, or nullptr
};

struct Message {
  const MessageSpec* spec = nullptr;
  std::vector<Field> fields;

  const Field* Find(uint32_t number) const {
    for (const Field& f : fields) {
      if (f.spec.number == number) return &f;
    }
    return nullptr;
  }
};

class Registry {
 public:
  static const Registry& Get() {
    static const Registry registry;
    return registry;
  }

  const Message& Document() const { return *document_; }

 private:
  // Table mistakes are programmer errors: they abort at first use (every test encodes).
  Registry() {
    for (const MessageSpec& spec : MessageSpecs()) {
      KLUTCH_CHECK(messages_.emplace(spec.name, Message{&spec, {}}).second);
    }
    for (const MessageSpec& spec : MessageSpecs()) {
      Message& message = messages_.at(spec.name);
      for (const FieldSpec& f : spec.fields) {
        const Message* nested = nullptr;
        if (f.kind == Kind::kMessage) {
          auto it = messages_.find(f.message);
          KLUTCH_CHECK(it != messages_.end());
          nested = &it->second;
        }
        KLUTCH_CHECK(f.number > 0 && f.number < 1000);
        KLUTCH_CHECK(spec.shape == Shape::kStruct || !f.repeated);
        message.fields.push_back(Field{f, nested});
      }
      std::sort(message.fields.begin(), message.fields.end(),
                [](const Field& a, const Field& b) { return a.spec.number < b.spec.number; });
      for (size_t i = 1; i < message.fields.size(); ++i) {
        KLUTCH_CHECK(message.fields[i - 1].spec.number != message.fields[i].spec.number);
      }
      KLUTCH_CHECK(spec.shape == Shape::kStruct || spec.shape == Shape::kOneof
                       ? !message.fields.empty()
                       : message.fields.size() == 1);
      KLUTCH_CHECK((spec.shape == Shape::kOneof) == (spec.choose != nullptr));
      // Extensions are written after the fields of a struct, which needs the highest number.
      KLUTCH_CHECK(spec.shape != Shape::kStruct || spec.extensions == 0 ||
                   spec.extensions > message.fields.back().spec.number);
      KLUTCH_CHECK(spec.shape != Shape::kMap || spec.extensions != message.fields[0].spec.number);
    }
    document_ = &messages_.at("Document");
  }

  // Node-based: pointers to values stay valid while the map is filled.
  std::unordered_map<std::string_view, Message> messages_;
  const Message* document_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// JSON checks.
// ---------------------------------------------------------------------------------------------

// An integer value: JSON integers, and numbers with an integral value, within int64.
std::optional<int64_t> ToInt64(const Json& value) {
  if (value.is_number_unsigned()) {
    auto u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    double d = value.get<double>();
    // 2^63: the first double above int64's range.
    constexpr double kLimit = 9223372036854775808.0;
    if (!std::isfinite(d) || std::trunc(d) != d || d < -kLimit || d >= kLimit) {
      return std::nullopt;
    }
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// The encoder.
// ---------------------------------------------------------------------------------------------

// One step of the JSON path from the document root, kept on the stack while descending and
// rendered only when an error is reported.
struct PathNode {
  enum class Type : uint8_t { kRoot, kField, kKey, kIndex };
  const PathNode* parent = nullptr;
  Type type = Type::kRoot;
  std::string_view name;  // kField, kKey
  size_t index = 0;       // kIndex
  size_t depth = 0;       // steps from the root

  PathNode Field(std::string_view field) const { return {this, Type::kField, field, 0, depth + 1}; }
  PathNode Key(std::string_view key) const { return {this, Type::kKey, key, 0, depth + 1}; }
  PathNode Index(size_t i) const { return {this, Type::kIndex, {}, i, depth + 1}; }
};

bool IsPlainKey(std::string_view key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '$';
  });
}

// `definitions["io.k8s.api.core.v1.ConfigMap"].properties.data.type`
std::string RenderPath(const PathNode& path) {
  std::vector<const PathNode*> steps;
  for (const PathNode* p = &path; p != nullptr && p->type != PathNode::Type::kRoot; p = p->parent) {
    steps.push_back(p);
  }
  std::string out;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const PathNode& step = **it;
    if (step.type == PathNode::Type::kIndex) {
      out += fmt::format("[{}]", step.index);
    } else if (step.type == PathNode::Type::kField || IsPlainKey(step.name)) {
      if (!out.empty()) out += '.';
      out.append(step.name);
    } else {
      out += '[';
      out += Quote(step.name);
      out += ']';
    }
  }
  return out;
}

core::Status Error(const PathNode& path, std::string_view problem) {
  std::string where = RenderPath(path);
  if (where.empty()) {
    return core::BadRequest(fmt::format("invalid Swagger 2.0 document: {}", problem));
  }
  return core::BadRequest(fmt::format("invalid Swagger 2.0 document: {}: {}", where, problem));
}

core::Status TooDeep(const PathNode& path) {
  return Error(path, fmt::format("nested deeper than {} levels", kMaxJsonDepth));
}

// Checks what Any's text needs from a free-form value (bounded nesting, valid UTF-8), without
// recursing deeper than kMaxJsonDepth from the root.
core::Status CheckFreeForm(const Json& value, const PathNode& path) {
  if (path.depth > kMaxJsonDepth) return TooDeep(path);
  if (value.is_string()) {
    if (!IsValidUtf8(value.get_ref<const std::string&>())) {
      return Error(path, "invalid UTF-8 in string");
    }
  } else if (value.is_object()) {
    for (const auto& [key, member] : value.items()) {
      PathNode child = path.Key(key);
      if (!IsValidUtf8(key)) return Error(child, "invalid UTF-8 in key");
      KLUTCH_RETURN_IF_ERROR(CheckFreeForm(member, child));
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      KLUTCH_RETURN_IF_ERROR(CheckFreeForm(value[i], path.Index(i)));
    }
  }
  return core::Status::Ok();
}

core::Status EncodeMessage(const Message& message, const Json& value, const PathNode& path,
                           std::string& out);

// Writes one value of `field` as field `number`. `keep_zero` writes proto3 default scalars too
// (repeated elements, oneof members, which Go always writes).
core::Status EncodeValue(const Field& field, uint32_t number, const Json& value,
                         const PathNode& path, bool keep_zero, std::string& out) {
  switch (field.spec.kind) {
    case Kind::kString: {
      if (!value.is_string()) return Error(path, Expected("a string", value));
      const auto& s = value.get_ref<const std::string&>();
      if (s.empty() && !keep_zero) return core::Status::Ok();
      if (!IsValidUtf8(s)) return Error(path, "invalid UTF-8 in string");
      AppendLengthDelimited(out, number, s);
      return core::Status::Ok();
    }
    case Kind::kBool: {
      if (!value.is_boolean()) return Error(path, Expected("a boolean", value));
      bool b = value.get<bool>();
      if (!b && !keep_zero) return core::Status::Ok();
      AppendVarintField(out, number, b ? 1 : 0);
      return core::Status::Ok();
    }
    case Kind::kInt64: {
      std::optional<int64_t> v = ToInt64(value);
      if (!v) {
        return Error(path, value.is_number()
                               ? fmt::format("expected an integer, got {}", value.dump())
                               : Expected("an integer", value));
      }
      if (*v == 0 && !keep_zero) return core::Status::Ok();
      AppendVarintField(out, number, static_cast<uint64_t>(*v));
      return core::Status::Ok();
    }
    case Kind::kDouble: {
      if (!value.is_number()) return Error(path, Expected("a number", value));
      auto d = value.get<double>();
      uint64_t bits = 0;
      std::memcpy(&bits, &d, sizeof bits);
      if (bits == 0 && !keep_zero) return core::Status::Ok();
      AppendFixed64Field(out, number, bits);
      return core::Status::Ok();
    }
    case Kind::kAny: {
      // Any {2: yaml}: the value as compact JSON, which YAML parsers read as the same value.
      KLUTCH_RETURN_IF_ERROR(CheckFreeForm(value, path));
      size_t start = out.size();
      AppendLengthDelimited(out, 2, value.dump(-1, ' ', false, Json::error_handler_t::replace));
      WrapAsField(out, start, number);
      return core::Status::Ok();
    }
    case Kind::kMessage: {
      size_t start = out.size();
      KLUTCH_RETURN_IF_ERROR(EncodeMessage(*field.message, value, path, out));
      WrapAsField(out, start, number);
      return core::Status::Ok();
    }
  }
  return Error(path, "unsupported field kind");  // unreachable: the switch is exhaustive
}

// Writes a field of a kStruct message: every element of a repeated field, or the one value.
core::Status EncodeField(const Field& field, const Json& value, const PathNode& path,
                         std::string& out) {
  if (!field.spec.repeated) return EncodeValue(field, field.spec.number, value, path, false, out);
  if (!value.is_array()) return Error(path, Expected("an array", value));
  for (size_t i = 0; i < value.size(); ++i) {
    KLUTCH_RETURN_IF_ERROR(
        EncodeValue(field, field.spec.number, value[i], path.Index(i), true, out));
  }
  return core::Status::Ok();
}

// Writes a Named* entry {1: name, 2: value} as field `number`; `value_field` says how to write
// the value.
core::Status EncodeNamed(uint32_t number, std::string_view name, const Field& value_field,
                         const Json& value, const PathNode& path, std::string& out) {
  if (!IsValidUtf8(name)) return Error(path, "invalid UTF-8 in key");
  size_t start = out.size();
  if (!name.empty()) AppendLengthDelimited(out, 1, name);
  KLUTCH_RETURN_IF_ERROR(EncodeValue(value_field, 2, value, path, false, out));
  WrapAsField(out, start, number);
  return core::Status::Ok();
}

const Field& AnyField() {
  static const Field field{AnyValue(2, "value"), nullptr};
  return field;
}

bool IsExtension(std::string_view key) { return key.size() >= 2 && key.substr(0, 2) == "x-"; }

// Writes the "x-" members of `value` as NamedAny entries in field `number`.
core::Status EncodeExtensions(uint32_t number, const Json& value, const PathNode& path,
                              std::string& out) {
  for (const auto& [key, member] : value.items()) {
    if (!IsExtension(key)) continue;
    KLUTCH_RETURN_IF_ERROR(EncodeNamed(number, key, AnyField(), member, path.Field(key), out));
  }
  return core::Status::Ok();
}

core::Status EncodeStruct(const Message& message, const Json& value, const PathNode& path,
                          std::string& out) {
  if (!value.is_object()) return Error(path, Expected("an object", value));
  for (const Field& field : message.fields) {
    auto it = value.find(field.spec.json_name);
    if (it == value.end() || it->is_null()) continue;
    KLUTCH_RETURN_IF_ERROR(EncodeField(field, *it, path.Field(field.spec.json_name), out));
  }
  if (message.spec->extensions == 0) return core::Status::Ok();
  return EncodeExtensions(message.spec->extensions, value, path, out);
}

core::Status EncodeMap(const Message& message, const Json& value, const PathNode& path,
                       std::string& out) {
  if (!value.is_object()) return Error(path, Expected("an object", value));
  const MessageSpec& spec = *message.spec;
  const Field& entries = message.fields[0];
  // Fields are written in number order: Paths has its extensions first, Responses last.
  bool extensions_first = spec.extensions != 0 && spec.extensions < entries.spec.number;
  if (extensions_first) KLUTCH_RETURN_IF_ERROR(EncodeExtensions(spec.extensions, value, path, out));
  for (const auto& [key, member] : value.items()) {
    if (spec.extensions != 0 && IsExtension(key)) continue;
    if (key.compare(0, spec.key_prefix.size(), spec.key_prefix) != 0) continue;
    KLUTCH_RETURN_IF_ERROR(
        EncodeNamed(entries.spec.number, key, entries, member, path.Key(key), out));
  }
  if (spec.extensions != 0 && !extensions_first) {
    KLUTCH_RETURN_IF_ERROR(EncodeExtensions(spec.extensions, value, path, out));
  }
  return core::Status::Ok();
}

bool Accepts(const Field& field, const Json& value) {
  switch (field.spec.kind) {
    case Kind::kString:
      return value.is_string();
    case Kind::kMessage:
      return value.is_object();
    default:
      return true;
  }
}

core::Status EncodeList(const Message& message, const Json& value, const PathNode& path,
                        std::string& out) {
  const Field& elements = message.fields[0];
  if (!value.is_array()) {
    if (!Accepts(elements, value)) {
      std::string_view what = elements.spec.kind == Kind::kString
                                  ? "a string or an array of strings"
                                  : "an object or an array of objects";
      return Error(path, Expected(what, value));
    }
    return EncodeValue(elements, elements.spec.number, value, path, true, out);
  }
  for (size_t i = 0; i < value.size(); ++i) {
    KLUTCH_RETURN_IF_ERROR(
        EncodeValue(elements, elements.spec.number, value[i], path.Index(i), true, out));
  }
  return core::Status::Ok();
}

core::Status EncodeOneof(const Message& message, const Json& value, const PathNode& path,
                         std::string& out) {
  Choice choice = message.spec->choose(value);
  const Field* field = choice.number != 0 ? message.Find(choice.number) : nullptr;
  if (field == nullptr) {
    return Error(choice.key.empty() ? path : path.Field(choice.key), choice.problem);
  }
  // The oneof wraps the same JSON value: the path does not change.
  return EncodeValue(*field, field->spec.number, value, path, true, out);
}

core::Status EncodeMessage(const Message& message, const Json& value, const PathNode& path,
                           std::string& out) {
  if (path.depth > kMaxJsonDepth) return TooDeep(path);
  switch (message.spec->shape) {
    case Shape::kStruct:
      return EncodeStruct(message, value, path, out);
    case Shape::kMap:
      return EncodeMap(message, value, path, out);
    case Shape::kList:
      return EncodeList(message, value, path, out);
    case Shape::kOneof:
      return EncodeOneof(message, value, path, out);
  }
  return Error(path, "unsupported message shape");  // unreachable: the switch is exhaustive
}

}  // namespace

core::Result<std::string> EncodeOpenApiV2Protobuf(const Json& swagger) {
  std::string out;
  PathNode root;
  KLUTCH_RETURN_IF_ERROR(EncodeMessage(Registry::Get().Document(), swagger, root, out));
  return out;
}

}  // namespace klutch::codec
