#include "schema/structural.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "machinery/object.h"

namespace klutch::schema {
namespace {

std::string Join(const std::string& base, const std::string& field) {
  return base.empty() ? field : base + "." + field;
}

bool Bool(const Json* node, const char* key) {
  if (node == nullptr) return false;
  auto it = node->find(key);
  return it != node->end() && it->is_boolean() && it->get<bool>();
}

const Json* Get(const Json* node, const char* key) {
  if (node == nullptr || !node->is_object()) return nullptr;
  auto it = node->find(key);
  return it == node->end() ? nullptr : &*it;
}

void Prune(Json& value, const SchemaCursor& schema, const std::string& path,
           std::vector<std::string>& pruned, int depth) {
  if (!schema.known() || depth > 128) return;
  const Json* node = schema.node();
  if (Bool(node, "x-kubernetes-int-or-string")) return;
  if (value.is_object()) {
    if (Bool(node, "x-kubernetes-embedded-resource")) {
      // Embedded objects always carry apiVersion, kind and metadata.
    }
    const Json* props = Get(node, "properties");
    const Json* additional = Get(node, "additionalProperties");
    const bool preserve = schema.PreservesUnknownFields();
    if (props == nullptr && additional != nullptr) {
      if (additional->is_object()) {
        SchemaCursor values = schema.Values();
        for (auto& [k, v] : value.items()) Prune(v, values, path + "." + k, pruned, depth + 1);
      }
      return;
    }
    std::vector<std::string> drop;
    for (auto& [k, v] : value.items()) {
      if (props != nullptr && props->contains(k)) {
        Prune(v, schema.Field(k), Join(path, k), pruned, depth + 1);
      } else if (Bool(node, "x-kubernetes-embedded-resource") &&
                 (k == "apiVersion" || k == "kind" || k == "metadata")) {
        continue;
      } else if (!preserve && (additional == nullptr || additional->is_boolean())) {
        if (additional != nullptr && additional->get<bool>()) continue;
        drop.push_back(k);
      }
    }
    for (const auto& k : drop) {
      pruned.push_back(Join(path, k));
      value.erase(k);
    }
  } else if (value.is_array()) {
    SchemaCursor items = schema.Items();
    for (size_t i = 0; i < value.size(); ++i) {
      Prune(value[i], items, fmt::format("{}[{}]", path, i), pruned, depth + 1);
    }
  }
}

void Defaults(Json& value, const SchemaCursor& schema, int depth) {
  if (!schema.known() || depth > 128) return;
  const Json* node = schema.node();
  if (value.is_object()) {
    if (const Json* props = Get(node, "properties"); props && props->is_object()) {
      for (const auto& [k, prop] : props->items()) {
        SchemaCursor child = schema.Field(k);
        if (!value.contains(k) && child.known()) {
          if (const Json* def = Get(child.node(), "default")) value[k] = *def;
        }
        if (value.contains(k)) Defaults(value[k], child, depth + 1);
      }
    } else if (const Json* add = Get(node, "additionalProperties"); add && add->is_object()) {
      SchemaCursor values = schema.Values();
      for (auto& [k, v] : value.items()) Defaults(v, values, depth + 1);
    }
  } else if (value.is_array()) {
    SchemaCursor items = schema.Items();
    for (auto& v : value) Defaults(v, items, depth + 1);
  }
}

std::string TypeOf(const Json& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) {
    double d = v.get<double>();
    return std::floor(d) == d && std::isfinite(d) ? "integer" : "number";
  }
  return "null";
}

// How kube-apiserver renders the offending value in type errors.
std::string Shown(const Json& v) {
  std::string t = TypeOf(v);
  if (t == "object" || t == "array" || t == "string" || t == "boolean" || t == "integer" ||
      t == "number") {
    return "\"" + t + "\"";
  }
  return "null";
}

class Validator {
 public:
  explicit Validator(std::vector<core::Cause>& causes, bool types_only = false)
      : causes_(causes), types_only_(types_only) {}

