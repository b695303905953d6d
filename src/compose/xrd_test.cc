// The CRDs generated from every XRD of the upstream Klutch package (read at run time from
// ../shared/conformance/klutch/crossplane-api), checked against data-services.md §1-§2 and
// Crossplane's generation rules, and validated as kube-apiserver validates a CRD on create.
#include "compose/xrd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "apiserver/crd.h"
#include "compose/selection.h"
#include "machinery/json.h"
#include "test/support/json_text.h"

namespace klutch::compose::xrd_test {
namespace {

namespace fs = std::filesystem;

const fs::path kApi = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/crossplane-api/api";

using fixture::J;

Json LoadYaml(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(text.str().empty()) << "cannot read " << path;
  auto parsed = machinery::ParseYaml(text.str());
  EXPECT_TRUE(parsed.ok()) << path << ": " << parsed.status().ToString();
  return parsed.ok() ? *parsed : Json();
}

// What data-services.md §2 says about each XRD.
struct Expected {
  std::string file;  // under api/
  std::string xr_kind;
  std::string xr_plural;
  std::string claim_kind;
  std::string claim_plural;
  std::string delete_policy;  // the claim's compositeDeletePolicy default (§1.3)
  bool managed_column;        // the XRD declares the ManagedResource printer column (§1.4)
};

const std::vector<Expected>& UpstreamXrds() {
  static const auto* xrds = new std::vector<Expected>{
      {"common/postgresql_definition.yaml", "XPostgresqlInstance", "xpostgresqlinstances",
       "PostgresqlInstance", "postgresqlinstances", "Foreground", false},
      {"common/servicebinding_definition.yaml", "XServiceBinding", "xservicebindings",
       "ServiceBinding", "servicebindings", "Background", false},
      {"common/backup_definition.yaml", "XBackup", "xbackups", "Backup", "backups", "Background",
       false},
      {"common/restore_definition.yaml", "XRestore", "xrestores", "Restore", "restores",
       "Background", false},
      {"a9s/keyvalue/definition.yaml", "XKeyvalueInstance", "xkeyvalueinstances",
       "KeyvalueInstance", "keyvalueinstances", "Foreground", true},
      {"a9s/logme2/definition.yaml", "XLogme2Instance", "xlogme2instances", "Logme2Instance",
       "logme2instances", "Foreground", true},
      {"a9s/mariadb/definition.yaml", "XMariadbInstance", "xmariadbinstances", "MariadbInstance",
       "mariadbinstances", "Foreground", true},
      {"a9s/messaging/definition.yaml", "XMessagingInstance", "xmessaginginstances",
       "MessagingInstance", "messaginginstances", "Foreground", true},
      {"a9s/mongodb/definition.yaml", "XMongodbInstance", "xmongodbinstances", "MongodbInstance",
       "mongodbinstances", "Foreground", true},
      {"a9s/prometheus/definition.yaml", "XPrometheusInstance", "xprometheusinstances",
       "PrometheusInstance", "prometheusinstances", "Foreground", true},
      {"a9s/search/definition.yaml", "XSearchInstance", "xsearchinstances", "SearchInstance",
       "searchinstances", "Foreground", true},
  };
  return *xrds;
}

TEST(UpstreamXrds, TheTableCoversEveryXrdFileOfThePackage) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(kApi / "common")) {
    if (entry.path().filename().string().ends_with("_definition.yaml")) {
      files.push_back("common/" + entry.path().filename().string());
    }
  }
  for (const auto& dir : fs::directory_iterator(kApi / "a9s")) {
    if (fs::exists(dir.path() / "definition.yaml")) {
      files.push_back("a9s/" + dir.path().filename().string() + "/definition.yaml");
    }
  }
  std::vector<std::string> covered;
  for (const Expected& e : UpstreamXrds()) covered.push_back(e.file);
  std::sort(files.begin(), files.end());
  std::sort(covered.begin(), covered.end());
  EXPECT_EQ(files, covered);
}

// Every object below `node` that is a schema (not a `properties` map of field names) and has
// `key`; their paths are returned.
void FindSchemaKeyword(const Json& node, const std::string& key, const std::string& at,
                       std::vector<std::string>& found, bool field_names = false) {
  if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) {
      FindSchemaKeyword(node[i], key, at + "[" + std::to_string(i) + "]", found);
    }
    return;
  }
  if (!node.is_object()) return;
  if (!field_names && node.contains(key)) found.push_back(at);
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!field_names && it.key() == "x-kubernetes-validations") continue;
    FindSchemaKeyword(it.value(), key, at + "." + it.key(), found,
                      !field_names && it.key() == "properties");
  }
}

