#include "bind/snapshot.h"

#include <string_view>

#include "apis/klutch/ids.h"
#include "machinery/object.h"

namespace klutch::bind {
namespace {

// A boolean field; false when absent or not a boolean (value() would throw on a mistyped one).
bool Bool(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() && it->get<bool>();  // json-ok: type checked
}

core::Status Problem(const Json& crd, const std::string& field, std::string what) {
  return core::Invalid("CustomResourceDefinition " + machinery::Name(crd) +
                       " cannot be exported: " + field + " " + what);
}

}  // namespace

core::Result<Json> CrdSnapshot(const Json& crd) {
  const Json* spec = machinery::Find(crd, {"spec"});
  if (spec == nullptr || !spec->is_object()) return Problem(crd, "spec", "is missing");
  Json out = Json::object();
  const std::string group = machinery::GetString(*spec, {"group"});
  if (group.empty()) return Problem(crd, "spec.group", "is missing");
  out["group"] = group;

  Json names = Json::object();
  if (const Json* n = machinery::Find(*spec, {"names"}); n && n->is_object()) {
    for (const char* key : {"plural", "singular", "shortNames", "kind", "listKind", "categories"}) {
      auto it = n->find(key);
      if (it != n->end() && !it->is_null()) names[key] = *it;
    }
  }
  if (machinery::GetString(names, {"plural"}).empty()) {
    return Problem(crd, "spec.names.plural", "is missing");
  }
  if (machinery::GetString(names, {"kind"}).empty()) {
    return Problem(crd, "spec.names.kind", "is missing");
  }
  out["names"] = std::move(names);

  const std::string scope = machinery::GetString(*spec, {"scope"});
  if (scope != "Namespaced" && scope != "Cluster") {
    return Problem(crd, "spec.scope", "must be Namespaced or Cluster");
  }
  out["scope"] = scope;

  const bool webhook = machinery::GetString(*spec, {"conversion", "strategy"}) == "Webhook";
  Json versions = Json::array();
  const Json* list = machinery::Find(*spec, {"versions"});
  if (list != nullptr && list->is_array()) {
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& v = (*list)[i];
      if (!v.is_object() || !Bool(v, "served")) continue;
      const bool storage = Bool(v, "storage");
      // Consumers get no conversion webhook: only the version stored on the provider is safe.
      if (webhook && !storage) continue;
      const std::string field = "spec.versions[" + std::to_string(i) + "]";
      Json version = {
          {"name", machinery::GetString(v, {"name"})}, {"served", true}, {"storage", storage}};
      if (Bool(v, "deprecated")) version["deprecated"] = true;
      if (auto it = v.find("deprecationWarning"); it != v.end() && it->is_string()) {
        version["deprecationWarning"] = *it;
      }
      if (auto it = v.find("additionalPrinterColumns"); it != v.end() && it->is_array()) {
        version["additionalPrinterColumns"] = *it;
      }
      auto sub = v.find("subresources");
      version["subresources"] = sub != v.end() && sub->is_object() ? *sub : Json(Json::object());
      const Json* schema = machinery::Find(v, {"schema", "openAPIV3Schema"});
      if (schema == nullptr || !schema->is_object()) {
        return Problem(crd, field + ".schema.openAPIV3Schema", "is missing");
      }
      version["schema"] = {{"openAPIV3Schema", *schema}};
      versions.push_back(std::move(version));
      if (webhook) break;
    }
  }
  if (versions.empty()) return Problem(crd, "spec.versions", "has no served version");
  out["versions"] = std::move(versions);
  return out;
}

std::string SnapshotHash(const Json& snapshot) {
  return apis::klutch::Sha224Base62(machinery::Dump(snapshot));
}

Json WithSnapshot(Json export_spec, const Json& snapshot) {
  if (!export_spec.is_object()) export_spec = Json::object();
  for (const char* key : {"group", "names", "scope", "versions"}) {
    auto it = snapshot.find(key);
    if (it != snapshot.end()) export_spec[key] = *it;
  }
  return export_spec;
}

}  // namespace klutch::bind
