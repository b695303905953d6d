#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "fmt/format.h"
#include "machinery/managed_fields.h"
#include "machinery/managed_fields_internal.h"

// managedFields entries: decoding and validating them, their identities, encoding, and the
// conflict error of an apply.

namespace klutch::machinery::internal {

// ---------------------------------------------------------------------------------------------
// managedFields entries.

// kube-apiserver's manager identifier: the entry as Go JSON without time and fields, and
// without apiVersion for appliers (one Apply entry per manager whatever the version).
std::string Identity(const Entry& e) {
  std::string out = "{";
  auto add = [&](std::string_view name, const std::string& value) {
    if (value.empty()) return;
    if (out.size() > 1) out += ",";
    out += fmt::format("\"{}\":{}", name, GoJson(Json(value)));
  };
  add("manager", e.manager);
  add("operation", e.operation);
  if (e.operation != kApply) add("apiVersion", e.api_version);
  add("subresource", e.subresource);
  return out + "}";
}

// How conflict messages name a manager: "m", "m" using v1, "m" with subresource "status" ...
std::string PrintManager(const Entry& e) {
  std::string out = core::GoQuote(e.manager);
  if (!e.subresource.empty()) out += " with subresource " + core::GoQuote(e.subresource);
  if (e.operation == kUpdate) out += " using " + e.api_version;
  return out;
}

namespace {

Json EncodeEntry(const Entry& e) {
  Json out = Json::object();
  if (!e.manager.empty()) out["manager"] = e.manager;
  if (!e.operation.empty()) out["operation"] = e.operation;
  if (!e.api_version.empty()) out["apiVersion"] = e.api_version;
  if (!e.time.empty()) out["time"] = e.time;
  if (!e.fields_type.empty()) out["fieldsType"] = e.fields_type;
  if (e.has_fields) out["fieldsV1"] = e.fields.ToJson();
  if (!e.subresource.empty()) out["subresource"] = e.subresource;
  return out;
}

}  // namespace

Json EncodeEntries(const std::vector<Entry>& entries) {
  Json out = Json::array();
  for (const Entry& e : entries) out.push_back(EncodeEntry(e));
  return out;
}

namespace {

bool IsDigits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// RFC 3339 date-time: 2006-01-02T15:04:05[.frac](Z|+07:00).
bool IsRfc3339(std::string_view s) {
  if (s.size() < 20) return false;
  auto num = [&](size_t pos, size_t len, int lo, int hi) {
    std::string_view part = s.substr(pos, len);
    if (!IsDigits(part)) return false;
    int v = std::stoi(std::string(part));
    return v >= lo && v <= hi;
  };
  if (!num(0, 4, 0, 9999) || s[4] != '-' || !num(5, 2, 1, 12) || s[7] != '-' || !num(8, 2, 1, 31) ||
      (s[10] != 'T' && s[10] != 't') || !num(11, 2, 0, 23) || s[13] != ':' || !num(14, 2, 0, 59) ||
      s[16] != ':' || !num(17, 2, 0, 60)) {
    return false;
  }
  size_t pos = 19;
  if (s[pos] == '.') {
    size_t start = ++pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
    if (pos == start) return false;
  }
  std::string_view zone = s.substr(pos);
  if (zone == "Z" || zone == "z") return true;
  return zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && num(pos + 1, 2, 0, 23) &&
         zone[3] == ':' && num(pos + 4, 2, 0, 59);
}

// Go's %#U for a rune that is not printable: U+0009.
std::string RuneName(int32_t cp) { return fmt::format("U+{:04X}", cp); }

struct FieldError {
  std::string type;  // CauseType
  std::string field;
  std::string body;  // "Invalid value: \"x\": detail"
};

}  // namespace

// Validates and decodes a managedFields array. `*cleared` is set for the `[{}]` form.
core::Result<std::vector<Entry>> DecodeEntries(const Json& managed_fields, bool* cleared) {
  *cleared = false;
  std::vector<Entry> entries;
  if (managed_fields.is_null()) return entries;
  if (!managed_fields.is_array()) {
    return core::BadRequest(fmt::format("metadata.managedFields: expected an array, found {}",
                                        managed_fields.type_name()));
  }
  if (!managed_fields.empty() &&
      std::all_of(managed_fields.begin(), managed_fields.end(),
                  [](const Json& e) { return e.is_object() && e.empty(); })) {
    *cleared = true;
    return entries;
  }
  std::vector<FieldError> errors;
  for (size_t i = 0; i < managed_fields.size(); ++i) {
    const Json& raw = managed_fields[i];
    std::string at = fmt::format("metadata.managedFields[{}]", i);
    if (!raw.is_object()) {
      return core::BadRequest(fmt::format("{}: expected an object, found {}", at, raw.type_name()));
    }
    Entry e;
    for (auto [name, target] : std::initializer_list<std::pair<const char*, std::string*>>{
             {"manager", &e.manager},
             {"operation", &e.operation},
             {"apiVersion", &e.api_version},
             {"time", &e.time},
             {"fieldsType", &e.fields_type},
             {"subresource", &e.subresource}}) {
      auto it = raw.find(name);
      if (it == raw.end() || it->is_null()) continue;
      if (!it->is_string()) {
        return core::BadRequest(
            fmt::format("{}.{}: expected a string, found {}", at, name, it->type_name()));
      }
      *target = it->get<std::string>();
    }
    if (!e.time.empty() && !IsRfc3339(e.time)) {
      return core::BadRequest(
          fmt::format("{}.time: {} is not an RFC 3339 time", at, core::GoQuote(e.time)));
    }
    if (auto it = raw.find("fieldsV1"); it != raw.end() && !it->is_null()) {
      auto fields = FieldSet::FromJson(*it);
      if (!fields.ok()) {
        return core::BadRequest(fmt::format("{}.fieldsV1: {}", at, fields.status().message()));
      }
      e.has_fields = true;
      e.fields = std::move(fields).value();
    }

    if (e.operation != kApply && e.operation != kUpdate) {
      errors.push_back({"FieldValueInvalid", at + ".operation",
                        fmt::format("Invalid value: {}: must be `Apply` or `Update`",
                                    core::GoQuote(e.operation))});
    }
    if (e.api_version.empty()) {
      errors.push_back({"FieldValueRequired", at + ".apiVersion", "Required value"});
    }
    if (e.fields_type.empty()) {
      errors.push_back({"FieldValueRequired", at + ".fieldsType", "Required value"});
    } else if (e.fields_type != kFieldsV1) {
      errors.push_back(
          {"FieldValueInvalid", at + ".fieldsType",
           fmt::format("Invalid value: {}: must be `FieldsV1`", core::GoQuote(e.fields_type))});
    }
    if (e.manager.size() > kFieldManagerMaxLength) {
      errors.push_back(
          {"FieldValueTooLong", at + ".manager",
           fmt::format("Too long: may not be more than {} bytes", kFieldManagerMaxLength)});
    }
    for (size_t pos = 0; pos < e.manager.size();) {
      auto lead = static_cast<unsigned char>(e.manager[pos]);
      size_t len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
      len = std::min(len, e.manager.size() - pos);
      std::string_view rune(e.manager.data() + pos, len);
      // A rune Go's %q leaves unescaped is printable (quote and backslash aside).
      if (rune == "\"" || rune == "\\" || core::GoQuote(rune) == "\"" + std::string(rune) + "\"") {
        pos += len;
        continue;
      }
      int32_t cp = lead;
      if (lead >= 0x80) {
        cp = len == 1 ? 0xFFFD : lead & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
        for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (rune[k] & 0x3F);
      }
      errors.push_back({"FieldValueInvalid", at + ".manager",
                        fmt::format("Invalid value: {}: invalid character {} (at position {})",
                                    core::GoQuote(e.manager), RuneName(cp), pos)});
      break;
    }
    entries.push_back(std::move(e));
  }
  if (!errors.empty()) {
    core::Details details;
    std::vector<std::string> parts;
    for (const FieldError& err : errors) {
      details.causes.push_back({err.type, err.body, err.field});
      parts.push_back(err.field + ": " + err.body);
    }
    std::string message = parts.size() == 1 ? parts[0] : "[" + core::Join(parts, ", ") + "]";
    return core::Status(core::Reason::kInvalid, std::move(message), std::move(details));
  }
  return entries;
}

int FindEntry(const std::vector<Entry>& entries, const std::string& identity) {
  // A later duplicate wins, as in kube-apiserver's decoder.
  int found = -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (Identity(entries[i]) == identity) found = static_cast<int>(i);
  }
  return found;
}

