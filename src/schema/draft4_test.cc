// Runs the JSON Schema draft-4 test suite (../shared/conformance/json-schema-draft4, read at
// test time) through the kube-openapi value validation, for the keywords Kubernetes
// supports in structural schemas. Cases needing features Kubernetes does not have, or where
// kube-apiserver deliberately differs from plain JSON Schema, are skipped below with a
// reason each; every other case must pass.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "schema/structural.h"

namespace klutch::schema::draft4_test {
namespace {

namespace fs = std::filesystem;

// Whole files about keywords CRD schemas cannot use.
const std::map<std::string, std::string> kSkippedFiles = {
    {"additionalItems.json", "additionalItems and tuple items are forbidden in CRD schemas"},
    {"definitions.json", "$ref to the draft-4 metaschema; $ref/definitions are forbidden"},
    {"dependencies.json", "dependencies is forbidden in CRD schemas"},
    {"infinite-loop-detection.json", "$ref/definitions are forbidden in CRD schemas"},
    {"patternProperties.json", "patternProperties is forbidden in CRD schemas"},
    {"ref.json", "$ref is forbidden in CRD schemas"},
    {"refRemote.json", "remote $ref is forbidden in CRD schemas"},
};

// Single groups ("file/group description") or cases ("file/group/case").
const std::map<std::string, std::string> kSkipped = {
    {"additionalProperties.json/additionalProperties being false does not allow other properties",
     "uses patternProperties (forbidden in CRD schemas)"},
    {"additionalProperties.json/non-ASCII pattern with additionalProperties",
     "uses patternProperties (forbidden in CRD schemas)"},
    {"properties.json/properties, patternProperties, additionalProperties interaction",
     "uses patternProperties (forbidden in CRD schemas)"},
    {"items.json/an array of schemas for items", "tuple items are forbidden in CRD schemas"},
    {"items.json/items and subitems", "$ref/definitions and tuple items are forbidden"},
    {"uniqueItems.json/uniqueItems with an array of items", "tuple items are forbidden"},
    {"uniqueItems.json/uniqueItems with an array of items and additionalItems=false",
     "tuple items and additionalItems are forbidden"},
    {"uniqueItems.json/uniqueItems=false with an array of items", "tuple items are forbidden"},
    {"uniqueItems.json/uniqueItems=false with an array of items and additionalItems=false",
     "tuple items and additionalItems are forbidden"},
    // kube-apiserver's own semantics, where it deliberately or by accident differs from
    // plain JSON Schema (kube-openapi keeps Go's decoded types and its own validator order):
    {"enum.json/heterogeneous enum-with-null validation/null is valid",
     "kube-openapi never matches a null value against enum members"},
    {"enum.json/enum with [0] does not match [false]/[0.0] is valid",
     "Go compares decoded float64 0 and int64 0 inside arrays as different"},
    {"enum.json/enum with [1] does not match [true]/[1.0] is valid",
     "Go compares decoded float64 1 and int64 1 inside arrays as different"},
    {"multipleOf.json/by number/35 is not multiple of 1.5",
     "kube-openapi truncates the factor to int64 (1) for integer values"},
    {"multipleOf.json/small multiple of large integer/any integer is a multiple of 1e-8",
     "kube-openapi truncates the factor to int64 0 for integer values and panics"},
    {"not.json/forbid everything with empty schema/null is invalid",
     "kube-openapi applies only type and enum to null values, not allOf/anyOf/oneOf/not"},
};

// format.json checks that formats ignore non-strings when the schema has no type;
// kube-openapi's type validator rejects them instead. CRD schemas always carry a type with
// a format (structural schemas), so these cases cannot occur in Kubernetes.
bool IsTypelessFormatCase(const std::string& file, const Json& schema, const Json& data) {
  return file == "format.json" && !schema.contains("type") &&
         (data.is_number() || data.is_object() || data.is_boolean());
}

struct Tally {
  int passed = 0;
  int skipped = 0;
  std::vector<std::string> failures;
};

TEST(JsonSchemaDraft4, SupportedKeywordsPass) {
  const fs::path dir = fs::path(KLUTCH_SHARED_DIR) / "conformance" / "json-schema-draft4";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 20u);
  Tally t;
  std::set<std::string> used_skips;
  for (const auto& path : files) {
    const std::string file = path.filename().string();
    std::ifstream in(path);
    const Json groups = Json::parse(in);
    for (const auto& group : groups) {
      const std::string gname = file + "/" + group["description"].get<std::string>();
      for (const auto& c : group["tests"]) {
        const std::string cname = gname + "/" + c["description"].get<std::string>();
        if (kSkippedFiles.contains(file)) {
          ++t.skipped;
          continue;
        }
        if (IsTypelessFormatCase(file, group["schema"], c["data"])) {
          ++t.skipped;
          continue;
        }
        if (kSkipped.contains(gname) || kSkipped.contains(cname)) {
          used_skips.insert(kSkipped.contains(gname) ? gname : cname);
          ++t.skipped;
          continue;
        }
        std::vector<core::Cause> causes;
        ValidateValue(c["data"], group["schema"], std::nullopt, causes);
        const bool valid = causes.empty();
        if (valid == c["valid"].get<bool>()) {
          ++t.passed;
        } else {
          std::string why = valid ? "accepted" : causes[0].field + ": " + causes[0].message;
          t.failures.push_back(cname + " (" + c["data"].dump() + "): " + why);
        }
      }
    }
  }
  std::cout << "json-schema-draft4: " << t.passed << " passed, " << t.skipped << " skipped, "
            << t.failures.size() << " failed\n";
  for (const auto& f : t.failures) ADD_FAILURE() << f;
  for (const auto& [name, reason] : kSkipped) {
    EXPECT_TRUE(used_skips.contains(name)) << "stale skip entry: " << name;
  }
  EXPECT_GT(t.passed, 300);
}

}  // namespace
}  // namespace klutch::schema::draft4_test
