#include "codec/protobuf.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "apis/builtin_schemas.h"
#include "codec/wire.h"
#include "core/log.h"
#include "core/strings.h"
#include "fmt/format.h"

namespace klutch::codec {

using machinery::Json;

// ---------------------------------------------------------------------------------------------
// Message tables.
//
// Each decodable protobuf message is a list of fields. A field maps a protobuf field number to
// the JSON name of the Go struct field and says how to convert the wire value. The tables are
// derived from annotated OpenAPI definitions (see protobuf.h); ProtobufTypes::Tables owns them.
// ---------------------------------------------------------------------------------------------

namespace {

enum class Kind : uint8_t {
  kString,       // length-delimited UTF-8 -> JSON string
  kBytes,        // length-delimited -> standard base64 string
  kBool,         // varint -> true/false
  kInt32,        // varint (negative values sign-extended to 64 bits) -> number
  kInt64,        // varint -> number
  kMessage,      // length-delimited nested message described by its own table
  kTime,         // meta/v1 Time {1 seconds, 2 nanos} -> RFC 3339, whole seconds
  kMicroTime,    // meta/v1 MicroTime {1 seconds, 2 nanos} -> RFC 3339, 6 fractional digits
  kQuantity,     // api/resource Quantity {1 string} -> string
  kIntOrString,  // util/intstr IntOrString {1 type, 2 intVal, 3 strVal} -> number or string
  kFieldsV1,     // meta/v1 FieldsV1 {1 Raw: JSON bytes} -> that JSON object
  kStringList,   // ExtraValue {repeated string items = 1} -> JSON array of strings
};

enum Flag : uint8_t {
  kRepeated = 1 << 0,  // repeated field -> JSON array
  kMap = 1 << 1,       // map<string, kind>: repeated entries {1: key, 2: value} -> JSON object
  kPtr = 1 << 2,       // Go pointer field: a zero value on the wire is kept, not omitted
  kAlways = 1 << 3,    // Go field without omitempty whose emptiness matters: emitted even when
                       // absent ("" or [])
  kInline = 1 << 4,    // embedded Go struct (`json:",inline"`): its fields join the parent object
};

struct Message;

struct Field {
  uint32_t number = 0;
  std::string json_name;  // for kInline: the embedded message's name (not a JSON key)
  Kind kind = Kind::kString;
  uint8_t flags = 0;
  const Message* message = nullptr;  // Kind::kMessage
};

struct Message {
  std::string name;           // "ObjectMeta", "VolumeSource": what error messages call it
  std::vector<Field> fields;  // sorted by number

  const Field* Find(uint32_t number) const {
    auto it = std::lower_bound(fields.begin(), fields.end(), number,
                               [](const Field& f, uint32_t n) { return f.number < n; });
    return it != fields.end() && it->number == number ? &*it : nullptr;
  }
};

struct KindEntry {
  std::string api_version;  // "*" for DeleteOptions
  std::string kind;
  std::string definition;
  const Message* message = nullptr;
};

}  // namespace

struct ProtobufTypes::Tables {
  // Messages by key (a definition name, or "<definition>#<number>" for an embedded struct).
  // Node-based: pointers to the messages stay valid while the map is filled.
  std::map<std::string, Message> messages;
  std::vector<KindEntry> kinds;                               // sorted by (api_version, kind)
  std::unordered_map<std::string, const KindEntry*> by_kind;  // "<apiVersion> <kind>"