void DropEmpty(std::vector<Entry>& entries) {
  std::erase_if(entries, [](const Entry& e) { return e.fields.Empty(); });
}

Entry EntryFor(const ManagerInfo& who, std::string_view operation) {
  Entry e;
  e.manager = who.manager;
  e.operation = std::string(operation);
  e.api_version = who.api_version;
  e.subresource = who.subresource;
  e.fields_type = std::string(kFieldsV1);
  e.has_fields = true;
  return e;
}

std::string StringAt(const Json& object, std::string_view a, std::string_view b) {
  if (!object.is_object()) return "";
  auto it = object.find(std::string(a));
  if (it == object.end()) return "";
  if (!b.empty()) {
    if (!it->is_object()) return "";
    auto jt = it->find(std::string(b));
    if (jt == it->end() || !jt->is_string()) return "";
    return jt->get<std::string>();
  }
  return it->is_string() ? it->get<std::string>() : "";
}

// "/v1, Kind=ConfigMap" as Go prints a GroupVersionKind.
std::string GvkString(const Json& object) {
  std::string api_version = StringAt(object, "apiVersion");
  std::string group, version = api_version;
  if (size_t slash = api_version.find('/'); slash != std::string::npos) {
    group = api_version.substr(0, slash);
    version = api_version.substr(slash + 1);
  }
  return fmt::format("{}/{}, Kind={}", group, version, StringAt(object, "kind"));
}