// All CEL rules (rule text) anywhere in a schema.
std::vector<std::string> Rules(const Json& schema) {
  std::vector<std::string> rules;
  std::vector<const Json*> stack = {&schema};
  while (!stack.empty()) {
    const Json* n = stack.back();
    stack.pop_back();
    if (n->is_object()) {
      for (auto it = n->begin(); it != n->end(); ++it) {
        if (it.key() == "x-kubernetes-validations" && it->is_array()) {
          for (const Json& r : *it) rules.push_back(r.value("rule", ""));
        } else {
          stack.push_back(&*it);
        }
      }
    } else if (n->is_array()) {
      for (const Json& e : *n) stack.push_back(&e);
    }
  }
  std::sort(rules.begin(), rules.end());
  return rules;
}

std::vector<std::string> ColumnNames(const Json& version) {
  std::vector<std::string> names;
  for (const Json& c : version["additionalPrinterColumns"]) names.push_back(c.value("name", ""));
  return names;
}

void ExpectValidCrd(const Json& crd) {
  std::vector<core::Cause> causes;
  apiserver::ValidateCrdSpec(crd, nullptr, causes);
  for (const core::Cause& c : causes) ADD_FAILURE() << c.field << ": " << c.message;
}

void ExpectCrossplaneSpecFields(const Json& spec_props, bool claim) {
  for (const char* field : {"compositionRef", "compositionSelector", "compositionRevisionRef",
                            "compositionRevisionSelector", "compositionUpdatePolicy",
                            "writeConnectionSecretToRef", "publishConnectionDetailsTo"}) {
    EXPECT_TRUE(spec_props.contains(field)) << field;
  }
  // Each field Crossplane adds is described for kubectl explain (issue #23), on the XR too.
  for (const char* field :
       {"compositionRef", "compositionSelector", "compositionRevisionRef",
        "compositionRevisionSelector", "compositionUpdatePolicy", "writeConnectionSecretToRef",
        "publishConnectionDetailsTo", claim ? "compositeDeletePolicy" : "claimRef",
        claim ? "resourceRef" : "resourceRefs"}) {
    EXPECT_FALSE(spec_props[field].value("description", "").empty()) << field;
  }
  EXPECT_FALSE(spec_props["compositionRef"]["properties"]["name"].value("description", "").empty());
  EXPECT_EQ(spec_props["compositionRef"]["properties"]["name"]["type"], "string");
  EXPECT_EQ(spec_props["compositionUpdatePolicy"]["default"], "Automatic");
  for (const char* field : {"claimRef", "resourceRefs"}) {
    EXPECT_EQ(spec_props.contains(field), !claim) << field;
  }
  for (const char* field : {"compositeDeletePolicy", "resourceRef"}) {
    EXPECT_EQ(spec_props.contains(field), claim) << field;
  }
}

