#include "machinery/json_patch.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "test/support/json_text.h"

namespace klutch::machinery::json_patch_test {
namespace {

using fixture::J;

// ---- The shared RFC 6902 conformance suite (json-patch-tests), read at run time ----

struct SuiteCounts {
  int run = 0;
  int passed = 0;
  int disabled = 0;
};

SuiteCounts RunSuite(const std::string& file) {
  SuiteCounts counts;
  std::ifstream in(std::string(KLUTCH_SHARED_DIR) + "/conformance/json-patch/" + file);
  EXPECT_TRUE(in.good()) << "cannot read " << file;
  if (!in.good()) return counts;
  std::stringstream text;
  text << in.rdbuf();
  auto cases = ParseJson(text.str());
  EXPECT_TRUE(cases.ok()) << cases.status().ToString();
  if (!cases.ok() || !cases->is_array()) return counts;

  for (size_t i = 0; i < cases->size(); ++i) {
    const Json& test = (*cases)[i];
    if (test.value("disabled", false)) {
      ++counts.disabled;
      continue;
    }
    ++counts.run;
    SCOPED_TRACE(file + " #" + std::to_string(i) + ": " + test.value("comment", std::string()) +
                 test.value("error", std::string()));
    auto result = ApplyJsonPatch(test.at("doc"), test.at("patch"));
    bool ok;
    if (test.contains("error")) {
      EXPECT_FALSE(result.ok()) << "unexpectedly produced " << Dump(*result);
      ok = !result.ok();
      if (!result.ok()) {
        core::Reason reason = result.status().reason();
        EXPECT_TRUE(reason == core::Reason::kInvalid || reason == core::Reason::kBadRequest)
            << result.status().ToString();
      }
    } else {
      EXPECT_TRUE(result.ok()) << result.status().ToString();
      ok = result.ok();
      if (result.ok() && test.contains("expected")) {
        EXPECT_EQ(*result, test.at("expected")) << Dump(*result);
        ok = *result == test.at("expected");
      }
    }
    if (ok) ++counts.passed;
  }
  return counts;
}

TEST(JsonPatchConformance, EveryEnabledCasePasses) {
  SuiteCounts tests = RunSuite("tests.json");
  SuiteCounts spec = RunSuite("spec_tests.json");
  std::cout << "[ json-patch ] tests.json: " << tests.passed << "/" << tests.run << " passed, "
            << tests.disabled << " disabled; spec_tests.json: " << spec.passed << "/" << spec.run
            << " passed, " << spec.disabled << " disabled\n";
  EXPECT_EQ(tests.passed, tests.run);
  EXPECT_EQ(spec.passed, spec.run);
  // Guards against an empty or truncated suite passing vacuously.
  EXPECT_GE(tests.run, 90);
  EXPECT_GE(spec.run, 15);
}

// ---- Behaviour beyond the suite ----

TEST(ApplyJsonPatch, AppliesOperationsInOrder) {
  auto r = ApplyJsonPatch(J(R"({"data":{"a":"1"}})"), J(R"([
      {"op":"add","path":"/data/b","value":"2"},
      {"op":"replace","path":"/data/a","value":"x"},
      {"op":"copy","from":"/data/b","path":"/data/c"},
      {"op":"move","from":"/data/a","path":"/data/d"},
      {"op":"remove","path":"/data/b"},
      {"op":"test","path":"/data","value":{"c":"2","d":"x"}}])"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, J(R"({"data":{"c":"2","d":"x"}})"));
}

TEST(ApplyJsonPatch, FailedTestNamesThePathLikeKubeApiserver) {
  auto r = ApplyJsonPatch(J(R"({"data":{"color":"red"}})"),
                          J(R"([{"op":"test","path":"/data/color","value":"blue"}])"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kInvalid);
  EXPECT_EQ(r.status().message(), "testing value /data/color failed: test failed");
}

TEST(ApplyJsonPatch, MissingPathMessagesMatchEvanphxStyle) {
  struct Case {
    const char* patch;
    const char* message;
  } cases[] = {
      {R"([{"op":"replace","path":"/data/x","value":1}])",
       R"(replace operation does not apply: doc is missing path: "/data/x": missing value)"},
      {R"([{"op":"remove","path":"/data/x"}])",
       R"(remove operation does not apply: doc is missing path: "/data/x": missing value)"},
      {R"([{"op":"add","path":"/nope/x","value":1}])",
       R"(add operation does not apply: doc is missing path: "/nope/x": missing value)"},
      {R"([{"op":"move","from":"/data/x","path":"/y"}])",
       R"(move operation does not apply: doc is missing from path: /data/x: missing value)"},
      {R"([{"op":"copy","from":"/data/x","path":"/y"}])",
       R"(copy operation does not apply: doc is missing from path: /data/x: missing value)"},
      {R"([{"op":"copy","from":"/data","path":"/a/b"}])",
       R"(copy operation does not apply: doc is missing destination path: /a/b: missing value)"},
      {R"([{"op":"add","path":"/list/5","value":1}])",
       R"(error in add for path: '/list/5': Unable to access invalid index: 5: invalid index referenced)"},
  };
  Json doc = J(R"({"data":{"a":"1"},"list":[1]})");
  for (const Case& c : cases) {
    auto r = ApplyJsonPatch(doc, J(c.patch));
    ASSERT_FALSE(r.ok()) << c.patch;
    EXPECT_EQ(r.status().reason(), core::Reason::kInvalid) << c.patch;
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST(ApplyJsonPatch, MalformedPatchIsBadRequestNamingTheProblem) {
  struct Case {
    const char* patch;
    const char* needle;
  } cases[] = {
      {R"({"op":"add"})", "expected an array of operations, got object"},
      {R"([1])", "operation 0 must be an object, not number"},
      {R"([{"path":"/a","value":1}])", "operation 0 is missing a string \"op\" member"},
      {R"([{"op":"test","path":"/a","value":1},{"op":"spam","path":"/a"}])",
       "operation 1: Unexpected kind: spam"},
      {R"([{"op":"add","value":1}])", "operation 0 (\"add\") is missing \"path\""},
      {R"([{"op":"add","path":null,"value":1}])", "\"path\" must be a string, not null"},
      {R"([{"op":"add","path":"a","value":1}])", "must be empty or start with '/'"},
      {R"([{"op":"add","path":"/a~2","value":1}])", "'~' must be followed by '0' or '1'"},
      {R"([{"op":"add","path":"/a~","value":1}])", "'~' must be followed by '0' or '1'"},
      {R"([{"op":"replace","path":"/a"}])", "is missing \"value\""},
      {R"([{"op":"move","path":"/a"}])", "(\"move\") is missing \"from\""},
      {R"([{"op":"copy","from":7,"path":"/a"}])", "\"from\" must be a string, not number"},
  };
  for (const Case& c : cases) {
    auto r = ApplyJsonPatch(J(R"({"a":1})"), J(c.patch));
    ASSERT_FALSE(r.ok()) << c.patch;
    EXPECT_EQ(r.status().reason(), core::Reason::kBadRequest) << c.patch;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos)
        << c.patch << " -> " << r.status().message();
  }
}

TEST(ApplyJsonPatch, MalformedLaterOperationAppliesNothing) {
  // Validation runs before the first operation, so a bad op 2 does not half-apply op 1; the
  // input is const anyway, but the error must be the structural one.
  auto r = ApplyJsonPatch(J(R"({"a":1})"), J(R"([{"op":"test","path":"/a","value":2},
                                                 {"op":"frob","path":"/a"}])"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kBadRequest);
}

TEST(ApplyJsonPatch, PointerEscapesAndEmptyTokens) {
  Json doc = J(R"({"a/b":{"m~n":1},"":{"":2}})");
  auto r = ApplyJsonPatch(doc, J(R"([
      {"op":"test","path":"/a~1b/m~0n","value":1},
      {"op":"test","path":"/","value":{"":2}},
      {"op":"test","path":"//","value":2},
      {"op":"replace","path":"/a~1b/m~0n","value":3}])"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["a/b"]["m~n"], 3);
}

TEST(ApplyJsonPatch, ArrayIndexRules) {
  Json doc = J(R"({"l":[0,1,2]})");
  auto fails = [&](const char* patch) {
    auto r = ApplyJsonPatch(doc, J(patch));
    return !r.ok() && r.status().reason() == core::Reason::kInvalid;
  };
  EXPECT_TRUE(fails(R"([{"op":"test","path":"/l/01","value":1}])"));    // leading zero
  EXPECT_TRUE(fails(R"([{"op":"test","path":"/l/-1","value":2}])"));    // no negative indices
  EXPECT_TRUE(fails(R"([{"op":"test","path":"/l/3","value":2}])"));     // past the end
  EXPECT_TRUE(fails(R"([{"op":"replace","path":"/l/-","value":2}])"));  // "-" only for add
  EXPECT_TRUE(fails(R"([{"op":"remove","path":"/l/99999999999999999999999"}])"));
  EXPECT_TRUE(fails(R"([{"op":"add","path":"/l/-/x","value":1}])"));  // "-" is not a parent
  EXPECT_TRUE(fails(R"([{"op":"add","path":"/l/4","value":1}])"));

  auto appended = ApplyJsonPatch(doc, J(R"([{"op":"add","path":"/l/3","value":3},
                                            {"op":"add","path":"/l/-","value":4},
                                            {"op":"add","path":"/l/0","value":-1}])"));
  ASSERT_TRUE(appended.ok()) << appended.status().ToString();
  EXPECT_EQ(*appended, J(R"({"l":[-1,0,1,2,3,4]})"));
}

TEST(ApplyJsonPatch, TestUsesDeepJsonEquality) {
  Json doc = J(R"({"o":{"x":[1,{"y":null}],"n":1.0}})");
  EXPECT_TRUE(ApplyJsonPatch(doc, J(R"([{"op":"test","path":"/o",
                                        "value":{"n":1,"x":[1,{"y":null}]}}])"))
                  .ok());
  EXPECT_FALSE(
      ApplyJsonPatch(doc, J(R"([{"op":"test","path":"/o/x","value":[{"y":null},1]}])")).ok());
  EXPECT_FALSE(ApplyJsonPatch(doc, J(R"([{"op":"test","path":"/o/n","value":"1"}])")).ok());
  EXPECT_FALSE(ApplyJsonPatch(doc, J(R"([{"op":"test","path":"/o/x/1/y","value":false}])")).ok());
  // The whole document, and a missing member (not the same as null).
  EXPECT_TRUE(ApplyJsonPatch(doc, J(R"([{"op":"test","path":"","value":{"o":{"n":1,
                                        "x":[1,{"y":null}]}}}])"))
                  .ok());
  EXPECT_FALSE(ApplyJsonPatch(doc, J(R"([{"op":"test","path":"/o/z","value":null}])")).ok());
}

