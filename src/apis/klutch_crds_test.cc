// Our APIServiceBinding CRD against Klutch's (read from ../shared/conformance at run time): every
// fact must agree, only descriptions may differ. Also checks the konnector manifests of
// deploy/konnector/ parse and keep their promises (no wildcard RBAC, probes on the health port).
#include "apis/klutch_crds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "machinery/json.h"
#include "schema/crd_schema.h"
#include "schema/validation_rules.h"
#include "test/support/process.h"

namespace klutch::apis::klutch_crds_test {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

const fs::path kUpstreamCrd = fs::path(KLUTCH_SHARED_DIR) /
                              "conformance/klutch/bind/deploy/crd/"
                              "klutch.anynines.com_apiservicebindings.yaml";
const fs::path kManifestDir = fs::path(KLUTCH_SOURCE_DIR) / "deploy/konnector";

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

// Removes every `description` keyword below `node`. Keys directly under `properties` are field
// names, so a field that happens to be called "description" is kept.
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

// The differences between two values as a JSON patch turning `ours` into `theirs` (the failure
// message: the full documents would be pages long).
std::string Diff(const Json& ours, const Json& theirs) { return Json::diff(ours, theirs).dump(1); }

Json OurCrd() {
  std::string text = KlutchCrdYaml(kApiServiceBindingsCrdFile);
  EXPECT_FALSE(text.empty()) << kApiServiceBindingsCrdFile << " is not embedded";
  return Parse(text, std::string(kApiServiceBindingsCrdFile));
}

Json UpstreamCrd() {
  std::string text = ReadFile(kUpstreamCrd);
  EXPECT_FALSE(text.empty()) << "cannot read " << kUpstreamCrd;
  return Parse(text, kUpstreamCrd.string());
}

TEST(KlutchCrdYaml, UnknownFileIsEmpty) {
  EXPECT_EQ(KlutchCrdYaml("no-such-file.yaml"), "");
  EXPECT_EQ(KlutchCrdYaml(""), "");
}

TEST(KlutchCrdYaml, ApiServiceBindingsAgreesWithUpstreamExceptDescriptions) {
  Json ours = OurCrd();
  Json theirs = UpstreamCrd();
  ASSERT_TRUE(ours.is_object());
  ASSERT_TRUE(theirs.is_object());
  EXPECT_EQ(ours["apiVersion"], "apiextensions.k8s.io/v1");
  EXPECT_EQ(ours["kind"], "CustomResourceDefinition");
  EXPECT_EQ(ours["metadata"]["name"], theirs["metadata"]["name"]);

  Json& spec = ours["spec"];
  Json& upstream = theirs["spec"];
  StripDescriptions(spec);
  StripDescriptions(upstream);
  // Piece by piece first, so a failure says where the two part.
  for (const char* key : {"group", "names", "scope"}) {
    EXPECT_TRUE(spec[key] == upstream[key]) << "spec." << key << " differs:\n"
                                            << Diff(spec[key], upstream[key]);
  }
  ASSERT_EQ(spec["versions"].size(), 1u);
  ASSERT_EQ(upstream["versions"].size(), 1u);
  const Json& version = spec["versions"][0];
  const Json& upstream_version = upstream["versions"][0];
  for (const char* key :
       {"name", "served", "storage", "subresources", "additionalPrinterColumns", "schema"}) {
    EXPECT_TRUE(version.value(key, Json()) == upstream_version.value(key, Json()))
        << "spec.versions[0]." << key << " differs:\n"
        << Diff(version.value(key, Json()), upstream_version.value(key, Json()));
  }
  // Then the whole spec, so no key outside the list above can differ unnoticed.
  EXPECT_TRUE(spec == upstream) << "spec differs:\n" << Diff(spec, upstream);
}

// The comparison above must be able to fail: stripping descriptions keeps every other fact, and
// a change to one of them is a difference.
TEST(KlutchCrdYaml, StrippingDescriptionsKeepsEveryOtherFact) {
  Json crd = OurCrd();
  ASSERT_TRUE(crd.is_object());
  StripDescriptions(crd);
  EXPECT_EQ(crd.dump().find("\"description\""), std::string::npos);
  const Json& schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
  const Json& ref = schema["properties"]["spec"]["properties"]["kubeconfigSecretRef"];
  EXPECT_EQ(ref["x-kubernetes-validations"][0]["rule"], "self == oldSelf");
  EXPECT_EQ(ref["properties"]["key"]["enum"], Json::array({"kubeconfig"}));

  Json changed = crd;
  changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
         ["kubeconfigSecretRef"]["properties"]["name"]["minLength"] = 2;
  EXPECT_NE(changed, crd);

  Json field = {{"description", "text"},
                {"properties", {{"description", {{"type", "string"}, {"description", "x"}}}}}};
  StripDescriptions(field);
  EXPECT_EQ(field, Json({{"properties", {{"description", {{"type", "string"}}}}}}));
}

TEST(KlutchCrdYaml, ApiServiceBindingsSchemaIsValidAndItsRulesCompile) {
  Json crd = OurCrd();
  ASSERT_TRUE(crd.is_object());
  const std::string path = "spec.versions[0].schema.openAPIV3Schema";
  auto schema =
      std::make_shared<const Json>(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]);
  std::vector<core::Cause> causes;
  schema::ValidateCrdSchema(*schema, path, schema::CrdSchemaOptionsFor(nullptr), causes);
  for (const core::Cause& cause : causes) ADD_FAILURE() << cause.field << ": " << cause.message;
  auto rules = schema::ValidationRules::Compile(schema, *schema, path, causes);
  for (const core::Cause& cause : causes) ADD_FAILURE() << cause.field << ": " << cause.message;
  ASSERT_NE(rules, nullptr);
  EXPECT_EQ(rules->size(), 2u);  // kubeconfigSecretRef immutability, adopt/donate exclusion
}