TEST(CrdsForXrd, EveryUpstreamXrd) {
  for (const Expected& e : UpstreamXrds()) {
    SCOPED_TRACE(e.file);
    const Json xrd = LoadYaml(kApi / e.file);
    ASSERT_TRUE(xrd.is_object());
    auto crds = CrdsForXrd(xrd);
    ASSERT_TRUE(crds.ok()) << crds.status().ToString();
    ASSERT_TRUE(crds->claim.has_value());
    const Json& xr = crds->composite;
    const Json& claim = *crds->claim;
    const Json& xrd_version = xrd["spec"]["versions"][0];
    const Json& xrd_schema = xrd_version["schema"]["openAPIV3Schema"];

    for (const Json* crd : {&xr, &claim}) {
      const bool is_claim = crd == &claim;
      SCOPED_TRACE(is_claim ? "claim CRD" : "XR CRD");
      EXPECT_EQ((*crd)["apiVersion"], "apiextensions.k8s.io/v1");
      EXPECT_EQ((*crd)["kind"], "CustomResourceDefinition");
      const Json& spec = (*crd)["spec"];
      EXPECT_EQ(spec["group"], "anynines.com");
      EXPECT_EQ(spec["scope"], is_claim ? "Namespaced" : "Cluster");
      const std::string plural = is_claim ? e.claim_plural : e.xr_plural;
      EXPECT_EQ((*crd)["metadata"]["name"], plural + ".anynines.com");
      EXPECT_EQ(spec["names"]["plural"], plural);
      EXPECT_EQ(spec["names"]["kind"], is_claim ? e.claim_kind : e.xr_kind);
      EXPECT_EQ(spec["names"]["listKind"], (is_claim ? e.claim_kind : e.xr_kind) + "List");
      const Json& categories = spec["names"]["categories"];
      EXPECT_NE(
          std::find(categories.begin(), categories.end(), Json(is_claim ? "claim" : "composite")),
          categories.end())
          << categories.dump();
      EXPECT_FALSE((*crd)["metadata"].contains("ownerReferences"));  // the XRD file has no uid

      ASSERT_EQ(spec["versions"].size(), 1u);
      const Json& v = spec["versions"][0];
      EXPECT_EQ(v["name"], "v1");
      EXPECT_EQ(v["served"], true);
      EXPECT_EQ(v["storage"], true);  // referenceable
      EXPECT_EQ(v["subresources"], J(R"({"status":{}})"));
      const Json& schema = v["schema"]["openAPIV3Schema"];
      EXPECT_EQ(schema["type"], "object");

      // The anchor holder is gone, everywhere.
      std::vector<std::string> supported;
      FindSchemaKeyword(schema, "supported", "openAPIV3Schema", supported);
      EXPECT_TRUE(supported.empty()) << ::testing::PrintToString(supported);
      ASSERT_TRUE(xrd_schema.contains("supported"));  // (the XRD does have it)

      // CEL rules kept, all of them and only them.
      EXPECT_EQ(Rules(schema), Rules(xrd_schema));
      EXPECT_FALSE(Rules(schema).empty());

      // The XRD's own fields and required list kept, Crossplane's added.
      const Json& spec_props = schema["properties"]["spec"]["properties"];
      for (auto it = xrd_schema["properties"]["spec"]["properties"].begin();
           it != xrd_schema["properties"]["spec"]["properties"].end(); ++it) {
        EXPECT_TRUE(spec_props.contains(it.key())) << it.key();
      }
      if (xrd_schema["properties"]["spec"].contains("required")) {
        EXPECT_EQ(schema["properties"]["spec"]["required"],
                  xrd_schema["properties"]["spec"]["required"]);
      }
      ExpectCrossplaneSpecFields(spec_props, is_claim);
      const Json& status_props = schema["properties"]["status"]["properties"];
      EXPECT_TRUE(status_props.contains("conditions"));
      EXPECT_TRUE(status_props.contains("connectionDetails"));
      EXPECT_EQ(status_props["managed"],
                J(R"({"type":"object","x-kubernetes-preserve-unknown-fields":true})"));

      // Printer columns: the XRD's own, then Crossplane's.
      std::vector<std::string> want;
      if (e.managed_column) want.push_back("ManagedResource");
      for (const char* c : {"SYNCED", "READY"}) want.push_back(c);
      want.push_back(is_claim ? "CONNECTION-SECRET" : "COMPOSITION");
      want.push_back("AGE");
      EXPECT_EQ(ColumnNames(v), want);
      if (e.managed_column) {
        EXPECT_EQ(v["additionalPrinterColumns"][0]["jsonPath"], ".status.managed.state");
      }

      // kube-apiserver accepts it (names, scope, structural schema, CEL rules compile,
      // printer columns).
      ExpectValidCrd(*crd);
    }

    // §1.3: the claim's delete policy default.
    const Json& policy = claim["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
                              ["spec"]["properties"]["compositeDeletePolicy"];
    EXPECT_EQ(policy["default"], e.delete_policy);
    EXPECT_EQ(policy["enum"], J(R"(["Background","Foreground"])"));
  }
}

TEST(CrdsForXrd, PostgresqlSpecifics) {
  auto crds = CrdsForXrd(LoadYaml(kApi / "common/postgresql_definition.yaml"));
  ASSERT_TRUE(crds.ok()) << crds.status().ToString();
  ASSERT_TRUE(crds->claim.has_value());
  const Json& schema = (*crds->claim)["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
  // The expose enum came through the &expose anchor of the dropped `supported:` list.
  EXPECT_EQ(schema["properties"]["spec"]["properties"]["expose"]["enum"],
            J(R"(["Internal","LoadBalancer"])"));
  // Crossplane's columns point where kubectl expects them.
  const Json& columns = (*crds->claim)["spec"]["versions"][0]["additionalPrinterColumns"];
  EXPECT_EQ(columns[0], J(R"({"name":"SYNCED","type":"string",
                              "jsonPath":".status.conditions[?(@.type=='Synced')].status"})"));
  EXPECT_EQ(columns[1]["jsonPath"], ".status.conditions[?(@.type=='Ready')].status");
  EXPECT_EQ(columns[2]["jsonPath"], ".spec.writeConnectionSecretToRef.name");
  EXPECT_EQ(columns[3], J(R"({"name":"AGE","type":"date",
                              "jsonPath":".metadata.creationTimestamp"})"));
  const Json& xr_columns = crds->composite["spec"]["versions"][0]["additionalPrinterColumns"];
  EXPECT_EQ(xr_columns[2]["jsonPath"], ".spec.compositionRef.name");
}

TEST(CrdsForXrd, OwnedByTheXrdWhenItHasAUid) {
  Json xrd = LoadYaml(kApi / "common/servicebinding_definition.yaml");
  xrd["metadata"]["uid"] = "2f3c1d7e-0000-4000-8000-000000000001";
  auto crds = CrdsForXrd(xrd);
  ASSERT_TRUE(crds.ok()) << crds.status().ToString();
  const Json want = J(R"([{"apiVersion":"apiextensions.crossplane.io/v1",
      "kind":"CompositeResourceDefinition","name":"xservicebindings.anynines.com",
      "uid":"2f3c1d7e-0000-4000-8000-000000000001","controller":true,
      "blockOwnerDeletion":true}])");
  EXPECT_EQ(crds->composite["metadata"]["ownerReferences"], want);
  ASSERT_TRUE(crds->claim.has_value());
  EXPECT_EQ((*crds->claim)["metadata"]["ownerReferences"], want);
  ExpectValidCrd(crds->composite);
}

