// Our Crossplane CRDs (src/apis/crossplane/) as the API server takes them: each is a CRD the API
// server accepts, with upstream's names, versions and columns; Klutch's own XRDs and Compositions
// (read from ../shared/conformance at run time) and the Objects those Compositions compose pass
// through pruning, defaulting and validation unchanged; malformed objects are rejected naming the
// field. Also checks the manifests of deploy/manager/ parse and keep their promises (RBAC
// wildcards only where documented, probes on the health port).
#include "apis/crossplane_crds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "apis/builtin_schemas.h"
#include "apiserver/crd.h"
#include "apiserver/resource.h"
#include "machinery/json.h"
#include "machinery/validation.h"
#include "schema/structural.h"
#include "schema/validation_rules.h"
#include "test/support/process.h"

namespace klutch::apis::crossplane_crds_test {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

const fs::path kKlutchApiDir =
    fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/crossplane-api/api";
const fs::path kManifestDir = fs::path(KLUTCH_SOURCE_DIR) / "deploy/manager";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Parses one YAML document; on failure records a test failure naming `what` and returns null.
Json Parse(std::string_view text, const std::string& what) {
  core::Result<Json> parsed = machinery::ParseYaml(text);
  if (!parsed.ok()) {
    ADD_FAILURE() << what << ": " << parsed.status().message();
    return Json();
  }
  return *std::move(parsed);
}

Json Crd(std::string_view file) {
  std::string text = CrossplaneCrdYaml(file);
  EXPECT_FALSE(text.empty()) << file << " is not embedded";
  return Parse(text, std::string(file));
}

// The served resource of `version` of the CRD in `file`, as the API server builds it.
apiserver::ResourcePtr Resource(std::string_view file, std::string_view version) {
  core::Result<std::vector<apiserver::ResourcePtr>> resources =
      apiserver::ResourcesForCrd(Crd(file));
  if (!resources.ok()) {
    ADD_FAILURE() << file << ": " << resources.status().message();
    return nullptr;
  }
  for (const apiserver::ResourcePtr& r : *resources) {
    if (r->version == version) return r;
  }
  ADD_FAILURE() << file << " serves no version " << version;
  return nullptr;
}

// Removes every `description` keyword below `node` (keys directly under `properties` are field
// names and kept).
void StripDescriptions(Json& node, bool field_names = false) {
  if (node.is_array()) {
    for (Json& element : node) StripDescriptions(element);
    return;
  }
  if (!node.is_object()) return;
  if (!field_names) node.erase("description");
  for (auto it = node.begin(); it != node.end(); ++it) {
    StripDescriptions(it.value(), !field_names && it.key() == "properties");
  }
}

std::string Fields(const std::vector<core::Cause>& causes) {
  std::string out;
  for (const core::Cause& c : causes) out += "\n  " + c.field + ": " + c.message;
  return out;
}

// What a create (old == nullptr) or update of `object` through the API server leaves: the object
// as stored, the unknown fields it dropped and the validation errors, in the order of
// RestStorage::ValidateObject (prune, metadata, defaults, schema, CEL rules).
struct Admission {
  Json object;
  std::vector<std::string> pruned;
  std::vector<core::Cause> causes;
};

Admission Admit(const apiserver::ResourceInfo& r, Json object, const Json* old = nullptr) {
  static const machinery::SchemaCursor kObjectMeta = [] {
    const Json& schemas = BuiltinSchemas();
    auto it = schemas.find("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    return it == schemas.end() ? machinery::SchemaCursor()
                               : machinery::SchemaCursor(&*it, &schemas);
  }();
  Admission out;
  machinery::SchemaCursor schema = r.Schema();
  EXPECT_TRUE(schema.known()) << r.kind;
  schema::PruneUnknownFields(object, schema, kObjectMeta, out.pruned);
  machinery::ValidateObjectMeta(object.value("metadata", Json::object()), r.namespaced, r.name_rule,
                                out.causes);
  schema::ApplyDefaults(object, schema);
  schema::Validate(object, schema, out.causes);
  if (r.rules && !r.rules->empty() && !schema::HasBlockingError(out.causes)) {
    r.rules->Validate(object, old, out.causes);
  }
  out.object = std::move(object);
  return out;
}

// Every document of every *.yaml below `dir`, with its path relative to `dir`.
std::vector<std::pair<std::string, Json>> LoadTree(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<std::pair<std::string, Json>> out;
  for (const fs::path& path : files) {
    const std::string name = fs::relative(path, dir).string();
    for (const std::string& doc : testing::SplitYamlDocuments(ReadFile(path))) {
      Json object = Parse(doc, name);
      if (object.is_object()) out.emplace_back(name, std::move(object));
    }
  }
  return out;
}

std::vector<std::pair<std::string, Json>> KlutchObjectsOfKind(std::string_view kind) {
  std::vector<std::pair<std::string, Json>> out;
  for (auto& [name, object] : LoadTree(kKlutchApiDir)) {
    if (object.value("apiVersion", "") == "apiextensions.crossplane.io/v1" &&
        object.value("kind", "") == kind) {
      out.emplace_back(name, std::move(object));
    }
  }
  return out;
}

Json KlutchComposition(std::string_view relative_path) {
  return Parse(ReadFile(kKlutchApiDir / relative_path), std::string(relative_path));
}

// ---- the embedded files ----

TEST(CrossplaneCrdYaml, ListsEveryFileSortedAndUnknownNamesAreEmpty) {
  const std::vector<std::string> files = CrossplaneCrdFiles();
  EXPECT_EQ(files,
            (std::vector<std::string>{"compositeresourcedefinitions.yaml",
                                      "compositionrevisions.yaml", "compositions.yaml",
                                      "functions.yaml", "objects.yaml", "providerconfigs.yaml"}));
  EXPECT_TRUE(std::is_sorted(files.begin(), files.end()));
  for (std::string_view constant :
       {kCompositeResourceDefinitionsCrdFile, kCompositionsCrdFile, kCompositionRevisionsCrdFile,
        kFunctionsCrdFile, kObjectsCrdFile, kProviderConfigsCrdFile}) {
    EXPECT_NE(std::find(files.begin(), files.end(), constant), files.end()) << constant;
  }
  EXPECT_EQ(CrossplaneCrdYaml("no-such-file.yaml"), "");
  EXPECT_EQ(CrossplaneCrdYaml(""), "");
}

// Upstream's facts, one row per CRD: what kubectl and Crossplane's clients see.
struct CrdFacts {
  std::string_view file;
  std::string name;
  std::string kind;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  // name -> storage, in order; all served.
  std::vector<std::pair<std::string, bool>> versions;
  std::vector<std::string> columns;
  bool status_subresource;
  size_t rules;  // CEL rules per version
};

const std::vector<CrdFacts>& AllCrdFacts() {
  static const std::vector<CrdFacts> kFacts = {
      {kCompositeResourceDefinitionsCrdFile,
       "compositeresourcedefinitions.apiextensions.crossplane.io",
       "CompositeResourceDefinition",
       {"xrd", "xrds"},
       {"crossplane"},
       {{"v1", true}},
       {"ESTABLISHED", "OFFERED", "AGE"},
       true,
       4},  // group, names, claimNames, enforcedCompositionRef immutable
      {kCompositionsCrdFile,
       "compositions.apiextensions.crossplane.io",
       "Composition",
       {"comp"},
       {"crossplane"},
       {{"v1", true}},
       {"XR-KIND", "XR-APIVERSION", "AGE"},
       false,
       1},  // compositeTypeRef immutable
      {kCompositionRevisionsCrdFile,
       "compositionrevisions.apiextensions.crossplane.io",
       "CompositionRevision",
       {"comprev"},
       {"crossplane"},
       {{"v1", true}, {"v1beta1", false}},
       {"REVISION", "XR-KIND", "XR-APIVERSION", "AGE"},
       true,
       1},
      {kFunctionsCrdFile,
       "functions.pkg.crossplane.io",
       "Function",
       {},
       {"crossplane", "pkg"},
       {{"v1", true}, {"v1beta1", false}},
       {"INSTALLED", "HEALTHY", "PACKAGE", "AGE"},
       true,
       0},
      {kObjectsCrdFile,
       "objects.kubernetes.crossplane.io",
       "Object",
       {},
       {"crossplane", "managed", "kubernetes"},
       {{"v1alpha1", true}},
       {"KIND", "APIVERSION", "METANAME", "METANAMESPACE", "PROVIDERCONFIG", "SYNCED", "READY",
        "AGE"},
       true,
       0},
      {kProviderConfigsCrdFile,
       "providerconfigs.kubernetes.crossplane.io",
       "ProviderConfig",
       {},
       {"crossplane", "provider", "kubernetes"},
       {{"v1alpha1", true}},
       {"AGE", "SECRET-NAME"},
       true,
       0},
  };
  return kFacts;
}

TEST(CrossplaneCrdYaml, EveryCrdIsAcceptedByTheApiServerWithUpstreamsFacts) {
  ASSERT_EQ(AllCrdFacts().size(), CrossplaneCrdFiles().size());
  for (const CrdFacts& want : AllCrdFacts()) {
    SCOPED_TRACE(want.file);
    Json crd = Crd(want.file);
    ASSERT_TRUE(crd.is_object());
    EXPECT_EQ(crd["apiVersion"], "apiextensions.k8s.io/v1");
    EXPECT_EQ(crd["kind"], "CustomResourceDefinition");
    EXPECT_EQ(crd["metadata"]["name"], want.name);

    // As a create and as an update to itself: names, versions, columns, structural schemas,
    // defaults and compiled CEL rules.
    std::vector<core::Cause> causes;
    apiserver::ValidateCrdSpec(crd, nullptr, causes);
    EXPECT_TRUE(causes.empty()) << Fields(causes);
    apiserver::ValidateCrdSpec(crd, &crd, causes);
    EXPECT_TRUE(causes.empty()) << Fields(causes);

    const Json& names = crd["spec"]["names"];
    EXPECT_EQ(names["kind"], want.kind);
    EXPECT_EQ(names["listKind"], want.kind + "List");
    EXPECT_EQ(crd["spec"]["scope"], "Cluster");
    EXPECT_EQ(names.value("shortNames", Json::array()), Json(want.short_names));
    EXPECT_EQ(names["categories"], Json(want.categories));

    core::Result<std::vector<apiserver::ResourcePtr>> resources = apiserver::ResourcesForCrd(crd);
    ASSERT_TRUE(resources.ok()) << resources.status().message();
    ASSERT_EQ(resources->size(), want.versions.size());
    const Json& versions = crd["spec"]["versions"];
    for (size_t i = 0; i < want.versions.size(); ++i) {
      SCOPED_TRACE(want.versions[i].first);
      EXPECT_EQ(versions[i]["name"], want.versions[i].first);
      EXPECT_EQ(versions[i]["storage"], want.versions[i].second);
      const apiserver::ResourceInfo& r = *(*resources)[i];
      EXPECT_FALSE(r.namespaced);
      EXPECT_EQ(r.has_status, want.status_subresource);
      ASSERT_NE(r.rules, nullptr);
      EXPECT_EQ(r.rules->size(), want.rules);
      std::vector<std::string> columns;
      for (const Json& c : versions[i]["additionalPrinterColumns"]) {
        columns.push_back(c["name"].get<std::string>());
      }
      EXPECT_EQ(columns, want.columns);
      // Every column was served (the API server stops at one it cannot parse).
      EXPECT_EQ(r.columns.size(), want.columns.size() + 1);  // + Name
    }
  }
}

// A second served version shares the first one's schema (converted by apiVersion alone), and a
// CompositionRevision's spec is exactly the Composition's plus the revision number.
TEST(CrossplaneCrdYaml, SharedSchemasAgree) {
  for (std::string_view file : {kCompositionRevisionsCrdFile, kFunctionsCrdFile}) {
    Json crd = Crd(file);
    ASSERT_EQ(crd["spec"]["versions"].size(), 2u) << file;
    const Json& v1 = crd["spec"]["versions"][0];
    const Json& beta = crd["spec"]["versions"][1];
    for (const char* key : {"schema", "additionalPrinterColumns", "subresources"}) {
      EXPECT_EQ(v1[key], beta[key]) << file << " " << key;
    }
    EXPECT_EQ(beta["served"], true);
  }

  Json composition = Crd(kCompositionsCrdFile)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
                                              ["properties"]["spec"];
  Json revision = Crd(kCompositionRevisionsCrdFile)["spec"]["versions"][0]["schema"]
                                                   ["openAPIV3Schema"]["properties"]["spec"];
  StripDescriptions(composition);
  StripDescriptions(revision);
  EXPECT_EQ(revision["properties"]["revision"], Json({{"type", "integer"}, {"format", "int64"}}));
  revision["properties"].erase("revision");
  EXPECT_EQ(revision["required"], Json({"compositeTypeRef", "revision"}));
  revision["required"] = composition["required"];
  EXPECT_EQ(revision, composition) << Json::diff(revision, composition).dump(1);
}

// ---- Klutch's XRDs and Compositions, unchanged ----

TEST(CrossplaneCrdYaml, KlutchXrdsAreAcceptedUnchanged) {
  apiserver::ResourcePtr r = Resource(kCompositeResourceDefinitionsCrdFile, "v1");
  ASSERT_NE(r, nullptr);
  std::vector<std::pair<std::string, Json>> xrds =
      KlutchObjectsOfKind("CompositeResourceDefinition");
  EXPECT_EQ(xrds.size(), 11u) << "Klutch's XRDs under " << kKlutchApiDir;
  for (const auto& [file, xrd] : xrds) {
    SCOPED_TRACE(file);
    Admission created = Admit(*r, xrd);
    EXPECT_TRUE(created.pruned.empty()) << Json(created.pruned);
    EXPECT_TRUE(created.causes.empty()) << Fields(created.causes);
    // The schemas are kept as written, Klutch's non-standard `supported:` anchor holder included.
    EXPECT_TRUE(created.object["spec"]["versions"] == xrd["spec"]["versions"])
        << Json::diff(xrd["spec"]["versions"], created.object["spec"]["versions"]).dump(1);
    // Defaults fill what the file leaves out and keep what it sets.
    EXPECT_EQ(created.object["spec"]["defaultCompositionUpdatePolicy"], "Automatic");
    EXPECT_EQ(created.object["spec"]["defaultCompositeDeletePolicy"],
              xrd["spec"].value("defaultCompositeDeletePolicy", "Background"));
    // Re-applying the same XRD is an update that changes nothing: the immutability rules pass.
    Admission updated = Admit(*r, xrd, &created.object);
    EXPECT_TRUE(updated.causes.empty()) << Fields(updated.causes);
  }
  const Json postgresql =
      Parse(ReadFile(kKlutchApiDir / "common/postgresql_definition.yaml"), "postgresql");
  ASSERT_TRUE(postgresql["spec"]["versions"][0]["schema"]["openAPIV3Schema"].contains("supported"));
}

TEST(CrossplaneCrdYaml, KlutchCompositionsAreAcceptedUnchanged) {
  apiserver::ResourcePtr r = Resource(kCompositionsCrdFile, "v1");
  ASSERT_NE(r, nullptr);
  std::vector<std::pair<std::string, Json>> compositions = KlutchObjectsOfKind("Composition");
  EXPECT_EQ(compositions.size(), 15u) << "Klutch's Compositions under " << kKlutchApiDir;
  for (const auto& [file, composition] : compositions) {
    SCOPED_TRACE(file);
    Admission created = Admit(*r, composition);
    EXPECT_TRUE(created.pruned.empty()) << Json(created.pruned);
    EXPECT_TRUE(created.causes.empty()) << Fields(created.causes);
    EXPECT_EQ(created.object["spec"]["mode"], "Pipeline");
    EXPECT_EQ(created.object["spec"]["pipeline"], composition["spec"]["pipeline"]);
    EXPECT_EQ(created.object["spec"]["publishConnectionDetailsWithStoreConfigRef"],
              Json({{"name", "default"}}));
    Admission updated = Admit(*r, composition, &created.object);
    EXPECT_TRUE(updated.causes.empty()) << Fields(updated.causes);

    // The same spec as a CompositionRevision, at both served versions.
    for (const char* version : {"v1", "v1beta1"}) {
      apiserver::ResourcePtr rev = Resource(kCompositionRevisionsCrdFile, version);
      ASSERT_NE(rev, nullptr);
      Json revision = composition;
      revision["apiVersion"] = std::string("apiextensions.crossplane.io/") + version;
      revision["kind"] = "CompositionRevision";
      revision["metadata"] = {{"name", composition["metadata"]["name"].get<std::string>() + "-1"}};
      revision["spec"]["revision"] = 1;
      Admission rev_created = Admit(*rev, revision);
      EXPECT_TRUE(rev_created.pruned.empty()) << version << Json(rev_created.pruned);
      EXPECT_TRUE(rev_created.causes.empty()) << version << Fields(rev_created.causes);
      // Crossplane renumbers a revision when a Composition returns to it (mutable since v1.17.1).
      Json renumbered = rev_created.object;
      renumbered["spec"]["revision"] = 3;
      Admission rev_updated = Admit(*rev, renumbered, &rev_created.object);
      EXPECT_TRUE(rev_updated.causes.empty()) << version << Fields(rev_updated.causes);
    }
  }
}

// The provider-kubernetes Objects Klutch's Compositions compose, as their templates stand before
// patching (the patches only add the manifest's name and namespace).
TEST(CrossplaneCrdYaml, ObjectsComposedByKlutchCompositionsAreAccepted) {
  apiserver::ResourcePtr r = Resource(kObjectsCrdFile, "v1alpha1");
  ASSERT_NE(r, nullptr);
  size_t objects = 0;
  for (const auto& [file, composition] : KlutchObjectsOfKind("Composition")) {
    for (const Json& step : composition["spec"]["pipeline"]) {
      for (const Json& resource : step["input"].value("resources", Json::array())) {
        Json object = resource["base"];
        if (object.value("apiVersion", "") != "kubernetes.crossplane.io/v1alpha1") continue;
        SCOPED_TRACE(file);
        ++objects;
        object["metadata"] = {{"name", "composed-object"}};
        object["spec"]["forProvider"]["manifest"]["metadata"] = {{"name", "instance"},
                                                                 {"namespace", "team-a"}};
        Admission created = Admit(*r, object);
        EXPECT_TRUE(created.pruned.empty()) << Json(created.pruned);
        EXPECT_TRUE(created.causes.empty()) << Fields(created.causes);
        const Json& spec = created.object["spec"];
        EXPECT_EQ(spec["forProvider"], object["spec"]["forProvider"]);
        EXPECT_EQ(spec["providerConfigRef"], Json({{"name", "kubernetes-provider"}}));
        EXPECT_EQ(spec["managementPolicy"], "Default");
        EXPECT_EQ(spec["deletionPolicy"], "Delete");
        EXPECT_EQ(spec["watch"], false);
      }
    }
  }
  EXPECT_EQ(objects, 4u) << "the a8s Compositions compose four Objects";
}

// ---- malformed objects ----

struct BadCase {
  std::string name;
  std::function<void(Json&)> mutate;
  std::string field;    // a cause must name this field
  std::string message;  // and contain this text
};

void ExpectRejected(const apiserver::ResourceInfo& r, const Json& valid,
                    const std::vector<BadCase>& cases, const Json* old = nullptr) {
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    Json object = valid;
    c.mutate(object);
    Admission admission = Admit(r, object, old);
    bool found = std::any_of(
        admission.causes.begin(), admission.causes.end(), [&](const core::Cause& cause) {
          return cause.field == c.field && cause.message.find(c.message) != std::string::npos;
        });
    EXPECT_TRUE(found) << "want " << c.field << ": ..." << c.message << "..., got"
                       << Fields(admission.causes);
  }
}

TEST(CrossplaneCrdYaml, BadCompositionsAreRejectedNamingTheField) {
  apiserver::ResourcePtr r = Resource(kCompositionsCrdFile, "v1");
  ASSERT_NE(r, nullptr);
  const Json valid = KlutchComposition("a8s/postgresql/composition.yaml");
  ASSERT_TRUE(Admit(*r, valid).causes.empty());
  ExpectRejected(
      *r, valid,
      {
          {"no compositeTypeRef", [](Json& o) { o["spec"].erase("compositeTypeRef"); },
           "spec.compositeTypeRef", "Required value"},
          {"compositeTypeRef without kind",
           [](Json& o) { o["spec"]["compositeTypeRef"].erase("kind"); },
           "spec.compositeTypeRef.kind", "Required value"},
          {"unknown mode", [](Json& o) { o["spec"]["mode"] = "Bogus"; }, "spec.mode",
           "Unsupported value: \"Bogus\""},
          {"step without functionRef",
           [](Json& o) { o["spec"]["pipeline"][0].erase("functionRef"); },
           "spec.pipeline[0].functionRef", "Required value"},
          {"step without name", [](Json& o) { o["spec"]["pipeline"][0].erase("step"); },
           "spec.pipeline[0].step", "Required value"},
          {"input without kind", [](Json& o) { o["spec"]["pipeline"][0]["input"].erase("kind"); },
           "spec.pipeline[0].input.kind", "Required value"},
          {"duplicate step",
           [](Json& o) { o["spec"]["pipeline"].push_back(o["spec"]["pipeline"][0]); },
           "spec.pipeline[1]", "Duplicate value"},
          {"credentials from nowhere",
           [](Json& o) {
             o["spec"]["pipeline"][0]["credentials"] = {{{"name", "c"}, {"source", "Vault"}}};
           },
           "spec.pipeline[0].credentials[0].source", "Unsupported value: \"Vault\""},
          {"resource template without base",
           [](Json& o) {
             o["spec"]["resources"] = {{{"name", "r"}}};
           },
           "spec.resources[0].base", "Required value"},
          {"unknown readiness check",
           [](Json& o) {
             o["spec"]["resources"] = {{{"base", {{"apiVersion", "v1"}, {"kind", "ConfigMap"}}},
                                        {"readinessChecks", {{{"type", "Eventually"}}}}}};
           },
           "spec.resources[0].readinessChecks[0].type", "Unsupported value: \"Eventually\""},
          {"pipeline not a list", [](Json& o) { o["spec"]["pipeline"] = "patch-and-transform"; },
           "spec.pipeline", "must be of type array"},
      });

  // compositeTypeRef is immutable.
  Admission stored = Admit(*r, valid);
  ExpectRejected(
      *r, valid,
      {{"another XR kind", [](Json& o) { o["spec"]["compositeTypeRef"]["kind"] = "XRedis"; },
        "spec.compositeTypeRef", "Value is immutable"}},
      &stored.object);
}

TEST(CrossplaneCrdYaml, BadXrdsAreRejectedNamingTheField) {
  apiserver::ResourcePtr r = Resource(kCompositeResourceDefinitionsCrdFile, "v1");
  ASSERT_NE(r, nullptr);
  const Json valid =
      Parse(ReadFile(kKlutchApiDir / "common/postgresql_definition.yaml"), "postgresql");
  ExpectRejected(
      *r, valid,
      {
          {"no versions", [](Json& o) { o["spec"].erase("versions"); }, "spec.versions",
           "Required value"},
          {"version not referenceable",
           [](Json& o) { o["spec"]["versions"][0].erase("referenceable"); },
           "spec.versions[0].referenceable", "Required value"},
          {"unknown delete policy",
           [](Json& o) { o["spec"]["defaultCompositeDeletePolicy"] = "Orphan"; },
           "spec.defaultCompositeDeletePolicy", "Unsupported value: \"Orphan\""},
          {"unknown update policy",
           [](Json& o) { o["spec"]["defaultCompositionUpdatePolicy"] = "Never"; },
           "spec.defaultCompositionUpdatePolicy", "Unsupported value: \"Never\""},
          {"claim names without plural", [](Json& o) { o["spec"]["claimNames"].erase("plural"); },
           "spec.claimNames.plural", "Required value"},
      });

  Admission stored = Admit(*r, valid);
  ASSERT_TRUE(stored.causes.empty()) << Fields(stored.causes);
  ExpectRejected(
      *r, valid,
      {
          {"group changed", [](Json& o) { o["spec"]["group"] = "example.org"; }, "spec.group",
           "Value is immutable"},
          {"kind changed", [](Json& o) { o["spec"]["names"]["kind"] = "XPostgres"; }, "spec.names",
           "Value is immutable"},
          {"claim kind changed", [](Json& o) { o["spec"]["claimNames"]["kind"] = "Postgres"; },
           "spec.claimNames", "Value is immutable"},
      },
      &stored.object);
}

// Legacy patch-and-transform Compositions (mode Resources) are accepted with their patches as
// written, and get Crossplane's defaults.
TEST(CrossplaneCrdYaml, ResourcesModeCompositionIsAcceptedWithDefaults) {
  apiserver::ResourcePtr r = Resource(kCompositionsCrdFile, "v1");
  ASSERT_NE(r, nullptr);
  const Json composition = Parse(R"(
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: legacy
spec:
  compositeTypeRef: {apiVersion: example.org/v1, kind: XBucket}
  writeConnectionSecretsToNamespace: crossplane-system
  patchSets:
  - name: common
    patches:
    - {type: FromCompositeFieldPath, fromFieldPath: spec.region, toFieldPath: spec.forProvider.region}
  resources:
  - name: bucket
    base:
      apiVersion: kubernetes.crossplane.io/v1alpha1
      kind: Object
      spec: {forProvider: {manifest: {apiVersion: v1, kind: ConfigMap}}}
    patches:
    - {type: PatchSet, patchSetName: common}
    - fromFieldPath: spec.size
      toFieldPath: spec.forProvider.manifest.data.size
      transforms:
      - {type: convert, convert: {toType: string}}
    connectionDetails:
    - {name: endpoint, fromFieldPath: status.atProvider.manifest.data.endpoint}
    - {name: port, type: FromValue, value: "5432"}
  - name: checked
    base: {apiVersion: v1, kind: ConfigMap}
    readinessChecks:
    - {type: MatchString, fieldPath: data.state, matchString: ready}
  environment:
    environmentConfigs:
    - {type: Reference, ref: {name: shared}}
    - type: Selector
      selector:
        mode: Multiple
        matchLabels:
        - {key: team, valueFromFieldPath: spec.team}
)",
                                 "legacy composition");
  Admission created = Admit(*r, composition);
  EXPECT_TRUE(created.pruned.empty()) << Json(created.pruned);
  EXPECT_TRUE(created.causes.empty()) << Fields(created.causes);
  const Json& spec = created.object["spec"];
  EXPECT_EQ(spec["mode"], "Resources");
  EXPECT_EQ(spec["resources"][0]["patches"], composition["spec"]["resources"][0]["patches"]);
  EXPECT_EQ(spec["resources"][0]["readinessChecks"],
            Json::parse(R"([{"type":"MatchCondition","matchCondition":{"type":"Ready",)"
                        R"("status":"True"}}])"));
  EXPECT_EQ(spec["resources"][1]["readinessChecks"],
            composition["spec"]["resources"][1]["readinessChecks"]);
  const Json& selector = spec["environment"]["environmentConfigs"][1]["selector"];
  EXPECT_EQ(selector["sortByFieldPath"], "metadata.name");
  EXPECT_EQ(selector["matchLabels"][0]["type"], "FromCompositeFieldPath");
  EXPECT_EQ(selector["matchLabels"][0]["fromFieldPathPolicy"], "Required");
}

