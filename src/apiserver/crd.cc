#include "apiserver/crd.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/log.h"
#include "core/strings.h"
#include "machinery/jsonpath.h"
#include "machinery/validation.h"
#include "schema/crd_schema.h"
#include "schema/validation_rules.h"

namespace klutch::apiserver {

using machinery::Find;
using machinery::GetString;

namespace {

// metav1.ObjectMeta's creationTimestamp documentation, which kube-apiserver gives the Age
// column it serves for CRDs without printer columns.
constexpr const char* kCreationTimestampDescription =
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#metadata";

// Whether a schema declares a `default` anywhere (keyword positions only: a property named
// "default" is not one).
bool HasDefault(const Json& schema) {
  if (!schema.is_object()) return false;
  if (schema.contains("default")) return true;
  if (auto it = schema.find("properties"); it != schema.end() && it->is_object()) {
    for (const auto& [name, sub] : it->items()) {
      if (HasDefault(sub)) return true;
    }
  }
  for (const char* key : {"items", "additionalProperties"}) {
    if (auto it = schema.find(key); it != schema.end() && HasDefault(*it)) return true;
  }
  return false;
}

}  // namespace

void ValidateCrdSpec(const Json& crd, const Json* old, std::vector<core::Cause>& causes) {
  const std::string group = GetString(crd, {"spec", "group"});
  const std::string plural = GetString(crd, {"spec", "names", "plural"});
  const std::string kind = GetString(crd, {"spec", "names", "kind"});
  if (const Json* names = Find(crd, {"spec", "names"}); names && names->is_object()) {
    for (const char* list : {"shortNames", "categories"}) {
      const Json* l = Find(*names, {list});
      if (!l) continue;
      bool ok = l->is_array();
      if (ok) {
        for (const auto& e : *l) ok = ok && e.is_string();
      }
      if (!ok) {
        causes.push_back(machinery::FieldInvalid(fmt::format("spec.names.{}", list), *l,
                                                 "must be a list of strings"));
      }
    }
  }
  if (group.empty()) {
    causes.push_back(machinery::FieldRequired("spec.group"));
  } else {
    for (const auto& e : machinery::IsDns1123Subdomain(group)) {
      causes.push_back(machinery::FieldInvalid("spec.group", group, e));
    }
    if (group.find('.') == std::string::npos) {
      causes.push_back(
          machinery::FieldInvalid("spec.group", group, "should be a domain with at least one dot"));
    }
  }
  if (plural.empty()) {
    causes.push_back(machinery::FieldRequired("spec.names.plural"));
  } else {
    for (const auto& e : machinery::IsDns1123Label(plural)) {
      causes.push_back(machinery::FieldInvalid("spec.names.plural", plural, e));
    }
  }
  if (kind.empty()) causes.push_back(machinery::FieldRequired("spec.names.kind"));
  std::string want = plural + "." + group;
  if (!plural.empty() && !group.empty() && machinery::Name(crd) != want) {
    causes.push_back(machinery::FieldInvalid("metadata.name", machinery::Name(crd),
                                             "must be spec.names.plural+\".\"+spec.group"));
  }
  std::string scope = GetString(crd, {"spec", "scope"});
  if (scope != "Namespaced" && scope != "Cluster") {
    if (scope.empty()) {
      causes.push_back(machinery::FieldRequired("spec.scope"));
    } else {
      causes.push_back(
          machinery::FieldNotSupported("spec.scope", scope, {"Cluster", "Namespaced"}));
    }
  }
  const Json* versions = Find(crd, {"spec", "versions"});
  if (!versions || !versions->is_array() || versions->empty()) {
    causes.push_back(machinery::FieldInvalid(
        "spec.versions", Json::array(), "must have exactly one version marked as storage version"));
    return;
  }
  int storage = 0;
  std::set<std::string> seen;
  for (size_t i = 0; i < versions->size(); ++i) {
    const Json& v = (*versions)[i];
    std::string base = fmt::format("spec.versions[{}]", i);
    if (!v.is_object()) {
      causes.push_back(machinery::FieldInvalid(base, v, "must be an object"));
      continue;
    }
    for (const char* flag : {"served", "storage", "deprecated"}) {
      const Json* f = Find(v, {flag});
      if (f && !f->is_boolean()) {
        causes.push_back(
            machinery::FieldInvalid(fmt::format("{}.{}", base, flag), *f, "must be a boolean"));
      }
    }
    if (const Json* subs = Find(v, {"subresources"}); subs && !subs->is_object()) {
      causes.push_back(machinery::FieldInvalid(base + ".subresources", *subs, "must be an object"));
    }
    std::string name = GetString(v, {"name"});
    for (const auto& e : machinery::IsDns1123Label(name)) {
      causes.push_back(machinery::FieldInvalid(base + ".name", name, e));
    }
    if (!seen.insert(name).second)
      causes.push_back(machinery::FieldDuplicate(base + ".name", name));
    if (const Json* st = Find(v, {"storage"}); st && st->is_boolean() && st->get<bool>()) {
      ++storage;
    }
    const Json* schema = Find(v, {"schema", "openAPIV3Schema"});
    if (schema == nullptr || !schema->is_object()) {
      causes.push_back(
          machinery::FieldRequired(base + ".schema.openAPIV3Schema", "schemas are required"));
    } else if (GetString(*schema, {"type"}) != "object") {
      causes.push_back(machinery::FieldInvalid(base + ".schema.openAPIV3Schema.type",
                                               GetString(*schema, {"type"}),
                                               "must be object at the root"));
    } else {
      // Structural-schema and OpenAPI checks; an update keeps the rules the stored version
      // of this schema already broke, as kube-apiserver does.
      const Json* old_schema = nullptr;
      if (const Json* old_versions = old ? Find(*old, {"spec", "versions"}) : nullptr;
          old_versions && old_versions->is_array()) {
        for (const auto& ov : *old_versions) {
          if (ov.is_object() && GetString(ov, {"name"}) == name) {
            old_schema = Find(ov, {"schema", "openAPIV3Schema"});
          }
        }
      }
      const size_t before = causes.size();
      schema::ValidateCrdSchema(*schema, base + ".schema.openAPIV3Schema",
                                schema::CrdSchemaOptionsFor(old_schema), causes);
      // CEL rules must compile (and name valid reasons and field paths) before the CRD is
      // accepted, as kube-apiserver checks them; it skips them for schemas with errors.
      if (causes.size() == before) {
        (void)schema::ValidationRules::Compile(nullptr, *schema, base + ".schema.openAPIV3Schema",
                                               causes);
      }
    }
    if (const Json* cols = Find(v, {"additionalPrinterColumns"}); cols) {
      if (!cols->is_array()) {
        causes.push_back(
            machinery::FieldInvalid(base + ".additionalPrinterColumns", *cols, "must be a list"));
      } else {
        for (size_t c = 0; c < cols->size(); ++c) {
          const Json& col = (*cols)[c];
          std::string cbase = fmt::format("{}.additionalPrinterColumns[{}]", base, c);
          if (!col.is_object()) {
            causes.push_back(machinery::FieldInvalid(cbase, col, "must be an object"));
            continue;
          }
          // kube-apiserver's checks, in its order and wording (the field path names the
          // internal type's JSONPath field). The path itself is only parsed when served:
          // one client-go cannot parse ends the table's columns there.
          if (GetString(col, {"name"}).empty()) {
            causes.push_back(machinery::FieldRequired(cbase + ".name"));
          }
          static const std::string kTypes = "boolean,date,integer,number,string";
          const std::string type = GetString(col, {"type"});
          if (type.empty()) {
            causes.push_back(machinery::FieldRequired(cbase + ".type", "must be one of " + kTypes));
          } else if (("," + kTypes + ",").find("," + type + ",") == std::string::npos) {
            causes.push_back(
                machinery::FieldInvalid(cbase + ".type", type, "must be one of " + kTypes));
          }
          static const std::string kFormats =
              "byte,date,date-time,double,float,int32,int64,password";
          const std::string format = GetString(col, {"format"});
          if (!format.empty() &&
              ("," + kFormats + ",").find("," + format + ",") == std::string::npos) {
            causes.push_back(
                machinery::FieldInvalid(cbase + ".format", format, "must be one of " + kFormats));
          }
          const std::string path = GetString(col, {"jsonPath"});
          if (path.empty()) {
            causes.push_back(machinery::FieldRequired(cbase + ".JSONPath"));
          } else if (path.front() != '.') {
            causes.push_back(machinery::FieldInvalid(cbase + ".JSONPath", path,
                                                     "must be a simple json path starting with ."));
          }
          if (const Json* p = Find(col, {"priority"}); p && !p->is_number_integer()) {
            causes.push_back(
                machinery::FieldInvalid(cbase + ".priority", *p, "must be an integer"));
          }
        }
      }
    }
  }
  if (storage != 1) {
    causes.push_back(machinery::FieldInvalid(
        "spec.versions", *versions, "must have exactly one version marked as storage version"));
  }
  if (old != nullptr) {
    std::string old_scope = GetString(*old, {"spec", "scope"});
    if (!old_scope.empty() && old_scope != scope) {
      causes.push_back(machinery::FieldInvalid("spec.scope", scope, "field is immutable"));
    }
  }
}

core::Result<std::vector<ResourcePtr>> ResourcesForCrd(const Json& crd) {
  const std::string group = GetString(crd, {"spec", "group"});
  const Json* names = Find(crd, {"spec", "names"});
  if (!names) return core::Invalid("spec.names: Required value");
  const std::string kind = GetString(*names, {"kind"});
  const std::string plural = GetString(*names, {"plural"});
  std::string singular = GetString(*names, {"singular"});
  if (singular.empty()) singular = core::ToLower(kind);
  std::string list_kind = GetString(*names, {"listKind"});
  if (list_kind.empty()) list_kind = kind + "List";
  const bool namespaced = GetString(crd, {"spec", "scope"}) == "Namespaced";
  std::string storage_version;
  const Json* versions = Find(crd, {"spec", "versions"});
  if (!versions || !versions->is_array()) return core::Invalid("spec.versions: Required value");
  auto flag = [](const Json& v, const char* key) {
    const Json* f = Find(v, {key});
    return f && f->is_boolean() && f->get<bool>();
  };
  for (const auto& v : *versions) {
    if (flag(v, "storage")) storage_version = GetString(v, {"name"});
  }
  std::vector<ResourcePtr> out;
  for (const auto& v : *versions) {
    if (!flag(v, "served")) continue;
    ResourceInfo r;
    r.group = group;
    r.version = GetString(v, {"name"});
    r.storage_version = storage_version;
    r.kind = kind;
    r.list_kind = list_kind;
    r.plural = plural;
    r.singular = singular;
    r.namespaced = namespaced;
    r.short_names = machinery::Strings(Find(*names, {"shortNames"}));
    r.categories = machinery::Strings(Find(*names, {"categories"}));
    r.verbs = {"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"};
    r.custom = true;
    r.tracks_generation = true;
    r.crd_name = machinery::Name(crd);
    if (const Json* subs = Find(v, {"subresources"}); subs && subs->is_object()) {
      if (subs->contains("status")) {
        r.has_status = true;
        r.subresources.push_back({"status", {group, r.version, kind}, {"get", "patch", "update"}});
      }
      if (subs->contains("scale")) {
        r.subresources.push_back(
            {"scale", {"autoscaling", "v1", "Scale"}, {"get", "patch", "update"}});
      }
    }
    // The schema travels as a one-entry components map so SchemaCursor can walk it.
    if (const Json* schema = Find(v, {"schema", "openAPIV3Schema"})) {
      std::string name = fmt::format("{}.{}.{}", group, r.version, kind);
      auto schemas = std::make_shared<Json>(Json::object());
      (*schemas)[name] = *schema;
      std::vector<core::Cause> rule_errors;  // reported by ValidateCrdSpec on write
      r.rules = schema::ValidationRules::Compile(schemas, (*schemas)[name], "", rule_errors);
      r.defaults_on_read = HasDefault(*schema);
      r.schemas = std::move(schemas);
      r.schema_name = std::move(name);
    }
    r.columns.push_back({"Name", "string", "name", "Name must be unique within a namespace.", 0, "",
                         [](const Json& o) { return Json(machinery::Name(o)); }});
    // As kube-apiserver serves them: the CRD's columns, or Age when it declares none; a
    // column whose path client-go cannot parse (as the template `{<jsonPath>}`) ends the
    // list there, kube-apiserver's fallback to the columns it could build.
    const Json* cols = Find(v, {"additionalPrinterColumns"});
    if (cols && cols->is_array() && !cols->empty()) {
      for (const auto& c : *cols) {
        Column col;
        col.name = GetString(c, {"name"});
        col.type = GetString(c, {"type"});
        col.format = GetString(c, {"format"});
        col.json_path = GetString(c, {"jsonPath"});
        col.description = GetString(c, {"description"});
        if (col.description.empty()) {
          col.description =
              "Custom resource definition column (in JSONPath format): " + col.json_path;
        }
        const Json* priority = Find(c, {"priority"});
        col.priority = priority && priority->is_number_integer() ? priority->get<int>() : 0;
        if (auto parsed = machinery::JsonPath::Compile("{" + col.json_path + "}"); !parsed.ok()) {
          KLUTCH_LOG(kWarn, "apiserver",
                     "CRD {} version {}: printer column {} not served, nor any after it: {}",
                     r.crd_name, r.version, col.name, parsed.status().message());
          break;
        }
        r.columns.push_back(std::move(col));
      }
    } else {
      r.columns.push_back({"Age", "date", "", kCreationTimestampDescription, 0,
                           ".metadata.creationTimestamp", nullptr});
    }
    out.push_back(std::make_shared<const ResourceInfo>(std::move(r)));
  }
  return out;
}

}  // namespace klutch::apiserver
