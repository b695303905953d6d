// Crossplane field paths: parsing and printing, reading, writing with every merge policy, and
// deleting. Expectations follow crossplane-runtime's fieldpath package (the syntax of
// Composition patches) and the contract in fieldpath.h.
#include "compose/fieldpath.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/support/json_text.h"

namespace klutch::compose::fieldpath_test {
namespace {

using fixture::J;

PathSegment F(std::string name) { return PathSegment{.field = std::move(name)}; }
PathSegment I(int64_t index) { return PathSegment{.is_index = true, .index = index}; }

FieldPath P(std::string_view text) {
  auto parsed = ParseFieldPath(text);
  EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.status().ToString();
  return parsed.ok() ? *parsed : FieldPath();
}

TEST(ParseFieldPath, SplitsFieldsIndicesAndBracketedKeys) {
  struct Case {
    std::string text;
    FieldPath want;
  };
  const std::vector<Case> cases = {
      {"metadata.name", {F("metadata"), F("name")}},
      {"metadata.labels[crossplane.io/claim-name]",
       {F("metadata"), F("labels"), F("crossplane.io/claim-name")}},
      {"a[0].b", {F("a"), I(0), F("b")}},
      {"a[1][2]", {F("a"), I(1), I(2)}},
      {"status.conditions[0].type", {F("status"), F("conditions"), I(0), F("type")}},
      {"[42]", {I(42)}},
      {"data[.config.yml]", {F("data"), F(".config.yml")}},
      {"spec[klutch.io/instance-type].x", {F("spec"), F("klutch.io/instance-type"), F("x")}},
      // Bracketed text that is not a non-negative decimal integer is a key.
      {"a[-1]", {F("a"), F("-1")}},
      {"a[x1]", {F("a"), F("x1")}},
      // A dotted segment is always a field, even when it looks like a number.
      {"a.0", {F("a"), F("0")}},
      {"apiVersion", {F("apiVersion")}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto got = ParseFieldPath(c.text);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, c.want);
  }
}

TEST(ParseFieldPath, StripsQuotesAroundBracketedKeysAsCrossplaneDoes) {
  // crossplane-runtime documents metadata.annotations['crossplane.io/external-name'] as valid.
  EXPECT_EQ(P("metadata.annotations['crossplane.io/external-name']"),
            (FieldPath{F("metadata"), F("annotations"), F("crossplane.io/external-name")}));
  EXPECT_EQ(P("data[\"a.b\"]"), (FieldPath{F("data"), F("a.b")}));
}

TEST(ParseFieldPath, RejectsMalformedPathsNamingTheOffset) {
  const std::vector<std::string> bad = {
      "",         // empty
      "a..b",     // empty segment
      ".a",       // leading period
      "a.",       // trailing period
      "a[0].",    // trailing period after a bracket
      "a[",       // unclosed
      "a[0",      // unclosed
      "a]",       // ] without [
      "]",        // ] without [
      "a[]",      // empty brackets
      "a[0]b",    // text right after ]
      "a[b[c]]",  // nested [
      "a['']",    // a key that is empty once its quotes are gone
  };
  for (const std::string& text : bad) {
    SCOPED_TRACE(text);
    auto got = ParseFieldPath(text);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().reason(), core::Reason::kBadRequest);
    EXPECT_NE(got.status().message().find("offset"), std::string::npos) << got.status().message();
    EXPECT_NE(got.status().message().find("\"" + text + "\""), std::string::npos)
        << got.status().message();
  }
}

TEST(FieldPathToString, PrintsCanonicalTextThatParsesBack) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"metadata.labels[crossplane.io/claim-name]", "metadata.labels[crossplane.io/claim-name]"},
      {"a[0].b", "a[0].b"},
      {"a[1][2]", "a[1][2]"},
      {"[3].x", "[3].x"},
      {"a[b]", "a.b"},  // brackets are only needed for keys holding '.'
      {"a.0", "a.0"},   // a field named "0" must not print as index [0]
      {"a[-1]", "a.-1"},
      {"metadata.annotations['x.y']", "metadata.annotations[x.y]"},
  };
  for (const auto& [in, want] : cases) {
    SCOPED_TRACE(in);
    FieldPath path = P(in);
    EXPECT_EQ(FieldPathToString(path), want);
    EXPECT_EQ(P(FieldPathToString(path)), path);
  }
}

