#include "compose/xrd.h"

#include <set>
#include <string>

#include "machinery/object.h"

namespace klutch::compose {
namespace {

using machinery::Find;
using machinery::GetString;

// Keeps only the keywords of apiextensions JSONSchemaProps (and x-kubernetes-*).
Json CleanSchema(const Json& schema) {
  static const std::set<std::string, std::less<>> kKeys = {"description",
                                                           "type",
                                                           "format",
                                                           "title",
                                                           "default",
                                                           "maximum",
                                                           "exclusiveMaximum",
                                                           "minimum",
                                                           "exclusiveMinimum",
                                                           "maxLength",
                                                           "minLength",
                                                           "pattern",
                                                           "maxItems",
                                                           "minItems",
                                                           "uniqueItems",
                                                           "multipleOf",
                                                           "enum",
                                                           "maxProperties",
                                                           "minProperties",
                                                           "required",
                                                           "items",
                                                           "allOf",
                                                           "oneOf",
                                                           "anyOf",
                                                           "not",
                                                           "properties",
                                                           "additionalProperties",
                                                           "nullable",
                                                           "example",
                                                           "externalDocs"};
  if (!schema.is_object()) return schema;
  Json out = Json::object();
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    const std::string& k = it.key();
    if (!kKeys.count(k) && !k.starts_with("x-kubernetes-")) continue;
    if (k == "properties" && it->is_object()) {
      Json props = Json::object();
      for (auto p = it->begin(); p != it->end(); ++p) props[p.key()] = CleanSchema(p.value());
      out[k] = std::move(props);
    } else if ((k == "items" || k == "additionalProperties" || k == "not") && it->is_object()) {
      out[k] = CleanSchema(*it);
    } else if ((k == "allOf" || k == "anyOf" || k == "oneOf") && it->is_array()) {
      Json list = Json::array();
      for (const auto& s : *it) list.push_back(CleanSchema(s));
      out[k] = std::move(list);
    } else {
      out[k] = *it;
    }
  }
  return out;
}

Json Str() { return Json{{"type", "string"}}; }
Json Obj(Json props, Json required = nullptr) {
  Json o{{"type", "object"}, {"properties", std::move(props)}};
  if (!required.is_null()) o["required"] = std::move(required);
  return o;
}
Json RefWithName() { return Obj(Json{{"name", Str()}}, Json::array({"name"})); }
Json StringMap() { return Json{{"type", "object"}, {"additionalProperties", Str()}}; }

Json SelectorSchema() {
  return Obj(Json{{"matchLabels", StringMap()}}, Json::array({"matchLabels"}));
}

Json PublishSchema() {
  return Obj(
      Json{{"name", Str()},
           {"configRef", Json{{"type", "object"},
                              {"default", Json{{"name", "default"}}},
                              {"properties", Json{{"name", Str()}}}}},
           {"metadata",
            Obj(Json{{"labels", StringMap()}, {"annotations", StringMap()}, {"type", Str()}})}},
      Json::array({"name"}));
}

Json ConditionsSchema() {
  return Json{
      {"type", "array"},
      {"x-kubernetes-list-type", "map"},
      {"x-kubernetes-list-map-keys", Json::array({"type"})},
      {"items", Obj(Json{{"lastTransitionTime", Json{{"type", "string"}, {"format", "date-time"}}},
                         {"message", Str()},
                         {"reason", Str()},
                         {"status", Str()},
                         {"type", Str()},
                         {"observedGeneration", Json{{"type", "integer"}, {"format", "int64"}}}},
                    Json::array({"lastTransitionTime", "reason", "status", "type"}))}};
}

void AddCommonSpec(Json& props) {
  props["compositionRef"] = RefWithName();
  props["compositionRevisionRef"] = RefWithName();
  props["compositionSelector"] = SelectorSchema();
  props["compositionRevisionSelector"] = SelectorSchema();
  props["compositionUpdatePolicy"] =
      Json{{"type", "string"}, {"enum", Json::array({"Automatic", "Manual"})}};
  props["publishConnectionDetailsTo"] = PublishSchema();
}

struct Kind {
  bool claim;
  std::string default_delete_policy;
  std::string default_update_policy;
};

core::Result<Json> Version(const Json& v, size_t index, const Kind& kind) {
  const std::string where = "spec.versions[" + std::to_string(index) + "]";
  std::string name = GetString(v, {"name"});
  if (name.empty()) return core::BadRequest(where + ".name: Required value");
  const Json* raw = Find(v, {"schema", "openAPIV3Schema"});
  Json schema = raw ? CleanSchema(*raw) : Json::object();
  const Json* spec_in = Find(schema, {"properties", "spec"});
  Json xspec = spec_in ? *spec_in : Json::object();
  xspec["type"] = "object";
  if (!xspec.contains("properties") || !xspec["properties"].is_object()) {
    xspec["properties"] = Json::object();
  }
  Json& props = xspec["properties"];
  AddCommonSpec(props);
  if (!kind.default_update_policy.empty()) {
    props["compositionUpdatePolicy"]["default"] = kind.default_update_policy;
  }
  if (kind.claim) {
    props["compositeDeletePolicy"] = Json{{"type", "string"},
                                          {"enum", Json::array({"Background", "Foreground"})},
                                          {"default", kind.default_delete_policy}};
    props["resourceRef"] = Obj(Json{{"apiVersion", Str()}, {"kind", Str()}, {"name", Str()}},
                               Json::array({"apiVersion", "kind", "name"}));
    props["writeConnectionSecretToRef"] = RefWithName();
  } else {
    props["claimRef"] =
        Obj(Json{{"apiVersion", Str()}, {"kind", Str()}, {"name", Str()}, {"namespace", Str()}},
            Json::array({"apiVersion", "kind", "namespace", "name"}));
    props["resourceRefs"] =
        Json{{"type", "array"},
             {"items", Obj(Json{{"apiVersion", Str()}, {"kind", Str()}, {"name", Str()}},
                           Json::array({"apiVersion", "kind"}))},
             {"x-kubernetes-list-type", "atomic"}};
    props["writeConnectionSecretToRef"] =
        Obj(Json{{"name", Str()}, {"namespace", Str()}}, Json::array({"name", "namespace"}));
  }
  const Json* status_in = Find(schema, {"properties", "status"});
  Json xstatus = status_in ? *status_in : Json::object();
  xstatus["type"] = "object";
  if (!xstatus.contains("properties") || !xstatus["properties"].is_object()) {
    xstatus["properties"] = Json::object();
  }
  xstatus["properties"]["conditions"] = ConditionsSchema();
  xstatus["properties"]["connectionDetails"] =
      Obj(Json{{"lastPublishedTime", Json{{"type", "string"}, {"format", "date-time"}}}});
  if (!kind.claim) {
    xstatus["properties"]["claimConditionTypes"] =
        Json{{"type", "array"}, {"items", Str()}, {"x-kubernetes-list-type", "set"}};
  }
  Json root = schema;
  root["type"] = "object";
  root["required"] = Json::array({"spec"});
  if (!root.contains("properties") || !root["properties"].is_object()) {
    root["properties"] = Json::object();
  }
  root["properties"]["apiVersion"] = Str();
  root["properties"]["kind"] = Str();
  root["properties"]["metadata"] = Json{{"type", "object"}};
  root["properties"]["spec"] = std::move(xspec);
  root["properties"]["status"] = std::move(xstatus);

  Json columns = Json::array();
  if (const Json* own = Find(v, {"additionalPrinterColumns"}); own && own->is_array()) {
    for (const auto& c : *own) columns.push_back(c);
  }
  columns.push_back(Json{{"name", "SYNCED"},
                         {"type", "string"},
                         {"jsonPath", ".status.conditions[?(@.type=='Synced')].status"}});
  columns.push_back(Json{{"name", "READY"},
                         {"type", "string"},
                         {"jsonPath", ".status.conditions[?(@.type=='Ready')].status"}});
  if (kind.claim) {
    columns.push_back(Json{{"name", "CONNECTION-SECRET"},
                           {"type", "string"},
                           {"jsonPath", ".spec.writeConnectionSecretToRef.name"}});
  } else {
    columns.push_back(Json{
        {"name", "COMPOSITION"}, {"type", "string"}, {"jsonPath", ".spec.compositionRef.name"}});
  }
  columns.push_back(
      Json{{"name", "AGE"}, {"type", "date"}, {"jsonPath", ".metadata.creationTimestamp"}});

  const Json* served = Find(v, {"served"});
  const Json* referenceable = Find(v, {"referenceable"});
  Json out{{"name", name},
           {"served", served && served->is_boolean() ? *served : Json(true)},
           {"storage", referenceable && referenceable->is_boolean() ? *referenceable : Json(true)},
           {"schema", Json{{"openAPIV3Schema", std::move(root)}}},
           {"subresources", Json{{"status", Json::object()}}},
           {"additionalPrinterColumns", std::move(columns)}};
  if (const Json* d = Find(v, {"deprecated"}); d && d->is_boolean()) out["deprecated"] = *d;
  if (const Json* w = Find(v, {"deprecationWarning"}); w && w->is_string()) {
    out["deprecationWarning"] = *w;
  }
  return out;
}

core::Result<Json> Generate(const Json& xrd, const Json& names_in, const Kind& kind) {
  const std::string group = GetString(xrd, {"spec", "group"});
  const std::string field = kind.claim ? "spec.claimNames" : "spec.names";
  std::string plural = GetString(names_in, {"plural"});
  std::string kind_name = GetString(names_in, {"kind"});
  if (kind_name.empty()) return core::BadRequest(field + ".kind: Required value");
  if (plural.empty()) return core::BadRequest(field + ".plural: Required value");
  const Json* versions = Find(xrd, {"spec", "versions"});
  if (!versions || !versions->is_array() || versions->empty()) {
    return core::BadRequest("spec.versions: Required value: an XRD needs at least one version");
  }
  Json out_versions = Json::array();
  size_t i = 0;
  for (const Json& v : *versions) {
    auto version = Version(v, i++, kind);
    if (!version.ok()) return version.status();
    out_versions.push_back(*std::move(version));
  }
  Json names{{"kind", kind_name}, {"plural", plural}};
  std::string list_kind = GetString(names_in, {"listKind"});
  names["listKind"] = list_kind.empty() ? kind_name + "List" : list_kind;
  if (std::string s = GetString(names_in, {"singular"}); !s.empty()) names["singular"] = s;
  if (const Json* sn = Find(names_in, {"shortNames"}); sn && sn->is_array()) {
    names["shortNames"] = *sn;
  }
  Json categories = Json::array();
  if (const Json* c = Find(names_in, {"categories"}); c && c->is_array()) categories = *c;
  std::string category = kind.claim ? "claim" : "composite";
  if (std::find(categories.begin(), categories.end(), Json(category)) == categories.end()) {
    categories.push_back(category);
  }
  names["categories"] = std::move(categories);

  Json owner{{"apiVersion", "apiextensions.crossplane.io/v1"},
             {"kind", "CompositeResourceDefinition"},
             {"name", machinery::Name(xrd)},
             {"controller", true},
             {"blockOwnerDeletion", true}};
  if (std::string uid = machinery::Uid(xrd); !uid.empty()) owner["uid"] = uid;
  Json metadata{{"name", plural + "." + group},
                {"labels", Json{{std::string(kLabelXrdName), machinery::Name(xrd)}}}};
  if (owner.contains("uid")) metadata["ownerReferences"] = Json::array({owner});
  return Json{{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", std::move(metadata)},
              {"spec", Json{{"group", group},
                            {"names", std::move(names)},
                            {"scope", kind.claim ? "Namespaced" : "Cluster"},
                            {"versions", std::move(out_versions)}}}};
}

}  // namespace

core::Result<GeneratedCrds> CrdsForXrd(const Json& xrd) {
  if (GetString(xrd, {"spec", "group"}).empty()) {
    return core::BadRequest("spec.group: Required value");
  }
  const Json* names = Find(xrd, {"spec", "names"});
  if (!names) return core::BadRequest("spec.names: Required value");
  std::string delete_policy = GetString(xrd, {"spec", "defaultCompositeDeletePolicy"});
  if (delete_policy.empty()) delete_policy = "Background";
  std::string update_policy = GetString(xrd, {"spec", "defaultCompositionUpdatePolicy"});
  if (update_policy.empty()) update_policy = "Automatic";
  GeneratedCrds out;
  auto xr = Generate(xrd, *names, Kind{false, delete_policy, update_policy});
  if (!xr.ok()) return xr.status();
  out.composite = *std::move(xr);
  if (const Json* claim_names = Find(xrd, {"spec", "claimNames"}); claim_names) {
    auto claim = Generate(xrd, *claim_names, Kind{true, delete_policy, update_policy});
    if (!claim.ok()) return claim.status();
    out.claim = *std::move(claim);
  }
  return out;
}

}  // namespace klutch::compose
