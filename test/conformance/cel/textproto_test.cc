#include "test/conformance/cel/textproto.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "test/conformance/cel/conformance_value.h"

namespace klutch::textproto {
namespace {

Message MustParse(std::string_view text) {
  auto parsed = Parse(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : Message();
}

std::string StringField(std::string_view text) {
  Message m = MustParse(text);
  auto s = m.FindString("s");
  EXPECT_TRUE(s.has_value()) << text;
  return s.value_or("<none>");
}

TEST(TextprotoParse, NestedMessagesKeepFieldOrderAndRepeats) {
  Message m = MustParse(R"pb(
    # a comment
    name: "basic"  # trailing comment
    section { name: "s1"
              test { name: "a" expr: "1" }
              test: { name: "b", expr: "2"
    ; }
    }
    section: < name: "s2" >
  )pb");
  ASSERT_EQ(m.fields().size(), 3u);
  EXPECT_EQ(m.FindString("name"), "basic");
  auto sections = m.FindAll("section");
  ASSERT_EQ(sections.size(), 2u);
  const Message& s1 = sections[0]->message();
  EXPECT_EQ(s1.FindString("name"), "s1");
  auto tests = s1.FindAll("test");
  ASSERT_EQ(tests.size(), 2u);
  EXPECT_EQ(tests[0]->message().FindString("name"), "a");
  EXPECT_EQ(tests[1]->message().FindString("expr"), "2");
  EXPECT_EQ(sections[1]->message().FindString("name"), "s2");
  EXPECT_EQ(sections[1]->line, 9);
}

TEST(TextprotoParse, StringEscapes) {
  EXPECT_EQ(StringField(R"(s: "a\nb\t\\\"\'")"), "a\nb\t\\\"'");
  EXPECT_EQ(StringField(R"(s: 'it\'s "quoted"')"), "it's \"quoted\"");
  EXPECT_EQ(StringField(R"(s: "\303\277\000\377")"), std::string("\xc3\xbf\0\xff", 4));
  EXPECT_EQ(StringField(R"(s: "\7x\12")"), "\ax\n");
  EXPECT_EQ(StringField(R"(s: "\xe2\x9c\x8c\x41")"),
            "\xe2\x9c\x8c"
            "A");
  EXPECT_EQ(StringField(R"(s: "\u270c")"), "\xe2\x9c\x8c");
  EXPECT_EQ(StringField(R"(s: "\U0001f431")"), "\xf0\x9f\x90\xb1");
  EXPECT_EQ(StringField(R"(s: "\a\b\f\v\r\?")"), "\a\b\f\v\r?");
  // Raw UTF-8 passes through unchanged.
  EXPECT_EQ(StringField("s: \"b'\xc3\xbf'\""), "b'\xc3\xbf'");
}

TEST(TextprotoParse, AdjacentStringsConcatenate) {
  EXPECT_EQ(StringField("s: \"ab\" 'cd'\n  \"ef\" # comment\n 'g'"), "abcdefg");
}

TEST(TextprotoParse, NumbersAndIdentifiers) {
  Message m = MustParse(
      "a: 0 b: -12 c: 1e+300 d: -inf e: nan f: 0x1F g: NULL_VALUE h: true i: 2.5E-3 j: .5 "
      "k: 9223372036854775807 l: -9223372036854775808 m: 18446744073709551615 n: inf "
      "o: - 7 p: 1.5f q: Infinity");
  auto scalar = [&](std::string_view name) { return m.Find(name)->scalar(); };
  EXPECT_EQ(*ToInt64(scalar("a")), 0);
  EXPECT_EQ(*ToInt64(scalar("b")), -12);
  EXPECT_EQ(*ToDouble(scalar("c")), 1e300);
  EXPECT_EQ(*ToDouble(scalar("d")), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(*ToDouble(scalar("e"))));
  EXPECT_EQ(*ToInt64(scalar("f")), 31);
  EXPECT_EQ(scalar("g").type, Scalar::Type::kIdentifier);
  EXPECT_EQ(scalar("g").text, "NULL_VALUE");
  EXPECT_TRUE(*ToBool(scalar("h")));
  EXPECT_DOUBLE_EQ(*ToDouble(scalar("i")), 2.5e-3);
  EXPECT_DOUBLE_EQ(*ToDouble(scalar("j")), 0.5);
  EXPECT_EQ(*ToInt64(scalar("k")), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*ToInt64(scalar("l")), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*ToUint64(scalar("m")), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*ToDouble(scalar("n")), std::numeric_limits<double>::infinity());
  EXPECT_EQ(*ToInt64(scalar("o")), -7);
  EXPECT_EQ(*ToDouble(scalar("p")), 1.5);
  EXPECT_EQ(*ToDouble(scalar("q")), std::numeric_limits<double>::infinity());
  EXPECT_EQ(*ToDouble(scalar("b")), -12.0);
}

TEST(TextprotoParse, ScalarConversionsRejectMismatches) {
  Message m =
      MustParse("a: 9223372036854775808 b: -1 c: 1.5 d: \"x\" e: maybe f: 18446744073709551616");
  EXPECT_FALSE(ToInt64(m.Find("a")->scalar()).ok());
  EXPECT_TRUE(ToUint64(m.Find("a")->scalar()).ok());
  EXPECT_FALSE(ToUint64(m.Find("b")->scalar()).ok());
  EXPECT_FALSE(ToInt64(m.Find("c")->scalar()).ok());
  EXPECT_FALSE(ToDouble(m.Find("d")->scalar()).ok());
  EXPECT_FALSE(ToBool(m.Find("e")->scalar()).ok());
  EXPECT_FALSE(ToUint64(m.Find("f")->scalar()).ok());
}

TEST(TextprotoParse, AnyExpansionAndLists) {
  Message m = MustParse(R"pb(
    object_value {
      [type.googleapis.com/google.protobuf.Duration] { seconds: 123 nanos: 321456789 }
    }
    values:
    [ { int64_value: 1 }
      , { int64_value: 2 }]
    names: [ "a", 'b' ]
    empty: []
  )pb");
  const Message* any = m.FindMessage("object_value");
  ASSERT_NE(any, nullptr);
  ASSERT_EQ(any->fields().size(), 1u);
  EXPECT_EQ(any->fields()[0].name, "type.googleapis.com/google.protobuf.Duration");
  EXPECT_EQ(m.FindAll("values").size(), 2u);
  auto names = m.FindAll("names");
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[1]->scalar().text, "b");
  EXPECT_EQ(m.Find("empty"), nullptr);
}

TEST(TextprotoParse, ErrorsNameTheLine) {
  struct Case {
    std::string_view text;
    std::string_view message;
  };
  for (const Case& c : {
           Case{"a: \"unterminated", "line 1: unterminated string"},
           Case{"a {\n b: 1\n", "line 3: unexpected end of input, expected '}'"},
           Case{"a 1", "line 1: expected ':' or '{' after field 'a'"},
           Case{"a: \"\\q\"", "line 1: unknown escape \\q"},
           Case{"\n: 1", "line 2: expected a field name, got ':'"},
           Case{"a: \"\\u12\"", "line 1: \\u escape needs 4 hex digits"},
           Case{"a: }", "line 1: expected a value, got '}'"},
           Case{"a: [1 2]", "line 1: expected ',' or ']' in list of 'a'"},
       }) {
    auto parsed = Parse(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().message(), c.message) << c.text;
  }
}

// Every conformance file the runner reads parses.
TEST(TextprotoParse, ParsesEveryCelSpecFile) {
  for (const char* name : {"basic", "comparisons", "conversions", "fields", "integer_math",
                           "fp_math", "lists", "logic", "macros", "macros2", "parse", "plumbing",
                           "string", "string_ext", "timestamps", "optionals"}) {
    std::ifstream in(std::string(KLUTCH_SHARED_DIR "/conformance/cel-spec/") + name + ".textproto");
    ASSERT_TRUE(in) << name;
    std::stringstream buffer;
    buffer << in.rdbuf();
    auto parsed = Parse(buffer.str());
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->FindString("name"), name);
    EXPECT_FALSE(parsed->FindAll("section").empty()) << name;
  }
}

}  // namespace
}  // namespace klutch::textproto