  void Run(const Json& v, const SchemaCursor& schema, const std::string& path, int depth) {
    if (!schema.known() || depth > 128) return;
    const Json* node = schema.node();
    if (v.is_null()) {
      // Go's JSON decoder reads null into any field as its zero value, so built-in kinds
      // (types_only) accept it everywhere: kubectl 1.27 sends `creationTimestamp: null`.
      if (types_only_ || Bool(node, "nullable")) return;
      std::string type = schema.Type();
      if (!type.empty()) {
        causes_.push_back(machinery::FieldInvalid(
            path, nullptr, fmt::format("{} in body must be of type {}: \"null\"", path, type)));
      }
      return;
    }
    if (Bool(node, "x-kubernetes-int-or-string")) {
      if (!v.is_string() && TypeOf(v) != "integer") {
        causes_.push_back(machinery::FieldInvalid(
            path, Json(TypeOf(v)),
            fmt::format("{} in body must be of type integer-or-string: {}", path, Shown(v))));
      }
      return;
    }
    std::string type = schema.Type();
    std::string actual = TypeOf(v);
    if (!type.empty() && type != actual && !(type == "number" && actual == "integer")) {
      causes_.push_back(machinery::FieldInvalid(
          path, Json(actual),
          fmt::format("{} in body must be of type {}: {}", path, type, Shown(v))));
      return;
    }
    if (!types_only_) {
      CheckEnum(v, node, path);
      if (v.is_string()) CheckString(v.get<std::string>(), node, path);
      if (v.is_number()) CheckNumber(v.get<double>(), node, path);
    }
    if (v.is_object()) CheckObject(v, schema, node, path, depth);
    if (v.is_array()) CheckArray(v, schema, node, path, depth);
  }

 private:
  void CheckEnum(const Json& v, const Json* node, const std::string& path) {
    const Json* e = Get(node, "enum");
    if (e == nullptr || !e->is_array()) return;
    for (const auto& allowed : *e) {
      if (allowed == v) return;
    }
    std::vector<std::string> supported;
    for (const auto& allowed : *e) {
      supported.push_back(allowed.is_string() ? allowed.get<std::string>() : allowed.dump());
    }
    causes_.push_back(machinery::FieldNotSupported(path, v, supported));
  }

  void CheckString(const std::string& s, const Json* node, const std::string& path) {
    // Lengths count characters (runes), as Go does.
    size_t runes = 0;
    for (unsigned char c : s) runes += (c & 0xC0) != 0x80;
    if (const Json* m = Get(node, "maxLength"); m && m->is_number() && runes > m->get<size_t>()) {
      causes_.push_back({"FieldValueTooLong",
                         fmt::format("Too long: may not be more than {} bytes", m->get<size_t>()),
                         path});
    }
    if (const Json* m = Get(node, "minLength"); m && m->is_number() && runes < m->get<size_t>()) {
      causes_.push_back(machinery::FieldInvalid(
          path, s,
          fmt::format("{} in body should be at least {} chars long", path, m->get<size_t>())));
    }
    if (const Json* p = Get(node, "pattern"); p && p->is_string()) {
      try {
        std::regex re(p->get<std::string>(), std::regex::ECMAScript);
        if (!std::regex_search(s, re)) {
          causes_.push_back(machinery::FieldInvalid(
              path, s, fmt::format("{} in body should match '{}'", path, p->get<std::string>())));
        }
      } catch (const std::regex_error&) {
        // An unsupported pattern is reported when the CRD is created; do not fail objects.
      }
    }
  }

  void CheckNumber(double d, const Json* node, const std::string& path) {
    auto num = [](const Json& j) { return j.get<double>(); };
    auto show = [](const Json& j) { return j.dump(); };
    if (const Json* m = Get(node, "maximum"); m && m->is_number()) {
      bool excl = Bool(node, "exclusiveMaximum");
      if (excl ? d >= num(*m) : d > num(*m)) {
        causes_.push_back(
            machinery::FieldInvalid(path, Json(d),
                                    fmt::format("{} in body should be less than {}{}", path,
                                                excl ? "" : "or equal to ", show(*m))));
      }
    }
    if (const Json* m = Get(node, "minimum"); m && m->is_number()) {
      bool excl = Bool(node, "exclusiveMinimum");
      if (excl ? d <= num(*m) : d < num(*m)) {
        causes_.push_back(
            machinery::FieldInvalid(path, Json(d),
                                    fmt::format("{} in body should be greater than {}{}", path,
                                                excl ? "" : "or equal to ", show(*m))));
      }
    }
    if (const Json* m = Get(node, "multipleOf"); m && m->is_number() && num(*m) > 0) {
      double q = d / num(*m);
      if (std::fabs(q - std::round(q)) > 1e-9) {
        causes_.push_back(machinery::FieldInvalid(
            path, Json(d), fmt::format("{} in body should be a multiple of {}", path, show(*m))));
      }
    }
  }

