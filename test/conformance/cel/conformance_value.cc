#include "test/conformance/cel/conformance_value.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace klutch::cel_conformance {
namespace {

using textproto::Field;
using textproto::Message;
using textproto::Scalar;

Converted Unsupported(std::string why) { return Converted{cel::Value(), std::move(why)}; }

core::Status Malformed(const Field& field, std::string what) {
  return core::BadRequest("line " + std::to_string(field.line) + ": " + field.name + ": " +
                          std::move(what));
}

core::Result<const Scalar*> ScalarOf(const Field& field) {
  if (field.is_message()) return Malformed(field, "expected a scalar, got a message");
  return &field.scalar();
}

core::Result<const Message*> MessageOf(const Field& field) {
  if (!field.is_message()) return Malformed(field, "expected a message, got a scalar");
  return &field.message();
}

// seconds and nanos of a google.protobuf.Timestamp or Duration payload.
core::Status SecondsAndNanos(const Message& m, int64_t& seconds, int32_t& nanos) {
  seconds = 0;
  nanos = 0;
  for (const Field& f : m.fields()) {
    KLUTCH_ASSIGN_OR_RETURN(const Scalar* s, ScalarOf(f));
    KLUTCH_ASSIGN_OR_RETURN(int64_t v, textproto::ToInt64(*s));
    if (f.name == "seconds") {
      seconds = v;
    } else if (f.name == "nanos") {
      if (v <= -1000000000 || v >= 1000000000) return Malformed(f, "nanos out of range");
      nanos = static_cast<int32_t>(v);
    } else {
      return Malformed(f, "unknown field");
    }
  }
  return core::Status::Ok();
}

// object_value: an Any, written expanded (`[type.googleapis.com/T] { ... }`) or raw.
core::Result<Converted> FromAny(const Field& field, const Message& any) {
  if (any.fields().size() != 1 || !any.fields()[0].is_message()) {
    return Unsupported("object_value given as a raw Any (type_url/value)");
  }
  const Field& payload = any.fields()[0];
  std::string_view type = payload.name;
  if (auto slash = type.rfind('/'); slash != std::string_view::npos) {
    type.remove_prefix(slash + 1);
  }
  int64_t seconds = 0;
  int32_t nanos = 0;
  if (type == "google.protobuf.Timestamp") {
    KLUTCH_RETURN_IF_ERROR(SecondsAndNanos(payload.message(), seconds, nanos));
    if (nanos < 0) return Malformed(payload, "timestamp nanos must be non-negative");
    // 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
    if (seconds < -62135596800 || seconds > 253402300799) {
      return Malformed(payload, "timestamp out of range");
    }
    return Converted{cel::Value::Time(cel::Timestamp{seconds, nanos}), ""};
  }
  if (type == "google.protobuf.Duration") {
    KLUTCH_RETURN_IF_ERROR(SecondsAndNanos(payload.message(), seconds, nanos));
    if ((seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0)) {
      return Malformed(payload, "duration seconds and nanos have different signs");
    }
    return Converted{cel::Value::Span(cel::Duration{seconds, nanos}), ""};
  }
  return Unsupported("protobuf message " + std::string(type));
}

}  // namespace