namespace klutch::cel_conformance {
namespace {

cel::Value Convert(std::string_view text) {
  auto parsed = textproto::Parse(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (!parsed.ok()) return cel::Value::MakeError("parse");
  auto converted = ToCelValue(*parsed);
  EXPECT_TRUE(converted.ok()) << text << ": " << converted.status().ToString();
  if (!converted.ok()) return cel::Value::MakeError("convert");
  EXPECT_EQ(converted->unsupported, "") << text;
  return converted->value;
}

std::string Unsupported(std::string_view text) {
  auto parsed = textproto::Parse(text);
  EXPECT_TRUE(parsed.ok());
  auto converted = ToCelValue(*parsed);
  EXPECT_TRUE(converted.ok()) << converted.status().ToString();
  return converted.ok() ? converted->unsupported : "";
}

TEST(ConformanceValue, ScalarKinds) {
  EXPECT_EQ(Convert("null_value: NULL_VALUE").kind(), cel::Kind::kNull);
  EXPECT_TRUE(Convert("bool_value: true").bool_value());
  EXPECT_EQ(Convert("int64_value: -9223372036854775808").int_value(), INT64_MIN);
  EXPECT_EQ(Convert("uint64_value: 18446744073709551615").uint_value(), UINT64_MAX);
  EXPECT_EQ(Convert("double_value: 1e+300").double_value(), 1e300);
  EXPECT_EQ(Convert("double_value: 0").kind(), cel::Kind::kDouble);
  EXPECT_TRUE(std::isnan(Convert("double_value: nan").double_value()));
  EXPECT_EQ(Convert("string_value: '\\u270c'").string_value(), "\xe2\x9c\x8c");
  cel::Value bytes = Convert("bytes_value: \"\\000\\377\"");
  ASSERT_EQ(bytes.kind(), cel::Kind::kBytes);
  EXPECT_EQ(bytes.bytes_value(), std::string("\0\xff", 2));
  cel::Value type = Convert("type_value: \"google.protobuf.Timestamp\"");
  ASSERT_EQ(type.kind(), cel::Kind::kType);
  EXPECT_EQ(type.type_name(), "google.protobuf.Timestamp");
}

TEST(ConformanceValue, ListsAndMaps) {
  cel::Value list =
      Convert("list_value { values { int64_value: 1 } values: { string_value: 'x' } }");
  ASSERT_EQ(list.kind(), cel::Kind::kList);
  ASSERT_EQ(list.list().size(), 2u);
  EXPECT_EQ(list.list().Get(0).int_value(), 1);
  EXPECT_EQ(list.list().Get(1).string_value(), "x");
  EXPECT_EQ(Convert("list_value: {}").list().size(), 0u);

  cel::Value map = Convert(R"pb(
    map_value {
      entries {
        key: { string_value: "k" }
        value: { list_value { values { bool_value: false } } }
      }
      entries {
        key: { uint64_value: 2 }
        value: { null_value: NULL_VALUE }
      }
    })pb");
  ASSERT_EQ(map.kind(), cel::Kind::kMap);
  ASSERT_EQ(map.map().size(), 2u);
  auto k = map.map().Find(cel::Value::String("k"));
  ASSERT_TRUE(k.has_value());
  EXPECT_FALSE(k->list().Get(0).bool_value());
  EXPECT_TRUE(map.map().Find(cel::Value::Uint(2)).has_value());
  EXPECT_EQ(Convert("map_value: {}").map().size(), 0u);
}

TEST(ConformanceValue, TimestampAndDurationPayloads) {
  cel::Value d = Convert(
      R"pb(object_value {
             [type.googleapis.com/google.protobuf.Duration] { seconds: 123 nanos: 321456789 }
           })pb");
  ASSERT_EQ(d.kind(), cel::Kind::kDuration);
  EXPECT_EQ(d.duration(), (cel::Duration{123, 321456789}));
  cel::Value t =
      Convert(R"pb(object_value {
                     [type.googleapis.com/google.protobuf.Timestamp] { seconds: 1234567890 }
                   })pb");
  ASSERT_EQ(t.kind(), cel::Kind::kTimestamp);
  EXPECT_EQ(t.timestamp(), (cel::Timestamp{1234567890, 0}));
}

TEST(ConformanceValue, MessagesAndEnumsAreUnsupported) {
  EXPECT_EQ(Unsupported(R"pb(object_value {
                               [type.googleapis.com/cel.expr.conformance.proto3.TestAllTypes] {
                                 single_int64: 1
                               }
                             })pb"),
            "protobuf message cel.expr.conformance.proto3.TestAllTypes");
  EXPECT_EQ(Unsupported("enum_value { type: 'x.E' value: 1 }"), "enum_value");
  // Unsupported inside a container makes the whole value unsupported.
  EXPECT_EQ(Unsupported("list_value { values { enum_value { value: 2 } } }"), "enum_value");
}