Json MinimalXrd() {
  return J(R"({"apiVersion":"apiextensions.crossplane.io/v1","kind":"CompositeResourceDefinition",
    "metadata":{"name":"xwidgets.example.org"},
    "spec":{"group":"example.org","names":{"kind":"XWidget","plural":"xwidgets",
            "categories":["widgets"]},
      "versions":[{"name":"v1alpha1","served":true,"referenceable":true,
        "schema":{"openAPIV3Schema":{"type":"object","properties":{
          "spec":{"type":"object","properties":{"size":{"type":"integer"}}}}}}}]}})");
}

TEST(CrdsForXrd, NoClaimNamesNoClaimCrd) {
  auto crds = CrdsForXrd(MinimalXrd());
  ASSERT_TRUE(crds.ok()) << crds.status().ToString();
  EXPECT_FALSE(crds->claim.has_value());
  EXPECT_EQ(crds->composite["metadata"]["name"], "xwidgets.example.org");
  EXPECT_EQ(crds->composite["spec"]["names"]["categories"], J(R"(["widgets","composite"])"));
  ExpectValidCrd(crds->composite);
}

TEST(CrdsForXrd, VersionsWithoutSchemaOrStatusStillGetCrossplaneFields) {
  Json xrd = MinimalXrd();
  xrd["spec"]["versions"][0].erase("schema");
  xrd["spec"]["claimNames"] = {{"kind", "Widget"}, {"plural", "widgets"}};
  xrd["spec"]["defaultCompositeDeletePolicy"] = "Foreground";
  auto crds = CrdsForXrd(xrd);
  ASSERT_TRUE(crds.ok()) << crds.status().ToString();
  ASSERT_TRUE(crds->claim.has_value());
  ExpectValidCrd(crds->composite);
  ExpectValidCrd(*crds->claim);
  const Json& props =
      (*crds->claim)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
  ExpectCrossplaneSpecFields(props["spec"]["properties"], true);
  EXPECT_EQ(props["spec"]["properties"]["compositeDeletePolicy"]["default"], "Foreground");
  EXPECT_TRUE(props["status"]["properties"].contains("conditions"));
}

