#include "apiserver/openapi.h"

#include <fmt/format.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "apis/builtin_schemas.h"
#include "codec/openapi_v2.h"
#include "core/log.h"
#include "core/strings.h"

namespace klutch::apiserver {
namespace {

constexpr const char* kObjectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
constexpr const char* kRefPrefix = "#/components/schemas/";

std::string Hash(const std::string& body) {
  // FNV-1a, twice with different offsets: an opaque cache key, not a security property.
  uint64_t a = 1469598103934665603ull, b = 1099511628211ull * 7;
  for (unsigned char c : body) {
    a = (a ^ c) * 1099511628211ull;
    b = (b ^ c) * 1099511628211ull;
  }
  return fmt::format("{:016X}{:016X}", a, b);
}

// Adds `name` and everything it references (transitively) from `from` to `out`.
void Closure(const Json& from, const std::string& name, Json& out) {
  if (out.contains(name)) return;
  auto it = from.find(name);
  if (it == from.end()) return;
  out[name] = *it;
  std::function<void(const Json&)> walk = [&](const Json& node) {
    if (node.is_object()) {
      for (const auto& [k, v] : node.items()) {
        if (k == "$ref" && v.is_string()) {
          std::string ref = v.get<std::string>();
          if (ref.starts_with(kRefPrefix)) Closure(from, ref.substr(std::strlen(kRefPrefix)), out);
        } else {
          walk(v);
        }
      }
    } else if (node.is_array()) {
      for (const auto& v : node) walk(v);
    }
  };
  walk(*it);
}

// Reverse-domain definition name for a custom resource: "com.example.v1.Widget".
std::string CustomSchemaName(const ResourceInfo& r) {
  auto parts = core::Split(r.group, '.');
  std::string out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    out += std::string(*it) + ".";
  }
  return out + r.version + "." + r.kind;
}

Json GvkObject(const ResourceInfo& r) {
  return {{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
}

Json Param(const char* name, const char* in, const char* type, bool required = false) {
  Json p = {{"name", name}, {"in", in}, {"schema", {{"type", type}, {"uniqueItems", true}}}};
  if (required) p["required"] = true;
  return p;
}

Json Ref(const std::string& name) { return {{"$ref", std::string(kRefPrefix) + name}}; }

Json Response(const std::string& schema_name) {
  Json content = {{"application/json", {{"schema", Ref(schema_name)}}},
                  {"application/yaml", {{"schema", Ref(schema_name)}}}};
  return {{"description", "OK"}, {"content", content}};
}

Json Operation(const ResourceInfo& r, const char* action, const std::string& op_id,
               const std::string& schema_name, std::vector<Json> params, Json request_body) {
  Json op = {{"operationId", op_id},
             {"x-kubernetes-action", action},
             {"x-kubernetes-group-version-kind", GvkObject(r)},
             {"responses", {{"200", Response(schema_name)}}},
             {"parameters", params}};
  if (!request_body.is_null()) op["requestBody"] = std::move(request_body);
  return op;
}

std::string OpId(const char* verb, const ResourceInfo& r, bool namespaced, const char* suffix) {
  std::string group;
  for (auto part : core::Split(r.group, '.')) {
    if (part.empty()) continue;
    std::string p(part);
    p[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(p[0])));
    group += p;
    break;
  }
  if (group.empty()) group = "Core";
  std::string version = r.version;
  version[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(version[0])));
  return fmt::format("{}{}{}{}{}{}", verb, group, version, namespaced ? "Namespaced" : "", r.kind,
                     suffix);
}

void AddPaths(const ResourceInfo& r, const std::string& schema_name, Json& paths) {
  const std::string base = r.group.empty() ? "/api/v1" : "/apis/" + r.group + "/" + r.version;
  const std::string list_name = schema_name + "List";
  const std::string collection =
      r.namespaced ? base + "/namespaces/{namespace}/" + r.plural : base + "/" + r.plural;
  const std::string item = collection + "/{name}";
  Json ns_param = Param("namespace", "path", "string", true);
  Json name_param = Param("name", "path", "string", true);
  Json write_params =
      Json::array({Param("dryRun", "query", "string"), Param("fieldManager", "query", "string"),
                   Param("fieldValidation", "query", "string")});
  Json body = {{"required", true},
               {"content",
                {{"application/json", {{"schema", Ref(schema_name)}}},
                 {"application/yaml", {{"schema", Ref(schema_name)}}}}}};
  Json patch_schema = Ref("io.k8s.apimachinery.pkg.apis.meta.v1.Patch");
  Json patch_content = {{"application/apply-patch+yaml", {{"schema", patch_schema}}},
                        {"application/json-patch+json", {{"schema", patch_schema}}},
                        {"application/merge-patch+json", {{"schema", patch_schema}}}};
  if (r.strategic_merge) {
    patch_content["application/strategic-merge-patch+json"] = {{"schema", patch_schema}};
  }
  Json patch_body = {{"required", true}, {"content", patch_content}};
  std::vector<Json> patch_params = {
      Param("dryRun", "query", "string"), Param("fieldManager", "query", "string"),
      Param("fieldValidation", "query", "string"), Param("force", "query", "boolean")};
  std::vector<Json> list_params = {
      Param("labelSelector", "query", "string"),   Param("fieldSelector", "query", "string"),
      Param("limit", "query", "integer"),          Param("continue", "query", "string"),
      Param("resourceVersion", "query", "string"), Param("watch", "query", "boolean")};

  Json coll = Json::object();
  coll["parameters"] = r.namespaced ? Json::array({ns_param}) : Json::array();
  coll["get"] =
      Operation(r, "list", OpId("list", r, r.namespaced, ""), list_name, list_params, nullptr);
  coll["post"] =
      Operation(r, "post", OpId("create", r, r.namespaced, ""), schema_name, write_params, body);
  coll["delete"] = Operation(r, "deletecollection", OpId("deleteCollection", r, r.namespaced, ""),
                             "io.k8s.apimachinery.pkg.apis.meta.v1.Status", list_params, nullptr);
  paths[collection] = std::move(coll);

  Json one = Json::object();
  one["parameters"] =
      r.namespaced ? Json::array({ns_param, name_param}) : Json::array({name_param});
  one["get"] = Operation(r, "get", OpId("read", r, r.namespaced, ""), schema_name, {}, nullptr);
  one["put"] =
      Operation(r, "put", OpId("replace", r, r.namespaced, ""), schema_name, write_params, body);
  one["patch"] = Operation(r, "patch", OpId("patch", r, r.namespaced, ""), schema_name,
                           patch_params, patch_body);
  one["delete"] = Operation(
      r, "delete", OpId("delete", r, r.namespaced, ""),
      "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
      {Param("dryRun", "query", "string"), Param("propagationPolicy", "query", "string")}, nullptr);
  paths[item] = std::move(one);

  if (r.namespaced) {
    Json all = Json::object();
    all["get"] = Operation(r, "list", OpId("list", r, false, "ForAllNamespaces"), list_name,
                           list_params, nullptr);
    paths[base + "/" + r.plural] = std::move(all);
  }
  if (r.has_status) {
    Json status = Json::object();
    status["parameters"] = paths[item]["parameters"];  // `one` was moved into it
    status["get"] =
        Operation(r, "get", OpId("read", r, r.namespaced, "Status"), schema_name, {}, nullptr);
    status["put"] = Operation(r, "put", OpId("replace", r, r.namespaced, "Status"), schema_name,
                              write_params, body);
    status["patch"] = Operation(r, "patch", OpId("patch", r, r.namespaced, "Status"), schema_name,
                                patch_params, patch_body);
    paths[item + "/status"] = std::move(status);
  }
}

Json CustomSchema(const ResourceInfo& r) {
  Json schema = Json::object();
  if (r.schemas && r.schemas->contains(r.schema_name)) schema = (*r.schemas)[r.schema_name];
  if (!schema.contains("type")) schema["type"] = "object";
  Json& props = schema["properties"];
  if (!props.is_object()) props = Json::object();
  props["apiVersion"] = {
      {"type", "string"},
      {"description", "The versioned schema of this representation of an object."}};
  props["kind"] = {{"type", "string"},
                   {"description", "The REST resource this object represents."}};
  props["metadata"] = {{"allOf", Json::array({Ref(kObjectMeta)})},
                       {"description", "Standard object metadata."}};
  schema["x-kubernetes-group-version-kind"] = Json::array({GvkObject(r)});
  return schema;
}

// Swagger 2.0 form of a v3 schema: `#/definitions/` references, `$ref` with siblings instead
// of the allOf wrapper, and no v3-only keywords.
Json ToV2Schema(const Json& node) {
  if (node.is_array()) {
    Json out = Json::array();
    for (const auto& v : node) out.push_back(ToV2Schema(v));
    return out;
  }
  if (!node.is_object()) return node;
  Json out = Json::object();
  for (const auto& [k, v] : node.items()) {
    if (k == "nullable" || k == "oneOf" || k == "anyOf" || k == "not") continue;
    if (k == "$ref" && v.is_string()) {
      std::string ref = v.get<std::string>();
      if (ref.starts_with(kRefPrefix)) ref = "#/definitions/" + ref.substr(std::strlen(kRefPrefix));
      out[k] = ref;
    } else if (k == "properties" || k == "x-kubernetes-validations" || k == "example" ||
               k == "enum" || k == "default") {
      if (k == "properties" && v.is_object()) {
        Json props = Json::object();
        for (const auto& [pk, pv] : v.items()) props[pk] = ToV2Schema(pv);
        out[k] = std::move(props);
      } else {
        out[k] = v;
      }
    } else {
      out[k] = ToV2Schema(v);
    }
  }
  if (out.contains("allOf") && out["allOf"].is_array() && out["allOf"].size() == 1 &&
      out["allOf"][0].contains("$ref") && !out.contains("properties")) {
    out["$ref"] = out["allOf"][0]["$ref"];
    out.erase("allOf");
  }
  return out;
}

Json ToV2Parameter(const Json& p) {
  Json out = {{"name", p.value("name", "")}, {"in", p.value("in", "")}};
  if (p.value("required", false)) out["required"] = true;
  if (const Json* schema = machinery::Find(p, {"schema"}); schema && schema->is_object()) {
    for (const auto& [k, v] : schema->items()) out[k] = v;
  }
  if (p.contains("description")) out["description"] = p["description"];
  return out;
}

Json ToV2Operation(const Json& op) {
  Json out = Json::object();
  for (const auto& [k, v] : op.items()) {
    if (k == "parameters") {
      Json params = Json::array();
      for (const auto& p : v) params.push_back(ToV2Parameter(p));
      out["parameters"] = std::move(params);
    } else if (k == "requestBody") {
      Json consumes = Json::array();
      Json schema;
      const Json content = v.value("content", Json::object());
      for (const auto& [type, media] : content.items()) {
        consumes.push_back(type);
        if (schema.is_null() && media.contains("schema")) schema = ToV2Schema(media["schema"]);
      }
      out["consumes"] = std::move(consumes);
      Json body = {{"name", "body"},
                   {"in", "body"},
                   {"required", true},
                   {"schema", schema.is_null() ? Json{{"type", "object"}} : schema}};
      if (!out.contains("parameters")) out["parameters"] = Json::array();
      out["parameters"].push_back(std::move(body));
    } else if (k == "responses") {
      Json responses = Json::object();
      for (const auto& [code, resp] : v.items()) {
        Json r = {{"description", resp.value("description", "OK")}};
        const Json* media = machinery::Find(resp, {"content", "application/json", "schema"});
        if (media) r["schema"] = ToV2Schema(*media);
        responses[code] = std::move(r);
      }
      out["responses"] = std::move(responses);
      out["produces"] = Json::array({"application/json", "application/yaml"});
      out["schemes"] = Json::array({"https"});
    } else {
      out[k] = v;
    }
  }
  return out;
}

}  // namespace