TEST(ConformanceValue, MalformedValuesAreErrors) {
  for (std::string_view text : {"", "int64_value: 1 bool_value: true", "int64_value: 'x'",
                                "bool_value: 3", "list_value { other: 1 }", "color_value: 1",
                                "map_value { entries { key { double_value: 1 } value { "
                                "int64_value: 1 } } }",
                                "object_value { [type.googleapis.com/google.protobuf.Timestamp] "
                                "{ seconds: 253402300800 } }"}) {
    auto parsed = textproto::Parse(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_FALSE(ToCelValue(*parsed).ok()) << text;
  }
}

TEST(ConformanceValue, ExactEqualityDistinguishesNumericKinds) {
  using cel::Value;
  EXPECT_TRUE(ExactlyEqual(Value::Int(3), Value::Int(3)));
  EXPECT_FALSE(ExactlyEqual(Value::Int(3), Value::Double(3.0)));
  EXPECT_FALSE(ExactlyEqual(Value::Int(3), Value::Uint(3)));
  EXPECT_TRUE(ExactlyEqual(Value::Double(NAN), Value::Double(NAN)));
  EXPECT_FALSE(ExactlyEqual(Value::Double(NAN), Value::Double(1)));
  EXPECT_TRUE(ExactlyEqual(Value::List({Value::Int(1), Value::String("a")}),
                           Value::List({Value::Int(1), Value::String("a")})));
  EXPECT_FALSE(ExactlyEqual(Value::List({Value::Int(1)}), Value::List({Value::Double(1)})));
  EXPECT_FALSE(ExactlyEqual(Value::List({Value::Int(1), Value::Int(2)}),
                            Value::List({Value::Int(2), Value::Int(1)})));
  Value m1 = Value::Map({{Value::Int(1), Value::String("a")}, {Value::String("b"), Value::Null()}});
  Value m2 = Value::Map({{Value::String("b"), Value::Null()}, {Value::Int(1), Value::String("a")}});
  Value m3 =
      Value::Map({{Value::Uint(1), Value::String("a")}, {Value::String("b"), Value::Null()}});
  EXPECT_TRUE(ExactlyEqual(m1, m2));
  EXPECT_FALSE(ExactlyEqual(m1, m3));
  EXPECT_TRUE(ExactlyEqual(Value::OptionalNone(), Value::OptionalNone()));
  EXPECT_FALSE(ExactlyEqual(Value::OptionalOf(Value::Int(1)), Value::OptionalNone()));
  EXPECT_TRUE(ExactlyEqual(Value::OptionalOf(Value::Int(1)), Value::OptionalOf(Value::Int(1))));
  EXPECT_FALSE(ExactlyEqual(Value::MakeError("x"), Value::MakeError("x")));
  EXPECT_TRUE(ExactlyEqual(Value::Time({1, 2}), Value::Time({1, 2})));
  EXPECT_FALSE(ExactlyEqual(Value::Span({1, 2}), Value::Span({1, 3})));
  EXPECT_FALSE(ExactlyEqual(Value::Type("int"), Value::Type("uint")));
  EXPECT_FALSE(ExactlyEqual(Value::BytesOf("a"), Value::String("a")));
}

}  // namespace
}  // namespace klutch::cel_conformance
