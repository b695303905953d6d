#include "cel/value.h"

#include <cmath>
#include <cstdio>

#include "cel/internal.h"
#include "core/duration.h"

namespace klutch::cel {

Value Value::List(std::vector<Value> items) {
  return Value(
      Rep(std::shared_ptr<const ListValue>(std::make_shared<VectorList>(std::move(items)))));
}

Value Value::Map(std::vector<std::pair<Value, Value>> entries) {
  return Value(
      Rep(std::shared_ptr<const MapValue>(std::make_shared<VectorMap>(std::move(entries)))));
}

Value Value::OptionalOf(Value v) {
  return Value(Rep(cel::Optional{std::make_shared<const Value>(std::move(v))}));
}

Value Value::OptionalNone() { return Value(Rep(cel::Optional{nullptr})); }

Value Value::MakeError(std::string message) {
  return Value(Rep(Error{std::make_shared<const std::string>(std::move(message))}));
}

std::string Value::TypeName() const {
  switch (kind()) {
    case Kind::kNull:
      return "null_type";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kUint:
      return "uint";
    case Kind::kDouble:
      return "double";
    case Kind::kString:
      return "string";
    case Kind::kBytes:
      return "bytes";
    case Kind::kList:
      return "list";
    case Kind::kMap:
      return "map";
    case Kind::kTimestamp:
      return "google.protobuf.Timestamp";
    case Kind::kDuration:
      return "google.protobuf.Duration";
    case Kind::kType:
      return "type";
    case Kind::kOptional:
      return "optional_type";
    case Kind::kOpaque:
      return std::string(opaque().type_name());
    case Kind::kError:
      return "error";
  }
  return "unknown";
}

namespace {

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string Value::DebugString() const {
  switch (kind()) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return bool_value() ? "true" : "false";
    case Kind::kInt:
      return std::to_string(int_value());
    case Kind::kUint:
      return std::to_string(uint_value()) + "u";
    case Kind::kDouble: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", double_value());
      return buf;
    }
    case Kind::kString:
      return Quote(string_value());
    case Kind::kBytes:
      return "b" + Quote(bytes_value());
    case Kind::kList: {
      std::string out = "[";
      const ListValue& l = list();
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + l.Get(i).DebugString();
      return out + "]";
    }
    case Kind::kMap: {
      std::string out = "{";
      bool first = true;
      for (const Value& k : map().Keys()) {
        auto v = map().Find(k);
        out += (first ? "" : ", ") + k.DebugString() + ": " + (v ? v->DebugString() : "?");
        first = false;
      }
      return out + "}";
    }
    case Kind::kTimestamp:
      return "timestamp(\"" + FormatTimestamp(timestamp()) + "\")";
    case Kind::kDuration:
      return "duration(\"" + FormatDuration(duration()) + "\")";
    case Kind::kType:
      return type_name();
    case Kind::kOptional:
      return has_optional_value() ? "optional.of(" + optional_value().DebugString() + ")"
                                  : "optional.none()";
    case Kind::kOpaque:
      return opaque().DebugString();
    case Kind::kError:
      return "error(" + Quote(error_message()) + ")";
  }
  return "?";
}

std::optional<Value> MapValue::FindField(std::string_view name) const {
  return Find(Value::String(std::string(name)));
}

std::optional<Value> VectorMap::Find(const Value& key) const {
  for (const auto& [k, v] : entries_) {
    if (k.kind() == key.kind()) {
      bool same = false;
      switch (k.kind()) {
        case Kind::kString:
          same = k.string_value() == key.string_value();
          break;
        case Kind::kInt:
          same = k.int_value() == key.int_value();
          break;
        case Kind::kUint:
          same = k.uint_value() == key.uint_value();
          break;
        case Kind::kBool:
          same = k.bool_value() == key.bool_value();
          break;
        default:
          break;
      }
      if (same) return v;
      continue;
    }
    Value eq = Equal(k, key);
    if (eq.kind() == Kind::kBool && eq.bool_value()) return v;
  }
  return std::nullopt;
}

std::vector<Value> VectorMap::Keys() const {
  std::vector<Value> keys;
  keys.reserve(entries_.size());
  for (const auto& e : entries_) keys.push_back(e.first);
  return keys;
}

bool IsValidMapKey(const Value& key) {
  switch (key.kind()) {
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kUint:
    case Kind::kString:
      return true;
    default:
      return false;
  }
}