TEST(ApplyJsonPatch, MoveRules) {
  Json doc = J(R"({"a":{"b":{"c":1}},"l":[1,2,3]})");
  auto child = ApplyJsonPatch(doc, J(R"([{"op":"move","from":"/a","path":"/a/b/d"}])"));
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().reason(), core::Reason::kInvalid);
  EXPECT_NE(child.status().message().find("into its own child"), std::string::npos);

  // A sibling that merely shares a name prefix is not a child.
  auto sibling = ApplyJsonPatch(J(R"({"a":1})"), J(R"([{"op":"move","from":"/a","path":"/ab"}])"));
  ASSERT_TRUE(sibling.ok()) << sibling.status().ToString();
  EXPECT_EQ(*sibling, J(R"({"ab":1})"));

  auto within = ApplyJsonPatch(doc, J(R"([{"op":"move","from":"/l/0","path":"/l/-"}])"));
  ASSERT_TRUE(within.ok()) << within.status().ToString();
  EXPECT_EQ((*within)["l"], J("[2,3,1]"));

  auto up = ApplyJsonPatch(doc, J(R"([{"op":"move","from":"/a/b/c","path":"/a"}])"));
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ((*up)["a"], 1);
}

TEST(ApplyJsonPatch, RootOperations) {
  auto replaced = ApplyJsonPatch(J("[1]"), J(R"([{"op":"replace","path":"","value":"s"}])"));
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(*replaced, "s");
  auto removed = ApplyJsonPatch(J("{}"), J(R"([{"op":"remove","path":""}])"));
  EXPECT_FALSE(removed.ok());
  auto copied = ApplyJsonPatch(J(R"({"a":1})"), J(R"([{"op":"copy","from":"","path":"/self"}])"));
  ASSERT_TRUE(copied.ok());
  EXPECT_EQ(*copied, J(R"({"a":1,"self":{"a":1}})"));
}

