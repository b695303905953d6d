// CEL runtime values: the dynamic values a CEL program reads and produces.
//
// A Value is one of CEL's types (null, bool, int, uint, double, string, bytes, list, map,
// timestamp, duration, type, optional), an opaque extension value (Kubernetes' Quantity, URL,
// IP, CIDR, ...) or an error. Errors are values so that the logical operators can absorb
// them as the CEL spec requires (`false && error` is false). Lists and maps are interfaces,
// so callers can hand in lazily converted data (src/schema wraps JSON objects typed by a
// schema) without copying. Values are immutable and cheap to copy (payloads are shared);
// safe to read from many threads.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace klutch::cel {

enum class Kind {
  kNull,
  kBool,
  kInt,
  kUint,
  kDouble,
  kString,
  kBytes,
  kList,
  kMap,
  kTimestamp,
  kDuration,
  kType,
  kOptional,
  kOpaque,
  kError,
};

// Seconds and nanoseconds since the Unix epoch (nanos in [0, 1e9)). CEL's range is
// 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z.
struct Timestamp {
  int64_t seconds = 0;
  int32_t nanos = 0;
  auto operator<=>(const Timestamp&) const = default;
};

// A signed span; seconds and nanos carry the same sign. CEL's range is about +-10,000 years.
struct Duration {
  int64_t seconds = 0;
  int32_t nanos = 0;
  auto operator<=>(const Duration&) const = default;
};

// A CEL type used as a value (`type(1) == int`). `name` is CEL's type name: "int", "uint",
// "double", "bool", "string", "bytes", "list", "map", "null_type", "type",
// "google.protobuf.Timestamp", "google.protobuf.Duration", "optional_type", or an
// extension type ("kubernetes.Quantity").
struct TypeValue {
  std::string name;
  bool operator==(const TypeValue&) const = default;
};

struct Bytes {
  std::string data;
  bool operator==(const Bytes&) const = default;
};

class Value;
class ListValue;
class MapValue;
class OpaqueValue;

// An evaluation error: a message as cel-go words it ("no such key: x", "division by zero",
// "no matching overload for '_+_' applied to '(int, uint)'").
struct Error {
  std::shared_ptr<const std::string> message;
};

// optional(T): `value` is null for optional.none().
struct Optional {
  std::shared_ptr<const Value> value;
};

class Value {
 public:
  Value() = default;  // null
  static Value Null() { return Value(); }
  static Value Bool(bool v) { return Value(Rep(v)); }
  static Value Int(int64_t v) { return Value(Rep(v)); }
  static Value Uint(uint64_t v) { return Value(Rep(v)); }
  static Value Double(double v) { return Value(Rep(v)); }
  static Value String(std::string v) { return Value(Rep(std::move(v))); }
  static Value BytesOf(std::string v) { return Value(Rep(cel::Bytes{std::move(v)})); }
  static Value List(std::vector<Value> items);
  static Value List(std::shared_ptr<const ListValue> list) { return Value(Rep(std::move(list))); }
  // Keys must be of kind bool, int, uint or string; duplicates are the caller's problem
  // (the evaluator checks map literals).
  static Value Map(std::vector<std::pair<Value, Value>> entries);
  static Value Map(std::shared_ptr<const MapValue> map) { return Value(Rep(std::move(map))); }
  static Value Time(Timestamp t) { return Value(Rep(t)); }
  static Value Span(Duration d) { return Value(Rep(d)); }
  static Value Type(std::string name) { return Value(Rep(TypeValue{std::move(name)})); }
  static Value OptionalOf(Value v);
  static Value OptionalNone();
  static Value Opaque(std::shared_ptr<const OpaqueValue> v) { return Value(Rep(std::move(v))); }
  static Value MakeError(std::string message);

  Kind kind() const { return static_cast<Kind>(rep_.index()); }
  bool is_error() const { return kind() == Kind::kError; }

  // Accessors; calling one for another kind is a programmer error (std::get throws).
  bool bool_value() const { return std::get<bool>(rep_); }
  int64_t int_value() const { return std::get<int64_t>(rep_); }
  uint64_t uint_value() const { return std::get<uint64_t>(rep_); }
  double double_value() const { return std::get<double>(rep_); }
  const std::string& string_value() const { return std::get<std::string>(rep_); }
  const std::string& bytes_value() const { return std::get<cel::Bytes>(rep_).data; }
  const ListValue& list() const { return *std::get<std::shared_ptr<const ListValue>>(rep_); }
  const std::shared_ptr<const ListValue>& list_ptr() const {
    return std::get<std::shared_ptr<const ListValue>>(rep_);
  }
  const MapValue& map() const { return *std::get<std::shared_ptr<const MapValue>>(rep_); }
  Timestamp timestamp() const { return std::get<Timestamp>(rep_); }
  Duration duration() const { return std::get<Duration>(rep_); }
  const std::string& type_name() const { return std::get<TypeValue>(rep_).name; }
  // For kOptional: whether a value is present, and the value.
  bool has_optional_value() const { return std::get<cel::Optional>(rep_).value != nullptr; }
  const Value& optional_value() const { return *std::get<cel::Optional>(rep_).value; }
  const OpaqueValue& opaque() const { return *std::get<std::shared_ptr<const OpaqueValue>>(rep_); }
  const std::string& error_message() const { return *std::get<Error>(rep_).message; }

