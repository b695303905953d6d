#include "schema/cel_value.h"

#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "core/strings.h"

namespace klutch::schema {
namespace {

const Json* Child(const Json* schema, const char* key) {
  if (schema == nullptr || !schema->is_object()) return nullptr;
  auto it = schema->find(key);
  if (it == schema->end()) return nullptr;
  return &*it;
}

std::string TypeOf(const Json* schema) {
  const Json* t = Child(schema, "type");
  return t && t->is_string() ? t->get<std::string>() : "";
}

bool Flag(const Json* schema, const char* key) {
  const Json* f = Child(schema, key);
  return f && f->is_boolean() && f->get<bool>();
}

// The metadata of a custom resource as CEL sees it: name and generateName only.
const Json& RootMetadataSchema() {
  static const Json kSchema = Json::parse(
      R"({"type":"object","properties":{"name":{"type":"string"},"generateName":{"type":"string"}}})");
  return kSchema;
}

// The fields every embedded resource (and the root object) has besides its properties.
const Json& EmbeddedFieldSchema(std::string_view field) {
  static const Json kString = Json::parse(R"({"type":"string"})");
  static const Json kMeta = Json::parse(
      R"({"type":"object","properties":{"name":{"type":"string"},"generateName":{"type":"string"},
          "namespace":{"type":"string"},"labels":{"type":"object","additionalProperties":{"type":"string"}},
          "annotations":{"type":"object","additionalProperties":{"type":"string"}}}})");
  return field == "metadata" ? kMeta : kString;
}

class ObjectValue final : public cel::MapValue {
 public:
  ObjectValue(const Json& json, const Json* schema, bool root)
      : json_(json), schema_(schema), root_(root) {
    properties_ = Child(schema, "properties");
    if (properties_ && !properties_->is_object()) properties_ = nullptr;
    const Json* ap = Child(schema, "additionalProperties");
    if (ap && ap->is_object()) additional_ = ap;
    embedded_ = Flag(schema, "x-kubernetes-embedded-resource");
    typed_ = properties_ != nullptr || additional_ != nullptr;
  }

  size_t size() const override {
    size_t n = 0;
    for (auto it = json_.begin(); it != json_.end(); ++it) n += Visible(it.key(), *it) ? 1 : 0;
    return n;
  }

  std::optional<cel::Value> Find(const cel::Value& key) const override {
    if (key.kind() != cel::Kind::kString) return std::nullopt;
    return Lookup(key.string_value());
  }

  std::optional<cel::Value> FindField(std::string_view name) const override {
    return Lookup(UnescapePropertyName(name));
  }

  std::vector<cel::Value> Keys() const override {
    std::vector<cel::Value> keys;
    keys.reserve(json_.size());
    for (auto it = json_.begin(); it != json_.end(); ++it) {
      if (Visible(it.key(), *it)) keys.push_back(cel::Value::String(it.key()));
    }
    return keys;
  }

 private:
  // Whether rules see this member: a declared (or, untyped, any) non-null field. A null
  // property of an object is absent to CEL, as in Kubernetes.
  bool Visible(const std::string& name, const Json& value) const {
    if (value.is_null() && properties_ != nullptr) return false;
    return FieldSchema(name).has_value();
  }

  // The schema of member `name`: nullptr when untyped, nullopt when not visible.
  std::optional<const Json*> FieldSchema(const std::string& name) const {
    if (root_ && name == "metadata") return &RootMetadataSchema();
    if (properties_ != nullptr && properties_->contains(name)) return &(*properties_)[name];
    if (additional_ != nullptr) return additional_;
    if ((root_ || embedded_) && (name == "apiVersion" || name == "kind" || name == "metadata")) {
      return &EmbeddedFieldSchema(name);
    }
    if (typed_ || (schema_ != nullptr && !Flag(schema_, "x-kubernetes-preserve-unknown-fields"))) {
      return std::nullopt;  // not declared: pruning removes such fields anyway
    }
    return nullptr;
  }

  std::optional<cel::Value> Lookup(const std::string& name) const {
    auto it = json_.find(name);
    if (it == json_.end()) return std::nullopt;
    if (it->is_null() && properties_ != nullptr) return std::nullopt;
    auto field_schema = FieldSchema(name);
    if (!field_schema) return std::nullopt;
    return ToCelValue(*it, *field_schema);
  }

  const Json& json_;
  const Json* schema_;
  const Json* properties_ = nullptr;
  const Json* additional_ = nullptr;
  bool root_;
  bool embedded_ = false;
  bool typed_ = false;
};