TEST(GetPath, ReadsPresentValuesAndReportsAbsence) {
  Json root = J(R"({"metadata":{"labels":{"crossplane.io/claim-name":"pg"}},
                    "a":[{"b":1},[10,20,30]],"s":"text","n":null})");
  ASSERT_NE(GetPath(root, P("metadata.labels[crossplane.io/claim-name]")), nullptr);
  EXPECT_EQ(*GetPath(root, P("metadata.labels[crossplane.io/claim-name]")), "pg");
  EXPECT_EQ(*GetPath(root, P("a[0].b")), 1);
  EXPECT_EQ(*GetPath(root, P("a[1][2]")), 30);
  EXPECT_EQ(*GetPath(root, P("a")), root["a"]);
  // A present null is present.
  ASSERT_NE(GetPath(root, P("n")), nullptr);
  EXPECT_TRUE(GetPath(root, P("n"))->is_null());

  // Missing and mistyped steps are absent, never an error.
  for (const char* missing : {"metadata.annotations", "metadata.labels[other]", "a[2]", "a[1][3]",
                              "a[0].c", "s.x", "s[0]", "a.b", "metadata[0]", "n.x", "x.y.z"}) {
    SCOPED_TRACE(missing);
    EXPECT_EQ(GetPath(root, P(missing)), nullptr);
  }
  EXPECT_EQ(GetPath(Json(), P("a")), nullptr);
  EXPECT_EQ(GetPath(J("[1]"), P("[0]"))->get<int>(), 1);
}

TEST(SetPath, CreatesObjectsAndArraysOnTheWay) {
  Json root = Json::object();
  ASSERT_TRUE(SetPath(root, P("spec.forProvider.manifest.metadata.name"), "pg").ok());
  ASSERT_TRUE(SetPath(root, P("metadata.labels[crossplane.io/claim-name]"), "claim").ok());
  ASSERT_TRUE(SetPath(root, P("list[2].name"), "third").ok());
  ASSERT_TRUE(SetPath(root, P("grid[1][1]"), 5).ok());
  EXPECT_EQ(root, J(R"({
      "spec":{"forProvider":{"manifest":{"metadata":{"name":"pg"}}}},
      "metadata":{"labels":{"crossplane.io/claim-name":"claim"}},
      "list":[null,null,{"name":"third"}],
      "grid":[null,[null,5]]})"));

  // A null root becomes whatever the first segment needs.
  Json null_root;
  ASSERT_TRUE(SetPath(null_root, P("[1]"), "x").ok());
  EXPECT_EQ(null_root, J(R"([null,"x"])"));
}

TEST(SetPath, GrowsArraysAndOverwritesInPlace) {
  Json root = J(R"({"a":[1,2]})");
  ASSERT_TRUE(SetPath(root, P("a[4]"), 5).ok());
  EXPECT_EQ(root, J(R"({"a":[1,2,null,null,5]})"));
  ASSERT_TRUE(SetPath(root, P("a[0]"), "one").ok());
  EXPECT_EQ(root["a"][0], "one");
  EXPECT_EQ(root["a"].size(), 5u);
  ASSERT_TRUE(SetPath(root, P("a[1]"), J(R"({"k":"v"})")).ok());
  EXPECT_EQ(root["a"][1], J(R"({"k":"v"})"));
}