std::shared_ptr<const OpenApi::Document> OpenApi::V2Json() { return Current()->v2_json; }
std::shared_ptr<const OpenApi::Document> OpenApi::V2Protobuf() { return Current()->v2_protobuf; }

std::shared_ptr<const OpenApi::Snapshot> OpenApi::Current() {
  core::MutexLock lock(mu_);
  uint64_t gen = registry_.generation();
  if (snapshot_ && snapshot_->generation == gen) return snapshot_;

  const Json& builtin = apis::BuiltinSchemas();
  std::map<std::string, Json> docs;  // path -> document
  for (const auto& r : registry_.All()) {
    std::string path =
        r->group.empty() ? "api/" + r->version : "apis/" + r->group + "/" + r->version;
    Json& doc = docs[path];
    if (doc.is_null()) {
      doc = {{"openapi", "3.0.0"},
             {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0"}}},
             {"paths", Json::object()},
             {"components", {{"schemas", Json::object()}}}};
    }
    Json& schemas = doc["components"]["schemas"];
    std::string schema_name;
    if (r->custom) {
      schema_name = CustomSchemaName(*r);
      schemas[schema_name] = CustomSchema(*r);
      Closure(builtin, kObjectMeta, schemas);
      AddPaths(*r, schema_name, doc["paths"]);
    } else {
      schema_name = r->schema_name;
      if (schema_name.empty()) continue;
      Closure(builtin, schema_name, schemas);
      AddPaths(*r, schema_name, doc["paths"]);
    }
    // The list kind, so list operations resolve.
    schemas[schema_name + "List"] = {
        {"type", "object"},
        {"description", r->list_kind + " is a list of " + r->kind + " objects."},
        {"properties",
         {{"apiVersion", {{"type", "string"}}},
          {"kind", {{"type", "string"}}},
          {"items", {{"type", "array"}, {"items", Ref(schema_name)}}},
          {"metadata",
           {{"allOf", Json::array({Ref("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")})}}}}},
        {"x-kubernetes-group-version-kind",
         Json::array({{{"group", r->group}, {"version", r->version}, {"kind", r->list_kind}}})}};
    Closure(builtin, "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta", schemas);
    for (const char* extra : {"io.k8s.apimachinery.pkg.apis.meta.v1.Status",
                              "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
                              "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"}) {
      Closure(builtin, extra, schemas);
    }
  }
  auto snap = std::make_shared<Snapshot>();
  snap->generation = gen;
  Json root = {{"paths", Json::object()}};
  for (auto& [path, doc] : docs) {
    auto d = std::make_shared<Document>();
    d->body = machinery::Dump(doc);
    d->hash = Hash(d->body);
    root["paths"][path] = {{"serverRelativeURL", "/openapi/v3/" + path + "?hash=" + d->hash}};
    snap->docs[path] = std::move(d);
  }
  snap->root = machinery::Dump(root);

  // One Swagger 2.0 document for /openapi/v2 (older kubectl versions validate with it).
  Json v2 = {{"swagger", "2.0"},
             {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0"}}},
             {"paths", Json::object()},
             {"definitions", Json::object()}};
  for (auto& [path, doc] : docs) {
    for (const auto& [p, item] : doc["paths"].items()) {
      Json v2item = Json::object();
      for (const auto& [verb, op] : item.items()) {
        if (verb == "parameters") {
          Json params = Json::array();
          for (const auto& prm : op) params.push_back(ToV2Parameter(prm));
          v2item["parameters"] = std::move(params);
        } else {
          v2item[verb] = ToV2Operation(op);
        }
      }
      v2["paths"][p] = std::move(v2item);
    }
    for (const auto& [name, schema] : doc["components"]["schemas"].items()) {
      if (!v2["definitions"].contains(name)) v2["definitions"][name] = ToV2Schema(schema);
    }
  }
  auto v2json = std::make_shared<Document>();
  v2json->body = machinery::Dump(v2);
  v2json->hash = Hash(v2json->body);
  snap->v2_json = v2json;
  auto pb = codec::EncodeOpenApiV2Protobuf(v2);
  if (pb.ok()) {
    auto v2pb = std::make_shared<Document>();
    v2pb->body = std::move(pb).value();
    v2pb->hash = Hash(v2pb->body);
    snap->v2_protobuf = v2pb;
  } else {
    KLUTCH_LOG(kError, "apiserver", "encoding OpenAPI v2 as protobuf: {}", pb.status().message());
  }
  snapshot_ = snap;
  return snap;
}

std::string OpenApi::Root() { return Current()->root; }

std::shared_ptr<const OpenApi::Document> OpenApi::ForPath(std::string_view path) {
  auto snap = Current();
  auto it = snap->docs.find(path);
  if (it == snap->docs.end()) return nullptr;
  return it->second;
}

}  // namespace klutch::apiserver
