#include "machinery/fieldpath.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/strings.h"
#include "test/support/json_text.h"

namespace klutch::machinery::fieldpath_test {
namespace {

using fixture::J;

FieldSet Set(std::string_view fields_v1) {
  auto set = FieldSet::FromJson(J(fields_v1));
  EXPECT_TRUE(set.ok()) << set.status().ToString() << " in " << fields_v1;
  return set.ok() ? *set : FieldSet();
}

PathElement F(const char* name) { return PathElement::Field(name); }

TEST(FieldSet, FieldsV1RoundTripsRealEntries) {
  const std::vector<std::string> cases = {
      R"({})",
      R"({"f:data":{".":{},"f:a":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}})",
      R"({"f:data":{".":{},"f:a":{},"f:b":{}},"f:metadata":{"f:annotations":{".":{},)"
      R"("f:kubectl.kubernetes.io/last-applied-configuration":{}}}})",
      R"({"f:spec":{"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},)"
      R"("f:port":{},"f:protocol":{},"f:targetPort":{}}},"f:selector":{},"f:type":{}}})",
      R"({"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{)"
      R"(".":{},"f:image":{},"f:name":{},"f:ports":{".":{},)"
      R"("k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}})",
      R"({"f:metadata":{"f:finalizers":{".":{},"v:\"example.com/cleanup\"":{}}}})",
      R"({"f:spec":{"f:items":{"i:0":{},"i:1":{"f:x":{}}}}})",
      R"({"f:spec":{"f:values":{"v:1":{},"v:true":{},"v:null":{}}}})",
  };
  for (const std::string& text : cases) {
    SCOPED_TRACE(text);
    FieldSet set = Set(text);
    EXPECT_EQ(Dump(set.ToJson()), Dump(J(text)));
    auto again = FieldSet::FromJson(set.ToJson());
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(*again == set);
  }
}

TEST(FieldSet, FromJsonNormalizesAndSkipsWhatKubernetesSkips) {
  struct Case {
    const char* in;
    const char* out;
  };
  const std::vector<Case> cases = {
      // Key fields come out sorted, whatever order they were written in.
      {R"({"k:{\"protocol\":\"TCP\",\"port\":80}":{}})",
       R"({"k:{\"port\":80,\"protocol\":\"TCP\"}":{}})"},
      // Element types from a future version are dropped; a node with nothing known below it
      // is a member.
      {R"({"f:a":{},"x:future":{}})", R"({"f:a":{}})"},
      {R"({"f:a":{"z:b":{}}})", R"({"f:a":{}})"},
      // "." alone, whatever its value, and null are the same as {}.
      {R"({"f:a":{".":{}}})", R"({"f:a":{}})"},
      {R"({"f:a":{".":1},"f:b":null,".":[]})", R"({"f:a":{},"f:b":{}})"},
      // Without ".", a node with children is not itself a member.
      {R"({"f:a":{"f:b":{}}})", R"({"f:a":{"f:b":{}}})"},
      // Go's encoder escapes <, > and & inside keys.
      {R"({"k:{\"name\":\"a<b\"}":{}})", R"({"k:{\"name\":\"a\\u003cb\"}":{}})"},
      {R"({"i:+3":{}})", R"({"i:3":{}})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.in);
    EXPECT_EQ(Dump(Set(c.in).ToJson()), Dump(J(c.out)));
  }
}

TEST(FieldSet, FromJsonRejectsMalformedInput) {
  const std::vector<std::string> cases = {
      R"([])",
      R"("f:a")",
      R"({"f:a":1})",
      R"({"f:a":{"f:b":[]}})",
      R"({"v:1e400":{}})",  // a number no float64 holds
      "{\"v:" + std::string(40, '[') + std::string(40, ']') + "\":{}}",
      R"({"a":{}})",          // shorter than two bytes
      R"({"ab":{}})",         // no colon
      R"({"k:[1]":{}})",      // key not an object
      R"({"k:{\"a\":":{}})",  // malformed key JSON
      R"({"v:":{}})",         // empty value
      R"({"i:x":{}})",        // index not a number
      R"({"i:99999999999999999999":{}})",
  };
  for (const std::string& text : cases) {
    SCOPED_TRACE(text);
    auto set = FieldSet::FromJson(J(text));
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.status().reason(), core::Reason::kBadRequest);
  }
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "{\"f:a\":";
  deep += "{}";
  for (int i = 0; i < 200; ++i) deep += "}";
  auto set = FieldSet::FromJson(J(deep));
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(), "fieldsV1: nesting is too deep");
}

TEST(PathElement, ParseAndSerializeEachKind) {
  struct Case {
    const char* text;
    PathElement::Kind kind;
    const char* human;
  };
  const std::vector<Case> cases = {
      {"f:data", PathElement::Kind::kField, ".data"},
      {"f:", PathElement::Kind::kField, "."},
      {R"(k:{"name":"c"})", PathElement::Kind::kKey, R"([name="c"])"},
      {R"(k:{"port":80,"protocol":"TCP"})", PathElement::Kind::kKey, R"([port=80,protocol="TCP"])"},
      {R"(v:"x")", PathElement::Kind::kValue, R"([="x"])"},
      {"v:1.5", PathElement::Kind::kValue, "[=1.5]"},
      {"v:true", PathElement::Kind::kValue, "[=true]"},
      {"i:0", PathElement::Kind::kIndex, "[0]"},
      {"i:-2", PathElement::Kind::kIndex, "[-2]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto pe = PathElement::Parse(c.text);
    ASSERT_TRUE(pe.ok()) << pe.status().ToString();
    EXPECT_EQ(pe->kind(), c.kind);
    EXPECT_EQ(pe->Serialize(), c.text);
    EXPECT_EQ(pe->ToString(), c.human);
  }
  auto unknown = PathElement::Parse("x:1");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().reason(), core::Reason::kNotFound);
}