TEST(SetPath, FailsWhenThePathCrossesAValueOfTheWrongType) {
  Json root = J(R"({"s":"text","n":3,"list":[1],"obj":{"a":1}})");
  const Json before = root;
  struct Case {
    const char* path;
    const char* names;  // what the message must mention
  };
  for (const Case& c : std::vector<Case>{{"s.x", "s"},
                                         {"n[0]", "n"},
                                         {"list.x", "list"},
                                         {"obj[0]", "obj"},
                                         {"list[0].x", "list[0]"},
                                         {"obj.a.b", "obj.a"}}) {
    SCOPED_TRACE(c.path);
    core::Status s = SetPath(root, P(c.path), 1);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.reason(), core::Reason::kBadRequest);
    EXPECT_NE(s.message().find(c.names), std::string::npos) << s.message();
  }
  EXPECT_EQ(root, before);
  // The root itself of the wrong type.
  Json scalar = "x";
  EXPECT_FALSE(SetPath(scalar, P("a"), 1).ok());
  Json object = Json::object();
  EXPECT_FALSE(SetPath(object, P("[0]"), 1).ok());
}

TEST(SetPath, RefusesToGrowAnArrayFarPastItsEnd) {
  Json root = Json::object();
  core::Status s = SetPath(root, P("a[10001]"), 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), core::Reason::kBadRequest);
  EXPECT_NE(s.message().find("10001"), std::string::npos) << s.message();
  ASSERT_TRUE(SetPath(root, P("b[10000]"), 1).ok());
  EXPECT_EQ(root["b"].size(), 10001u);
  // Far past the end of an existing array.
  root = J(R"({"a":[1,2,3]})");
  EXPECT_FALSE(SetPath(root, P("a[10004]"), 1).ok());
  EXPECT_TRUE(SetPath(root, P("a[10003]"), 1).ok());
}

TEST(SetPath, RejectsNegativeIndices) {
  // ParseFieldPath never yields one, but a FieldPath can be built by hand.
  Json root = Json::object();
  core::Status s = SetPath(root, FieldPath{F("a"), I(-1)}, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.reason(), core::Reason::kBadRequest);
  EXPECT_EQ(GetPath(J(R"({"a":[1]})"), FieldPath{F("a"), I(-1)}), nullptr);
  Json list = J(R"({"a":[1]})");
  EXPECT_FALSE(DeletePath(list, FieldPath{F("a"), I(-1)}));
}

TEST(SetPath, ReplaceOverwritesWhateverIsThere) {
  Json root = J(R"({"o":{"a":1,"b":{"c":2}},"l":[1,2]})");
  ASSERT_TRUE(SetPath(root, P("o"), J(R"({"b":{"d":3}})")).ok());
  ASSERT_TRUE(SetPath(root, P("l"), J("[3]"), MergePolicy::kReplace).ok());
  EXPECT_EQ(root, J(R"({"o":{"b":{"d":3}},"l":[3]})"));
}

TEST(SetPath, MergePoliciesCombineObjectsAndArrays) {
  const Json existing = J(R"({"keep":"old","obj":{"x":1,"list":[1,2]},"list":[1,2],"n":null})");
  const Json incoming = J(R"({"keep":"new","obj":{"y":2,"list":[2,3]},"list":[2,3],"n":"set",
                              "added":true})");
  struct Case {
    MergePolicy policy;
    const char* want;
  };
  const std::vector<Case> cases = {
      {MergePolicy::kReplace, R"({"keep":"new","obj":{"y":2,"list":[2,3]},"list":[2,3],"n":"set",
                                  "added":true})"},
      // Existing values win; missing (or null) ones are filled in; arrays are kept.
      {MergePolicy::kMergeObjects,
       R"({"keep":"old","obj":{"x":1,"y":2,"list":[1,2]},"list":[1,2],"n":"set","added":true})"},
      // As above, arrays get the new elements they lack appended.
      {MergePolicy::kMergeObjectsAppendArrays,
       R"({"keep":"old","obj":{"x":1,"y":2,"list":[1,2,3]},"list":[1,2,3],"n":"set",
           "added":true})"},
      // New values win, arrays are replaced.
      {MergePolicy::kForceMergeObjects,
       R"({"keep":"new","obj":{"x":1,"y":2,"list":[2,3]},"list":[2,3],"n":"set","added":true})"},
      {MergePolicy::kForceMergeObjectsAppendArrays,
       R"({"keep":"new","obj":{"x":1,"y":2,"list":[1,2,3]},"list":[1,2,3],"n":"set",
           "added":true})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.policy));
    Json root{{"spec", existing}};
    ASSERT_TRUE(SetPath(root, P("spec"), incoming, c.policy).ok());
    EXPECT_EQ(root["spec"], J(c.want)) << root["spec"].dump();
  }
}