core::Result<Converted> ToCelValue(const Message& value) {
  if (value.fields().size() != 1) {
    return core::BadRequest("a Value must set exactly one kind, got " +
                            std::to_string(value.fields().size()) + " fields");
  }
  const Field& f = value.fields()[0];
  const std::string& kind = f.name;
  if (kind == "null_value") {
    KLUTCH_ASSIGN_OR_RETURN(const Scalar* s, ScalarOf(f));
    if (!(s->type == Scalar::Type::kIdentifier && s->text == "NULL_VALUE") &&
        !(s->type == Scalar::Type::kNumber && s->text == "0")) {
      return Malformed(f, "expected NULL_VALUE");
    }
    return Converted{cel::Value::Null(), ""};
  }
  if (kind == "bool_value") {
    KLUTCH_ASSIGN_OR_RETURN(const Scalar* s, ScalarOf(f));
    KLUTCH_ASSIGN_OR_RETURN(bool b, textproto::ToBool(*s));
    return Converted{cel::Value::Bool(b), ""};
  }
  if (kind == "int64_value") {
    KLUTCH_ASSIGN_OR_RETURN(const Scalar* s, ScalarOf(f));
    KLUTCH_ASSIGN_OR_RETURN(int64_t v, textproto::ToInt64(*s));
    return Converted{cel::Value::Int(v), ""};
  }
  if (kind == "uint64_value") {
    KLUTCH_ASSIGN_OR_RETURN(const Scalar* s, ScalarOf(f));
    KLUTCH_ASSIGN_OR_RETURN(uint64_t v, textproto::ToUint64(*s));
    return Converted{cel::Value::Uint(v), ""};
  }
  if (kind == "double_value") {
    KLUTCH_ASSIGN_OR_RETURN(const Scalar* s, ScalarOf(f));
    KLUTCH_ASSIGN_OR_RETURN(double v, textproto::ToDouble(*s));
    return Converted{cel::Value::Double(v), ""};
  }
  if (kind == "string_value" || kind == "bytes_value" || kind == "type_value") {
    KLUTCH_ASSIGN_OR_RETURN(const Scalar* s, ScalarOf(f));
    if (s->type != Scalar::Type::kString) return Malformed(f, "expected a string");
    if (kind == "string_value") return Converted{cel::Value::String(s->text), ""};
    if (kind == "bytes_value") return Converted{cel::Value::BytesOf(s->text), ""};
    return Converted{cel::Value::Type(s->text), ""};
  }
  if (kind == "list_value") {
    KLUTCH_ASSIGN_OR_RETURN(const Message* list, MessageOf(f));
    std::vector<cel::Value> items;
    for (const Field& element : list->fields()) {
      if (element.name != "values") return Malformed(element, "unknown field in list_value");
      KLUTCH_ASSIGN_OR_RETURN(const Message* m, MessageOf(element));
      KLUTCH_ASSIGN_OR_RETURN(Converted item, ToCelValue(*m));
      if (!item.unsupported.empty()) return item;
      items.push_back(std::move(item.value));
    }
    return Converted{cel::Value::List(std::move(items)), ""};
  }
  if (kind == "map_value") {
    KLUTCH_ASSIGN_OR_RETURN(const Message* map, MessageOf(f));
    std::vector<std::pair<cel::Value, cel::Value>> entries;
    for (const Field& entry : map->fields()) {
      if (entry.name != "entries") return Malformed(entry, "unknown field in map_value");
      KLUTCH_ASSIGN_OR_RETURN(const Message* e, MessageOf(entry));
      const Message* key = e->FindMessage("key");
      const Message* val = e->FindMessage("value");
      if (key == nullptr || val == nullptr) return Malformed(entry, "entry needs key and value");
      KLUTCH_ASSIGN_OR_RETURN(Converted k, ToCelValue(*key));
      if (!k.unsupported.empty()) return k;
      if (!cel::IsValidMapKey(k.value)) {
        return Malformed(entry, "map key of kind " + k.value.TypeName());
      }
      KLUTCH_ASSIGN_OR_RETURN(Converted v, ToCelValue(*val));
      if (!v.unsupported.empty()) return v;
      entries.emplace_back(std::move(k.value), std::move(v.value));
    }
    return Converted{cel::Value::Map(std::move(entries)), ""};
  }
  if (kind == "object_value") {
    KLUTCH_ASSIGN_OR_RETURN(const Message* any, MessageOf(f));
    return FromAny(f, *any);
  }
  if (kind == "enum_value") return Unsupported("enum_value");
  return Malformed(f, "unknown Value kind");
}

bool ExactlyEqual(const cel::Value& a, const cel::Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case cel::Kind::kNull:
      return true;
    case cel::Kind::kBool:
      return a.bool_value() == b.bool_value();
    case cel::Kind::kInt:
      return a.int_value() == b.int_value();
    case cel::Kind::kUint:
      return a.uint_value() == b.uint_value();
    case cel::Kind::kDouble: {
      double x = a.double_value();
      double y = b.double_value();
      return x == y || (std::isnan(x) && std::isnan(y));
    }
    case cel::Kind::kString:
      return a.string_value() == b.string_value();
    case cel::Kind::kBytes:
      return a.bytes_value() == b.bytes_value();
    case cel::Kind::kList: {
      const cel::ListValue& x = a.list();
      const cel::ListValue& y = b.list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!ExactlyEqual(x.Get(i), y.Get(i))) return false;
      }
      return true;
    }
    case cel::Kind::kMap: {
      const cel::MapValue& x = a.map();
      const cel::MapValue& y = b.map();
      if (x.size() != y.size()) return false;
      std::vector<cel::Value> y_keys = y.Keys();
      std::vector<bool> used(y_keys.size(), false);
      for (const cel::Value& key : x.Keys()) {
        // Keys match exactly (1 and 1u are different keys here); Find() would match loosely.
        size_t j = 0;
        while (j < y_keys.size() && (used[j] || !ExactlyEqual(key, y_keys[j]))) ++j;
        if (j == y_keys.size()) return false;
        used[j] = true;
        std::optional<cel::Value> xv = x.Find(key);
        std::optional<cel::Value> yv = y.Find(y_keys[j]);
        if (!xv || !yv || !ExactlyEqual(*xv, *yv)) return false;
      }
      return true;
    }
    case cel::Kind::kTimestamp:
      return a.timestamp() == b.timestamp();
    case cel::Kind::kDuration:
      return a.duration() == b.duration();
    case cel::Kind::kType:
      return a.type_name() == b.type_name();
    case cel::Kind::kOptional:
      if (a.has_optional_value() != b.has_optional_value()) return false;
      return !a.has_optional_value() || ExactlyEqual(a.optional_value(), b.optional_value());
    case cel::Kind::kOpaque:
      return a.opaque().Equals(b.opaque());
    case cel::Kind::kError:
      return false;
  }
  return false;
}

}  // namespace klutch::cel_conformance