  const KindEntry* Find(std::string_view api_version, std::string_view kind) const {
    auto it = by_kind.find(fmt::format("{} {}", api_version, kind));
    if (it == by_kind.end()) it = by_kind.find(fmt::format("* {}", kind));
    return it == by_kind.end() ? nullptr : it->second;
  }
};

namespace {

// ---------------------------------------------------------------------------------------------
// Derivation from annotated OpenAPI definitions.
// ---------------------------------------------------------------------------------------------

constexpr std::string_view kRefPrefix = "#/components/schemas/";
constexpr std::string_view kAnnotation = "x-klutch-protobuf";
constexpr std::string_view kEmbeddedAnnotation = "x-klutch-protobuf-embedded";
// metav1.AddToGroupVersion registers DeleteOptions in every group version and client-go stamps
// the one of the sending client ("v1", "apps/v1", ..., or "meta.k8s.io/v1").
constexpr std::string_view kDeleteOptions = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";

// Definitions that are well-known protobuf messages with their own conversion.
const std::map<std::string_view, Kind>& WellKnownTypes() {
  static const std::map<std::string_view, Kind> types = {
      {"io.k8s.apimachinery.pkg.apis.meta.v1.Time", Kind::kTime},
      {"io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime", Kind::kMicroTime},
      {"io.k8s.apimachinery.pkg.api.resource.Quantity", Kind::kQuantity},
      {"io.k8s.apimachinery.pkg.util.intstr.IntOrString", Kind::kIntOrString},
      {"io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1", Kind::kFieldsV1},
  };
  return types;
}

// A property's annotation: "none", or a field number with flags, possibly inside an embedded
// struct.
struct Annotation {
  bool none = false;
  uint32_t embedded = 0;  // field number of the embedded struct, 0 when direct
  uint32_t number = 0;
  uint8_t flags = 0;
};

std::optional<uint32_t> FieldNumber(std::string_view digits) {
  std::optional<int64_t> n = core::ParseInt64(digits);
  if (!n || *n < 1 || *n > kMaxFieldNumber) return std::nullopt;
  return static_cast<uint32_t>(*n);
}

core::Result<Annotation> ParseAnnotation(const Json& value) {
  Annotation a;
  if (value.is_number_integer()) {
    auto n = FieldNumber(value.dump());
    if (!n) return core::Invalid(fmt::format("field number {} out of range", value.dump()));
    a.number = *n;
    return a;
  }
  if (!value.is_string()) {
    return core::Invalid(fmt::format("expected a field number or a string, got {}", value.dump()));
  }
  const auto& text = value.get_ref<const std::string&>();
  if (text == "none") {
    a.none = true;
    return a;
  }
  std::vector<std::string_view> parts = core::Split(text, ',');
  std::string_view number = parts[0];
  if (size_t dot = number.find('.'); dot != std::string_view::npos) {
    auto embedded = FieldNumber(number.substr(0, dot));
    if (!embedded) return core::Invalid(fmt::format("malformed {}", Json(text).dump()));
    a.embedded = *embedded;
    number = number.substr(dot + 1);
  }
  auto n = FieldNumber(number);
  if (!n) return core::Invalid(fmt::format("malformed {}", Json(text).dump()));
  a.number = *n;
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] == "ptr") {
      a.flags |= kPtr;
    } else if (parts[i] == "always") {
      a.flags |= kAlways;
    } else {
      return core::Invalid(fmt::format("unknown flag {} in {} (known: ptr, always)",
                                       Json(std::string(parts[i])).dump(), Json(text).dump()));
    }
  }
  return a;
}

// The definition a schema refers to, as {"$ref": ...} or {"allOf": [{"$ref": ...}]}; "" when
// it refers to none.
std::string RefOf(const Json& schema) {
  const Json* node = &schema;
  if (auto all = schema.find("allOf"); all != schema.end() && all->is_array() && all->size() == 1) {
    node = &(*all)[0];
  }
  auto ref = node->find("$ref");
  if (ref == node->end() || !ref->is_string()) return "";
  std::string_view target = ref->get_ref<const std::string&>();
  if (!target.starts_with(kRefPrefix)) return "";
  return std::string(target.substr(kRefPrefix.size()));
}

std::string ShortName(std::string_view definition) {
  size_t dot = definition.rfind('.');
  return std::string(dot == std::string_view::npos ? definition : definition.substr(dot + 1));
}

std::string TypeOf(const Json& schema) {
  auto type = schema.find("type");
  return type != schema.end() && type->is_string() ? type->get<std::string>() : "";
}

std::string FormatOf(const Json& schema) {
  auto format = schema.find("format");
  return format != schema.end() && format->is_string() ? format->get<std::string>() : "";
}

class Deriver {
 public:
  Deriver(const Json& schemas, ProtobufTypes::Tables& tables) : schemas_(schemas), t_(tables) {}

  core::Status DeriveKinds() {
    for (const auto& [name, schema] : schemas_.items()) {
      auto gvks = schema.find("x-kubernetes-group-version-kind");
      if (gvks == schema.end() || !gvks->is_array() || !IsAnnotated(schema)) continue;
      KLUTCH_ASSIGN_OR_RETURN(const Message* message, MessageFor(name));
      if (name == kDeleteOptions) {
        t_.kinds.push_back({"*", "DeleteOptions", name, message});
        continue;
      }
      for (const Json& gvk : *gvks) {
        std::string group = gvk.value("group", "");
        std::string version = gvk.value("version", "");
        std::string api_version = group.empty() ? version : group + "/" + version;
        t_.kinds.push_back({api_version, gvk.value("kind", ""), name, message});
      }
    }
    std::sort(t_.kinds.begin(), t_.kinds.end(), [](const KindEntry& a, const KindEntry& b) {
      return std::tie(a.api_version, a.kind) < std::tie(b.api_version, b.kind);
    });
    for (const KindEntry& k : t_.kinds) {
      if (!t_.by_kind.emplace(fmt::format("{} {}", k.api_version, k.kind), &k).second) {
        return core::Invalid(fmt::format("{} {} is declared twice", k.api_version, k.kind));
      }
    }
    return core::Status::Ok();
  }

 private:
  // Whether a top-level kind takes part: any of its properties is annotated.
  static bool IsAnnotated(const Json& schema) {
    auto props = schema.find("properties");
    if (props == schema.end() || !props->is_object()) return false;
    return std::any_of(props->begin(), props->end(), [](const Json& prop) {
      return prop.is_object() && prop.contains(kAnnotation);
    });
  }

