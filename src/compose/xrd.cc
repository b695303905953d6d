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

Json StringSchema() { return Json{{"type", "string"}}; }
Json StringSchema(std::string_view description) {
  return Json{{"type", "string"}, {"description", description}};
}
Json Obj(Json props, Json required = nullptr) {
  Json o{{"type", "object"}, {"properties", std::move(props)}};
  if (!required.is_null()) o["required"] = std::move(required);
  return o;
}
Json Described(Json schema, std::string_view description) {
  schema["description"] = description;
  return schema;
}
Json RefWithName(std::string_view what) {
  return Obj(Json{{"name", StringSchema("Name of the " + std::string(what) + ".")}},
             Json::array({"name"}));
}
Json StringMap(std::string_view description) {
  return Json{
      {"type", "object"}, {"additionalProperties", StringSchema()}, {"description", description}};
}

Json SelectorSchema(std::string_view what) {
  return Obj(
      Json{{"matchLabels", StringMap("Labels the " + std::string(what) +
                                     " must carry, every one of them with the given value.")}},
      Json::array({"matchLabels"}));
}

// The descriptions kubectl explain shows for the fields Crossplane adds: what each field
// does in Crossplane's composition machinery, in this project's words.
Json PublishSchema() {
  return Described(
      Obj(Json{{"name", StringSchema("Name of the connection secret in the store.")},
               {"configRef",
                Json{{"type", "object"},
                     {"default", Json{{"name", "default"}}},
                     {"description",
                      "The StoreConfig that says which store receives the connection "
                      "details; \"default\" when unset."},
                     {"properties", Json{{"name", StringSchema("Name of the StoreConfig.")}}}}},
               {"metadata",
                Described(
                    Obj(Json{{"labels", StringMap("Labels of the published secret.")},
                             {"annotations", StringMap("Annotations of the published secret.")},
                             {"type", StringSchema("Type of the published secret.")}}),
                    "Labels, annotations and type given to the published secret.")}},
          Json::array({"name"})),
      "Publishes the connection details to a secret store chosen by a StoreConfig, in "
      "addition to (or instead of) writeConnectionSecretToRef (an alpha Crossplane "
      "feature).");
}

Json ConditionsSchema() {
  return Json{
      {"type", "array"},
      {"description",
       "The observed state, one condition per type: Synced tells whether the last "
       "reconciliation succeeded, Ready whether the composed resources are ready; each "
       "carries a reason and a message saying why."},
      {"x-kubernetes-list-type", "map"},
      {"x-kubernetes-list-map-keys", Json::array({"type"})},
      {"items",
       Obj(Json{{"lastTransitionTime",
                 Json{{"type", "string"},
                      {"format", "date-time"},
                      {"description", "When the condition last changed its status."}}},
                {"message", StringSchema("Details of the status, for a human.")},
                {"reason",
                 StringSchema("Why the condition has its status, in one CamelCase word.")},
                {"status", StringSchema("True, False or Unknown.")},
                {"type", StringSchema("The kind of condition, e.g. Synced or Ready.")},
                {"observedGeneration",
                 Json{{"type", "integer"},
                      {"format", "int64"},
                      {"description", "The metadata.generation the condition was computed for."}}}},
           Json::array({"lastTransitionTime", "reason", "status", "type"}))}};
}

void AddCommonSpec(Json& props, std::string_view self) {
  const std::string me(self);
  props["compositionRef"] =
      Described(RefWithName("Composition"),
                "The Composition that composes this " + me +
                    ". When unset, Crossplane picks one: the first Composition matching "
                    "compositionSelector, else the XRD's spec.defaultCompositionRef, else the only "
                    "Composition of this type; it then records its choice here. An XRD's "
                    "spec.enforcedCompositionRef overrides it.");
  props["compositionRevisionRef"] =
      Described(RefWithName("CompositionRevision"),
                "The CompositionRevision (a snapshot of the Composition) in use. With "
                "compositionUpdatePolicy Automatic Crossplane moves it to the newest revision; "
                "with Manual it stays until you change it.");
  props["compositionSelector"] =
      Described(SelectorSchema("Composition"),
                "Picks a Composition by its labels when compositionRef is unset; the choice is "
                "then recorded in compositionRef.");
  props["compositionRevisionSelector"] =
      Described(SelectorSchema("CompositionRevision"),
                "Picks the newest CompositionRevision of the chosen Composition that carries these "
                "labels (e.g. a release channel), instead of the newest of all.");
  props["compositionUpdatePolicy"] =
      Json{{"type", "string"},
           {"enum", Json::array({"Automatic", "Manual"})},
           {"description",
            "Whether a new revision of the Composition applies to this " + me +
                " at once (Automatic) or only when you change compositionRevisionRef (Manual)."}};
  props["publishConnectionDetailsTo"] = PublishSchema();
}

struct Kind {
  bool claim;
  std::string default_delete_policy;
  std::string default_update_policy;
};