core::Status ConflictError(std::vector<Conflict> conflicts) {
  std::stable_sort(conflicts.begin(), conflicts.end(),
                   [](const Conflict& a, const Conflict& b) { return a.identity < b.identity; });
  core::Details details;
  for (const Conflict& c : conflicts) {
    details.causes.push_back(
        {"FieldManagerConflict", "conflict with " + c.printed, PathToString(c.path)});
  }
  std::string message;
  if (conflicts.size() == 1) {
    message = fmt::format("Apply failed with 1 conflict: conflict with {}: {}",
                          conflicts[0].printed, PathToString(conflicts[0].path));
  } else {
    std::vector<std::string> lines;
    for (size_t i = 0; i < conflicts.size(); ++i) {
      if (i == 0 || conflicts[i].identity != conflicts[i - 1].identity) {
        lines.push_back(fmt::format("conflicts with {}:", conflicts[i].printed));
      }
      lines.push_back("- " + PathToString(conflicts[i].path));
    }
    message = fmt::format("Apply failed with {} conflicts: {}", conflicts.size(),
                          core::Join(lines, "\n"));
  }
  return core::Status(core::Reason::kConflict, std::move(message), std::move(details));
}

void SetManagedFields(Json& object, const Json& managed_fields) {
  if (!object.is_object()) return;
  auto meta = object.find("metadata");
  if (managed_fields.empty()) {
    if (meta != object.end() && meta->is_object()) meta->erase("managedFields");
    return;
  }
  if (meta == object.end() || !meta->is_object()) {
    object["metadata"] = Json::object();
    meta = object.find("metadata");
  }
  (*meta)["managedFields"] = managed_fields;
}

}  // namespace klutch::machinery::internal