  static core::Status Defect(std::string_view where, std::string_view problem) {
    return core::Invalid(fmt::format("{}: {}", where, problem));
  }

  // The message derived from `definition`, derived once (recursive references resolve to the
  // message being filled).
  core::Result<const Message*> MessageFor(const std::string& definition) {
    if (auto it = t_.messages.find(definition); it != t_.messages.end()) return &it->second;
    auto schema = schemas_.find(definition);
    if (schema == schemas_.end()) return Defect(definition, "no such definition");
    Message& message = t_.messages[definition];
    message.name = ShortName(definition);
    KLUTCH_RETURN_IF_ERROR(Fill(definition, *schema, message));
    return &message;
  }

  core::Status Fill(const std::string& definition, const Json& schema, Message& message) {
    const bool kind = schema.contains("x-kubernetes-group-version-kind");
    // Embedded structs: their messages first, so that properties can join them.
    std::map<uint32_t, Message*> embedded;
    if (auto decl = schema.find(kEmbeddedAnnotation); decl != schema.end()) {
      if (!decl->is_object()) return Defect(definition, "x-klutch-protobuf-embedded is not a map");
      for (const auto& [number_text, name] : decl->items()) {
        auto number = FieldNumber(number_text);
        if (!number || !name.is_string()) {
          return Defect(definition, "x-klutch-protobuf-embedded maps field numbers to names");
        }
        Message& inner = t_.messages[fmt::format("{}#{}", definition, *number)];
        inner.name = name.get<std::string>();
        embedded[*number] = &inner;
        message.fields.push_back(Field{*number, inner.name, Kind::kMessage, kInline, &inner});
      }
    }
    auto props = schema.find("properties");
    if (props != schema.end() && props->is_object()) {
      for (const auto& [name, prop] : props->items()) {
        std::string where = fmt::format("{}.{}", definition, name);
        auto annotation = prop.find(kAnnotation);
        if (annotation == prop.end()) {
          // A kind's apiVersion and kind travel in the envelope.
          if (kind && (name == "apiVersion" || name == "kind")) continue;
          return Defect(where, "no x-klutch-protobuf field number (or \"none\")");
        }
        auto parsed = ParseAnnotation(*annotation);
        if (!parsed.ok()) return Defect(where, parsed.status().message());
        if (parsed->none) continue;
        Field field;
        KLUTCH_RETURN_IF_ERROR(FieldFor(where, prop, *parsed, field));
        field.json_name = name;
        Message* target = &message;
        if (parsed->embedded != 0) {
          auto it = embedded.find(parsed->embedded);
          if (it == embedded.end()) {
            return Defect(where,
                          fmt::format("field {} is not declared in x-klutch-protobuf-embedded",
                                      parsed->embedded));
          }
          target = it->second;
        }
        target->fields.push_back(std::move(field));
      }
    }
    for (auto& [number, inner] : embedded) {
      if (inner->fields.empty()) {
        return Defect(definition, fmt::format("embedded field {} has no properties", number));
      }
      KLUTCH_RETURN_IF_ERROR(Sort(fmt::format("{}#{}", definition, number), *inner));
    }
    return Sort(definition, message);
  }

  static core::Status Sort(std::string_view where, Message& message) {
    std::sort(message.fields.begin(), message.fields.end(),
              [](const Field& a, const Field& b) { return a.number < b.number; });
    for (size_t i = 1; i < message.fields.size(); ++i) {
      if (message.fields[i - 1].number == message.fields[i].number) {
        return Defect(where, fmt::format("field number {} used twice", message.fields[i].number));
      }
    }
    return core::Status::Ok();
  }

  // The kind of a single value (a scalar, message or well-known type) described by `schema`.
  core::Status ValueKind(std::string_view where, const Json& schema, Field& field) {
    if (std::string ref = RefOf(schema); !ref.empty()) {
      if (auto known = WellKnownTypes().find(ref); known != WellKnownTypes().end()) {
        field.kind = known->second;
        return core::Status::Ok();
      }
      KLUTCH_ASSIGN_OR_RETURN(field.message, MessageFor(ref));
      field.kind = Kind::kMessage;
      return core::Status::Ok();
    }
    if (schema.value("x-kubernetes-int-or-string", false)) {
      field.kind = Kind::kIntOrString;
      return core::Status::Ok();
    }
    const std::string type = TypeOf(schema);
    const std::string format = FormatOf(schema);
    if (type == "string") {
      if (format == "date-time") {
        return Defect(where, "a date-time string must refer to meta/v1 Time or MicroTime");
      }
      field.kind = format == "byte" ? Kind::kBytes : Kind::kString;
    } else if (type == "boolean") {
      field.kind = Kind::kBool;
    } else if (type == "integer" && (format == "int32" || format == "int64")) {
      field.kind = format == "int32" ? Kind::kInt32 : Kind::kInt64;
    } else {
      return Defect(where, fmt::format("no protobuf form for type {} format {}", Json(type).dump(),
                                       Json(format).dump()));
    }
    return core::Status::Ok();
  }