TEST(CrossplaneCrdYaml, FunctionsAndProviderConfigsAreAcceptedWithDefaults) {
  for (const char* version : {"v1", "v1beta1"}) {
    SCOPED_TRACE(version);
    apiserver::ResourcePtr r = Resource(kFunctionsCrdFile, version);
    ASSERT_NE(r, nullptr);
    Json function = {
        {"apiVersion", std::string("pkg.crossplane.io/") + version},
        {"kind", "Function"},
        {"metadata", {{"name", "function-patch-and-transform"}}},
        {"spec",
         {{"package", "xpkg.upbound.io/crossplane-contrib/function-patch-and-transform:v0.7.0"}}}};
    Admission created = Admit(*r, function);
    EXPECT_TRUE(created.causes.empty()) << Fields(created.causes);
    EXPECT_EQ(created.object["spec"], Json::parse(R"({
                "package": "xpkg.upbound.io/crossplane-contrib/function-patch-and-transform:v0.7.0",
                "packagePullPolicy": "IfNotPresent", "revisionActivationPolicy": "Automatic",
                "revisionHistoryLimit": 1, "ignoreCrossplaneConstraints": false,
                "skipDependencyResolution": false,
                "runtimeConfigRef": {"apiVersion": "pkg.crossplane.io/v1beta1",
                                     "kind": "DeploymentRuntimeConfig", "name": "default"}})"));
    ExpectRejected(*r, function,
                   {{"no package", [](Json& o) { o["spec"].erase("package"); }, "spec.package",
                     "Required value"}});
  }

  apiserver::ResourcePtr r = Resource(kProviderConfigsCrdFile, "v1alpha1");
  ASSERT_NE(r, nullptr);
  const Json config = Parse(R"(
apiVersion: kubernetes.crossplane.io/v1alpha1
kind: ProviderConfig
metadata: {name: kubernetes-provider}
spec:
  credentials: {source: InjectedIdentity}
)",
                            "provider config");
  Admission created = Admit(*r, config);
  EXPECT_TRUE(created.pruned.empty()) << Json(created.pruned);
  EXPECT_TRUE(created.causes.empty()) << Fields(created.causes);
  ExpectRejected(
      *r, config,
      {
          {"no credentials", [](Json& o) { o["spec"].erase("credentials"); }, "spec.credentials",
           "Required value"},
          {"unknown source", [](Json& o) { o["spec"]["credentials"]["source"] = "Vault"; },
           "spec.credentials.source", "Unsupported value: \"Vault\""},
          {"secret without key",
           [](Json& o) {
             o["spec"]["credentials"] = {{"source", "Secret"},
                                         {"secretRef", {{"name", "kc"}, {"namespace", "ns"}}}};
           },
           "spec.credentials.secretRef.key", "Required value"},
          {"identity without type",
           [](Json& o) {
             o["spec"]["identity"] = {{"source", "InjectedIdentity"}};
           },
           "spec.identity.type", "Required value"},
      });

  apiserver::ResourcePtr objects = Resource(kObjectsCrdFile, "v1alpha1");
  ASSERT_NE(objects, nullptr);
  const Json object = Parse(R"(
apiVersion: kubernetes.crossplane.io/v1alpha1
kind: Object
metadata: {name: pg}
spec:
  forProvider:
    manifest: {apiVersion: postgresql.anynines.com/v1beta3, kind: Postgresql,
               metadata: {name: pg, namespace: team-a}}
)",
                            "object");
  ExpectRejected(
      *objects, object,
      {
          {"no manifest", [](Json& o) { o["spec"]["forProvider"].erase("manifest"); },
           "spec.forProvider.manifest", "Required value"},
          {"manifest without kind",
           [](Json& o) { o["spec"]["forProvider"]["manifest"].erase("kind"); },
           "spec.forProvider.manifest.kind", "Required value"},
          {"unknown readiness",
           [](Json& o) {
             o["spec"]["readiness"] = {{"policy", "Eventually"}};
           },
           "spec.readiness.policy", "Unsupported value: \"Eventually\""},
          {"unknown management policy", [](Json& o) { o["spec"]["managementPolicy"] = "Full"; },
           "spec.managementPolicy", "Unsupported value: \"Full\""},
          {"patch without field path",
           [](Json& o) {
             o["spec"]["references"] = {{{"patchesFrom", {{"name", "other"}}}}};
           },
           "spec.references[0].patchesFrom.fieldPath", "Required value"},
      });
}

