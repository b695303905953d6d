#include "machinery/object.h"

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

namespace klutch::machinery {

GroupVersion ParseApiVersion(std::string_view api_version) {
  auto slash = api_version.find('/');
  if (slash == std::string_view::npos) return {"", std::string(api_version)};
  return {std::string(api_version.substr(0, slash)), std::string(api_version.substr(slash + 1))};
}

const Json* Find(const Json& obj, std::initializer_list<std::string_view> path) {
  const Json* cur = &obj;
  for (auto key : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(key));
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::string GetString(const Json& obj, std::initializer_list<std::string_view> path) {
  const Json* v = Find(obj, path);
  if (v == nullptr || !v->is_string()) return "";
  return v->get<std::string>();
}

Json& MutableMetadata(Json& obj) {
  if (!obj.is_object()) obj = Json::object();
  Json& m = obj["metadata"];
  if (!m.is_object()) m = Json::object();
  return m;
}

std::vector<std::string> Strings(const Json* array) {
  std::vector<std::string> out;
  if (array == nullptr || !array->is_array()) return out;
  for (const auto& v : *array) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::vector<std::string> Finalizers(const Json& obj) {
  return Strings(Find(obj, {"metadata", "finalizers"}));
}

bool HasFinalizer(const Json& obj, std::string_view finalizer) {
  for (const auto& f : Finalizers(obj)) {
    if (f == finalizer) return true;
  }
  return false;
}

bool IsBeingDeleted(const Json& obj) {
  const Json* ts = Find(obj, {"metadata", "deletionTimestamp"});
  return ts != nullptr && ts->is_string();
}

Json StatusToJson(const core::Status& status) {
  Json out = {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", Json::object()}};
  if (status.ok()) {
    out["status"] = "Success";
  } else {
    out["status"] = "Failure";
    out["message"] = status.message();
    std::string_view reason = core::ReasonName(status.reason());
    if (!reason.empty()) out["reason"] = reason;
  }
  if (status.details()) {
    const auto& d = *status.details();
    Json details = Json::object();
    if (!d.name.empty()) details["name"] = d.name;
    if (!d.group.empty()) details["group"] = d.group;
    if (!d.kind.empty()) details["kind"] = d.kind;
    if (!d.uid.empty()) details["uid"] = d.uid;
    if (!d.causes.empty()) {
      Json causes = Json::array();
      for (const auto& c : d.causes) {
        Json cj = Json::object();
        if (!c.reason.empty()) cj["reason"] = c.reason;
        if (!c.message.empty()) cj["message"] = c.message;
        if (!c.field.empty()) cj["field"] = c.field;
        causes.push_back(std::move(cj));
      }
      details["causes"] = std::move(causes);
    }
    if (d.retry_after_seconds > 0) details["retryAfterSeconds"] = d.retry_after_seconds;
    out["details"] = std::move(details);
  }
  out["code"] = status.ok() ? 200 : status.code();
  return out;
}

core::Status StatusFromJson(const Json& j) {
  if (GetString(j, {"status"}) == "Success") return core::Status::Ok();
  core::Reason reason = core::ReasonFromName(GetString(j, {"reason"}));
  core::Status s(reason, GetString(j, {"message"}));
  const Json* code = Find(j, {"code"});
  if (code && code->is_number_integer()) s.set_code(code->get<int>());
  if (const Json* d = Find(j, {"details"}); d && d->is_object()) {
    core::Details details;
    details.name = GetString(*d, {"name"});
    details.group = GetString(*d, {"group"});
    details.kind = GetString(*d, {"kind"});
    details.uid = GetString(*d, {"uid"});
    if (const Json* r = Find(*d, {"retryAfterSeconds"}); r && r->is_number_integer()) {
      details.retry_after_seconds = r->get<int>();
    }
    if (const Json* causes = Find(*d, {"causes"}); causes && causes->is_array()) {
      for (const auto& c : *causes) {
        details.causes.push_back(
            {GetString(c, {"reason"}), GetString(c, {"message"}), GetString(c, {"field"})});
      }
    }
    s.set_details(std::move(details));
  }
  return s;
}

core::Status InvalidObject(std::string_view group, std::string_view kind, std::string_view name,
                           std::vector<core::Cause> causes) {
  std::string qualified = group.empty() ? std::string(kind) : fmt::format("{}.{}", kind, group);
  std::string msg = fmt::format("{} \"{}\" is invalid", qualified, name);
  auto render = [](const core::Cause& c) {
    return c.field.empty() ? c.message : fmt::format("{}: {}", c.field, c.message);
  };
  if (causes.size() == 1) {
    msg += ": " + render(causes[0]);
  } else if (!causes.empty()) {
    msg += ": [";
    for (size_t i = 0; i < causes.size(); ++i) {
      if (i) msg += ", ";
      msg += render(causes[i]);
    }
    msg += "]";
  }
  core::Details d;
  d.name = std::string(name);
  d.group = std::string(group);
  d.kind = std::string(kind);
  d.causes = std::move(causes);
  return core::Status(core::Reason::kInvalid, std::move(msg), std::move(d));
}

namespace {
// Renders a value as Go's %#v-like rendering in field errors: strings quoted, others JSON.
std::string RenderValue(const Json& v) {
  if (v.is_string()) return Json(v.get<std::string>()).dump();
  if (v.is_null()) return "null";
  if (v.is_object()) return "\"object\"";
  if (v.is_array()) return "\"array\"";
  return v.dump();
}
}  // namespace

core::Cause FieldInvalid(std::string field, const Json& value, std::string detail) {
  std::string msg = "Invalid value: " + RenderValue(value);
  if (!detail.empty()) msg += ": " + detail;
  return {"FieldValueInvalid", std::move(msg), std::move(field)};
}

core::Cause FieldRequired(std::string field, std::string detail) {
  std::string msg = "Required value";
  if (!detail.empty()) msg += ": " + detail;
  return {"FieldValueRequired", std::move(msg), std::move(field)};
}

core::Cause FieldForbidden(std::string field, std::string detail) {
  std::string msg = "Forbidden";
  if (!detail.empty()) msg += ": " + detail;
  return {"FieldValueForbidden", std::move(msg), std::move(field)};
}

core::Cause FieldNotSupported(std::string field, const Json& value,
                              const std::vector<std::string>& supported) {
  std::string msg = "Unsupported value: " + RenderValue(value);
  if (!supported.empty()) {
    msg += ": supported values: ";
    for (size_t i = 0; i < supported.size(); ++i) {
      if (i) msg += ", ";
      msg += "\"" + supported[i] + "\"";
    }
  }
  return {"FieldValueNotSupported", std::move(msg), std::move(field)};
}

core::Cause FieldTooLong(std::string field, const Json& value, size_t max) {
  return {"FieldValueTooLong", fmt::format("Too long: may not be more than {} bytes", max),
          std::move(field)};
}

core::Cause FieldDuplicate(std::string field, const Json& value) {
  return {"FieldValueDuplicate", "Duplicate value: " + RenderValue(value), std::move(field)};
}

bool Covers(const Json& have, const Json& want, ListCover lists) {
  if (want.is_null()) return true;
  if (lists == ListCover::kInOrder && want.is_array() && have.is_array()) {
    // Each wanted element, in order, covered by a distinct element of `have`: a list the
    // server or another writer extended (defaults inside elements, an extra ownerReference)
    // still covers what was asked; a reordered or shortened one does not.
    size_t next = 0;
    for (const Json& w : want) {
      while (next < have.size() && !Covers(have[next], w, lists)) ++next;
      if (next == have.size()) return false;
      ++next;
    }
    return true;
  }
  if (!want.is_object()) return have == want;
  if (!have.is_object()) return false;
  for (const auto& [key, value] : want.items()) {
    auto it = have.find(key);
    if (it == have.end() || !Covers(*it, value, lists)) return false;
  }
  return true;
}

std::string JsonHash(const Json& value) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : Dump(value)) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

void SetAnnotation(Json& object, std::string_view key, std::string_view value) {
  Json& meta = MutableMetadata(object);
  auto it = meta.find("annotations");
  if (it == meta.end() || !it->is_object()) meta["annotations"] = Json::object();
  meta["annotations"][std::string(key)] = std::string(value);
}

std::string Annotation(const Json& object, std::string_view key) {
  const Json* annotations = Find(object, {"metadata", "annotations"});
  if (!annotations) return "";
  return GetString(*annotations, {key});
}

bool AddFinalizer(Json& obj, std::string_view finalizer) {
  if (HasFinalizer(obj, finalizer)) return false;
  Json& meta = MutableMetadata(obj);
  auto it = meta.find("finalizers");
  if (it == meta.end() || !it->is_array()) meta["finalizers"] = Json::array();
  meta["finalizers"].push_back(std::string(finalizer));
  return true;
}

bool RemoveFinalizer(Json& obj, std::string_view finalizer) {
  if (!HasFinalizer(obj, finalizer)) return false;
  Json kept = Json::array();
  for (const auto& f : Finalizers(obj)) {
    if (f != finalizer) kept.push_back(f);
  }
  MutableMetadata(obj)["finalizers"] = std::move(kept);
  return true;
}

}  // namespace klutch::machinery
