// Go's fmt.Sprint / fmt.Sprintf over decoded JSON values. Every expectation is what Go prints
// for the same value as unstructured JSON decodes it (integers int64, other numbers float64,
// arrays []interface{}, objects map[string]interface{}).
#include "machinery/gofmt.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "test/support/json_text.h"

namespace klutch::machinery::gofmt_test {
namespace {

using fixture::J;

TEST(GoSprint, PrintsScalarsAsGoDoes) {
  struct Case {
    Json value;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"text", "text"},
      {"", ""},
      {"with space", "with space"},
      {42, "42"},
      {-7, "-7"},
      {0, "0"},
      {std::numeric_limits<int64_t>::min(), "-9223372036854775808"},
      {std::numeric_limits<uint64_t>::max(), "18446744073709551615"},
      {true, "true"},
      {false, "false"},
      {nullptr, "<nil>"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.value.dump());
    EXPECT_EQ(GoSprint(c.value), c.want);
  }
}

TEST(GoSprint, PrintsFloatsInShortestGFormWithExponentFromAMillion) {
  const std::vector<std::pair<double, std::string>> cases = {
      {5432.0, "5432"},
      {1e6, "1e+06"},
      {0.5, "0.5"},
      {1234567.0, "1.234567e+06"},
      {1e-5, "1e-05"},
      {123456.0, "123456"},
      {999999.0, "999999"},
      {0.0001, "0.0001"},
      {3.14, "3.14"},
      {-2.5, "-2.5"},
      {0.0, "0"},
      {-0.0, "-0"},
      {1e21, "1e+21"},
      {1.5e300, "1.5e+300"},
      {0.1 + 0.2, "0.30000000000000004"},
      {5e-324, "5e-324"},
  };
  for (const auto& [value, want] : cases) {
    SCOPED_TRACE(want);
    EXPECT_EQ(GoSprint(Json(value)), want);
  }
  // A number decoded from JSON text with a fraction or exponent is a float64 too.
  EXPECT_EQ(GoSprint(J("5432.0")), "5432");
  EXPECT_EQ(GoSprint(J("1000000.0")), "1e+06");
}

TEST(GoSprint, PrintsArraysAndObjectsLikeGoSlicesAndMaps) {
  EXPECT_EQ(GoSprint(J(R"(["a","b"])")), "[a b]");
  EXPECT_EQ(GoSprint(J(R"([])")), "[]");
  EXPECT_EQ(GoSprint(J(R"(["host:9200"])")), "[host:9200]");
  EXPECT_EQ(GoSprint(J(R"([1,"x",null,true,2.5])")), "[1 x <nil> true 2.5]");
  EXPECT_EQ(GoSprint(J(R"([[1,2],[3]])")), "[[1 2] [3]]");
  // Map keys sorted.
  EXPECT_EQ(GoSprint(J(R"({"b":"x","a":1})")), "map[a:1 b:x]");
  EXPECT_EQ(GoSprint(J(R"({})")), "map[]");
  EXPECT_EQ(GoSprint(J(R"({"a":{"c":[1,1e6]},"B":null})")), "map[B:<nil> a:map[c:[1 1e+06]]]");
}

TEST(GoSprintf, FormatsEachVerbAsGoDoes) {
  struct Case {
    std::string format;
    std::vector<Json> args;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"%s", {"x"}, "x"},
      {"%s-creds", {"my-binding"}, "my-binding-creds"},
      {"%s-service-broker", {"postgresql"}, "postgresql-service-broker"},
      {"%d", {42}, "42"},
      {"%d", {-42}, "-42"},
      {"%v", {J(R"(["a","b"])")}, "[a b]"},
      {"%v", {J(R"({"k":"v"})")}, "map[k:v]"},
      {"%v", {nullptr}, "<nil>"},
      {"%v", {1e6}, "1e+06"},
      {"%v", {5432.0}, "5432"},
      {"%05d", {42}, "00042"},
      {"%05d", {-42}, "-0042"},
      {"%+05d", {42}, "+0042"},
      {"%5d|", {42}, "   42|"},
      {"%-5d|", {42}, "42   |"},
      {"%-5s|", {"ab"}, "ab   |"},
      {"%5s|", {"ab"}, "   ab|"},
      {"%.3s", {"abcdef"}, "abc"},
      {"%.2f", {3.14159}, "3.14"},
      {"%6.2f|", {3.14159}, "  3.14|"},
      {"%08.3f", {-3.14159}, "-003.142"},
      {"%f", {1.0}, "1.000000"},
      {"%.1f", {5}, "%!f(int64=5)"},
      {"%e", {1234.5678}, "1.234568e+03"},
      {"%g", {1e6}, "1e+06"},
      {"%g", {100000.0}, "100000"},
      {"%x", {255}, "ff"},
      {"%X", {255}, "FF"},
      {"%#x", {255}, "0xff"},
      {"%x", {-255}, "-ff"},
      {"%x", {"hi"}, "6869"},
      {"%X", {"hi"}, "6869"},
      {"%o", {8}, "10"},
      {"%b", {5}, "101"},
      {"%c", {65}, "A"},
      {"%q", {"a\"b"}, R"("a\"b")"},
      {"%q", {"line\n"}, R"("line\n")"},
      {"%t", {true}, "true"},
      {"%t", {false}, "false"},
      {"%5t|", {true}, " true|"},
      {"100%%", {}, "100%"},
      {"%d%%", {5}, "5%"},
      {"%s/%s", {"a", "b"}, "a/b"},
      {"%*d", {5, 42}, "   42"},
      {"%-*d|", {4, 7}, "7   |"},
      {"%.*f", {1, 2.25}, "2.2"},
      {"% d", {5}, " 5"},
      {"%+d", {5}, "+5"},
      {"%d", {J("[1,2]")}, "[1 2]"},
      {"%s", {J(R"(["a","b"])")}, "[a b]"},
      {"no verbs", {}, "no verbs"},
      {"%s", {""}, ""},
      {"héllo %s", {"wörld"}, "héllo wörld"},
      {"%4s|", {"é"}, "   é|"},  // width counts runes, not bytes
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.format);
    EXPECT_EQ(GoSprintf(c.format, c.args), c.want);
  }
}

