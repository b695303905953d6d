#include "schema/crd_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "cel/regex.h"
#include "schema/field_error.h"
#include "schema/structural.h"

namespace klutch::schema {
namespace {

const Json* Get(const Json& s, const char* key) {
  if (!s.is_object()) return nullptr;
  auto it = s.find(key);
  return it == s.end() ? nullptr : &*it;
}

bool Bool(const Json& s, const char* key) {
  const Json* v = Get(s, key);
  return v != nullptr && v->is_boolean() && v->get<bool>();
}

std::string Str(const Json& s, const char* key) {
  const Json* v = Get(s, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

std::string Prop(const std::string& path, const std::string& k) {
  return path + ".properties[" + k + "]";
}

// ---------------------------------------------------------------------------------------
// Structural schema rules (apiextensions-apiserver pkg/apiserver/schema/validation.go and
// complete.go).

enum class Level { kRoot, kItem, kField };

const std::vector<const char*> kJunctors = {"allOf", "anyOf", "oneOf", "not"};

bool IsIntOrStringAnyOf(const Json* any) {
  if (any == nullptr || !any->is_array() || any->size() != 2) return false;
  return (*any)[0] == Json{{"type", "integer"}} && (*any)[1] == Json{{"type", "string"}};
}

class Structural {
 public:
  explicit Structural(std::vector<core::Cause>& errs) : errs_(errs) {}

  void Invariants(const Json& s, Level lvl, const std::string& path) {
    if (!s.is_object()) return;
    const std::string type = Str(s, "type");
    const Json* items = Get(s, "items");
    if (type == "array" && items == nullptr)
      errs_.push_back(Required(path + ".items", "must be specified"));
    if (items != nullptr && items->is_object()) Invariants(*items, Level::kItem, path + ".items");
    if (const Json* props = Get(s, "properties"); props && props->is_object()) {
      for (const auto& [k, v] : props->items()) Invariants(v, Level::kField, Prop(path, k));
    }
    const Json* additional = Get(s, "additionalProperties");
    if (additional != nullptr) {
      if (lvl == Level::kRoot) {
        errs_.push_back(Forbidden(path + ".additionalProperties", "must not be used at the root"));
      }
      if (additional->is_object()) {
        Invariants(*additional, Level::kField, path + ".additionalProperties");
      }
    }
    const bool int_or_string = Bool(s, "x-kubernetes-int-or-string");
    const bool preserve = Bool(s, "x-kubernetes-preserve-unknown-fields");
    const bool embedded = Bool(s, "x-kubernetes-embedded-resource");
    if (int_or_string && preserve) {
      errs_.push_back(Invalid(path + ".x-kubernetes-preserve-unknown-fields", Json(true),
                              "must be false if x-kubernetes-int-or-string is true"));
    }
    if (int_or_string && embedded) {
      errs_.push_back(Invalid(path + ".x-kubernetes-embedded-resource", Json(true),
                              "must be false if x-kubernetes-int-or-string is true"));
    }
    const bool skip_any_of = IsIntOrStringAnyOf(Get(s, "anyOf"));
    bool skip_first_all_of_any_of = false;
    if (const Json* all = Get(s, "allOf"); all && all->is_array() && !all->empty()) {
      skip_first_all_of_any_of = IsIntOrStringAnyOf(Get((*all)[0], "anyOf"));
    }
    ValueValidation(s, skip_any_of, skip_first_all_of_any_of, path);
    const bool check_metadata = lvl == Level::kRoot || embedded;
    if (embedded && type != "object") {
      if (type.empty()) {
        errs_.push_back(
            Required(path + ".type", "must be object if x-kubernetes-embedded-resource is true"));
      } else {
        errs_.push_back(Invalid(path + ".type", Json(type),
                                "must be object if x-kubernetes-embedded-resource is true"));
      }
    } else if (type.empty() && !int_or_string && !preserve) {
      const char* what = lvl == Level::kRoot   ? "must not be empty at the root"
                         : lvl == Level::kItem ? "must not be empty for specified array items"
                                               : "must not be empty for specified object fields";
      errs_.push_back(Required(path + ".type", what));
    }
    if (embedded && additional != nullptr) {
      errs_.push_back(Forbidden(path + ".additionalProperties",
                                "must not be used if x-kubernetes-embedded-resource is set"));
    }
    if (lvl == Level::kRoot && !type.empty() && type != "object") {
      errs_.push_back(Invalid(path + ".type", Json(type), "must be object at the root"));
    }
    const Json* props = Get(s, "properties");
    if (props != nullptr && props->is_object()) {
      for (const char* k : {"kind", "apiVersion"}) {
        if (props->contains(k) && check_metadata && Str((*props)[k], "type") != "string") {
          errs_.push_back(
              Invalid(Prop(path, k) + ".type", Json(Str((*props)[k], "type")), "must be string"));
        }
      }
      if (props->contains("metadata")) {
        Metadata((*props)["metadata"], check_metadata, lvl, Prop(path, "metadata"));
      }
    }
    if (embedded && !preserve && (props == nullptr || !props->is_object() || props->empty())) {
      errs_.push_back(Required(path + ".properties",
                               "must not be empty if x-kubernetes-embedded-resource is true "
                               "without x-kubernetes-preserve-unknown-fields"));
    }
  }

  // Every property or item specified in a value validation must be specified outside too.
  void Completeness(const Json& s, const std::string& path) {
    if (!s.is_object()) return;
    for (const char* j : kJunctors) Junctor(s, s, path, path, j);
    if (const Json* items = Get(s, "items"); items && items->is_object()) {
      Completeness(*items, path + ".items");
    }
    if (const Json* props = Get(s, "properties"); props && props->is_object()) {
      for (const auto& [k, v] : props->items()) Completeness(v, Prop(path, k));
    }
    if (const Json* add = Get(s, "additionalProperties"); add && add->is_object()) {
      Completeness(*add, path + ".additionalProperties");
    }
  }

 private:
  void Junctor(const Json& v, const Json& s, const std::string& spath, const std::string& vpath,
               const char* junctor) {
    const Json* j = Get(v, junctor);
    if (j == nullptr) return;
    if (std::string(junctor) == "not") {
      NestedCompleteness(*j, &s, spath, vpath + ".not");
      return;
    }
    if (!j->is_array()) return;
    for (size_t i = 0; i < j->size(); ++i) {
      NestedCompleteness((*j)[i], &s, spath, fmt::format("{}.{}[{}]", vpath, junctor, i));
    }
  }

  void NestedCompleteness(const Json& v, const Json* s, const std::string& spath,
                          const std::string& vpath) {
    if (!v.is_object()) return;
    if (s == nullptr || !s->is_object()) {
      errs_.push_back(Required(spath, "because it is defined in " + vpath));
      return;
    }
    for (const char* j : kJunctors) Junctor(v, *s, spath, vpath, j);
    if (const Json* items = Get(v, "items"); items && items->is_object()) {
      const Json* sitems = Get(*s, "items");
      NestedCompleteness(*items, sitems && sitems->is_object() ? sitems : nullptr, spath + ".items",
                         vpath + ".items");
    }
    if (const Json* props = Get(v, "properties"); props && props->is_object()) {
      const Json* sprops = Get(*s, "properties");
      for (const auto& [k, vf] : props->items()) {
        if (sprops == nullptr || !sprops->is_object() || !sprops->contains(k)) {
          errs_.push_back(Required(Prop(spath, k), "because it is defined in " + Prop(vpath, k)));
        } else {
          NestedCompleteness(vf, &(*sprops)[k], Prop(spath, k), Prop(vpath, k));
        }
      }
    }
  }

  void Metadata(const Json& m, bool check_metadata, Level lvl, const std::string& path) {
    if (check_metadata && Str(m, "type") != "object") {
      errs_.push_back(Invalid(path + ".type", Json(Str(m, "type")), "must be object"));
    }
    if (lvl != Level::kRoot || !m.is_object()) return;
    // Only name and generateName may be restricted; type and default are checked elsewhere.
    Json rest = m;
    rest.erase("type");
    rest.erase("default");
    if (const Json* props = Get(rest, "properties"); props && props->is_object()) {
      std::set<std::string> keys;
      for (const auto& [k, v] : props->items()) keys.insert(k);
      std::set<std::string> allowed = {"name", "generateName"};
      if (!keys.empty() &&
          std::includes(allowed.begin(), allowed.end(), keys.begin(), keys.end())) {
        rest.erase("properties");
      }
    }
    if (!rest.empty()) {
      errs_.push_back(Forbidden(path,
                                "must not specify anything other than name and generateName, but "
                                "metadata is implicitly specified"));
    }
  }

  void ValueValidation(const Json& v, bool skip_any_of, bool skip_first_all_of_any_of,
                       const std::string& path) {
    if (const Json* any = Get(v, "anyOf"); any && any->is_array() && !skip_any_of) {
      for (size_t i = 0; i < any->size(); ++i) {
        Nested((*any)[i], false, fmt::format("{}.anyOf[{}]", path, i));
      }
    }
    if (const Json* all = Get(v, "allOf"); all && all->is_array()) {
      for (size_t i = 0; i < all->size(); ++i) {
        Nested((*all)[i], skip_first_all_of_any_of && i == 0, fmt::format("{}.allOf[{}]", path, i));
      }
    }
    if (const Json* one = Get(v, "oneOf"); one && one->is_array()) {
      for (size_t i = 0; i < one->size(); ++i) {
        Nested((*one)[i], false, fmt::format("{}.oneOf[{}]", path, i));
      }
    }
    if (const Json* no = Get(v, "not")) Nested(*no, false, path + ".not");
    if (const Json* p = Get(v, "pattern");
        p && p->is_string() && !p->get_ref<const std::string&>().empty()) {
      std::string err = cel::GoRegexpError(p->get<std::string>());
      if (!err.empty()) {
        errs_.push_back(Invalid(path + ".pattern", *p,
                                "must be a valid regular expression, but isn't: " + err));
      }
    }
  }

  void Nested(const Json& v, bool skip_any_of, const std::string& path) {
    if (!v.is_object()) return;
    ValueValidation(v, skip_any_of, false, path);
    if (const Json* items = Get(v, "items"); items && items->is_object())
      Nested(*items, false, path + ".items");
    if (const Json* props = Get(v, "properties"); props && props->is_object()) {
      for (const auto& [k, f] : props->items()) Nested(f, false, Prop(path, k));
      if (props->contains("metadata")) {
        errs_.push_back(
            Forbidden(Prop(path, "metadata"), "must not be specified in a nested context"));
      }
    }
    if (v.contains("type"))
      errs_.push_back(Forbidden(path + ".type", "must be empty to be structural"));
    if (v.contains("additionalProperties")) {
      errs_.push_back(
          Forbidden(path + ".additionalProperties", "must be undefined to be structural"));
    }
    if (v.contains("default"))
      errs_.push_back(Forbidden(path + ".default", "must be undefined to be structural"));
    if (!Str(v, "title").empty())
      errs_.push_back(Forbidden(path + ".title", "must be empty to be structural"));
    if (!Str(v, "description").empty()) {
      errs_.push_back(Forbidden(path + ".description", "must be empty to be structural"));
    }
    if (Bool(v, "nullable"))
      errs_.push_back(Forbidden(path + ".nullable", "must be false to be structural"));
    if (v.contains("externalDocs")) {
      errs_.push_back(Forbidden(path + ".externalDocs", "must be undefined to be structural"));
    }
    for (const char* ext : {"x-kubernetes-preserve-unknown-fields",
                            "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string"}) {
      if (Bool(v, ext))
        errs_.push_back(Forbidden(path + "." + ext, "must be false to be structural"));
    }
    if (const Json* keys = Get(v, "x-kubernetes-list-map-keys");
        keys && keys->is_array() && !keys->empty()) {
      errs_.push_back(
          Forbidden(path + ".x-kubernetes-list-map-keys", "must be empty to be structural"));
    }
    for (const char* ext : {"x-kubernetes-list-type", "x-kubernetes-map-type"}) {
      if (v.contains(ext))
        errs_.push_back(Forbidden(path + "." + ext, "must be undefined to be structural"));
    }
    if (const Json* xv = Get(v, "x-kubernetes-validations"); xv && xv->is_array() && !xv->empty()) {
      errs_.push_back(
          Forbidden(path + ".x-kubernetes-validations", "must be empty to be structural"));
    }
  }

  std::vector<core::Cause>& errs_;
};

std::vector<core::Cause> StructuralErrors(const Json& schema, const std::string& path) {
  std::vector<core::Cause> errs;
  Structural st(errs);
  st.Invariants(schema, Level::kRoot, path);
  st.Completeness(schema, path);
  // kube-apiserver sorts these by their rendered text.
  std::sort(errs.begin(), errs.end(), [](const core::Cause& a, const core::Cause& b) {
    return a.field + ": " + a.message < b.field + ": " + b.message;
  });
  return errs;
}

// ---------------------------------------------------------------------------------------
// Defaults (apiextensions pkg/apiserver/schema/defaulting/validation.go).

// The root is treated as an embedded resource (its apiVersion, kind and metadata are meta).
void Defaults(const Json& s, const std::string& path, bool inside_meta, const CrdSchemaOptions& o,
              std::vector<core::Cause>& errs, bool resource_root = false) {
  if (!s.is_object()) return;
  const bool embedded = resource_root || Bool(s, "x-kubernetes-embedded-resource");
  if (embedded) inside_meta = false;
  if (const Json* def = Get(s, "default"); def != nullptr && !def->is_null() && !inside_meta) {
    const std::string dpath = path + ".default";
    if (o.require_pruned_defaults) {
      Json pruned = *def;
      PruneValue(pruned, s, embedded);
      if (pruned != *def) errs.push_back(Invalid(dpath, *def, "must not have unknown fields"));
    }
    std::vector<core::Cause> meta;
    ValidateEmbeddedResources(*def, s, dpath, embedded, meta);
    if (!meta.empty()) {
      errs.insert(errs.end(), meta.begin(), meta.end());
    } else {
      ValidateValue(*def, s, dpath, errs);
    }
  }
  if (const Json* items = Get(s, "items"); items && items->is_object()) {
    Defaults(*items, path + ".items", inside_meta, o, errs);
  }
  if (const Json* props = Get(s, "properties"); props && props->is_object()) {
    for (const auto& [k, v] : props->items()) {
      bool sub_meta =
          inside_meta || (embedded && (k == "metadata" || k == "apiVersion" || k == "kind"));
      Defaults(v, Prop(path, k), sub_meta, o, errs);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Generic OpenAPI checks (apiextensions validation.go
// validateCustomResourceDefinitionOpenAPISchema).

struct Context {
  bool allow_defaults = true;
  std::string disallow_defaults_reason;
  bool inside_resource_meta = false;
};

class OpenApi {
 public:
  OpenApi(const CrdSchemaOptions& o, std::vector<core::Cause>& errs) : o_(o), errs_(errs) {}

  void Check(const Json& s, const std::string& path, const Context& ctx, bool is_root) {
    if (!s.is_object()) return;
    Standard(s, path, ctx);
    if (Bool(s, "uniqueItems")) {
      errs_.push_back(Forbidden(path + ".uniqueItems",
                                "uniqueItems cannot be set to true since the runtime complexity "
                                "becomes quadratic"));
    }
    const Json* props = Get(s, "properties");
    const bool has_props = props != nullptr && props->is_object() && !props->empty();
    if (const Json* add = Get(s, "additionalProperties")) {
      if (has_props && (add->is_object() || (add->is_boolean() && !add->get<bool>()))) {
        errs_.push_back(Forbidden(path + ".additionalProperties",
                                  "additionalProperties and properties are mutual exclusive"));
      }
      Context sub = ctx;
      if (ctx.inside_resource_meta) {
        sub.allow_defaults = false;
        sub.disallow_defaults_reason = "inside additionalProperties applying to object metadata";
      }
      if (add->is_object()) Check(*add, path + ".additionalProperties", sub, false);
    }
    if (has_props) {
      const bool embedded = Bool(s, "x-kubernetes-embedded-resource");
      for (const auto& [k, v] : props->items()) {
        Context sub = ctx;
        if ((is_root || embedded) && (k == "metadata" || k == "apiVersion" || k == "kind")) {
          sub.inside_resource_meta = true;
          if (is_root) {
            sub.allow_defaults = false;
            sub.disallow_defaults_reason = "in top-level " + k;
          }
        }
        Check(v, Prop(path, k), sub, false);
      }
    }
    if (const Json* no = Get(s, "not")) Check(*no, path + ".not", ctx, false);
    for (const char* j : {"allOf", "oneOf", "anyOf"}) {
      if (const Json* l = Get(s, j); l && l->is_array()) {
        for (size_t i = 0; i < l->size(); ++i)
          Check((*l)[i], fmt::format("{}.{}[{}]", path, j, i), ctx, false);
      }
    }
    if (const Json* defs = Get(s, "definitions"); defs && defs->is_object()) {
      for (const auto& [k, v] : defs->items())
        Check(v, path + ".definitions[" + k + "]", ctx, false);
    }
    if (const Json* items = Get(s, "items")) {
      if (items->is_object()) Check(*items, path + ".items", ctx, false);
      if (items->is_array()) {
        for (size_t i = 0; i < items->size(); ++i)
          Check((*items)[i], fmt::format("{}.items[{}]", path, i), ctx, false);
      }
    }
    if (const Json* deps = Get(s, "dependencies"); deps && deps->is_object()) {
      for (const auto& [k, v] : deps->items()) {
        if (v.is_object()) Check(v, path + ".dependencies[" + k + "]", ctx, false);
      }
    }
    if (const Json* p = Get(s, "x-kubernetes-preserve-unknown-fields");
        p && p->is_boolean() && !p->get<bool>()) {
      errs_.push_back(Invalid(path + ".x-kubernetes-preserve-unknown-fields", Json(false),
                              "must be true or undefined"));
    }
    ListType(s, path);
    MapType(s, path);
    const Json* keys = Get(s, "x-kubernetes-list-map-keys");
    const bool has_keys = keys != nullptr && keys->is_array() && !keys->empty();
    if (has_keys) {
      const Json* lt = Get(s, "x-kubernetes-list-type");
      if (lt == nullptr) {
        errs_.push_back(Required(path + ".x-kubernetes-list-type",
                                 "must be map if x-kubernetes-list-map-keys is non-empty"));
      } else if (*lt != "map") {
        errs_.push_back(Invalid(path + ".x-kubernetes-list-type", *lt,
                                "must be map if x-kubernetes-list-map-keys is non-empty"));
      }
    }
    if (o_.require_map_list_keys_defaults) MapListKeysMapSet(s, path);
  }

 private:
  void Standard(const Json& s, const std::string& path, const Context& ctx) {
    static const std::vector<std::string> kTypes = {"array",  "boolean", "integer",
                                                    "number", "object",  "string"};
    const std::string type = Str(s, "type");
    if (o_.require_valid_property_type && !type.empty() &&
        std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end()) {
      errs_.push_back(NotSupported(path + ".type", Json(type), kTypes));
    }
    if (s.contains("default") && !ctx.allow_defaults) {
      std::string detail = "must not be set";
      if (!ctx.disallow_defaults_reason.empty()) detail += " " + ctx.disallow_defaults_reason;
      errs_.push_back(Forbidden(path + ".default", detail));
    }
    if (!Str(s, "id").empty()) errs_.push_back(Forbidden(path + ".id", "id is not supported"));
    if (s.contains("additionalItems")) {
      errs_.push_back(Forbidden(path + ".additionalItems", "additionalItems is not supported"));
    }
    if (const Json* pp = Get(s, "patternProperties"); pp && pp->is_object() && !pp->empty()) {
      errs_.push_back(Forbidden(path + ".patternProperties", "patternProperties is not supported"));
    }
    if (const Json* d = Get(s, "definitions"); d && d->is_object() && !d->empty()) {
      errs_.push_back(Forbidden(path + ".definitions", "definitions is not supported"));
    }
    if (s.contains("dependencies")) {
      errs_.push_back(Forbidden(path + ".dependencies", "dependencies is not supported"));
    }
    if (s.contains("$ref")) errs_.push_back(Forbidden(path + ".$ref", "$ref is not supported"));
    if (type == "null") {
      errs_.push_back(
          Forbidden(path + ".type", "type cannot be set to null, use nullable as an alternative"));
    }
    if (const Json* items = Get(s, "items"); items && items->is_array() && !items->empty()) {
      errs_.push_back(Forbidden(path + ".items", "items must be a schema object and not an array"));
    }
    if (ctx.inside_resource_meta && Bool(s, "x-kubernetes-embedded-resource")) {
      errs_.push_back(Forbidden(path + ".x-kubernetes-embedded-resource",
                                "must not be used inside of resource meta"));
    }
  }

  void ListType(const Json& s, const std::string& path) {
    const Json* lt = Get(s, "x-kubernetes-list-type");
    if (lt == nullptr) return;
    const std::string type = Str(s, "type");
    if (type != "array") {
      if (type.empty()) {
        errs_.push_back(
            Required(path + ".type", "must be array if x-kubernetes-list-type is specified"));
      } else {
        errs_.push_back(Invalid(path + ".type", Json(type),
                                "must be array if x-kubernetes-list-type is specified"));
      }
    }
    const Json* items = Get(s, "items");
    if (type == "array" && o_.require_atomic_set_items && *lt == "set" && items &&
        items->is_object()) {
      const std::string it = Str(*items, "type");
      if (it == "array") {
        const Json* ilt = Get(*items, "x-kubernetes-list-type");
        if (ilt != nullptr && *ilt != "atomic") {
          errs_.push_back(
              Invalid(path + ".items.x-kubernetes-list-type", *ilt,
                      "must be atomic as item of a list with x-kubernetes-list-type=set"));
        }
      } else if (it == "object") {
        const Json* mt = Get(*items, "x-kubernetes-map-type");
        if (mt == nullptr || *mt != "atomic") {
          errs_.push_back(
              Invalid(path + ".items.x-kubernetes-map-type", mt ? *mt : Json(),
                      "must be atomic as item of a list with x-kubernetes-list-type=set"));
        }
      }
    }
    if (*lt != "atomic" && *lt != "set" && *lt != "map") {
      errs_.push_back(
          NotSupported(path + ".x-kubernetes-list-type", *lt, {"atomic", "set", "map"}));
    }
    if (*lt != "map") return;
    const Json* keys = Get(s, "x-kubernetes-list-map-keys");
    if (keys == nullptr || !keys->is_array() || keys->empty()) {
      errs_.push_back(Required(path + ".x-kubernetes-list-map-keys",
                               "must not be empty if x-kubernetes-list-type is map"));
    }
    if (items == nullptr) {
      errs_.push_back(
          Required(path + ".items", "must have a schema if x-kubernetes-list-type is map"));
      return;
    }
    if (!items->is_object()) {
      errs_.push_back(Invalid(path + ".items", *items,
                              "must only have a single schema if x-kubernetes-list-type is map"));
      return;
    }
    if (Str(*items, "type") != "object") {
      errs_.push_back(Invalid(path + ".items.type", Json(Str(*items, "type")),
                              "must be object if parent array's x-kubernetes-list-type is map"));
      return;
    }
    if (keys == nullptr || !keys->is_array()) return;
    const Json* props = Get(*items, "properties");
    std::set<std::string> seen;
    for (const auto& k : *keys) {
      if (!k.is_string()) continue;
      const std::string key = k.get<std::string>();
      if (props != nullptr && props->is_object() && props->contains(key)) {
        const std::string kt = Str((*props)[key], "type");
        if (kt == "array" || kt == "object") {
          // kube-apiserver reports the items' type as the value here.
          errs_.push_back(
              Invalid(Prop(path + ".items", key) + ".type", Json(Str(*items, "type")),
                      "must be a scalar type if parent array's x-kubernetes-list-type is map"));
        }
      } else {
        errs_.push_back(Invalid(path + ".x-kubernetes-list-map-keys", *keys,
                                "entries must all be names of item properties"));
      }
      if (!seen.insert(key).second) {
        errs_.push_back(Invalid(path + ".x-kubernetes-list-map-keys", *keys,
                                "must not contain duplicate entries"));
      }
    }
  }

  void MapType(const Json& s, const std::string& path) {
    const Json* mt = Get(s, "x-kubernetes-map-type");
    if (mt == nullptr) return;
    const std::string type = Str(s, "type");
    if (type != "object") {
      if (type.empty()) {
        errs_.push_back(
            Required(path + ".type", "must be object if x-kubernetes-map-type is specified"));
      } else {
        errs_.push_back(Invalid(path + ".type", Json(type),
                                "must be object if x-kubernetes-map-type is specified"));
      }
    }
    if (*mt != "atomic" && *mt != "granular") {
      errs_.push_back(NotSupported(path + ".x-kubernetes-map-type", *mt, {"atomic", "granular"}));
    }
  }

  void MapListKeysMapSet(const Json& s, const std::string& path) {
    const Json* items = Get(s, "items");
    const Json* lt = Get(s, "x-kubernetes-list-type");
    if (items == nullptr || !items->is_object() || lt == nullptr) return;
    if (*lt != "set" && *lt != "map") return;
    if (Bool(*items, "nullable")) {
      errs_.push_back(
          Forbidden(path + ".items.nullable",
                    "cannot be nullable when x-kubernetes-list-type is " + lt->get<std::string>()));
    }
    if (*lt != "map") return;
    std::set<std::string> required;
    if (const Json* req = Get(*items, "required"); req && req->is_array()) {
      for (const auto& r : *req) {
        if (r.is_string()) required.insert(r.get<std::string>());
      }
    }
    const Json* props = Get(*items, "properties");
    const Json* keys = Get(s, "x-kubernetes-list-map-keys");
    if (keys == nullptr || !keys->is_array() || props == nullptr || !props->is_object()) return;
    for (const auto& k : *keys) {
      if (!k.is_string() || !props->contains(k.get<std::string>())) continue;
      const std::string key = k.get<std::string>();
      const Json& p = (*props)[key];
      if (!required.contains(key) && !p.contains("default")) {
        errs_.push_back(
            Required(Prop(path + ".items", key) + ".default",
                     "this property is in x-kubernetes-list-map-keys, so it must have a "
                     "default or be a required property"));
      }
      if (Bool(p, "nullable")) {
        errs_.push_back(Forbidden(Prop(path + ".items", key) + ".nullable",
                                  "this property is in x-kubernetes-list-map-keys, so it cannot be "
                                  "nullable"));
      }
    }
  }

  const CrdSchemaOptions& o_;
  std::vector<core::Cause>& errs_;
};

}  // namespace

CrdSchemaOptions CrdSchemaOptionsFor(const Json* old_schema) {
  CrdSchemaOptions o;
  if (old_schema == nullptr || !old_schema->is_object()) return o;
  // Each rule is relaxed when the stored schema already breaks it.
  o.require_structural = StructuralErrors(*old_schema, "").empty();
  auto breaks = [&](CrdSchemaOptions probe) {
    std::vector<core::Cause> strict, relaxed;
    OpenApi(CrdSchemaOptions{}, strict).Check(*old_schema, "", Context{}, true);
    OpenApi(probe, relaxed).Check(*old_schema, "", Context{}, true);
    return strict.size() != relaxed.size();
  };
  CrdSchemaOptions probe;
  probe.require_atomic_set_items = false;
  o.require_atomic_set_items = !breaks(probe);
  probe = CrdSchemaOptions{};
  probe.require_map_list_keys_defaults = false;
  o.require_map_list_keys_defaults = !breaks(probe);
  probe = CrdSchemaOptions{};
  probe.require_valid_property_type = false;
  o.require_valid_property_type = !breaks(probe);
  if (o.require_structural) {
    std::vector<core::Cause> strict;
    Defaults(*old_schema, "", false, CrdSchemaOptions{}, strict, true);
    CrdSchemaOptions lax;
    lax.require_pruned_defaults = false;
    std::vector<core::Cause> relaxed;
    Defaults(*old_schema, "", false, lax, relaxed, true);
    o.require_pruned_defaults = strict.size() == relaxed.size();
  }
  return o;
}

void ValidateCrdSchema(const Json& schema, const std::string& path, const CrdSchemaOptions& options,
                       std::vector<core::Cause>& causes) {
  if (!schema.is_object()) return;
  if (Bool(schema, "nullable")) {
    causes.push_back(Forbidden(path + ".nullable", "nullable cannot be true at the root"));
  }
  if (options.require_structural) {
    std::vector<core::Cause> structural = StructuralErrors(schema, path);
    if (!structural.empty()) {
      causes.insert(causes.end(), structural.begin(), structural.end());
    } else {
      Defaults(schema, path, false, options, causes, /*resource_root=*/true);
    }
  }
  OpenApi(options, causes).Check(schema, path, Context{}, true);
}

}  // namespace klutch::schema
