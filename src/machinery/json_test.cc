#include "machinery/json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace klutch::machinery {
namespace {

TEST(ParseJson, ReportsPositionOfMalformedInput) {
  auto r = ParseJson("{\"a\": 1,}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kBadRequest);
  EXPECT_NE(r.status().message().find("byte"), std::string::npos);
  EXPECT_EQ(*ParseJson("{\"a\":[1,2]}"), Json::parse("{\"a\":[1,2]}"));
}

TEST(ParseJson, RejectsHostileInputWithoutCrashing) {
  EXPECT_EQ(ParseJson("[1e400]").status().reason(), core::Reason::kBadRequest);
  std::string deep(kMaxJsonDepth + 1, '[');
  deep += std::string(kMaxJsonDepth + 1, ']');
  auto r = ParseJson(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nesting"), std::string::npos);
  std::string ok(kMaxJsonDepth, '[');
  ok += std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(ParseJson(ok).ok());
  EXPECT_TRUE(ParseJson(R"(["[[[[", "\\\"["])").ok());
}

TEST(ParseJson, ReportsRepeatedKeysWithTheirPaths) {
  std::vector<std::string> dups;
  auto r = ParseJsonReportingDuplicates(
      R"({"a":1,"a":2,"m":{"x":[{"k":1,"k":2}],"y":1,"y":3},"list":[{"a":1},{"a":2}]})", dups);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["a"], 2);
  EXPECT_EQ(dups, (std::vector<std::string>{"a", "m.x.k", "m.y"}));
  dups.clear();
  EXPECT_FALSE(ParseJsonReportingDuplicates("{\"a\":", dups).ok());
}

TEST(ParseYaml, ResolvesPlainScalarsLikeKubernetes) {
  auto r =
      ParseYaml("a: 1\nb: true\nc: \"1\"\nd: ~\ne: 1.5\nf: hello\ng: '007'\nh:\n  - x\n  - 2\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Json want =
      Json::parse(R"({"a":1,"b":true,"c":"1","d":null,"e":1.5,"f":"hello","g":"007","h":["x",2]})");
  EXPECT_EQ(*r, want);
}

TEST(ParseYaml, RefusesAliasBombs) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + std::string(1, c) + " [*" + prev;
    for (int i = 0; i < 8; ++i) bomb += ", *" + prev;
    bomb += "]\n";
  }
  auto r = ParseYaml(bomb);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too many nodes"), std::string::npos);
  // Modest aliasing is fine.
  auto ok = ParseYaml("base: &b {x: 1}\ncopy: *b\n");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["copy"]["x"], 1);
}

TEST(ParseYaml, AcceptsJsonAndRejectsSeveralDocuments) {
  EXPECT_EQ(*ParseYaml(R"({"kind":"ConfigMap"})"), Json::parse(R"({"kind":"ConfigMap"})"));
  auto multi = ParseYaml("a: 1\n---\nb: 2\n");
  EXPECT_FALSE(multi.ok());
  auto bad = ParseYaml("a: [1, 2\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line"), std::string::npos);
}

}  // namespace
}  // namespace klutch::machinery