TEST(CrdsForXrd, MissingPartsAreErrorsNamingTheField) {
  struct Case {
    std::string what;
    std::function<void(Json&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"no group", [](Json& x) { x["spec"].erase("group"); }, "spec.group"},
      {"empty group", [](Json& x) { x["spec"]["group"] = ""; }, "spec.group"},
      {"no names", [](Json& x) { x["spec"].erase("names"); }, "spec.names"},
      {"no kind", [](Json& x) { x["spec"]["names"].erase("kind"); }, "spec.names.kind"},
      {"no plural", [](Json& x) { x["spec"]["names"].erase("plural"); }, "spec.names.plural"},
      {"no versions", [](Json& x) { x["spec"].erase("versions"); }, "spec.versions"},
      {"empty versions", [](Json& x) { x["spec"]["versions"] = Json::array(); }, "spec.versions"},
      {"unnamed version", [](Json& x) { x["spec"]["versions"][0].erase("name"); },
       "spec.versions[0].name"},
      {"claimNames without kind",
       [](Json& x) {
         x["spec"]["claimNames"] = {{"plural", "widgets"}};
       },
       "spec.claimNames.kind"},
      {"claimNames without plural",
       [](Json& x) {
         x["spec"]["claimNames"] = {{"kind", "Widget"}};
       },
       "spec.claimNames.plural"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Json xrd = MinimalXrd();
    c.edit(xrd);
    auto crds = CrdsForXrd(xrd);
    ASSERT_FALSE(crds.ok());
    EXPECT_EQ(crds.status().reason(), core::Reason::kBadRequest);
    EXPECT_NE(crds.status().message().find(c.field), std::string::npos) << crds.status().message();
  }
  EXPECT_FALSE(CrdsForXrd(Json()).ok());
  EXPECT_FALSE(CrdsForXrd(J("[]")).ok());
}

// SelectComposition (selection.h) with the upstream PostgreSQL XRD and its two
// compositions: Crossplane's order of choice, and errors that list the compositions a user
// can name (issue #23).
std::vector<client::ObjectPtr> PostgresqlCompositions() {
  return {std::make_shared<const Json>(LoadYaml(kApi / "a8s/postgresql/composition.yaml")),
          std::make_shared<const Json>(LoadYaml(kApi / "a9s/postgresql/composition.yaml"))};
}

TEST(SelectComposition, FallsBackToTheXrdDefaultAsCrossplaneDoes) {
  const Json xrd = LoadYaml(kApi / "common/postgresql_definition.yaml");
  auto chosen = SelectComposition(J(R"({"service": "a9s-postgresql13"})"), "anynines.com/v1",
                                  "XPostgresqlInstance", xrd, PostgresqlCompositions(), {});
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(chosen->composition, "a8s-postgresql");
  chosen =
      SelectComposition(J(R"({"compositionRef": {"name": "a9s-postgresql"}})"), "anynines.com/v1",
                        "XPostgresqlInstance", xrd, PostgresqlCompositions(), {});
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(chosen->composition, "a9s-postgresql");
}

TEST(SelectComposition, ErrorsListTheCompositionsForTheType) {
  Json xrd = LoadYaml(kApi / "common/postgresql_definition.yaml");
  const std::string kList =
      "; compositions for XPostgresqlInstance.anynines.com/v1: \"a8s-postgresql\", "
      "\"a9s-postgresql\"";
  auto typo =
      SelectComposition(J(R"({"compositionRef": {"name": "a8s-postgres"}})"), "anynines.com/v1",
                        "XPostgresqlInstance", xrd, PostgresqlCompositions(), {});
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().message(),
            "composition \"a8s-postgres\" not found: create it or change "
            "spec.compositionRef.name" +
                kList);
  auto selector = SelectComposition(J(R"({"compositionSelector": {"matchLabels": {"x": "y"}}})"),
                                    "anynines.com/v1", "XPostgresqlInstance", xrd,
                                    PostgresqlCompositions(), {});
  ASSERT_FALSE(selector.ok());
  EXPECT_NE(selector.status().message().find(kList), std::string::npos)
      << selector.status().message();
  // Without the XRD's default and with two compositions nothing says which: the user does.
  xrd["spec"].erase("defaultCompositionRef");
  auto unset = SelectComposition(J(R"({"service": "a9s-postgresql13"})"), "anynines.com/v1",
                                 "XPostgresqlInstance", xrd, PostgresqlCompositions(), {});
  ASSERT_FALSE(unset.ok());
  EXPECT_EQ(unset.status().message(),
            "spec.compositionRef.name is not set and XPostgresqlInstance.anynines.com/v1 has no "
            "default composition (the XRD's spec.defaultCompositionRef): choose one" +
                kList);
  // A default that does not exist, and no composition at all.
  xrd["spec"]["defaultCompositionRef"] = {{"name", "gone"}};
  auto gone = SelectComposition(J("{}"), "anynines.com/v1", "XPostgresqlInstance", xrd, {}, {});
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().message(),
            "composition \"gone\" (the XRD's spec.defaultCompositionRef) not found: create it or "
            "set spec.compositionRef.name; no composition for XPostgresqlInstance.anynines.com/v1 "
            "exists yet");
}

}  // namespace
}  // namespace klutch::compose::xrd_test