  void CheckObject(const Json& v, const SchemaCursor& schema, const Json* node,
                   const std::string& path, int depth) {
    const Json* props = Get(node, "properties");
    if (types_only_) {
      for (const auto& [k, child] : v.items()) {
        if (props != nullptr && props->contains(k)) {
          Run(child, schema.Field(k), Join(path, k), depth + 1);
        } else if (const Json* add = Get(node, "additionalProperties"); add && add->is_object()) {
          Run(child, schema.Values(), path + "[" + k + "]", depth + 1);
        }
      }
      return;
    }
    if (const Json* req = Get(node, "required"); req && req->is_array()) {
      for (const auto& r : *req) {
        if (r.is_string() && !v.contains(r.get<std::string>())) {
          causes_.push_back(machinery::FieldRequired(Join(path, r.get<std::string>())));
        }
      }
    }
    if (const Json* m = Get(node, "maxProperties");
        m && m->is_number() && v.size() > m->get<size_t>()) {
      causes_.push_back(
          {"FieldValueTooMany",
           fmt::format("Too many: {}: must have at most {} items", v.size(), m->get<size_t>()),
           path});
    }
    if (const Json* m = Get(node, "minProperties");
        m && m->is_number() && v.size() < m->get<size_t>()) {
      causes_.push_back(machinery::FieldInvalid(
          path, Json(v.size()),
          fmt::format("{} in body should have at least {} properties", path, m->get<size_t>())));
    }
    for (const auto& [k, child] : v.items()) {
      if (depth == 0 && (k == "metadata" || k == "apiVersion" || k == "kind")) continue;
      if (props != nullptr && props->contains(k)) {
        Run(child, schema.Field(k), Join(path, k), depth + 1);
      } else if (const Json* add = Get(node, "additionalProperties"); add && add->is_object()) {
        Run(child, schema.Values(), path + "[" + k + "]", depth + 1);
      }
    }
  }

  void CheckArray(const Json& v, const SchemaCursor& schema, const Json* node,
                  const std::string& path, int depth) {
    if (types_only_) {
      SchemaCursor items = schema.Items();
      for (size_t i = 0; i < v.size(); ++i)
        Run(v[i], items, fmt::format("{}[{}]", path, i), depth + 1);
      return;
    }
    if (const Json* m = Get(node, "maxItems"); m && m->is_number() && v.size() > m->get<size_t>()) {
      causes_.push_back(
          {"FieldValueTooMany",
           fmt::format("Too many: {}: must have at most {} items", v.size(), m->get<size_t>()),
           path});
    }
    if (const Json* m = Get(node, "minItems"); m && m->is_number() && v.size() < m->get<size_t>()) {
      causes_.push_back(machinery::FieldInvalid(
          path, Json(v.size()),
          fmt::format("{} in body should have at least {} items", path, m->get<size_t>())));
    }
    std::string list_type = schema.Extension("x-kubernetes-list-type");
    if (Bool(node, "uniqueItems") || list_type == "set") {
      std::set<std::string> seen;
      for (size_t i = 0; i < v.size(); ++i) {
        if (!seen.insert(v[i].dump()).second) {
          causes_.push_back(machinery::FieldDuplicate(fmt::format("{}[{}]", path, i), v[i]));
        }
      }
    }
    if (list_type == "map") {
      auto keys = schema.Items().known() ? schema.ListMapKeys() : std::vector<std::string>{};
      std::set<std::string> seen;
      for (size_t i = 0; i < v.size(); ++i) {
        Json key = Json::object();
        for (const auto& k : keys) {
          if (v[i].is_object() && v[i].contains(k)) key[k] = v[i][k];
        }
        if (!keys.empty() && !seen.insert(key.dump()).second) {
          causes_.push_back(machinery::FieldDuplicate(fmt::format("{}[{}]", path, i), key));
        }
      }
    }
    SchemaCursor items = schema.Items();
    for (size_t i = 0; i < v.size(); ++i) {
      Run(v[i], items, fmt::format("{}[{}]", path, i), depth + 1);
    }
  }

  std::vector<core::Cause>& causes_;
  bool types_only_;
};

}  // namespace

void PruneUnknownFields(Json& object, const SchemaCursor& schema, const SchemaCursor& object_meta,
                        std::vector<std::string>& pruned) {
  if (!object.is_object() || !schema.known()) return;
  // apiVersion, kind and metadata are not the schema's business: set them aside, prune the
  // rest, and check metadata against ObjectMeta.
  Json aside = Json::object();
  for (const char* k : {"apiVersion", "kind", "metadata"}) {
    auto it = object.find(k);
    if (it == object.end()) continue;
    aside[k] = std::move(*it);
    object.erase(k);
  }
  Prune(object, schema, "", pruned, 0);
  if (aside.contains("metadata") && object_meta.known()) {
    Prune(aside["metadata"], object_meta, "metadata", pruned, 1);
  }
  for (auto& [k, v] : aside.items()) object[k] = std::move(v);
}

void ApplyDefaults(Json& object, const SchemaCursor& schema) { Defaults(object, schema, 0); }

void Validate(const Json& object, const SchemaCursor& schema, std::vector<core::Cause>& causes) {
  Validator(causes).Run(object, schema, "", 0);
}

void ValidateTypes(const Json& object, const SchemaCursor& schema,
                   std::vector<core::Cause>& causes) {
  // Depth 1: the top-level apiVersion, kind and metadata are checked too.
  Validator(causes, /*types_only=*/true).Run(object, schema, "", 1);
}

}  // namespace klutch::schema