TEST(ApplyJsonPatch, RejectsTooManyOperations) {
  Json patch = Json::array();
  for (int i = 0; i < 10001; ++i) patch.push_back(J(R"({"op":"test","path":"","value":{}})"));
  auto r = ApplyJsonPatch(Json::object(), patch);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kRequestEntityTooLarge);
  EXPECT_EQ(r.status().message(),
            "The allowed maximum operations in a JSON patch is 10000, got 10001");

  patch.erase(patch.size() - 1);
  EXPECT_TRUE(ApplyJsonPatch(Json::object(), patch).ok());
}

TEST(ApplyJsonPatch, CopyChainsAreBoundedByTheCopyBudget) {
  // Each copy doubles the document: 40 of them would need 2^40 bytes.
  Json patch = Json::array();
  patch.push_back(
      J(R"({"op":"add","path":"/a","value":"0123456789012345678901234567890123456789"})"));
  for (int i = 0; i < 40; ++i) {
    patch.push_back({{"op", "copy"}, {"from", ""}, {"path", "/k" + std::to_string(i)}});
  }
  auto r = ApplyJsonPatch(Json::object(), patch);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kInvalid);
  EXPECT_NE(r.status().message().find("exceeding the limit 3145728"), std::string::npos)
      << r.status().message();

  JsonPatchOptions small;
  small.max_copy_bytes = 100;
  auto within =
      ApplyJsonPatch(J(R"({"a":"xx"})"), J(R"([{"op":"copy","from":"/a","path":"/b"}])"), small);
  EXPECT_TRUE(within.ok());
  auto over = ApplyJsonPatch(J(R"({"a":"xx"})"), J(R"([{"op":"copy","from":"","path":"/b"},
                                                      {"op":"copy","from":"","path":"/c"},
                                                      {"op":"copy","from":"","path":"/d"},
                                                      {"op":"copy","from":"","path":"/e"}])"),
                             small);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().reason(), core::Reason::kInvalid);
}

TEST(ApplyJsonPatch, CopiesAreIndependentOfTheirSource) {
  auto r = ApplyJsonPatch(J(R"({"a":{"l":[1]}})"), J(R"([
      {"op":"copy","from":"/a","path":"/b"},
      {"op":"add","path":"/a/l/-","value":2},
      {"op":"test","path":"/b/l","value":[1]}])"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, J(R"({"a":{"l":[1,2]},"b":{"l":[1]}})"));
}

TEST(ApplyJsonPatch, LeavesTheInputUntouchedOnFailure) {
  Json doc = J(R"({"a":1})");
  Json before = doc;
  auto r = ApplyJsonPatch(doc, J(R"([{"op":"add","path":"/b","value":2},
                                     {"op":"test","path":"/a","value":2}])"));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(doc, before);
}

}  // namespace
}  // namespace klutch::machinery::json_patch_test