  // The CEL type of this value as a type value's name ("int", "list", ...).
  std::string TypeName() const;

  // A readable rendering for error messages and tests: 1, 2u, 1.5, "s", b"..", [1, 2],
  // {"a": 1}, timestamp("..."), duration("1s"), optional.of(..), error("..").
  std::string DebugString() const;

 private:
  using Rep =
      std::variant<std::monostate, bool, int64_t, uint64_t, double, std::string, cel::Bytes,
                   std::shared_ptr<const ListValue>, std::shared_ptr<const MapValue>, Timestamp,
                   Duration, TypeValue, cel::Optional, std::shared_ptr<const OpaqueValue>, Error>;
  explicit Value(Rep rep) : rep_(std::move(rep)) {}
  Rep rep_;
};

// A CEL list. Implementations may convert elements lazily; Get(i) for i < size() only.
class ListValue {
 public:
  virtual ~ListValue() = default;
  virtual size_t size() const = 0;
  virtual Value Get(size_t index) const = 0;
  // How equality treats this list: Kubernetes' x-kubernetes-list-type set and map lists
  // compare regardless of order.
  virtual bool unordered() const { return false; }
};

// A CEL map. Find() looks a key up with CEL's heterogeneous numeric key equality (1 == 1u ==
// 1.0); it returns nullopt when absent and an error Value when the key kind is not allowed.
class MapValue {
 public:
  virtual ~MapValue() = default;
  virtual size_t size() const = 0;
  virtual std::optional<Value> Find(const Value& key) const = 0;
  // The keys in iteration order (CEL leaves the order unspecified).
  virtual std::vector<Value> Keys() const = 0;
  // Field selection `m.f`: Find(String(f)) by default; schema-backed objects may answer
  // differently (escaped property names).
  virtual std::optional<Value> FindField(std::string_view name) const;
};

// An extension value with its own type name, equality and ordering (Quantity, URL, IP...).
class OpaqueValue {
 public:
  virtual ~OpaqueValue() = default;
  virtual std::string_view type_name() const = 0;
  virtual bool Equals(const OpaqueValue& other) const = 0;
  virtual std::string DebugString() const = 0;
};

// The plain vector-backed list and map.
class VectorList final : public ListValue {
 public:
  explicit VectorList(std::vector<Value> items) : items_(std::move(items)) {}
  size_t size() const override { return items_.size(); }
  Value Get(size_t index) const override { return items_[index]; }
  std::vector<Value>& mutable_items() { return items_; }
  const std::vector<Value>& items() const { return items_; }

 private:
  std::vector<Value> items_;
};

class VectorMap final : public MapValue {
 public:
  explicit VectorMap(std::vector<std::pair<Value, Value>> entries) : entries_(std::move(entries)) {}
  size_t size() const override { return entries_.size(); }
  std::optional<Value> Find(const Value& key) const override;
  std::vector<Value> Keys() const override;

 private:
  std::vector<std::pair<Value, Value>> entries_;
};

// CEL equality with heterogeneous numeric comparison: returns true/false, or an error Value
// when an operand is an error. Values of unrelated types are unequal (not an error).
Value Equal(const Value& a, const Value& b);
// Ordering for <, <=, >, >=: numbers across int/uint/double, strings, bytes, bools,
// timestamps, durations. nullopt when the kinds cannot be ordered (no matching overload);
// for NaN every comparison is false (an "unordered" result is reported as nullopt too? no:
// the second member says the pair is comparable but unordered).
struct Ordering {
  bool comparable = false;
  std::partial_ordering order = std::partial_ordering::unordered;
};
Ordering Compare(const Value& a, const Value& b);

// Text forms of timestamps and durations, as CEL's string()/timestamp()/duration() use them.
// RFC 3339 with fractional seconds only as needed ("2009-02-13T23:31:30Z",
// "2009-02-13T23:31:30.123Z"), always in UTC.
std::string FormatTimestamp(Timestamp t);
// Seconds with fractional part as needed and an "s" suffix ("1.5s", "-3s"), as protobuf
// JSON renders durations.
std::string FormatDuration(Duration d);
// RFC 3339 (with "Z" or a numeric offset); nullopt when malformed or out of CEL's range.
std::optional<Timestamp> ParseTimestamp(std::string_view text);
// Go's duration syntax ("1h2m3.5s", "-1.5ms", "300us") through core::ParseGoDuration; nullopt
// when malformed or out of range.
std::optional<Duration> ParseDuration(std::string_view text);
bool TimestampInRange(Timestamp t);
bool DurationInRange(Duration d);

// Whether a value may be a map key (bool, int, uint, string).
bool IsValidMapKey(const Value& key);

}  // namespace klutch::cel
