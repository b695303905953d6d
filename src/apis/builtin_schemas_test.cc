#include "apis/builtin_schemas.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "apis/embedded_files.h"
#include "machinery/schema_cursor.h"

namespace klutch::apis::builtin_schemas_test {
namespace {

using machinery::Json;
using machinery::SchemaCursor;

constexpr std::string_view kRefPrefix = "#/components/schemas/";

// Calls `visit(node, key)` for every JSON value below `node`, with the key it sits under (""
// for array elements).
void Walk(const Json& node, const std::function<void(const Json&, const std::string&)>& visit,
          const std::string& key = "") {
  visit(node, key);
  if (node.is_object()) {
    for (const auto& [k, v] : node.items()) Walk(v, visit, k);
  } else if (node.is_array()) {
    for (const Json& v : node) Walk(v, visit, "");
  }
}

// Every schema node reachable from a definition through the schema keywords (not through
// extension values such as enum members or defaults).
void WalkSchemas(const Json& schema, const std::function<void(const Json&)>& visit) {
  if (!schema.is_object()) return;
  visit(schema);
  if (auto props = schema.find("properties"); props != schema.end() && props->is_object()) {
    for (const auto& [name, prop] : props->items()) WalkSchemas(prop, visit);
  }
  for (const char* key : {"items", "additionalProperties"}) {
    if (auto it = schema.find(key); it != schema.end()) WalkSchemas(*it, visit);
  }
  for (const char* key : {"allOf", "oneOf", "anyOf"}) {
    if (auto it = schema.find(key); it != schema.end() && it->is_array()) {
      for (const Json& sub : *it) WalkSchemas(sub, visit);
    }
  }
}

// Walks `path` from definition `name`: a field name steps into a property (or map value), "[]"
// into list items.
SchemaCursor CursorAt(const std::string& name, const std::vector<std::string>& path) {
  const Json& schemas = BuiltinSchemas();
  auto it = schemas.find(name);
  if (it == schemas.end()) return {};
  SchemaCursor cursor(&*it, &schemas);
  for (const std::string& step : path) cursor = step == "[]" ? cursor.Items() : cursor.Field(step);
  return cursor;
}

TEST(BuiltinDataFiles, EmbedEveryDataFileByteForByte) {
  const std::filesystem::path dir = std::filesystem::path(KLUTCH_SOURCE_DIR) / "src/apis/builtin";
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".yaml") on_disk.insert(entry.path().filename().string());
  }
  std::set<std::string> embedded;
  size_t max_chunks = 0;
  for (const internal::EmbeddedFile& file : internal::BuiltinDataFiles()) {
    embedded.insert(std::string(file.name));
    std::string text;
    for (std::string_view chunk : file.chunks) {
      EXPECT_LE(chunk.size(), 16000u) << file.name;
      text.append(chunk);
    }
    max_chunks = std::max(max_chunks, file.chunks.size());
    std::ifstream in(dir / std::string(file.name), std::ios::binary);
    std::string want((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, want) << file.name << " differs from its source";
  }
  EXPECT_EQ(embedded, on_disk);
  EXPECT_GT(max_chunks, 1u) << "no file exercises chunking";
}

TEST(BuiltinSchemas, ParsesOnceIntoOneObjectAcrossThreads) {
  std::vector<const Json*> seen(4, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&seen, i] { seen[i] = &BuiltinSchemas(); });
  }
  for (auto& t : threads) t.join();
  for (const Json* p : seen) EXPECT_EQ(p, seen[0]);
  ASSERT_TRUE(seen[0]->is_object());
  // Every group file contributed: spot one definition from each.
  for (const char* name : {
           "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
           "io.k8s.api.core.v1.ConfigMap",
           "io.k8s.api.apps.v1.Deployment",
           "io.k8s.api.rbac.v1.ClusterRoleBinding",
           "io.k8s.api.coordination.v1.Lease",
           "io.k8s.api.events.v1.Event",
           "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
           "io.k8s.api.authentication.v1.TokenRequest",
           "io.k8s.api.authorization.v1.SubjectAccessReview",
       }) {
    EXPECT_TRUE(seen[0]->contains(name)) << name;
  }
}