namespace {

bool IsNumber(Kind k) { return k == Kind::kInt || k == Kind::kUint || k == Kind::kDouble; }

// Exact numeric ordering across int, uint and double (long double holds every int64,
// uint64 and double value exactly on the platforms we build for).
std::partial_ordering CompareNumbers(const Value& a, const Value& b) {
  auto as_ld = [](const Value& v) -> long double {
    switch (v.kind()) {
      case Kind::kInt:
        return static_cast<long double>(v.int_value());
      case Kind::kUint:
        return static_cast<long double>(v.uint_value());
      default:
        return static_cast<long double>(v.double_value());
    }
  };
  if (a.kind() == Kind::kInt && b.kind() == Kind::kInt) return a.int_value() <=> b.int_value();
  if (a.kind() == Kind::kUint && b.kind() == Kind::kUint) return a.uint_value() <=> b.uint_value();
  // Against a double the integer is converted to double, as the CEL spec's conformance
  // tests require (9223372036854775807 compares equal to 9223372036854775808.0); int
  // against uint compares exactly.
  if (a.kind() == Kind::kDouble || b.kind() == Kind::kDouble) {
    auto as_d = [](const Value& v) -> double {
      switch (v.kind()) {
        case Kind::kInt:
          return static_cast<double>(v.int_value());
        case Kind::kUint:
          return static_cast<double>(v.uint_value());
        default:
          return v.double_value();
      }
    };
    return as_d(a) <=> as_d(b);
  }
  return as_ld(a) <=> as_ld(b);
}

bool UnorderedListEqual(const ListValue& a, const ListValue& b, Value& error) {
  std::vector<bool> used(b.size(), false);
  for (size_t i = 0; i < a.size(); ++i) {
    Value x = a.Get(i);
    bool found = false;
    for (size_t j = 0; j < b.size() && !found; ++j) {
      if (used[j]) continue;
      Value r = Equal(x, b.Get(j));
      if (r.is_error()) {
        error = r;
        return false;
      }
      if (r.bool_value()) {
        used[j] = true;
        found = true;
      }
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

Value Equal(const Value& a, const Value& b) {
  if (a.is_error()) return a;
  if (b.is_error()) return b;
  Kind ka = a.kind(), kb = b.kind();
  if (ka != kb) {
    if (IsNumber(ka) && IsNumber(kb)) return Value::Bool(CompareNumbers(a, b) == 0);
    return Value::Bool(false);
  }
  switch (ka) {
    case Kind::kNull:
      return Value::Bool(true);
    case Kind::kBool:
      return Value::Bool(a.bool_value() == b.bool_value());
    case Kind::kInt:
      return Value::Bool(a.int_value() == b.int_value());
    case Kind::kUint:
      return Value::Bool(a.uint_value() == b.uint_value());
    case Kind::kDouble:
      return Value::Bool(a.double_value() == b.double_value());
    case Kind::kString:
      return Value::Bool(a.string_value() == b.string_value());
    case Kind::kBytes:
      return Value::Bool(a.bytes_value() == b.bytes_value());
    case Kind::kTimestamp:
      return Value::Bool(a.timestamp() == b.timestamp());
    case Kind::kDuration:
      return Value::Bool(a.duration() == b.duration());
    case Kind::kType:
      return Value::Bool(a.type_name() == b.type_name());
    case Kind::kOpaque:
      return Value::Bool(a.opaque().type_name() == b.opaque().type_name() &&
                         a.opaque().Equals(b.opaque()));
    case Kind::kOptional:
      if (a.has_optional_value() != b.has_optional_value()) return Value::Bool(false);
      if (!a.has_optional_value()) return Value::Bool(true);
      return Equal(a.optional_value(), b.optional_value());
    case Kind::kList: {
      const ListValue& la = a.list();
      const ListValue& lb = b.list();
      if (la.size() != lb.size()) return Value::Bool(false);
      if (la.unordered() || lb.unordered()) {
        Value err;
        bool eq = UnorderedListEqual(la, lb, err);
        if (err.is_error()) return err;
        return Value::Bool(eq);
      }
      std::optional<Value> error;
      for (size_t i = 0; i < la.size(); ++i) {
        Value r = Equal(la.Get(i), lb.Get(i));
        if (r.is_error()) {
          if (!error) error = r;
          continue;
        }
        if (!r.bool_value()) return r;
      }
      if (error) return *error;
      return Value::Bool(true);
    }
    case Kind::kMap: {
      const MapValue& ma = a.map();
      const MapValue& mb = b.map();
      if (ma.size() != mb.size()) return Value::Bool(false);
      std::optional<Value> error;
      for (const Value& k : ma.Keys()) {
        auto vb = mb.Find(k);
        auto va = ma.Find(k);
        if (!vb || !va) return Value::Bool(false);
        Value r = Equal(*va, *vb);
        if (r.is_error()) {
          if (!error) error = r;
          continue;
        }
        if (!r.bool_value()) return r;
      }
      if (error) return *error;
      return Value::Bool(true);
    }
    case Kind::kError:
      return a;
  }
  return Value::Bool(false);
}

Ordering Compare(const Value& a, const Value& b) {
  Kind ka = a.kind(), kb = b.kind();
  if (IsNumber(ka) && IsNumber(kb)) return Ordering{true, CompareNumbers(a, b)};
  if (ka != kb) return Ordering{};
  switch (ka) {
    case Kind::kBool:
      return Ordering{true, a.bool_value() <=> b.bool_value()};
    case Kind::kString:
      return Ordering{true, a.string_value().compare(b.string_value()) <=> 0};
    case Kind::kBytes:
      return Ordering{true, a.bytes_value().compare(b.bytes_value()) <=> 0};
    case Kind::kTimestamp:
      return Ordering{true, a.timestamp() <=> b.timestamp()};
    case Kind::kDuration:
      return Ordering{true, a.duration() <=> b.duration()};
    default:
      return Ordering{};
  }
}

std::optional<Duration> ParseDuration(std::string_view text) {
  // cel-go reads durations with Go's time.ParseDuration, whose range DurationInRange keeps.
  core::Result<core::GoDuration> d = core::ParseGoDuration(text);
  if (!d.ok()) return std::nullopt;
  return Duration{d->seconds, d->nanos};
}

}  // namespace klutch::cel