  core::Status FieldFor(std::string_view where, const Json& prop, const Annotation& a,
                        Field& field) {
    field.number = a.number;
    field.flags = a.flags;
    const std::string type = RefOf(prop).empty() ? TypeOf(prop) : "";
    if (type == "array") {
      auto items = prop.find("items");
      if (items == prop.end() || TypeOf(*items) == "array" || TypeOf(*items) == "object") {
        return Defect(where, "arrays must hold scalars or references");
      }
      field.flags |= kRepeated;
      KLUTCH_RETURN_IF_ERROR(ValueKind(where, *items, field));
    } else if (type == "object") {
      auto values = prop.find("additionalProperties");
      if (values == prop.end() || !values->is_object()) {
        return Defect(where, "objects must be maps (additionalProperties) or references");
      }
      field.flags |= kMap;
      if (TypeOf(*values) == "array") {
        auto items = values->find("items");
        if (items == values->end() || TypeOf(*items) != "string") {
          return Defect(where, "map values that are lists must hold strings");
        }
        field.kind = Kind::kStringList;
      } else {
        KLUTCH_RETURN_IF_ERROR(ValueKind(where, *values, field));
        if (field.kind != Kind::kString && field.kind != Kind::kBytes &&
            field.kind != Kind::kQuantity) {
          return Defect(where, "map values must be strings, bytes, quantities or string lists");
        }
      }
    } else {
      KLUTCH_RETURN_IF_ERROR(ValueKind(where, prop, field));
    }
    if ((field.flags & (kPtr | kAlways)) != 0 &&
        (field.kind == Kind::kMessage || (field.flags & kMap) != 0)) {
      return Defect(where, "ptr and always apply to scalars and lists only");
    }
    if ((field.flags & kAlways) != 0 && (field.flags & kRepeated) == 0 &&
        field.kind != Kind::kString) {
      return Defect(where, "always applies to strings and lists only");
    }
    return core::Status::Ok();
  }

  const Json& schemas_;
  ProtobufTypes::Tables& t_;
};

// ---------------------------------------------------------------------------------------------
// Wire reading helpers and value conversions.
// ---------------------------------------------------------------------------------------------

constexpr uint32_t kWireVarint = static_cast<uint32_t>(WireType::kVarint);
constexpr uint32_t kWireLen = static_cast<uint32_t>(WireType::kLengthDelimited);
constexpr std::string_view kMagic("k8s\0", 4);

// Largest bracket nesting of a JSON text, ignoring brackets inside strings.
int JsonNesting(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

// Bounds of Go's time.Time that RFC 3339 can express: 0001-01-01T00:00:00Z (also Go's zero
// time) to 9999-12-31T23:59:59Z.
constexpr int64_t kMinRfc3339Seconds = -62135596800;
constexpr int64_t kMaxRfc3339Seconds = 253402300799;
// Deeper FieldsV1 JSON is refused so that later recursive walks cannot exhaust the stack.
constexpr int kMaxFieldsV1Nesting = 100;

std::string FormatRfc3339(int64_t seconds, int32_t nanos, bool micro) {
  using std::chrono::days;
  using std::chrono::sys_days;
  int64_t day = seconds / 86400;
  int64_t second_of_day = seconds % 86400;
  if (second_of_day < 0) {
    second_of_day += 86400;
    --day;
  }
  std::chrono::year_month_day date{sys_days{days{day}}};
  std::string out =
      fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", static_cast<int>(date.year()),
                  static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                  second_of_day / 3600, second_of_day / 60 % 60, second_of_day % 60);
  if (micro) out += fmt::format(".{:06}", nanos / 1000);
  out += 'Z';
  return out;
}