// Klutch's annotations (x-klutch-protobuf, ...) stay out of the schemas the server serves; the
// annotated copy differs from the served one by them alone.
TEST(BuiltinSchemas, ServedSchemasCarryNoKlutchAnnotations) {
  int annotations = 0;
  Json stripped = AnnotatedBuiltinSchemas();
  std::function<void(Json&, bool)> strip = [&](Json& node, bool field_names) {
    if (node.is_array()) {
      for (Json& element : node) strip(element, false);
    }
    if (!node.is_object()) return;
    for (auto it = node.begin(); it != node.end();) {
      if (!field_names && it.key().starts_with("x-klutch-")) {
        ++annotations;
        it = node.erase(it);
        continue;
      }
      strip(it.value(), !field_names && it.key() == "properties");
      ++it;
    }
  };
  strip(stripped, true);
  EXPECT_GT(annotations, 600);
  EXPECT_TRUE(stripped == BuiltinSchemas());
  Walk(BuiltinSchemas(), [](const Json& node, const std::string& key) {
    EXPECT_FALSE(key.starts_with("x-klutch-")) << key;
  });
  EXPECT_EQ(&AnnotatedBuiltinSchemas(), &AnnotatedBuiltinSchemas());
  EXPECT_EQ(AnnotatedBuiltinSchemas()
                .at("io.k8s.api.core.v1.ConfigMap")
                .at("properties")
                .at("immutable")
                .at("x-klutch-protobuf"),
            "4,ptr");
}

TEST(BuiltinSchemas, EveryRefResolvesToADefinition) {
  const Json& schemas = BuiltinSchemas();
  int refs = 0;
  Walk(schemas, [&](const Json& node, const std::string&) {
    if (!node.is_object()) return;
    auto ref = node.find("$ref");
    // JSONSchemaProps has a *property* named $ref; only string values are references.
    if (ref == node.end() || !ref->is_string()) return;
    ++refs;
    const std::string& target = ref->get_ref<const std::string&>();
    ASSERT_TRUE(target.starts_with(kRefPrefix)) << target;
    EXPECT_TRUE(schemas.contains(target.substr(kRefPrefix.size()))) << "dangling " << target;
  });
  EXPECT_GT(refs, 100);
}

TEST(BuiltinSchemas, ReferencesUseTheAllOfWrapperWithNothingButMetadataBeside) {
  for (const auto& [name, schema] : BuiltinSchemas().items()) {
    WalkSchemas(schema, [&, &name = name](const Json& node) {
      auto all = node.find("allOf");
      if (all == node.end()) return;
      ASSERT_TRUE(all->is_array()) << name;
      ASSERT_EQ(all->size(), 1u) << name;
      EXPECT_TRUE((*all)[0].contains("$ref")) << name;
      EXPECT_FALSE(node.contains("type")) << name << ": type beside allOf";
      EXPECT_FALSE(node.contains("properties")) << name << ": properties beside allOf";
    });
  }
}