TEST(GoSprintf, IntegerPrecisionOverridesTheZeroFlag) {
  // Go pads with spaces when both a precision and the 0 flag are given, and %.0d of 0 is empty.
  EXPECT_EQ(GoSprintf("%.5d", {42}), "00042");
  EXPECT_EQ(GoSprintf("%08.5d", {42}), "   00042");
  EXPECT_EQ(GoSprintf("%.0d|", {0}), "|");
  EXPECT_EQ(GoSprintf("%3.0d|", {0}), "   |");
  EXPECT_EQ(GoSprintf("%#08x", {255}), "0x000000ff");
  EXPECT_EQ(GoSprintf("%#o", {8}), "010");
  EXPECT_EQ(GoSprintf("%#o", {0}), "0");
}

TEST(GoSprintf, MarksMissingExtraAndMismatchedArgumentsAsGoDoes) {
  struct Case {
    std::string format;
    std::vector<Json> args;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"%d", {}, "%!d(MISSING)"},
      {"%d %d", {1}, "1 %!d(MISSING)"},
      {"%s-%s", {"a"}, "a-%!s(MISSING)"},
      {"a", {"x"}, "a%!(EXTRA string=x)"},
      {"%s", {"x", 1}, "x%!(EXTRA int64=1)"},
      {"", {"x", true}, "%!(EXTRA string=x, bool=true)"},
      {"%s", {"x", nullptr}, "x%!(EXTRA <nil>)"},
      {"%d", {"x"}, "%!d(string=x)"},
      {"%t", {1}, "%!t(int64=1)"},
      {"%d", {true}, "%!d(bool=true)"},
      {"%d", {1.5}, "%!d(float64=1.5)"},
      {"%s", {1.5}, "%!s(float64=1.5)"},
      {"%s", {7}, "%!s(int64=7)"},
      {"%d", {nullptr}, "%!d(<nil>)"},
      {"%s", {nullptr}, "%!s(<nil>)"},
      {"%s-creds", {nullptr}, "%!s(<nil>)-creds"},
      {"%z", {"x"}, "%!z(string=x)"},
      {"%s", {J(R"(["a",1])")}, "[a %!s(int64=1)]"},
      {"%", {}, "%!(NOVERB)"},
      {"abc%", {}, "abc%!(NOVERB)"},
      {"%*d", {"w", 1}, "%!(BADWIDTH)1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.format);
    EXPECT_EQ(GoSprintf(c.format, c.args), c.want);
  }
}

TEST(GoSprintf, SurvivesHugeWidthsAndPrecisions) {
  // Bounded, not a gigabyte of padding.
  const std::string wide = GoSprintf("%1000000000d", {1});
  EXPECT_LE(wide.size(), 1000000u);
  EXPECT_EQ(wide.back(), '1');
  EXPECT_FALSE(GoSprintf("%.99999999f", {1.5}).empty());
  EXPECT_FALSE(GoSprintf("%.99999999e", {1.5}).empty());
  EXPECT_FALSE(GoSprintf("%.99999999g", {1.5}).empty());
  EXPECT_EQ(GoSprintf("%.2000s", {"ab"}), "ab");
  // Long fixed-point output is complete, not cut at a buffer size.
  const std::string fixed = GoSprintf("%.400f", {1.5});
  EXPECT_EQ(fixed.size(), 402u);
  EXPECT_EQ(fixed.substr(0, 4), "1.50");
  EXPECT_EQ(fixed.back(), '0');
  EXPECT_EQ(GoSprintf("%.0f", {1e300}).size(), 301u);
}

TEST(GoSprintf, CharacterVerbReplacesInvalidCodePoints) {
  EXPECT_EQ(GoSprintf("%c", {0x20AC}), "\u20AC");
  EXPECT_EQ(GoSprintf("%c", {0x1F600}), "\U0001F600");
  for (int64_t bad : {int64_t{-1}, int64_t{0x110000}, int64_t{0xD800}}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(GoSprintf("%c", {bad}), "\uFFFD");
  }
}

}  // namespace
}  // namespace klutch::machinery::gofmt_test