std::string Quote(std::string_view s) {
  constexpr size_t kMaxShown = 100;
  std::string shown(s.substr(0, kMaxShown));
  if (s.size() > kMaxShown) shown += "...";
  return Json(shown).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ---------------------------------------------------------------------------------------------
// The decoder.
// ---------------------------------------------------------------------------------------------

// Appends ".name" (or "[i]") to the error path for the lifetime of the scope.
class PathScope {
 public:
  PathScope(std::string& path, std::string_view name) : path_(path), size_(path.size()) {
    if (name.empty()) return;
    if (!path_.empty()) path_ += '.';
    path_.append(name);
  }
  PathScope(std::string& path, size_t index) : path_(path), size_(path.size()) {
    path_ += fmt::format("[{}]", index);
  }
  ~PathScope() { path_.resize(size_); }
  PathScope(const PathScope&) = delete;
  PathScope& operator=(const PathScope&) = delete;

 private:
  std::string& path_;
  size_t size_;
};

bool IsVarintKind(Kind kind) {
  return kind == Kind::kBool || kind == Kind::kInt32 || kind == Kind::kInt64;
}

// Decodes one object message into JSON. Holds the error path while descending.
class Decoder {
 public:
  Decoder(std::string type_name, int max_depth)
      : type_name_(std::move(type_name)), max_depth_(max_depth) {}

  core::Status DecodeObject(std::string_view data, const Message& message, Json& out) {
    return DecodeMessage(data, message, out, 1);
  }

  core::Status Error(std::string_view what) const {
    if (path_.empty()) return core::BadRequest(fmt::format("protobuf {}: {}", type_name_, what));
    return core::BadRequest(fmt::format("protobuf {}: {}: {}", type_name_, path_, what));
  }

 private:
  // Calls fn(number, value) for every field of `data`; the first error stops the walk. A wire
  // problem is reported at the path of the field it occurred in when `message` names it.
  template <typename Fn>
  core::Status ForEachField(std::string_view data, Fn&& fn, const Message* message = nullptr) {
    WireReader reader(data);
    while (!reader.done()) {
      uint32_t number = 0;
      WireValue value;
      std::string problem = reader.Next(number, value);
      if (!problem.empty()) {
        if (number == 0) return Error(problem);
        const Field* field = message != nullptr ? message->Find(number) : nullptr;
        if (field == nullptr || (field->flags & kInline) != 0) {
          return Error(fmt::format("field {}: {}", number, problem));
        }
        PathScope scope(path_, field->json_name);
        return Error(problem);
      }
      KLUTCH_RETURN_IF_ERROR(fn(number, value));
    }
    return core::Status::Ok();
  }

  core::Status UnknownField(std::string_view message, uint32_t number, uint32_t wire) const {
    return Error(fmt::format("unknown field number {} ({}) in message {}", number,
                             WireTypeName(wire), message));
  }

  core::Status ExpectWire(const WireValue& value, uint32_t want, std::string_view what) const {
    if (value.wire == want) return core::Status::Ok();
    return Error(fmt::format("wrong wire type {} ({}) for {} field, want {} ({})", value.wire,
                             WireTypeName(value.wire), what, want, WireTypeName(want)));
  }

  core::Status EnterMessage(int depth) const {
    if (depth <= max_depth_) return core::Status::Ok();
    return Error(fmt::format("messages nested deeper than {} levels", max_depth_));
  }

  core::Status DecodeMessage(std::string_view data, const Message& message, Json& out, int depth) {
    KLUTCH_RETURN_IF_ERROR(EnterMessage(depth));
    if (!out.is_object()) out = Json::object();
    KLUTCH_RETURN_IF_ERROR(ForEachField(
        data,
        [&](uint32_t number, const WireValue& value) {
          const Field* field = message.Find(number);
          if (field == nullptr) return UnknownField(message.name, number, value.wire);
          return DecodeField(*field, value, out, depth);
        },
        &message));
    // Go fields without omitempty whose empty value matters (see kAlways).
    for (const Field& field : message.fields) {
      const Field& spec = field;
      if ((spec.flags & kAlways) == 0 || out.contains(spec.json_name)) continue;
      if (spec.flags & kRepeated) {
        out[spec.json_name] = Json::array();
      } else if (spec.kind == Kind::kString) {
        out[spec.json_name] = "";
      }
    }
    return core::Status::Ok();
  }

  core::Status DecodeField(const Field& field, const WireValue& value, Json& out, int depth) {
    const Field& spec = field;
    if (spec.flags & kInline) {
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "message"));
      return DecodeMessage(value.bytes, *field.message, out, depth + 1);
    }
    PathScope scope(path_, spec.json_name);
    const std::string key(spec.json_name);

    if (spec.flags & kMap) {
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "map"));
      std::string entry_key;
      Json entry_value;
      KLUTCH_RETURN_IF_ERROR(DecodeMapEntry(spec.kind, value.bytes, entry_key, entry_value));
      Json& map = out[key];
      if (!map.is_object()) map = Json::object();
      map[entry_key] = std::move(entry_value);
      return core::Status::Ok();
    }

    if (spec.flags & kRepeated) {
      Json& list = out[key];
      if (!list.is_array()) list = Json::array();
      if (IsVarintKind(spec.kind) && value.wire == kWireLen) {
        // Packed encoding: a run of varints.
        WireReader packed(value.bytes);
        while (!packed.done()) {
          uint64_t v = 0;
          if (!packed.ReadVarint(v)) return Error("malformed varint in packed repeated field");
          list.push_back(VarintToJson(spec.kind, v));
        }
        return core::Status::Ok();
      }
      PathScope index(path_, list.size());
      Json element;
      bool zero = false;
      KLUTCH_RETURN_IF_ERROR(DecodeValue(field, value, element, zero, depth));
      list.push_back(std::move(element));
      return core::Status::Ok();
    }

    if (spec.kind == Kind::kMessage) {
      // A message occurring twice merges, as in Go's generated Unmarshal.
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "message"));
      return DecodeMessage(value.bytes, *field.message, out[key], depth + 1);
    }

    Json decoded;
    bool zero = false;
    KLUTCH_RETURN_IF_ERROR(DecodeValue(field, value, decoded, zero, depth));
    bool keep_zero = (spec.flags & (kPtr | kAlways)) != 0 && spec.kind != Kind::kTime &&
                     spec.kind != Kind::kMicroTime && spec.kind != Kind::kQuantity;
    if (zero && !keep_zero) {
      out.erase(key);  // the last occurrence wins, even when it is the zero value
    } else {
      out[key] = std::move(decoded);
    }
    return core::Status::Ok();
  }

  static Json VarintToJson(Kind kind, uint64_t v) {
    switch (kind) {
      case Kind::kBool:
        return v != 0;
      case Kind::kInt32:
        return static_cast<int32_t>(static_cast<uint32_t>(v));
      default:
        return static_cast<int64_t>(v);
    }
  }

  // One value of `field` (a repeated field's element, or a singular non-message value).
  // `zero` reports whether it is Go's zero value for its type.
  core::Status DecodeValue(const Field& field, const WireValue& value, Json& out, bool& zero,
                           int depth) {
    const Field& spec = field;
    if (IsVarintKind(spec.kind)) {
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireVarint, "varint"));
      out = VarintToJson(spec.kind, value.varint);
      zero =
          spec.kind == Kind::kInt32 ? static_cast<uint32_t>(value.varint) == 0 : value.varint == 0;
      return core::Status::Ok();
    }
    KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "length-delimited"));
    if (spec.kind == Kind::kMessage) {
      zero = false;
      return DecodeMessage(value.bytes, *field.message, out, depth + 1);
    }
    return DecodeLenValue(spec.kind, value.bytes, out, zero);
  }

  // Values carried as length-delimited bytes: strings, bytes and the well-known wrappers.
  core::Status DecodeLenValue(Kind kind, std::string_view bytes, Json& out, bool& zero) {
    switch (kind) {
      case Kind::kString:
        if (!IsValidUtf8(bytes)) return Error("string is not valid UTF-8");
        out = std::string(bytes);
        zero = bytes.empty();
        return core::Status::Ok();
      case Kind::kBytes:
        out = core::Base64Encode(bytes);
        zero = bytes.empty();
        return core::Status::Ok();
      case Kind::kTime:
      case Kind::kMicroTime:
        return DecodeTime(bytes, kind == Kind::kMicroTime, out, zero);
      case Kind::kQuantity:
        return DecodeQuantity(bytes, out, zero);
      case Kind::kIntOrString:
        return DecodeIntOrString(bytes, out, zero);
      case Kind::kFieldsV1:
        return DecodeFieldsV1(bytes, out, zero);
      case Kind::kStringList:
        return DecodeStringList(bytes, out, zero);
      default:
        return Error("internal error: unexpected value kind");
    }
  }

  core::Status DecodeTime(std::string_view bytes, bool micro, Json& out, bool& zero) {
    int64_t seconds = 0;
    int64_t nanos = 0;
    std::string_view name = micro ? "MicroTime" : "Time";
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& value) {
      if (number != 1 && number != 2) return UnknownField(name, number, value.wire);
      PathScope scope(path_, number == 1 ? "seconds" : "nanos");
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireVarint, "varint"));
      if (number == 1) {
        seconds = static_cast<int64_t>(value.varint);
      } else {
        nanos = static_cast<int32_t>(static_cast<uint32_t>(value.varint));
      }
      return core::Status::Ok();
    }));
    zero = (seconds == 0 || seconds == kMinRfc3339Seconds) && nanos == 0;
    if (zero) return core::Status::Ok();
    if (seconds < kMinRfc3339Seconds || seconds > kMaxRfc3339Seconds) {
      return Error(fmt::format("time out of range: {} seconds", seconds));
    }
    if (nanos < 0 || nanos > 999999999) {
      return Error(fmt::format("time nanos out of range: {}", nanos));
    }
    out = FormatRfc3339(seconds, static_cast<int32_t>(nanos), micro);
    return core::Status::Ok();
  }

  core::Status DecodeQuantity(std::string_view bytes, Json& out, bool& zero) {
    std::string_view text;
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& value) {
      if (number != 1) return UnknownField("Quantity", number, value.wire);
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "string"));
      text = value.bytes;
      return core::Status::Ok();
    }));
    if (!IsValidUtf8(text)) return Error("quantity is not valid UTF-8");
    out = std::string(text);
    zero = text.empty();
    return core::Status::Ok();
  }

  core::Status DecodeIntOrString(std::string_view bytes, Json& out, bool& zero) {
    int64_t type = 0;
    int32_t int_value = 0;
    std::string_view str_value;
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& value) {
      switch (number) {
        case 1:
          KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireVarint, "varint"));
          type = static_cast<int64_t>(value.varint);
          return core::Status::Ok();
        case 2:
          KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireVarint, "varint"));
          int_value = static_cast<int32_t>(static_cast<uint32_t>(value.varint));
          return core::Status::Ok();
        case 3:
          KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "string"));
          str_value = value.bytes;
          return core::Status::Ok();
        default:
          return UnknownField("IntOrString", number, value.wire);
      }
    }));
    if (type == 0) {
      out = int_value;
      zero = int_value == 0;
    } else if (type == 1) {
      if (!IsValidUtf8(str_value)) return Error("string is not valid UTF-8");
      out = std::string(str_value);
      zero = str_value.empty();
    } else {
      return Error(fmt::format("IntOrString type must be 0 (int) or 1 (string), got {}", type));
    }
    return core::Status::Ok();
  }

  core::Status DecodeFieldsV1(std::string_view bytes, Json& out, bool& zero) {
    std::string_view raw;
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& value) {
      if (number != 1) return UnknownField("FieldsV1", number, value.wire);
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "bytes"));
      raw = value.bytes;
      return core::Status::Ok();
    }));
    zero = raw.empty();
    if (zero) return core::Status::Ok();
    if (JsonNesting(raw) > kMaxFieldsV1Nesting) {
      return Error(fmt::format("FieldsV1 JSON nested deeper than {} levels", kMaxFieldsV1Nesting));
    }
    core::Result<Json> parsed = machinery::ParseJson(raw);
    if (!parsed.ok()) return Error(fmt::format("FieldsV1: {}", parsed.status().message()));
    if (!parsed->is_object()) return Error("FieldsV1 must hold a JSON object");
    out = std::move(parsed).value();
    return core::Status::Ok();
  }

  core::Status DecodeStringList(std::string_view bytes, Json& out, bool& zero) {
    out = Json::array();
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& value) {
      if (number != 1) return UnknownField("ExtraValue", number, value.wire);
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "string"));
      if (!IsValidUtf8(value.bytes)) return Error("string is not valid UTF-8");
      out.push_back(std::string(value.bytes));
      return core::Status::Ok();
    }));
    zero = out.empty();
    return core::Status::Ok();
  }

  // A map entry {1: key, 2: value}; absent parts take their zero value, like Go.
  core::Status DecodeMapEntry(Kind value_kind, std::string_view bytes, std::string& key,
                              Json& value) {
    bool have_value = false;
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& wire) {
      if (number == 1) {
        KLUTCH_RETURN_IF_ERROR(ExpectWire(wire, kWireLen, "map key"));
        if (!IsValidUtf8(wire.bytes)) return Error("map key is not valid UTF-8");
        key = std::string(wire.bytes);
        return core::Status::Ok();
      }
      if (number == 2) {
        KLUTCH_RETURN_IF_ERROR(ExpectWire(wire, kWireLen, "map value"));
        bool zero = false;
        have_value = true;
        return DecodeLenValue(value_kind, wire.bytes, value, zero);
      }
      return UnknownField("map entry", number, wire.wire);
    }));
    if (!have_value) {
      bool zero = false;
      KLUTCH_RETURN_IF_ERROR(DecodeLenValue(value_kind, "", value, zero));
    }
    // A zero Quantity in a map still prints as "0" in Go.
    if (value_kind == Kind::kQuantity && value == "") value = "0";
    return core::Status::Ok();
  }

  std::string type_name_;
  int max_depth_;
  std::string path_;
};