// ---- the provider-side CRDs ----

// Descriptions and CEL messages are prose; everything else is a fact that must agree.
void StripProse(Json& node, bool field_names = false) {
  if (node.is_array()) {
    for (Json& element : node) StripProse(element);
    return;
  }
  if (!node.is_object()) return;
  if (!field_names) {
    node.erase("description");
    node.erase("message");
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    StripProse(it.value(), !field_names && it.key() == "properties");
  }
}

// Every upstream CRD file has a counterpart of ours (named by its plural) agreeing on every
// fact: names, scope, versions, printer columns, subresources and the whole schema
// (properties, types, required, enums, patterns, defaults, CEL rules).
TEST(KlutchCrdYaml, EveryUpstreamBindCrdAgreesWithOursExceptProse) {
  const fs::path dir = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/bind/deploy/crd";
  size_t compared = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    Json theirs = Parse(ReadFile(entry.path()), entry.path().string());
    ASSERT_TRUE(theirs.is_object());
    const std::string plural = theirs["spec"]["names"]["plural"];
    const std::string file = plural + ".yaml";
    const std::string text = KlutchCrdYaml(file);
    ASSERT_FALSE(text.empty()) << "no embedded " << file << " for " << entry.path().filename();
    Json ours = Parse(text, file);
    ASSERT_TRUE(ours.is_object());
    EXPECT_EQ(ours["metadata"]["name"], theirs["metadata"]["name"]) << file;
    Json& spec = ours["spec"];
    Json& upstream = theirs["spec"];
    StripProse(spec);
    StripProse(upstream);
    EXPECT_TRUE(spec == upstream) << file << ": spec differs:\n" << Diff(spec, upstream);
    ++compared;
  }
  EXPECT_EQ(compared, 6u);
}