TEST(BuiltinSchemas, EveryServedKindIsFindableByGroupVersionKind) {
  struct Case {
    std::string group, version, kind, name;
  };
  const std::vector<Case> cases = {
      {"", "v1", "Namespace", "io.k8s.api.core.v1.Namespace"},
      {"", "v1", "ConfigMap", "io.k8s.api.core.v1.ConfigMap"},
      {"", "v1", "Secret", "io.k8s.api.core.v1.Secret"},
      {"", "v1", "ServiceAccount", "io.k8s.api.core.v1.ServiceAccount"},
      {"", "v1", "Event", "io.k8s.api.core.v1.Event"},
      {"", "v1", "Service", "io.k8s.api.core.v1.Service"},
      {"", "v1", "ResourceQuota", "io.k8s.api.core.v1.ResourceQuota"},
      {"", "v1", "LimitRange", "io.k8s.api.core.v1.LimitRange"},
      {"", "v1", "Status", "io.k8s.apimachinery.pkg.apis.meta.v1.Status"},
      {"", "v1", "APIResourceList", "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList"},
      {"apps", "v1", "Deployment", "io.k8s.api.apps.v1.Deployment"},
      {"apps", "v1", "DeleteOptions", "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"},
      {"events.k8s.io", "v1", "Event", "io.k8s.api.events.v1.Event"},
      {"coordination.k8s.io", "v1", "Lease", "io.k8s.api.coordination.v1.Lease"},
      {"rbac.authorization.k8s.io", "v1", "Role", "io.k8s.api.rbac.v1.Role"},
      {"rbac.authorization.k8s.io", "v1", "ClusterRole", "io.k8s.api.rbac.v1.ClusterRole"},
      {"rbac.authorization.k8s.io", "v1", "RoleBinding", "io.k8s.api.rbac.v1.RoleBinding"},
      {"rbac.authorization.k8s.io", "v1", "ClusterRoleBinding",
       "io.k8s.api.rbac.v1.ClusterRoleBinding"},
      {"apiextensions.k8s.io", "v1", "CustomResourceDefinition",
       "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"},
      {"authentication.k8s.io", "v1", "TokenRequest", "io.k8s.api.authentication.v1.TokenRequest"},
      {"authentication.k8s.io", "v1", "TokenReview", "io.k8s.api.authentication.v1.TokenReview"},
      {"authentication.k8s.io", "v1", "SelfSubjectReview",
       "io.k8s.api.authentication.v1.SelfSubjectReview"},
      {"authorization.k8s.io", "v1", "SelfSubjectAccessReview",
       "io.k8s.api.authorization.v1.SelfSubjectAccessReview"},
      {"authorization.k8s.io", "v1", "SelfSubjectRulesReview",
       "io.k8s.api.authorization.v1.SelfSubjectRulesReview"},
      {"authorization.k8s.io", "v1", "SubjectAccessReview",
       "io.k8s.api.authorization.v1.SubjectAccessReview"},
      {"authorization.k8s.io", "v1", "LocalSubjectAccessReview",
       "io.k8s.api.authorization.v1.LocalSubjectAccessReview"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(SchemaNameFor(c.group, c.version, c.kind), c.name)
        << c.group << "/" << c.version << ", Kind=" << c.kind;
  }
  EXPECT_EQ(SchemaNameFor("", "v1", "Pod"), "");
  EXPECT_EQ(SchemaNameFor("apps", "v1beta1", "Deployment"), "");
  EXPECT_EQ(SchemaNameFor("", "v1", "configmap"), "");
}

TEST(BuiltinSchemas, EveryTopLevelKindHasExactlyOneGroupVersionKind) {
  // Only the meta/v1 types every group shares (as in kube-apiserver) list several groups.
  const std::set<std::string> shared = {
      "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
      "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
  };
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  int kinds = 0;
  for (const auto& [name, schema] : BuiltinSchemas().items()) {
    auto gvks = schema.find("x-kubernetes-group-version-kind");
    if (gvks == schema.end()) continue;
    ASSERT_TRUE(gvks->is_array()) << name;
    if (!shared.contains(name)) {
      EXPECT_EQ(gvks->size(), 1u) << name;
      ++kinds;
    }
    for (const Json& gvk : *gvks) {
      ASSERT_TRUE(gvk.contains("group") && gvk.contains("version") && gvk.contains("kind")) << name;
      auto key = std::make_tuple(gvk["group"].get<std::string>(), gvk["version"].get<std::string>(),
                                 gvk["kind"].get<std::string>());
      EXPECT_TRUE(seen.insert(key).second) << name << " repeats a kind";
      EXPECT_EQ(SchemaNameFor(std::get<0>(key), std::get<1>(key), std::get<2>(key)), name);
    }
    if (!shared.contains(name)) {
      // A top-level kind carries its own apiVersion and kind.
      const Json& props = schema.at("properties");
      EXPECT_TRUE(props.contains("kind") && props.contains("apiVersion")) << name;
    }
  }
  EXPECT_EQ(kinds, 25);
}

struct ListCase {
  std::string schema;
  std::vector<std::string> path;
  std::string list_type;
  std::vector<std::string> map_keys;
  std::string patch_strategy;
  std::string merge_key;
};

TEST(BuiltinSchemas, ListMetadataMatchesKubernetes) {
  const std::string pod = "io.k8s.api.core.v1.PodSpec";
  const std::string crd =
      "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition";
  const std::vector<ListCase> cases = {
      {"io.k8s.api.core.v1.ConfigMap", {"metadata", "finalizers"}, "set", {}, "merge", ""},
      {"io.k8s.api.core.v1.Secret",
       {"metadata", "ownerReferences"},
       "map",
       {"uid"},
       "merge",
       "uid"},
      {"io.k8s.api.core.v1.Secret", {"metadata", "managedFields"}, "atomic", {}, "", ""},
      {"io.k8s.api.core.v1.ServiceAccount", {"secrets"}, "map", {"name"}, "merge", "name"},
      {"io.k8s.api.core.v1.ServiceAccount", {"imagePullSecrets"}, "atomic", {}, "", ""},
      {"io.k8s.api.core.v1.Namespace", {"status", "conditions"}, "map", {"type"}, "merge", "type"},
      {"io.k8s.api.core.v1.Namespace", {"spec", "finalizers"}, "atomic", {}, "", ""},
      {"io.k8s.api.core.v1.Service",
       {"spec", "ports"},
       "map",
       {"port", "protocol"},
       "merge",
       "port"},
      {"io.k8s.api.core.v1.Service", {"status", "conditions"}, "map", {"type"}, "merge", "type"},
      {"io.k8s.api.rbac.v1.Role", {"rules"}, "atomic", {}, "", ""},
      {"io.k8s.api.rbac.v1.ClusterRole", {"rules"}, "atomic", {}, "", ""},
      {"io.k8s.api.rbac.v1.RoleBinding", {"subjects"}, "atomic", {}, "", ""},
      {"io.k8s.api.rbac.v1.ClusterRoleBinding", {"subjects"}, "atomic", {}, "", ""},
      {"io.k8s.api.rbac.v1.Role", {"rules", "[]", "verbs"}, "atomic", {}, "", ""},
      {"io.k8s.api.apps.v1.Deployment",
       {"spec", "template", "spec", "containers", "[]", "ports"},
       "map",
       {"containerPort", "protocol"},
       "merge",
       "containerPort"},
      {"io.k8s.api.apps.v1.Deployment",
       {"spec", "template", "spec", "initContainers", "[]", "env"},
       "map",
       {"name"},
       "merge",
       "name"},
      {"io.k8s.api.apps.v1.Deployment", {"status", "conditions"}, "map", {"type"}, "merge", "type"},
      {pod, {"containers"}, "map", {"name"}, "merge", "name"},
      {pod, {"volumes"}, "map", {"name"}, "merge,retainKeys", "name"},
      {pod, {"imagePullSecrets"}, "map", {"name"}, "merge", "name"},
      {pod, {"tolerations"}, "atomic", {}, "", ""},
      {pod, {"containers", "[]", "volumeMounts"}, "map", {"mountPath"}, "merge", "mountPath"},
      {pod, {"containers", "[]", "args"}, "atomic", {}, "", ""},
      {crd, {"spec", "versions"}, "atomic", {}, "", ""},
      {crd, {"status", "conditions"}, "map", {"type"}, "", ""},
      // JSONSchemaProps recurses: properties -> (any name) -> properties -> (any name).
      {crd,
       {"spec", "versions", "[]", "schema", "openAPIV3Schema", "properties", "spec", "properties",
        "size", "x-kubernetes-validations"},
       "map",
       {"rule"},
       "merge",
       "rule"},
  };
  for (const ListCase& c : cases) {
    std::string where = c.schema;
    for (const std::string& step : c.path) where += "." + step;
    SchemaCursor cursor = CursorAt(c.schema, c.path);
    ASSERT_TRUE(cursor.known()) << where;
    EXPECT_EQ(cursor.Type(), "array") << where;
    EXPECT_EQ(cursor.Extension("x-kubernetes-list-type"), c.list_type) << where;
    EXPECT_EQ(cursor.ListMapKeys(), c.map_keys) << where;
    EXPECT_EQ(cursor.Extension("x-kubernetes-patch-strategy"), c.patch_strategy) << where;
    EXPECT_EQ(cursor.Extension("x-kubernetes-patch-merge-key"), c.merge_key) << where;
  }
}

TEST(BuiltinSchemas, AtomicMapsAndPreservedObjectsAreMarked) {
  EXPECT_EQ(
      CursorAt("io.k8s.api.rbac.v1.RoleBinding", {"roleRef"}).Extension("x-kubernetes-map-type"),
      "atomic");
  EXPECT_EQ(CursorAt("io.k8s.api.core.v1.Service", {"spec", "selector"})
                .Extension("x-kubernetes-map-type"),
            "atomic");
  EXPECT_EQ(CursorAt("io.k8s.api.apps.v1.Deployment", {"spec", "selector"})
                .Extension("x-kubernetes-map-type"),
            "atomic");
  EXPECT_EQ(CursorAt("io.k8s.api.core.v1.ConfigMap", {"metadata", "labels"})
                .Extension("x-kubernetes-map-type"),
            "");
  const std::string pod = "io.k8s.api.core.v1.PodSpec";
  EXPECT_TRUE(CursorAt(pod, {"volumes", "[]"}).PreservesUnknownFields());
  EXPECT_TRUE(CursorAt(pod, {"affinity"}).PreservesUnknownFields());
  EXPECT_TRUE(CursorAt(pod, {"containers", "[]", "livenessProbe"}).PreservesUnknownFields());
  EXPECT_FALSE(CursorAt(pod, {"containers", "[]"}).PreservesUnknownFields());
  EXPECT_FALSE(CursorAt("io.k8s.api.core.v1.ConfigMap", {}).PreservesUnknownFields());
}

TEST(BuiltinSchemas, FieldTypesAndFormatsMatchKubernetes) {
  struct Case {
    std::string schema;
    std::vector<std::string> path;
    std::string type, format;
  };
  const std::vector<Case> cases = {
      {"io.k8s.api.core.v1.ConfigMap", {"data", "any-key"}, "string", ""},
      {"io.k8s.api.core.v1.ConfigMap", {"binaryData", "any-key"}, "string", "byte"},
      {"io.k8s.api.core.v1.Secret", {"data", "any-key"}, "string", "byte"},
      {"io.k8s.api.core.v1.ConfigMap", {"immutable"}, "boolean", ""},
      {"io.k8s.api.core.v1.ConfigMap", {"metadata", "creationTimestamp"}, "string", "date-time"},
      {"io.k8s.api.core.v1.ConfigMap", {"metadata", "generation"}, "integer", "int64"},
      {"io.k8s.api.coordination.v1.Lease", {"spec", "renewTime"}, "string", "date-time"},
      {"io.k8s.api.coordination.v1.Lease", {"spec", "leaseDurationSeconds"}, "integer", "int32"},
      {"io.k8s.api.apps.v1.Deployment", {"spec", "replicas"}, "integer", "int32"},
      {"io.k8s.api.core.v1.Service", {"spec", "ports", "[]", "port"}, "integer", "int32"},
      {"io.k8s.api.authentication.v1.TokenRequest",
       {"spec", "expirationSeconds"},
       "integer",
       "int64"},
      {"io.k8s.api.authentication.v1.TokenReview",
       {"status", "user", "extra", "k", "[]"},
       "string",
       ""},
      {"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
       {"maximum"},
       "number",
       "double"},
  };
  for (const Case& c : cases) {
    std::string where = c.schema;
    for (const std::string& step : c.path) where += "." + step;
    SchemaCursor cursor = CursorAt(c.schema, c.path);
    ASSERT_TRUE(cursor.known()) << where;
    EXPECT_EQ(cursor.Type(), c.type) << where;
    EXPECT_EQ(cursor.Extension("format"), c.format) << where;
  }
  // Every integer says how wide it is, as Kubernetes' schemas do.
  for (const auto& [name, schema] : BuiltinSchemas().items()) {
    WalkSchemas(schema, [&, &name = name](const Json& node) {
      if (node.value("type", "") != "integer" || node.size() == 1) return;  // oneOf member
      std::string format = node.value("format", "");
      EXPECT_TRUE(format == "int32" || format == "int64") << name;
    });
  }
}

TEST(BuiltinSchemas, RequiredFieldsEnumsAndDefaults) {
  const Json& s = BuiltinSchemas();
  EXPECT_EQ(s.at("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference").at("required"),
            Json::parse(R"(["apiVersion","kind","name","uid"])"));
  EXPECT_EQ(s.at("io.k8s.api.rbac.v1.RoleRef").at("required"),
            Json::parse(R"(["apiGroup","kind","name"])"));
  EXPECT_EQ(s.at("io.k8s.api.core.v1.PodSpec").at("required"), Json::parse(R"(["containers"])"));
  EXPECT_EQ(s.at("io.k8s.api.core.v1.Event").at("required"),
            Json::parse(R"(["metadata","involvedObject"])"));
  EXPECT_EQ(s.at("io.k8s.api.apps.v1.DeploymentSpec").at("required"),
            Json::parse(R"(["selector","template"])"));
  EXPECT_EQ(CursorAt("io.k8s.api.core.v1.Service", {"spec", "ports", "[]", "protocol"})
                .node()
                ->at("default"),
            "TCP");
  EXPECT_EQ(CursorAt("io.k8s.api.core.v1.Secret", {"type"}).node()->at("default"), "Opaque");
  EXPECT_EQ(CursorAt("io.k8s.api.core.v1.Service", {"spec", "type"}).node()->at("enum"),
            Json::parse(R"(["ClusterIP","ExternalName","LoadBalancer","NodePort"])"));
  EXPECT_EQ(CursorAt("io.k8s.api.core.v1.PodSpec", {"containers", "[]", "imagePullPolicy"})
                .node()
                ->at("enum"),
            Json::parse(R"(["Always","IfNotPresent","Never"])"));

  // Every required field, list-map key and merge key names a declared property.
  for (const auto& [name, schema] : s.items()) {
    WalkSchemas(schema, [&, &name = name](const Json& node) {
      SchemaCursor cursor(&node, &s);
      if (auto req = node.find("required"); req != node.end() && req->is_array()) {
        auto props = node.find("properties");
        for (const Json& field : *req) {
          EXPECT_TRUE(props != node.end() && props->contains(field.get<std::string>()))
              << name << " requires undeclared " << field;
        }
      }
      if (node.value("type", "") != "array") return;
      SchemaCursor items = cursor.Items();
      for (const std::string& key : cursor.ListMapKeys()) {
        EXPECT_TRUE(items.Field(key).known()) << name << ": list-map key " << key;
      }
      std::string merge_key = cursor.Extension("x-kubernetes-patch-merge-key");
      if (!merge_key.empty()) {
        EXPECT_TRUE(items.Field(merge_key).known()) << name << ": merge key " << merge_key;
      }
      if (cursor.Extension("x-kubernetes-list-type") == "map") {
        EXPECT_FALSE(cursor.ListMapKeys().empty()) << name << ": map list without keys";
      }
    });
  }
}

// Descriptions are our own short sentences, not Kubernetes' prose.
TEST(BuiltinSchemas, DescriptionsAreOneShortSentenceEach) {
  int descriptions = 0;
  for (const auto& [name, schema] : BuiltinSchemas().items()) {
    EXPECT_TRUE(schema.contains("description")) << name;
    auto props = schema.find("properties");
    if (props != schema.end()) {
      for (const auto& [field, prop] : props->items()) {
        EXPECT_TRUE(prop.contains("description")) << name << "." << field;
      }
    }
    WalkSchemas(schema, [&, &name = name](const Json& node) {
      auto d = node.find("description");
      if (d == node.end() || !d->is_string()) return;  // a property *named* description
      ++descriptions;
      const std::string& text = d->get_ref<const std::string&>();
      EXPECT_FALSE(text.empty()) << name;
      EXPECT_LE(text.size(), 200u) << name << ": " << text;
      EXPECT_TRUE(text.ends_with(".")) << name << ": " << text;
      EXPECT_EQ(text.find(". "), std::string::npos) << name << ": more than a sentence: " << text;
      EXPECT_EQ(text.find("More info:"), std::string::npos) << name << ": " << text;
      EXPECT_EQ(text.find('\n'), std::string::npos) << name << ": " << text;
    });
  }
  EXPECT_GT(descriptions, 500);
}

}  // namespace
}  // namespace klutch::apis::builtin_schemas_test