// runtime.Unknown: the envelope around the object message.
struct Envelope {
  std::string api_version;
  std::string kind;
  std::string_view raw;
  std::string content_encoding;
  std::string content_type;
};

core::Status EnvelopeError(std::string_view what) {
  return core::BadRequest(fmt::format("protobuf envelope: {}", what));
}

core::Status ReadEnvelopeString(const WireValue& value, std::string_view name, std::string& out) {
  if (value.wire != kWireLen) {
    return EnvelopeError(fmt::format("wrong wire type {} for {}", value.wire, name));
  }
  if (!IsValidUtf8(value.bytes)) return EnvelopeError(fmt::format("{} is not valid UTF-8", name));
  out = std::string(value.bytes);
  return core::Status::Ok();
}

core::Status DecodeEnvelope(std::string_view data, Envelope& env) {
  WireReader reader(data);
  while (!reader.done()) {
    uint32_t number = 0;
    WireValue value;
    std::string problem = reader.Next(number, value);
    if (!problem.empty()) return EnvelopeError(problem);
    switch (number) {
      case 1: {  // typeMeta
        if (value.wire != kWireLen) return EnvelopeError("wrong wire type for typeMeta");
        WireReader meta(value.bytes);
        while (!meta.done()) {
          uint32_t meta_number = 0;
          WireValue meta_value;
          problem = meta.Next(meta_number, meta_value);
          if (!problem.empty()) return EnvelopeError(fmt::format("typeMeta: {}", problem));
          if (meta_number == 1) {
            KLUTCH_RETURN_IF_ERROR(ReadEnvelopeString(meta_value, "apiVersion", env.api_version));
          } else if (meta_number == 2) {
            KLUTCH_RETURN_IF_ERROR(ReadEnvelopeString(meta_value, "kind", env.kind));
          } else {
            return EnvelopeError(
                fmt::format("unknown field number {} in message TypeMeta", meta_number));
          }
        }
        break;
      }
      case 2:  // raw
        if (value.wire != kWireLen) return EnvelopeError("wrong wire type for raw");
        env.raw = value.bytes;
        break;
      case 3:
        KLUTCH_RETURN_IF_ERROR(ReadEnvelopeString(value, "contentEncoding", env.content_encoding));
        break;
      case 4:
        KLUTCH_RETURN_IF_ERROR(ReadEnvelopeString(value, "contentType", env.content_type));
        break;
      default:
        return EnvelopeError(fmt::format("unknown field number {} in message Unknown", number));
    }
  }
  return core::Status::Ok();
}

}  // namespace