TEST(KlutchCrdYaml, ProviderCrdsAreEmbeddedValidAndTheirRulesCompile) {
  for (bool control_plane_mode : {false, true}) {
    EXPECT_EQ(ProviderCrdFiles(control_plane_mode).size(), control_plane_mode ? 7u : 5u);
  }
  for (std::string_view file : ProviderCrdFiles(true)) {
    Json crd = Parse(KlutchCrdYaml(file), std::string(file));
    ASSERT_TRUE(crd.is_object()) << file;
    EXPECT_EQ(crd["kind"], "CustomResourceDefinition") << file;
    EXPECT_EQ(crd["spec"]["scope"], "Namespaced") << file;
    EXPECT_EQ(crd["spec"]["versions"][0]["subresources"], Json({{"status", Json::object()}}))
        << file;
    const std::string path = "spec.versions[0].schema.openAPIV3Schema";
    auto schema =
        std::make_shared<const Json>(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]);
    std::vector<core::Cause> causes;
    schema::ValidateCrdSchema(*schema, path, schema::CrdSchemaOptionsFor(nullptr), causes);
    for (const core::Cause& cause : causes) {
      ADD_FAILURE() << file << ": " << cause.field << ": " << cause.message;
    }
    causes.clear();
    auto rules = schema::ValidationRules::Compile(schema, *schema, path, causes);
    for (const core::Cause& cause : causes) {
      ADD_FAILURE() << file << ": " << cause.field << ": " << cause.message;
    }
    EXPECT_NE(rules, nullptr) << file;
  }
  // The facts of §1.1 the backend relies on: a new request starts Pending with a status.
  Json ser = Parse(KlutchCrdYaml(kApiServiceExportRequestsCrdFile), "ser");
  const Json& status =
      ser["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"];
  EXPECT_EQ(status["default"], Json::object());
  EXPECT_EQ(status["properties"]["phase"]["default"], "Pending");
  Json tmpl = Parse(KlutchCrdYaml(kApiServiceExportTemplatesCrdFile), "template");
  EXPECT_EQ(tmpl["metadata"]["name"],
            "apiserviceexporttemplates.example-backend.klutch.anynines.com");
}

// ---- deploy/konnector ----

struct Manifest {
  std::string file;
  Json object;
};

// Every object of every deploy/konnector/*.yaml, in file order. Documents are separated by
// "---" lines; documents holding only comments are skipped.
std::vector<Manifest> LoadManifests() {
  std::vector<Manifest> out;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kManifestDir)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    const std::vector<std::string> docs = testing::SplitYamlDocuments(ReadFile(path));
    for (size_t i = 0; i < docs.size(); ++i) {
      Json object = Parse(docs[i], path.filename().string() + " document " + std::to_string(i));
      if (object.is_null()) continue;
      EXPECT_TRUE(object.is_object()) << path.filename() << " document " << i;
      out.push_back({path.filename().string(), std::move(object)});
    }
  }
  return out;
}

std::vector<const Json*> OfKind(const std::vector<Manifest>& manifests, std::string_view kind) {
  std::vector<const Json*> out;
  for (const Manifest& m : manifests) {
    if (m.object.value("kind", "") == kind) out.push_back(&m.object);
  }
  return out;
}

// The port of a bind address such as ":8080" or "0.0.0.0:8080" given as `--<flag>=<address>`.
std::string PortOfFlag(const Json& args, std::string_view flag) {
  const std::string prefix = "--" + std::string(flag) + "=";
  for (const Json& arg : args) {
    std::string text = arg.get<std::string>();
    if (!text.starts_with(prefix)) continue;
    return text.substr(text.rfind(':') + 1);
  }
  return "";
}

TEST(KonnectorManifests, KustomizationListsEveryFileAndTheImage) {
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
  EXPECT_EQ(container["command"], Json::array({"klutch", "konnector"}));
}