// ---- deploy/manager ----

struct Manifest {
  std::string file;
  Json object;
};

std::vector<Manifest> LoadManifests() {
  std::vector<Manifest> out;
  for (auto& [file, object] : LoadTree(kManifestDir)) out.push_back({file, std::move(object)});
  return out;
}

std::vector<const Json*> OfKind(const std::vector<Manifest>& manifests, std::string_view kind) {
  std::vector<const Json*> out;
  for (const Manifest& m : manifests) {
    if (m.object.value("kind", "") == kind) out.push_back(&m.object);
  }
  return out;
}

// The port of a bind address such as ":8080" given as `--<flag>=<address>`.
std::string PortOfFlag(const Json& args, std::string_view flag) {
  const std::string prefix = "--" + std::string(flag) + "=";
  for (const Json& arg : args) {
    std::string text = arg.get<std::string>();
    if (!text.starts_with(prefix)) continue;
    return text.substr(text.rfind(':') + 1);
  }
  return "";
}

TEST(ManagerManifests, KustomizationListsEveryFileAndTheImage) {
  std::vector<Manifest> manifests = LoadManifests();
  std::vector<const Json*> kustomizations = OfKind(manifests, "Kustomization");
  ASSERT_EQ(kustomizations.size(), 1u);
  const Json& k = *kustomizations[0];
  std::set<std::string> listed;
  for (const Json& r : k["resources"]) listed.insert(r.get<std::string>());
  std::set<std::string> present;
  for (const Manifest& m : manifests) {
    if (m.file != "kustomization.yaml") present.insert(m.file);
  }
  EXPECT_EQ(listed, present);
  EXPECT_EQ(present, (std::set<std::string>{"deployment.yaml", "namespace.yaml", "rbac.yaml",
                                            "serviceaccount.yaml"}));
  ASSERT_EQ(k["images"].size(), 1u);
  EXPECT_EQ(k["images"][0]["name"], "klutch");

  std::vector<const Json*> deployments = OfKind(manifests, "Deployment");
  ASSERT_EQ(deployments.size(), 1u);
  const Json& container = (*deployments[0])["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(container["image"], "klutch:latest");  // the name kustomize's images entry rewrites
  EXPECT_EQ(container["command"], Json::array({"klutch", "manager"}));
}

// No wildcard anywhere, except the two documented resource wildcards on the groups whose kinds
// appear at run time; both must be there, so a change to either is a deliberate one.
TEST(ManagerManifests, OnlyTheDocumentedRbacWildcards) {
  std::vector<Manifest> manifests = LoadManifests();
  const std::set<std::string> kWildcardGroups = {"anynines.com", "dataservices.anynines.com"};
  std::set<std::string> wildcard_groups;
  size_t rules = 0;
  for (const Manifest& m : manifests) {
    const std::string kind = m.object.value("kind", "");
    if (kind != "ClusterRole" && kind != "Role") continue;
    const std::string role = m.object["metadata"]["name"];
    EXPECT_FALSE(m.object.contains("aggregationRule")) << role;
    for (const Json& rule : m.object["rules"]) {
      ++rules;
      const Json groups = rule.value("apiGroups", Json::array());
      const Json resources = rule.value("resources", Json::array());
      for (const char* key : {"apiGroups", "verbs", "resourceNames"}) {
        for (const Json& value : rule.value(key, Json::array())) {
          EXPECT_EQ(value.get<std::string>().find('*'), std::string::npos)
              << kind << " " << role << " " << key << " has " << value;
        }
      }
      for (const Json& value : resources) {
        const std::string resource = value.get<std::string>();
        if (resource.find('*') == std::string::npos) continue;
        const bool allowed = role == "klutch-manager" && kind == "ClusterRole" && resource == "*" &&
                             groups.size() == 1 &&
                             kWildcardGroups.contains(groups[0].get<std::string>()) &&
                             resources.size() == 1;
        EXPECT_TRUE(allowed) << kind << " " << role << " resources has " << resource << " in "
                             << rule;
        if (allowed) wildcard_groups.insert(groups[0].get<std::string>());
      }
      EXPECT_FALSE(rule.contains("nonResourceURLs")) << rule;
      EXPECT_FALSE(rule.value("verbs", Json::array()).empty()) << rule;
    }
  }
  EXPECT_EQ(wildcard_groups, kWildcardGroups);
  EXPECT_GE(rules, 15u) << "expected the manager's rules in rbac.yaml";

  // Object manifests may create exactly the a8s kinds Klutch's a8s Compositions compose.
  std::map<std::string, std::set<std::string>> manifest_kinds;  // group -> resources
  for (const Json* role : OfKind(manifests, "ClusterRole")) {
    if ((*role)["metadata"]["name"] != "klutch-manager-object-manifests") continue;
    for (const Json& rule : (*role)["rules"]) {
      for (const Json& group : rule["apiGroups"]) {
        for (const Json& resource : rule["resources"]) {
          manifest_kinds[group.get<std::string>()].insert(resource.get<std::string>());
        }
      }
    }
  }
  EXPECT_EQ(manifest_kinds, (std::map<std::string, std::set<std::string>>{
                                {"backups.anynines.com", {"backups", "restores"}},
                                {"postgresql.anynines.com", {"postgresqls"}},
                                {"servicebindings.anynines.com", {"servicebindings"}}}));
}

TEST(ManagerManifests, BindingsGrantTheRolesToTheManagerServiceAccount) {
  std::vector<Manifest> manifests = LoadManifests();
  std::set<std::string> roles;
  for (const Json* role : OfKind(manifests, "ClusterRole")) {
    roles.insert(role->at("metadata")["name"]);
  }
  for (const Json* role : OfKind(manifests, "Role")) {
    roles.insert(std::string(role->at("metadata")["namespace"]) + "/" +
                 std::string(role->at("metadata")["name"]));
  }
  EXPECT_EQ(roles, (std::set<std::string>{"klutch-manager", "klutch-manager-object-manifests",
                                          "crossplane-system/klutch-manager"}));
  std::set<std::string> bound;
  for (const char* kind : {"ClusterRoleBinding", "RoleBinding"}) {
    for (const Json* binding : OfKind(manifests, kind)) {
      const Json& ref = binding->at("roleRef");
      std::string name = ref["name"];
      if (ref["kind"] == "Role") {
        name = std::string(binding->at("metadata")["namespace"]) + "/" + name;
      }
      EXPECT_TRUE(roles.contains(name)) << kind << " refers to a missing role " << name;
      bound.insert(name);
      EXPECT_EQ(binding->at("subjects"),
                Json::parse(R"([{"kind":"ServiceAccount","name":"klutch-manager",)"
                            R"("namespace":"crossplane-system"}])"));
    }
  }
  EXPECT_EQ(bound, roles) << "every role is bound";

  std::vector<const Json*> accounts = OfKind(manifests, "ServiceAccount");
  ASSERT_EQ(accounts.size(), 1u);
  EXPECT_EQ(accounts[0]->at("metadata"),
            Json::parse(R"({"name":"klutch-manager","namespace":"crossplane-system"})"));
  std::vector<const Json*> namespaces = OfKind(manifests, "Namespace");
  ASSERT_EQ(namespaces.size(), 1u);
  EXPECT_EQ(namespaces[0]->at("metadata")["name"], "crossplane-system");
  std::vector<const Json*> deployments = OfKind(manifests, "Deployment");
  ASSERT_EQ(deployments.size(), 1u);
  EXPECT_EQ((*deployments[0])["spec"]["template"]["spec"]["serviceAccountName"], "klutch-manager");
  EXPECT_EQ((*deployments[0])["metadata"]["namespace"], "crossplane-system");
}

TEST(ManagerManifests, ProbesAndPortsMatchTheBindAddresses) {
  std::vector<Manifest> manifests = LoadManifests();
  std::vector<const Json*> deployments = OfKind(manifests, "Deployment");
  ASSERT_EQ(deployments.size(), 1u);
  const Json& pod = (*deployments[0])["spec"]["template"]["spec"];
  ASSERT_EQ(pod["containers"].size(), 1u);
  const Json& container = pod["containers"][0];

  const std::string health_port = PortOfFlag(container["args"], "health-probe-bind-address");
  const std::string metrics_port = PortOfFlag(container["args"], "metrics-bind-address");
  EXPECT_EQ(health_port, "8080");
  EXPECT_EQ(metrics_port, "8081");

  std::map<std::string, std::string> named;  // port name -> number
  for (const Json& port : container["ports"]) {
    named[port.value("name", "")] = std::to_string(port["containerPort"].get<int>());
  }
  EXPECT_EQ(named["metrics"], metrics_port);
  for (const char* probe : {"readinessProbe", "livenessProbe"}) {
    ASSERT_TRUE(container.contains(probe)) << probe;
    const Json& port = container[probe]["httpGet"]["port"];
    std::string number = port.is_number() ? std::to_string(port.get<int>()) : named[port];
    EXPECT_EQ(number, health_port) << probe;
  }
  EXPECT_EQ(container["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(container["livenessProbe"]["httpGet"]["path"], "/healthz");

  std::set<std::string> env;
  for (const Json& e : container["env"]) env.insert(e["name"].get<std::string>());
  EXPECT_EQ(env, (std::set<std::string>{"POD_NAME", "POD_NAMESPACE"}));

  const Json& security = container["securityContext"];
  EXPECT_EQ(security["allowPrivilegeEscalation"], false);
  EXPECT_EQ(security["readOnlyRootFilesystem"], true);
  EXPECT_EQ(security["capabilities"]["drop"], Json::array({"ALL"}));
  EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
  EXPECT_TRUE(container["resources"].contains("requests"));
}

}  // namespace
}  // namespace klutch::apis::crossplane_crds_test