ProtobufTypes::ProtobufTypes(std::unique_ptr<const Tables> tables) : tables_(std::move(tables)) {}
ProtobufTypes::~ProtobufTypes() = default;

core::Result<std::shared_ptr<const ProtobufTypes>> ProtobufTypes::Derive(const Json& schemas) {
  auto tables = std::make_unique<Tables>();
  Deriver deriver(schemas, *tables);
  KLUTCH_RETURN_IF_ERROR(deriver.DeriveKinds());
  return std::make_shared<const ProtobufTypes>(std::move(tables));
}

const ProtobufTypes& ProtobufTypes::Builtin() {
  // Never destroyed, so decoding during static destruction stays safe.
  static const std::shared_ptr<const ProtobufTypes>* const types = [] {
    auto derived = Derive(apis::AnnotatedBuiltinSchemas());
    if (!derived.ok()) {
      KLUTCH_LOG(kError, "codec", "deriving the protobuf tables of the built-in kinds: {}",
                 derived.status().message());
      core::CheckFailed("the built-in schemas' x-klutch-protobuf annotations are well-formed",
                        __FILE__, __LINE__);
    }
    return new std::shared_ptr<const ProtobufTypes>(std::move(derived).value());
  }();
  return **types;
}

core::Result<Json> ProtobufTypes::Decode(std::string_view body,
                                         const ProtobufDecodeOptions& options) const {
  if (body.substr(0, kMagic.size()) != kMagic) {
    return core::BadRequest(
        "protobuf body does not start with the Kubernetes magic prefix \"k8s\\x00\"");
  }
  Envelope env;
  KLUTCH_RETURN_IF_ERROR(DecodeEnvelope(body.substr(kMagic.size()), env));
  if (!env.content_encoding.empty()) {
    return core::Status(core::Reason::kUnsupportedMediaType,
                        fmt::format("protobuf envelope: unsupported contentEncoding {}",
                                    Quote(env.content_encoding)));
  }
  if (!env.content_type.empty() && env.content_type != kKubernetesProtobufContentType) {
    return core::Status(
        core::Reason::kUnsupportedMediaType,
        fmt::format("protobuf envelope: unsupported contentType {}", Quote(env.content_type)));
  }
  if (env.kind.empty()) return core::BadRequest("protobuf envelope: Object 'Kind' is missing");
  const KindEntry* entry = tables_->Find(env.api_version, env.kind);
  if (entry == nullptr) {
    return core::Status(core::Reason::kUnsupportedMediaType,
                        fmt::format("protobuf decoding is not supported for apiVersion {}, kind {}",
                                    Quote(env.api_version), Quote(env.kind)));
  }
  Json out = Json::object();
  if (!env.api_version.empty()) out["apiVersion"] = env.api_version;
  out["kind"] = env.kind;
  std::string type_name =
      env.api_version.empty() ? env.kind : fmt::format("{} {}", env.api_version, env.kind);
  Decoder decoder(std::move(type_name), options.max_depth);
  KLUTCH_RETURN_IF_ERROR(decoder.DecodeObject(env.raw, *entry->message, out));
  return out;
}

std::vector<std::pair<std::string, std::string>> ProtobufTypes::Kinds() const {
  std::vector<std::pair<std::string, std::string>> kinds;
  for (const KindEntry& k : tables_->kinds) kinds.emplace_back(k.api_version, k.kind);
  return kinds;
}

std::string ProtobufTypes::SchemaFor(std::string_view api_version, std::string_view kind) const {
  const KindEntry* entry = tables_->Find(api_version, kind);
  return entry == nullptr ? std::string() : entry->definition;
}

core::Result<Json> DecodeKubernetesProtobuf(std::string_view body) {
  return ProtobufTypes::Builtin().Decode(body, ProtobufDecodeOptions{});
}

core::Result<Json> DecodeKubernetesProtobuf(std::string_view body,
                                            const ProtobufDecodeOptions& options) {
  return ProtobufTypes::Builtin().Decode(body, options);
}

std::vector<std::pair<std::string, std::string>> ProtobufDecodableKinds() {
  return ProtobufTypes::Builtin().Kinds();
}

}  // namespace klutch::codec
