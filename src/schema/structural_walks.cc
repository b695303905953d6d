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
#include "schema/structural.h"
#include "schema/structural_internal.h"

// structural.h's ValidateEmbeddedResources and ValidateListSetsAndMaps.

namespace klutch::schema {
namespace {

using internal::Bool;
using internal::Get;
using internal::IsInt;

// ---------------------------------------------------------------------------------------
// Embedded resources (apiextensions objectmeta.Validate) and list sets/maps
// (listtype.ValidateListSetsAndMaps), walking the structural part of the schema.

std::string Index(const std::string& path, size_t i) { return fmt::format("{}[{}]", path, i); }
std::string Key(const std::string& path, const std::string& k) { return path + "[" + k + "]"; }
std::string Child(const std::string& path, const std::string& k) {
  return path.empty() ? k : path + "." + k;
}

constexpr const char* kDns1035Msg =
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

void ValidateEmbedded(const std::string& pth, const Json& x, std::vector<core::Cause>& causes) {
  if (!x.contains("apiVersion")) causes.push_back(Required(Child(pth, "apiVersion")));
  if (!x.contains("kind")) causes.push_back(Required(Child(pth, "kind")));
  for (const auto& [k, v] : x.items()) {
    if (k == "apiVersion") {
      const std::string f = Child(pth, "apiVersion");
      if (!v.is_string()) {
        causes.push_back(Invalid(f, v, "must be a string"));
      } else if (v.get_ref<const std::string&>().empty()) {
        causes.push_back(Required(f));
      } else if (const std::string& gv = v.get_ref<const std::string&>();
                 std::count(gv.begin(), gv.end(), '/') > 1) {
        causes.push_back(Invalid(f, v, "unexpected GroupVersion string: " + gv));
      }
    } else if (k == "kind") {
      const std::string f = Child(pth, "kind");
      if (!v.is_string()) {
        causes.push_back(Invalid(f, v, "must be a string"));
      } else if (v.get_ref<const std::string&>().empty()) {
        causes.push_back(Required(f));
      } else {
        std::string lower = core::ToLower(v.get<std::string>());
        std::vector<std::string> errs;
        if (lower.size() > 63) errs.push_back("must be no more than 63 characters");
        static const RE2 kDns1035("[a-z]([-a-z0-9]*[a-z0-9])?");
        if (!RE2::FullMatch(lower, kDns1035)) errs.push_back(kDns1035Msg);
        if (!errs.empty()) {
          causes.push_back(Invalid(
              f, v, "may have mixed case, but should otherwise match: " + core::Join(errs, ",")));
        }
      }
    } else if (k == "metadata") {
      const std::string f = Child(pth, "metadata");
      if (!v.is_object()) {
        causes.push_back(Invalid(f, v, "must be an object"));
        continue;
      }
      Json meta = v;
      if (!meta.contains("name") || !meta["name"].is_string() ||
          meta["name"].get_ref<const std::string&>().empty()) {
        meta["name"] = "fakename";  // as kube-apiserver does: a name is not required here
      }
      const bool namespaced = meta.contains("namespace") && meta["namespace"].is_string() &&
                              !meta["namespace"].get_ref<const std::string&>().empty();
      std::vector<core::Cause> meta_causes;
      machinery::ValidateObjectMeta(meta, namespaced, machinery::NameRule::kPathSegment,
                                    meta_causes);
      for (auto& c : meta_causes) {
        c.field = f + c.field.substr(std::string("metadata").size());
        causes.push_back(std::move(c));
      }
    }
  }
}

void EmbeddedWalk(const std::string& pth, const Json& x, const Json* s, int depth,
                  std::vector<core::Cause>& causes) {
  if (s == nullptr || !s->is_object() || depth > 256) return;
  if (x.is_object()) {
    if (Bool(s, "x-kubernetes-embedded-resource")) ValidateEmbedded(pth, x, causes);
    const Json* props = Get(s, "properties");
    const Json* additional = Get(s, "additionalProperties");
    for (const auto& [k, v] : x.items()) {
      if (props != nullptr && props->is_object() && props->contains(k)) {
        EmbeddedWalk(Child(pth, k), v, &(*props)[k], depth + 1, causes);
      } else if (additional != nullptr && additional->is_object()) {
        EmbeddedWalk(Key(pth, k), v, additional, depth + 1, causes);
      }
    }
  } else if (x.is_array()) {
    const Json* items = Get(s, "items");
    for (size_t i = 0; i < x.size(); ++i)
      EmbeddedWalk(Index(pth, i), x[i], items, depth + 1, causes);
  }
}

// Go map keys for validateListSet: scalars compare by Go type and value, compound values
// by their JSON encoding.
std::string SetKey(const Json& v) {
  if (v.is_object() || v.is_array()) return "c" + GoJson(v);
  if (v.is_number()) return (IsInt(v) ? "i" : "f") + GoJson(v);
  return "s" + v.dump();
}

std::vector<size_t> NonUnique(const std::vector<std::string>& keys) {
  std::map<std::string, int> seen;
  std::vector<size_t> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (++seen[keys[i]] == 2) out.push_back(i);
  }
  return out;
}

void ListWalk(const std::string& pth, const Json& x, const Json* s, int depth,
              std::vector<core::Cause>& causes);

void ListObject(const std::string& pth, const Json& x, const Json* s, int depth,
                std::vector<core::Cause>& causes) {
  const Json* additional = Get(s, "additionalProperties");
  if (additional != nullptr && additional->is_object()) {
    for (const auto& [k, v] : x.items()) ListWalk(Key(pth, k), v, additional, depth + 1, causes);
  }
  if (const Json* props = Get(s, "properties"); props && props->is_object()) {
    for (const auto& [k, v] : x.items()) {
      auto it = props->find(k);
      if (it != props->end()) ListWalk(Child(pth, k), v, &*it, depth + 1, causes);
    }
  }
}

void ListWalk(const std::string& pth, const Json& x, const Json* s, int depth,
              std::vector<core::Cause>& causes) {
  if (s == nullptr || !s->is_object() || depth > 256) return;
  if (x.is_object()) {
    ListObject(pth, x, s, depth, causes);
    return;
  }
  if (!x.is_array()) return;
  const Json* list_type = Get(s, "x-kubernetes-list-type");
  if (list_type != nullptr && list_type->is_string() && x.size() > 1) {
    if (*list_type == "set") {
      std::vector<std::string> keys;
      for (const auto& e : x) keys.push_back(SetKey(e));
      for (size_t i : NonUnique(keys)) causes.push_back(Duplicate(Index(pth, i), x[i]));
    }
  }
  if (list_type != nullptr && *list_type == "map") {
    bool objects = true;
    for (size_t i = 0; i < x.size() && objects; ++i) {
      if (!x[i].is_null() && !x[i].is_object()) {
        causes.push_back(
            Invalid(Index(pth, i), x[i], "must be an object for an array of list-type map"));
        objects = false;
      }
    }
    if (objects && x.size() > 1) {
      std::vector<std::string> key_fields;
      if (const Json* k = Get(s, "x-kubernetes-list-map-keys"); k && k->is_array()) {
        for (const auto& f : *k) {
          if (f.is_string()) key_fields.push_back(f.get<std::string>());
        }
      }
      std::vector<Json> keys;
      std::vector<std::string> key_ids;
      for (const auto& e : x) {
        Json key = Json::object();
        for (const auto& f : key_fields) {
          if (e.is_object() && e.contains(f)) key[f] = e[f];
        }
        if (key_fields.size() == 1) {
          // One key: the key value itself is compared (absent keys are alike).
          key_ids.push_back(key.empty() ? "u" : SetKey(key.begin().value()));
        } else {
          key_ids.push_back(SetKey(key));
        }
        keys.push_back(std::move(key));
      }
      for (size_t i : NonUnique(key_ids)) causes.push_back(Duplicate(Index(pth, i), keys[i]));
    }
  }
  if (const Json* items = Get(s, "items"); items && items->is_object()) {
    for (size_t i = 0; i < x.size(); ++i) ListWalk(Index(pth, i), x[i], items, depth + 1, causes);
  }
}

}  // namespace

void ValidateEmbeddedResources(const Json& object, const Json& schema, const std::string& fld_path,
                               bool is_resource_root, std::vector<core::Cause>& causes) {
  if (is_resource_root && object.is_object()) {
    ValidateEmbedded(fld_path, object, causes);
    const Json* props = Get(&schema, "properties");
    const Json* additional = Get(&schema, "additionalProperties");
    for (const auto& [k, v] : object.items()) {
      if (props != nullptr && props->is_object() && props->contains(k)) {
        EmbeddedWalk(Child(fld_path, k), v, &(*props)[k], 1, causes);
      } else if (additional != nullptr && additional->is_object()) {
        EmbeddedWalk(Key(fld_path, k), v, additional, 1, causes);
      }
    }
    return;
  }
  EmbeddedWalk(fld_path, object, &schema, 0, causes);
}

void ValidateListSetsAndMaps(const Json& object, const Json& schema, const std::string& fld_path,
                             std::vector<core::Cause>& causes) {
  if (object.is_object()) ListObject(fld_path, object, &schema, 0, causes);
}

}  // namespace klutch::schema