TEST(SetPath, MergePoliciesTreatTheTargetLikeANestedValue) {
  // An array at the path itself: appended to (without duplicates) or kept or replaced.
  struct Case {
    MergePolicy policy;
    const char* existing;
    const char* incoming;
    const char* want;
  };
  const std::vector<Case> cases = {
      {MergePolicy::kMergeObjectsAppendArrays, "[1,2]", "[2,3]", "[1,2,3]"},
      {MergePolicy::kForceMergeObjectsAppendArrays, "[1,2]", "[2,3]", "[1,2,3]"},
      {MergePolicy::kForceMergeObjects, "[1,2]", "[2,3]", "[2,3]"},
      {MergePolicy::kMergeObjects, "[1,2]", "[2,3]", "[1,2]"},
      // A scalar already there is kept by the MergeObjects policies, overwritten by Force.
      {MergePolicy::kMergeObjects, "\"old\"", "\"new\"", "\"old\""},
      {MergePolicy::kMergeObjectsAppendArrays, "1", "2", "1"},
      {MergePolicy::kForceMergeObjects, "\"old\"", "\"new\"", "\"new\""},
      {MergePolicy::kForceMergeObjectsAppendArrays, "1", "2", "2"},
      // Nothing there yet (or null): every policy sets the value.
      {MergePolicy::kMergeObjects, "null", "{\"a\":1}", "{\"a\":1}"},
      {MergePolicy::kMergeObjectsAppendArrays, "null", "[1]", "[1]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.existing) + " <- " + c.incoming);
    Json root{{"v", J(c.existing)}};
    ASSERT_TRUE(SetPath(root, P("v"), J(c.incoming), c.policy).ok());
    EXPECT_EQ(root["v"], J(c.want)) << root.dump();
  }
  // A missing target is simply created.
  Json root = Json::object();
  ASSERT_TRUE(SetPath(root, P("a.b"), J(R"({"c":1})"), MergePolicy::kMergeObjects).ok());
  EXPECT_EQ(root, J(R"({"a":{"b":{"c":1}}})"));
}

TEST(DeletePath, RemovesFieldsAndArrayElements) {
  Json root = J(R"({"metadata":{"labels":{"a.b/c":"x","d":"y"}},"list":[1,2,3]})");
  EXPECT_TRUE(DeletePath(root, P("metadata.labels[a.b/c]")));
  EXPECT_EQ(root["metadata"]["labels"], J(R"({"d":"y"})"));
  EXPECT_TRUE(DeletePath(root, P("list[1]")));
  EXPECT_EQ(root["list"], J("[1,3]"));
  EXPECT_TRUE(DeletePath(root, P("metadata")));
  EXPECT_EQ(root, J(R"({"list":[1,3]})"));
}

TEST(DeletePath, ReportsAbsence) {
  Json root = J(R"({"a":{"b":1},"list":[1],"s":"x"})");
  const Json before = root;
  for (const char* path : {"a.c", "a.b.c", "list[1]", "list.x", "s.x", "s[0]", "x.y", "a[0]"}) {
    SCOPED_TRACE(path);
    EXPECT_FALSE(DeletePath(root, P(path)));
  }
  EXPECT_FALSE(DeletePath(root, FieldPath()));
  EXPECT_EQ(root, before);
}

}  // namespace
}  // namespace klutch::compose::fieldpath_test
