#include "schema/structural.h"

// structural.h is implemented here (pruning, defaulting, type checks), in
// openapi_validation.cc (ValidateValue) and in structural_walks.cc (embedded resources,
// list sets and maps).

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "cel/regex.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "machinery/validation.h"
#include "schema/field_error.h"
#include "schema/formats.h"
#include "schema/structural_internal.h"

namespace klutch::schema {
namespace {

using internal::Bool;
using internal::Get;
using internal::IsInt;

std::string Join(const std::string& base, const std::string& field) {
  return base.empty() ? field : base + "." + field;
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

// ---------------------------------------------------------------------------------------
// Built-in kinds: only the type checks decoding into Go structs performs.

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

class TypeChecker {
 public:
  explicit TypeChecker(std::vector<core::Cause>& causes) : causes_(causes) {}

  void Run(const Json& v, const SchemaCursor& schema, const std::string& path, int depth) {
    if (!schema.known() || depth > 128) return;
    const Json* node = schema.node();
    // Go's JSON decoder reads null into any field as its zero value (kubectl 1.27 sends
    // `creationTimestamp: null`).
    if (v.is_null()) return;
    if (Bool(node, "x-kubernetes-int-or-string")) {
      if (!v.is_string() && TypeOf(v) != "integer") {
        causes_.push_back(machinery::FieldInvalid(
            path, Json(TypeOf(v)),
            fmt::format("{} in body must be of type integer-or-string: \"{}\"", path, TypeOf(v))));
      }
      return;
    }
    std::string type = schema.Type();
    std::string actual = TypeOf(v);
    if (!type.empty() && type != actual && !(type == "number" && actual == "integer")) {
      causes_.push_back(machinery::FieldInvalid(
          path, Json(actual),
          fmt::format("{} in body must be of type {}: \"{}\"", path, type, actual)));
      return;
    }
    if (v.is_object()) {
      const Json* props = Get(node, "properties");
      for (const auto& [k, child] : v.items()) {
        if (props != nullptr && props->contains(k)) {
          Run(child, schema.Field(k), Join(path, k), depth + 1);
        } else if (const Json* add = Get(node, "additionalProperties"); add && add->is_object()) {
          Run(child, schema.Values(), path + "[" + k + "]", depth + 1);
        }
      }
    } else if (v.is_array()) {
      SchemaCursor items = schema.Items();
      for (size_t i = 0; i < v.size(); ++i) {
        Run(v[i], items, fmt::format("{}[{}]", path, i), depth + 1);
      }
    }
  }

 private:
  std::vector<core::Cause>& causes_;
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

void PruneValue(Json& value, const Json& schema, bool is_resource_root) {
  std::vector<std::string> pruned;
  SchemaCursor cursor(&schema, nullptr);
  Json aside = Json::object();
  if (is_resource_root && value.is_object()) {
    for (const char* k : {"apiVersion", "kind", "metadata"}) {
      auto it = value.find(k);
      if (it == value.end()) continue;
      aside[k] = std::move(*it);
      value.erase(k);
    }
  }
  Prune(value, cursor, "", pruned, 0);
  for (auto& [k, v] : aside.items()) value[k] = std::move(v);
}

void Validate(const Json& object, const SchemaCursor& schema, std::vector<core::Cause>& causes) {
  if (!schema.known()) return;
  ValidateValue(object, *schema.node(), std::nullopt, causes);
  ValidateEmbeddedResources(object, *schema.node(), "", false, causes);
  ValidateListSetsAndMaps(object, *schema.node(), "", causes);
}

void ValidateTypes(const Json& object, const SchemaCursor& schema,
                   std::vector<core::Cause>& causes) {
  // Depth 1: the top-level apiVersion, kind and metadata are checked too.
  TypeChecker(causes).Run(object, schema, "", 1);
}

}  // namespace klutch::schema
