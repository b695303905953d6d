#include "machinery/json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace klutch::machinery::json_test {
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

TEST(ParseYamlDocuments, SplitsStreamsAndSkipsEmptyDocuments) {
  auto docs = ParseYamlDocuments("---\na: 1\n---\n# only a comment\n---\n- x\n");
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0], Json::parse(R"({"a":1})"));
  EXPECT_EQ((*docs)[1], Json::parse(R"(["x"])"));
  auto json = ParseYamlDocuments(R"({"kind":"List"})");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->size(), 1u);
  auto none = ParseYamlDocuments("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto bad = ParseYamlDocuments("a: 1\n---\nb: [\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().reason(), core::Reason::kBadRequest);
  // ParseYaml still insists on one document.
  EXPECT_FALSE(ParseYaml("a: 1\n---\nb: 2\n").ok());
}

TEST(ToYaml, PrintsLikeKubectlAndReadsBack) {
  Json v = Json::parse(R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"x",
      "labels":{}},"data":{"a":"b"},"list":[{"name":"one","v":1},"two",[],[1,2]],
      "empty":[]})");
  EXPECT_EQ(ToYaml(v),
            "apiVersion: v1\n"
            "data:\n"
            "  a: b\n"
            "empty: []\n"
            "kind: Secret\n"
            "list:\n"
            "- name: one\n"
            "  v: 1\n"
            "- two\n"
            "- []\n"
            "-\n"
            "  - 1\n"
            "  - 2\n"
            "metadata:\n"
            "  labels: {}\n"
            "  name: x\n");
  auto back = ParseYaml(ToYaml(v));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, v);
}

TEST(ToYaml, QuotesStringsThatWouldReadBackAsSomethingElse) {
  for (const char* text : {"",
                           "true",
                           "no",
                           "Off",
                           "null",
                           "~",
                           "123",
                           "1.5",
                           "1e3",
                           "-",
                           "- x",
                           "---",
                           "--- x",
                           "...",
                           "... x",
                           "a: b",
                           "a #b",
                           "#x",
                           "*x",
                           "&x",
                           "!x",
                           "%x",
                           "@x",
                           "`x",
                           "{x",
                           "[x",
                           "|",
                           ">",
                           "'q'",
                           "\"q\"",
                           " lead",
                           "trail ",
                           "colon:",
                           "line\nbreak",
                           "tab\there",
                           "ctl\x01",
                           "del\x7f",
                           "\xc2\x85",
                           "ls\xe2\x80\xa8ps\xe2\x80\xa9",
                           "\xef\xbb\xbf"
                           "bom",
                           "unicode \xc3\xa9",
                           "back\\slash",
                           "0x1F",
                           ".inf",
                           "y"}) {
    // As a value, as a key (both at the start of a line) and as the whole document.
    for (const Json& v : {Json::object({{"k", text}, {"list", Json::array({text})}}),
                          Json::object({{text, "v"}}), Json(text)}) {
      auto back = ParseYaml(ToYaml(v));
      ASSERT_TRUE(back.ok()) << text << ": " << back.status().ToString() << "\n" << ToYaml(v);
      EXPECT_EQ(*back, v) << text << "\n" << ToYaml(v);
    }
  }
  EXPECT_EQ(ToYaml(Json::object({{"k", "plain text"}})), "k: plain text\n");
  EXPECT_EQ(ToYaml(Json("x")), "x\n");
  EXPECT_EQ(ToYaml(Json::object()), "{}\n");
}

}  // namespace
}  // namespace klutch::machinery::json_test
