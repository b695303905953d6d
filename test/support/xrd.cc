#include "test/support/xrd.h"

#include <set>
#include <string>

namespace klutch::testing {
namespace {

using machinery::Json;

// Keeps only the keywords of apiextensions JSONSchemaProps.
Json CleanSchema(const Json& schema) {
  static const std::set<std::string> kKeys = {"description",
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

Json RefWithName() {
  return Json{{"type", "object"},
              {"required", Json::array({"name"})},
              {"properties", Json{{"name", Str()}}}};
}

}  // namespace

Json ClaimCrdFromXrd(const Json& xrd) {
  const Json& spec = xrd.at("spec");
  const std::string group = spec.at("group").get<std::string>();
  const Json& claim_names = spec.at("claimNames");
  const std::string plural = claim_names.at("plural").get<std::string>();
  std::string delete_policy = spec.value("defaultCompositeDeletePolicy", "Background");

  Json versions = Json::array();
  for (const auto& v : spec.at("versions")) {
    Json schema = CleanSchema(v.at("schema").at("openAPIV3Schema"));
    Json xspec = schema.contains("properties") && schema["properties"].contains("spec")
                     ? schema["properties"]["spec"]
                     : Json::object();
    xspec["type"] = "object";
    Json& props = xspec["properties"];
    if (!props.is_object()) props = Json::object();
    props["compositionRef"] = RefWithName();
    props["compositionRevisionRef"] = RefWithName();
    props["compositionSelector"] =
        Json{{"type", "object"},
             {"required", Json::array({"matchLabels"})},
             {"properties",
              Json{{"matchLabels", Json{{"type", "object"}, {"additionalProperties", Str()}}}}}};
    props["compositionUpdatePolicy"] =
        Json{{"type", "string"}, {"enum", Json::array({"Automatic", "Manual"})}};
    props["compositeDeletePolicy"] = Json{{"type", "string"},
                                          {"enum", Json::array({"Background", "Foreground"})},
                                          {"default", delete_policy}};
    props["resourceRef"] =
        Json{{"type", "object"},
             {"required", Json::array({"apiVersion", "kind", "name"})},
             {"properties", Json{{"apiVersion", Str()}, {"kind", Str()}, {"name", Str()}}}};
    props["writeConnectionSecretToRef"] = RefWithName();
    props["publishConnectionDetailsTo"] = Json{
        {"type", "object"},
        {"required", Json::array({"name"})},
        {"properties",
         Json{
             {"name", Str()},
             {"configRef", Json{{"type", "object"},
                                {"default", Json{{"name", "default"}}},
                                {"properties", Json{{"name", Str()}}}}},
             {"metadata",
              Json{{"type", "object"},
                   {"properties",
                    Json{{"labels", Json{{"type", "object"}, {"additionalProperties", Str()}}},
                         {"annotations", Json{{"type", "object"}, {"additionalProperties", Str()}}},
                         {"type", Str()}}}}}}}};
    Json xstatus = schema.contains("properties") && schema["properties"].contains("status")
                       ? schema["properties"]["status"]
                       : Json{{"type", "object"}};
    xstatus["type"] = "object";
    Json& sprops = xstatus["properties"];
    if (!sprops.is_object()) sprops = Json::object();
    sprops["conditions"] = Json{
        {"type", "array"},
        {"x-kubernetes-list-type", "map"},
        {"x-kubernetes-list-map-keys", Json::array({"type"})},
        {"items",
         Json{{"type", "object"},
              {"required", Json::array({"lastTransitionTime", "reason", "status", "type"})},
              {"properties",
               Json{{"lastTransitionTime", Json{{"type", "string"}, {"format", "date-time"}}},
                    {"message", Str()},
                    {"reason", Str()},
                    {"status", Str()},
                    {"type", Str()},
                    {"observedGeneration", Json{{"type", "integer"}, {"format", "int64"}}}}}}}};
    sprops["connectionDetails"] =
        Json{{"type", "object"},
             {"properties",
              Json{{"lastPublishedTime", Json{{"type", "string"}, {"format", "date-time"}}}}}};
    Json root = {{"type", "object"},
                 {"required", Json::array({"spec"})},
                 {"properties", Json{{"apiVersion", Str()},
                                     {"kind", Str()},
                                     {"metadata", Json{{"type", "object"}}},
                                     {"spec", xspec},
                                     {"status", xstatus}}}};
    Json columns = Json::array(
        {Json{{"name", "SYNCED"},
              {"type", "string"},
              {"jsonPath", ".status.conditions[?(@.type=='Synced')].status"}},
         Json{{"name", "READY"},
              {"type", "string"},
              {"jsonPath", ".status.conditions[?(@.type=='Ready')].status"}},
         Json{{"name", "CONNECTION-SECRET"},
              {"type", "string"},
              {"jsonPath", ".spec.writeConnectionSecretToRef.name"}},
         Json{{"name", "AGE"}, {"type", "date"}, {"jsonPath", ".metadata.creationTimestamp"}}});
    if (v.contains("additionalPrinterColumns")) {
      for (const auto& c : v["additionalPrinterColumns"]) columns.push_back(c);
    }
    versions.push_back(Json{{"name", v.at("name")},
                            {"served", v.value("served", true)},
                            {"storage", v.value("referenceable", true)},
                            {"schema", Json{{"openAPIV3Schema", root}}},
                            {"subresources", Json{{"status", Json::object()}}},
                            {"additionalPrinterColumns", columns}});
  }
  Json names = {{"kind", claim_names.at("kind")},
                {"plural", plural},
                {"listKind", claim_names.at("kind").get<std::string>() + "List"},
                {"singular", claim_names.value("singular", "")},
                {"categories", Json::array({"claim"})}};
  if (names["singular"] == "") names.erase("singular");
  return Json{
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", Json{{"name", plural + "." + group}}},
      {"spec",
       Json{{"group", group}, {"names", names}, {"scope", "Namespaced"}, {"versions", versions}}}};
}

}  // namespace klutch::testing