class ArrayValue final : public cel::ListValue {
 public:
  ArrayValue(const Json& json, const Json* schema) : json_(json) {
    items_ = Child(schema, "items");
    if (items_ && !items_->is_object()) items_ = nullptr;
    const Json* lt = Child(schema, "x-kubernetes-list-type");
    unordered_ = lt && lt->is_string() && (*lt == "set" || *lt == "map");
  }
  size_t size() const override { return json_.size(); }
  cel::Value Get(size_t index) const override { return ToCelValue(json_[index], items_); }
  bool unordered() const override { return unordered_; }

 private:
  const Json& json_;
  const Json* items_ = nullptr;
  bool unordered_ = false;
};

cel::Value Untyped(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return cel::Value::Null();
    case Json::value_t::boolean:
      return cel::Value::Bool(value.get<bool>());
    case Json::value_t::number_integer:
      return cel::Value::Int(value.get<int64_t>());
    case Json::value_t::number_unsigned: {
      uint64_t u = value.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return cel::Value::Int(static_cast<int64_t>(u));
      return cel::Value::Uint(u);
    }
    case Json::value_t::number_float:
      return cel::Value::Double(value.get<double>());
    case Json::value_t::string:
      return cel::Value::String(value.get<std::string>());
    default:
      return cel::Value::Null();
  }
}

}  // namespace

std::string UnescapePropertyName(std::string_view name) {
  if (name.find("__") == std::string_view::npos) return std::string(name);
  // A whole reserved word: __{keyword}__.
  static constexpr std::string_view kReserved[] = {
      "true",     "false",   "null",      "in",       "as",  "break",  "const",
      "continue", "else",    "for",       "function", "if",  "import", "let",
      "loop",     "package", "namespace", "return",   "var", "void",   "while"};
  if (name.size() > 4 && name.starts_with("__") && name.ends_with("__")) {
    std::string_view inner = name.substr(2, name.size() - 4);
    for (auto r : kReserved) {
      if (r == inner) return std::string(inner);
    }
  }
  std::string out;
  size_t i = 0;
  while (i < name.size()) {
    if (name.substr(i).starts_with("__underscores__")) {
      out += "__";
      i += 15;
    } else if (name.substr(i).starts_with("__dot__")) {
      out += ".";
      i += 7;
    } else if (name.substr(i).starts_with("__dash__")) {
      out += "-";
      i += 8;
    } else if (name.substr(i).starts_with("__slash__")) {
      out += "/";
      i += 9;
    } else {
      out += name[i++];
    }
  }
  return out;
}

cel::Value ToCelValue(const Json& value, const Json* schema, bool root) {
  if (value.is_null()) return cel::Value::Null();
  if (schema == nullptr) {
    if (value.is_object())
      return cel::Value::Map(std::make_shared<ObjectValue>(value, nullptr, root));
    if (value.is_array()) return cel::Value::List(std::make_shared<ArrayValue>(value, nullptr));
    return Untyped(value);
  }
  if (Flag(schema, "x-kubernetes-int-or-string")) return Untyped(value);
  std::string type = TypeOf(schema);
  if (value.is_object()) {
    return cel::Value::Map(std::make_shared<ObjectValue>(value, schema, root));
  }
  if (value.is_array()) return cel::Value::List(std::make_shared<ArrayValue>(value, schema));
  if (type == "number" && value.is_number()) return cel::Value::Double(value.get<double>());
  if (type == "integer" && value.is_number_float()) {
    double d = value.get<double>();
    // Only integral values inside int64's range convert (the cast is undefined outside).
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == std::trunc(d)) {
      return cel::Value::Int(static_cast<int64_t>(d));
    }
  }
  if (type == "string" && value.is_string()) {
    const Json* f = Child(schema, "format");
    std::string format = f && f->is_string() ? f->get<std::string>() : "";
    const std::string& s = value.get_ref<const std::string&>();
    if (format == "byte") {
      auto decoded = core::Base64Decode(s);
      if (decoded) return cel::Value::BytesOf(std::move(*decoded));
    } else if (format == "duration") {
      if (auto d = cel::ParseDuration(s)) return cel::Value::Span(*d);
    } else if (format == "date-time") {
      if (auto t = cel::ParseTimestamp(s)) return cel::Value::Time(*t);
    } else if (format == "date") {
      if (auto t = cel::ParseTimestamp(s + "T00:00:00Z")) return cel::Value::Time(*t);
    }
    return cel::Value::String(s);
  }
  return Untyped(value);
}

}  // namespace klutch::schema