TEST(KonnectorManifests, NoRbacRuleHasAWildcard) {
  std::vector<Manifest> manifests = LoadManifests();
  size_t rules = 0;
  for (const Manifest& m : manifests) {
    const std::string kind = m.object.value("kind", "");
    if (kind != "ClusterRole" && kind != "Role") continue;
    EXPECT_FALSE(m.object.contains("aggregationRule")) << m.object["metadata"]["name"];
    for (const Json& rule : m.object["rules"]) {
      ++rules;
      for (const char* key : {"apiGroups", "resources", "verbs", "resourceNames"}) {
        for (const Json& value : rule.value(key, Json::array())) {
          EXPECT_EQ(value.get<std::string>().find('*'), std::string::npos)
              << m.file << ": " << kind << " " << m.object["metadata"]["name"] << " " << key
              << " has " << value;
        }
      }
      EXPECT_FALSE(rule.contains("nonResourceURLs")) << m.file << ": " << rule;
      EXPECT_FALSE(rule.value("verbs", Json::array()).empty()) << m.file << ": " << rule;
    }
  }
  EXPECT_GE(rules, 10u) << "expected the konnector's rules in rbac.yaml";
}

TEST(KonnectorManifests, BindingsGrantTheRolesToTheKonnectorServiceAccount) {
  std::vector<Manifest> manifests = LoadManifests();
  std::set<std::string> roles;
  for (const Json* role : OfKind(manifests, "ClusterRole"))
    roles.insert(role->at("metadata")["name"]);
  for (const Json* role : OfKind(manifests, "Role")) {
    roles.insert(std::string(role->at("metadata")["namespace"]) + "/" +
                 std::string(role->at("metadata")["name"]));
  }
  std::set<std::string> bound;
  for (const char* kind : {"ClusterRoleBinding", "RoleBinding"}) {
    for (const Json* binding : OfKind(manifests, kind)) {
      const Json& ref = binding->at("roleRef");
      std::string name = ref["name"];
      if (ref["kind"] == "Role")
        name = std::string(binding->at("metadata")["namespace"]) + "/" + name;
      EXPECT_TRUE(roles.contains(name)) << kind << " refers to a missing role " << name;
      bound.insert(name);
      EXPECT_EQ(binding->at("subjects"),
                Json::parse(R"([{"kind":"ServiceAccount","name":"konnector",)"
                            R"("namespace":"klutch-bind"}])"));
    }
  }
  EXPECT_EQ(bound, roles) << "every role is bound";

  std::vector<const Json*> accounts = OfKind(manifests, "ServiceAccount");
  ASSERT_EQ(accounts.size(), 1u);
  EXPECT_EQ(accounts[0]->at("metadata"),
            Json::parse(R"({"name":"konnector","namespace":"klutch-bind"})"));
  std::vector<const Json*> deployments = OfKind(manifests, "Deployment");
  ASSERT_EQ(deployments.size(), 1u);
  EXPECT_EQ((*deployments[0])["spec"]["template"]["spec"]["serviceAccountName"], "konnector");
  EXPECT_EQ((*deployments[0])["metadata"]["namespace"], "klutch-bind");
}

TEST(KonnectorManifests, ProbesAndPortsMatchTheBindAddresses) {
  std::vector<Manifest> manifests = LoadManifests();
  std::vector<const Json*> deployments = OfKind(manifests, "Deployment");
  ASSERT_EQ(deployments.size(), 1u);
  const Json& pod = (*deployments[0])["spec"]["template"]["spec"];
  ASSERT_EQ(pod["containers"].size(), 1u);
  const Json& container = pod["containers"][0];
  EXPECT_EQ(container["name"], "konnector");

  const std::string health_port = PortOfFlag(container["args"], "health-probe-bind-address");
  const std::string metrics_port = PortOfFlag(container["args"], "metrics-bind-address");
  ASSERT_FALSE(health_port.empty()) << "no --health-probe-bind-address in " << container["args"];
  ASSERT_FALSE(metrics_port.empty()) << "no --metrics-bind-address in " << container["args"];

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

  const Json& security = container["securityContext"];
  EXPECT_EQ(security["allowPrivilegeEscalation"], false);
  EXPECT_EQ(security["readOnlyRootFilesystem"], true);
  EXPECT_EQ(security["capabilities"]["drop"], Json::array({"ALL"}));
  EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
  EXPECT_TRUE(container["resources"].contains("requests"));
}

}  // namespace
}  // namespace klutch::apis::klutch_crds_test