TEST(PathToString, MatchesKubeApiserverConflictPaths) {
  struct Case {
    Path path;
    const char* want;
  };
  const std::vector<Case> cases = {
      {{F("data"), F("a")}, ".data.a"},
      {{F("metadata"), F("labels"), F("app")}, ".metadata.labels.app"},
      {{F("spec"), F("ports"), PathElement::Key({{"name", "http"}})},
       R"(.spec.ports[name="http"])"},
      {{F("spec"), F("ports"), PathElement::Key({{"protocol", "TCP"}, {"port", 80}})},
       R"(.spec.ports[port=80,protocol="TCP"])"},
      {{F("spec"), F("containers"), PathElement::Key({{"name", "c"}}), F("image")},
       R"(.spec.containers[name="c"].image)"},
      {{F("spec"), F("tags"), PathElement::Value("x")}, R"(.spec.tags[="x"])"},
      {{F("spec"), F("items"), PathElement::Index(0)}, ".spec.items[0]"},
      {{F("spec"), F("ports"), PathElement::Key({{"name", "a\"b\n"}})},
       R"(.spec.ports[name="a\"b\n"])"},
      {{}, ""},
  };
  for (const Case& c : cases) EXPECT_EQ(PathToString(c.path), c.want);
}

TEST(FieldSet, SetOperations) {
  FieldSet a = Set(R"({"f:data":{".":{},"f:a":{},"f:b":{}},"f:spec":{"f:x":{}}})");
  FieldSet b = Set(R"({"f:data":{"f:b":{},"f:c":{}},"f:spec":{}})");
  struct Case {
    const char* name;
    FieldSet got;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"union", a.Union(b),
       R"({"f:data":{".":{},"f:a":{},"f:b":{},"f:c":{}},"f:spec":{".":{},"f:x":{}}})"},
      {"intersection", a.Intersection(b), R"({"f:data":{"f:b":{}}})"},
      {"difference", a.Difference(b), R"({"f:data":{".":{},"f:a":{}},"f:spec":{"f:x":{}}})"},
      // A member of b removes the whole subtree of a below it.
      {"recursive difference", a.RecursiveDifference(b), R"({"f:data":{".":{},"f:a":{}}})"},
      {"leaves", a.Leaves(), R"({"f:data":{"f:a":{},"f:b":{}},"f:spec":{"f:x":{}}})"},
      {"difference with self", a.Difference(a), R"({})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(Dump(c.got.ToJson()), Dump(J(c.want)));
  }
}

TEST(FieldSet, MembershipAndEnumeration) {
  FieldSet set = Set(R"({"f:data":{".":{},"f:a":{}},"f:apiVersion":{},)"
                     R"("f:spec":{"f:ports":{"k:{\"port\":80}":{".":{},"f:name":{}}}}})");
  EXPECT_FALSE(set.Empty());
  EXPECT_TRUE(FieldSet().Empty());
  EXPECT_EQ(set.Size(), 5u);
  EXPECT_TRUE(set.Has({F("data")}));
  EXPECT_TRUE(set.Has({F("data"), F("a")}));
  EXPECT_FALSE(set.Has({F("spec")}));
  EXPECT_FALSE(set.Has({}));
  EXPECT_TRUE(set.Has({F("spec"), F("ports"), PathElement::Key({{"port", 80}})}));
  // Numbers compare by value whatever their JSON representation.
  EXPECT_TRUE(set.Has({F("spec"), F("ports"), PathElement::Key({{"port", 80.0}})}));
  // Members of a node come before its children's paths: the order conflicts are listed in.
  EXPECT_EQ(set.ToString(),
            ".apiVersion\n.data\n.data.a\n.spec.ports[port=80]\n.spec.ports[port=80].name");

  FieldSet built;
  built.Insert({F("b")});
  built.Insert({F("a"), F("x")});
  built.Insert({F("b")});
  built.Insert({});
  EXPECT_EQ(Dump(built.ToJson()), R"({"f:a":{"f:x":{}},"f:b":{}})");
}

TEST(GoJson, EscapesLikeGoEncodingJson) {
  EXPECT_EQ(GoJson(J(R"({"b":1,"a":"<&>\u2028\t\u0001é"})")),
            R"({"a":"\u003c\u0026\u003e\u2028\t\u0001é","b":1})");
  EXPECT_EQ(GoJson(J("[1.5,1e21,0.0000001,80.0,-3]")), "[1.5,1e+21,1e-7,80,-3]");
  EXPECT_EQ(core::GoQuote("a\"b\\c\x01\xff"), R"("a\"b\\c\x01\xff")");
}

}  // namespace
}  // namespace klutch::machinery::fieldpath_test