// The spec fields a claim adds: compositeDeletePolicy, resourceRef, writeConnectionSecretToRef.
void AddClaimSpec(Json& props, const std::string& default_delete_policy) {
  props["compositeDeletePolicy"] =
      Json{{"type", "string"},
           {"enum", Json::array({"Background", "Foreground"})},
           {"default", default_delete_policy},
           {"description",
            "How deleting this claim deletes its composite resource: Background lets it go "
            "after the claim is gone, Foreground keeps the claim until the composite resource "
            "and the resources it composed are gone."}};
  props["resourceRef"] =
      Described(Obj(Json{{"apiVersion", StringSchema("API version of the composite resource.")},
                         {"kind", StringSchema("Kind of the composite resource.")},
                         {"name", StringSchema("Name of the composite resource.")}},
                    Json::array({"apiVersion", "kind", "name"})),
                "The composite resource this claim is bound to; Crossplane sets it when it creates "
                "the composite resource.");
  props["writeConnectionSecretToRef"] =
      Described(RefWithName("Secret"),
                "The Secret, in the claim's namespace, that receives the connection details "
                "(such as host, user and password) of the composed resources.");
}

// The spec fields an XR adds: claimRef, resourceRefs, writeConnectionSecretToRef.
void AddCompositeSpec(Json& props) {
  props["claimRef"] =
      Described(Obj(Json{{"apiVersion", StringSchema("API version of the claim.")},
                         {"kind", StringSchema("Kind of the claim.")},
                         {"name", StringSchema("Name of the claim.")},
                         {"namespace", StringSchema("Namespace of the claim.")}},
                    Json::array({"apiVersion", "kind", "namespace", "name"})),
                "The claim this composite resource is bound to, when a claim created it.");
  props["resourceRefs"] =
      Json{{"type", "array"},
           {"description", "The resources this composite resource composed; set by Crossplane."},
           {"items", Obj(Json{{"apiVersion", StringSchema("API version of the composed resource.")},
                              {"kind", StringSchema("Kind of the composed resource.")},
                              {"name", StringSchema("Name of the composed resource.")}},
                         Json::array({"apiVersion", "kind"}))},
           {"x-kubernetes-list-type", "atomic"}};
  props["writeConnectionSecretToRef"] =
      Described(Obj(Json{{"name", StringSchema("Name of the Secret.")},
                         {"namespace", StringSchema("Namespace of the Secret.")}},
                    Json::array({"name", "namespace"})),
                "The Secret that receives the connection details of the composed resources.");
}

// The status schema of a version: its own fields, conditions and connectionDetails (and an XR's
// claimConditionTypes).
Json XrdStatusSchema(const Json& schema, bool claim) {
  const Json* status_in = Find(schema, {"properties", "status"});
  Json xstatus = status_in ? *status_in : Json::object();
  xstatus["type"] = "object";
  if (!xstatus.contains("properties") || !xstatus["properties"].is_object()) {
    xstatus["properties"] = Json::object();
  }
  xstatus["properties"]["conditions"] = ConditionsSchema();
  xstatus["properties"]["connectionDetails"] = Described(
      Obj(Json{{"lastPublishedTime",
                Json{{"type", "string"},
                     {"format", "date-time"},
                     {"description", "When the connection details were last published."}}}}),
      "Where the publication of connection details stands.");
  if (!claim) {
    xstatus["properties"]["claimConditionTypes"] =
        Json{{"type", "array"},
             {"items", StringSchema()},
             {"x-kubernetes-list-type", "set"},
             {"description", "The condition types the claim copies from this composite resource."}};
  }
  return xstatus;
}

// The version's own printer columns, then SYNCED, READY, CONNECTION-SECRET or COMPOSITION, AGE.
Json XrdPrinterColumns(const Json& v, bool claim) {
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
  if (claim) {
    columns.push_back(Json{{"name", "CONNECTION-SECRET"},
                           {"type", "string"},
                           {"jsonPath", ".spec.writeConnectionSecretToRef.name"}});
  } else {
    columns.push_back(Json{
        {"name", "COMPOSITION"}, {"type", "string"}, {"jsonPath", ".spec.compositionRef.name"}});
  }
  columns.push_back(
      Json{{"name", "AGE"}, {"type", "date"}, {"jsonPath", ".metadata.creationTimestamp"}});
  return columns;
}

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
  AddCommonSpec(props, kind.claim ? "claim" : "composite resource");
  if (!kind.default_update_policy.empty()) {
    props["compositionUpdatePolicy"]["default"] = kind.default_update_policy;
  }
  if (kind.claim) {
    AddClaimSpec(props, kind.default_delete_policy);
  } else {
    AddCompositeSpec(props);
  }
  Json xstatus = XrdStatusSchema(schema, kind.claim);
  Json root = schema;
  root["type"] = "object";
  root["required"] = Json::array({"spec"});
  if (!root.contains("properties") || !root["properties"].is_object()) {
    root["properties"] = Json::object();
  }
  root["properties"]["apiVersion"] = StringSchema();
  root["properties"]["kind"] = StringSchema();
  root["properties"]["metadata"] = Json{{"type", "object"}};
  root["properties"]["spec"] = std::move(xspec);
  root["properties"]["status"] = std::move(xstatus);

  Json columns = XrdPrinterColumns(v, kind.claim);

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
