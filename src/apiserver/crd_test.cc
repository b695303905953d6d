// CRD printer columns as kube-apiserver validates and serves them: which jsonPaths a CRD may
// declare (and the wording when refused), which columns are served, and the Table cells.
#include "apiserver/crd.h"

#include <gtest/gtest.h>

#include "apiserver/table.h"
#include "core/clock.h"

namespace klutch::apiserver::crd_test {
namespace {

Json Crd(Json columns) {
  Json version = {{"name", "v1"},
                  {"served", true},
                  {"storage", true},
                  {"schema",
                   {{"openAPIV3Schema",
                     {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}};
  if (!columns.is_null()) version["additionalPrinterColumns"] = std::move(columns);
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "things.example.com"}}},
          {"spec",
           {{"group", "example.com"},
            {"names", {{"kind", "Thing"}, {"plural", "things"}}},
            {"scope", "Namespaced"},
            {"versions", Json::array({version})}}}};
}

Json Column(std::string name, std::string type, std::string path) {
  return {{"name", std::move(name)}, {"type", std::move(type)}, {"jsonPath", std::move(path)}};
}

std::vector<std::string> Causes(const Json& crd) {
  std::vector<core::Cause> causes;
  ValidateCrdSpec(crd, nullptr, causes);
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(c.field + ": " + c.message);
  return out;
}

std::vector<std::string> ColumnNames(const Json& crd) {
  auto resources = ResourcesForCrd(crd);
  EXPECT_TRUE(resources.ok()) << resources.status().ToString();
  std::vector<std::string> out;
  if (!resources.ok()) return out;
  for (const auto& c : (*resources)[0]->columns) out.push_back(c.name);
  return out;
}

using Strings = std::vector<std::string>;

TEST(CrdPrinterColumns, AcceptsEveryPathStartingWithADotAsKubeApiserverDoes) {
  for (const char* path : {R"(.metadata.annotations.crossplane\.io/external-name)",
                           R"(.metadata.annotations.bind\.klutch.\anynines\.com/resources)",
                           ".status.conditions[?(@.type=='Ready')].status", ".spec[", "."}) {
    EXPECT_EQ(Causes(Crd(Json::array({Column("X", "string", path)}))), Strings{}) << path;
  }
}

TEST(CrdPrinterColumns, RefusalsUseKubeApiserversWording) {
  const std::string base = "spec.versions[0].additionalPrinterColumns[0].";
  EXPECT_EQ(Causes(Crd(Json::array({Column("X", "string", "metadata.name")}))),
            Strings{base + "JSONPath: Invalid value: \"metadata.name\": must be a simple json "
                           "path starting with ."});
  EXPECT_EQ(Causes(Crd(Json::array({Column("X", "string", "")}))),
            Strings{base + "JSONPath: Required value"});
  EXPECT_EQ(Causes(Crd(Json::array({Column("", "text", ".a")}))),
            (Strings{base + "name: Required value",
                     base + "type: Invalid value: \"text\": must be one of "
                            "boolean,date,integer,number,string"}));
  Json col = Column("X", "", ".a");
  col["format"] = "uuid";
  EXPECT_EQ(Causes(Crd(Json::array({col}))),
            (Strings{base + "type: Required value: must be one of "
                            "boolean,date,integer,number,string",
                     base + "format: Invalid value: \"uuid\": must be one of "
                            "byte,date,date-time,double,float,int32,int64,password"}));
}

TEST(CrdPrinterColumns, ServesTheDeclaredColumnsOrAgeWhenThereAreNone) {
  EXPECT_EQ(ColumnNames(Crd(nullptr)), (Strings{"Name", "Age"}));
  EXPECT_EQ(ColumnNames(Crd(Json::array({Column("Size", "integer", ".spec.size")}))),
            (Strings{"Name", "Size"}));
  // A path client-go cannot parse ends the columns, as kube-apiserver falls back.
  EXPECT_EQ(
      ColumnNames(Crd(Json::array({Column("A", "string", ".a"), Column("Bad", "string", ".spec["),
                                   Column("C", "string", ".c")}))),
      (Strings{"Name", "A"}));
}

TEST(CrdPrinterColumns, CellsAreWhatKubeApiserversTableConvertorPrints) {
  Json crd = Crd(Json::array(
      {Column("EXTERNAL-NAME", "string", R"(.metadata.annotations.crossplane\.io/external-name)"),
       Column("BIND", "string", R"(.metadata.annotations.bind\.klutch.\anynines\.com/resources)"),
       Column("READY", "string", ".status.conditions[?(@.type=='Ready')].status"),
       Column("SIZE", "integer", ".spec.size"), Column("RATIO", "number", ".spec.ratio"),
       Column("RATIO-TEXT", "string", ".spec.ratio"), Column("BIG", "string", ".spec.big"),
       Column("SPEC", "string", ".spec.nested"), Column("NULL", "string", ".spec.none"),
       Column("WRONG", "integer", ".spec.nested"), Column("FLAG", "boolean", ".spec.flag"),
       Column("BORN", "date", ".metadata.creationTimestamp"),
       Column("BAD-DATE", "date", ".spec.nested.when")}));
  auto resources = ResourcesForCrd(crd);
  ASSERT_TRUE(resources.ok()) << resources.status().ToString();
  Json obj = Json::parse(R"({
    "apiVersion": "example.com/v1", "kind": "Thing",
    "metadata": {"name": "t1", "creationTimestamp": "2024-01-01T00:00:00Z",
      "annotations": {"crossplane.io/external-name": "pg-1234",
                      "bind.klutch.anynines.com/resources": "all"}},
    "spec": {"size": 3.7, "ratio": 0.5, "big": 1234567.0, "nested": {"when": "yesterday"},
             "none": null, "flag": true},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]}})");
  const core::SystemTime now = *core::ParseTime("2024-01-01T00:05:00Z");
  Json table = ToTable(*(*resources)[0], {&obj}, IncludeObject::kNone, Json::object(), true, now);
  ASSERT_EQ(table["rows"].size(), 1u);
  EXPECT_EQ(table["rows"][0]["cells"],
            Json::parse(R"(["t1", "pg-1234", null, "True", 3, 0.5, "0.5", "1.234567e+06",
                            "{\"when\":\"yesterday\"}", "<no value>", null, true, "5m",
                            "<invalid>"])"));
  EXPECT_EQ(table["columnDefinitions"][1]["description"],
            "Custom resource definition column (in JSONPath format): "
            R"(.metadata.annotations.crossplane\.io/external-name)");
}

}  // namespace
}  // namespace klutch::apiserver::crd_test
