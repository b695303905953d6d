// The value transforms of function-patch-and-transform: every type and sub-type, the errors a
// Composition author gets, and the exact chains the a8s-postgresql Composition relies on.
#include "compose/transforms.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "test/support/json_text.h"

namespace klutch::compose::transforms_test {
namespace {

using fixture::J;

// Applies one transform written as JSON; fails the test on error.
Json Apply(std::string_view transform, const Json& input) {
  auto out = ApplyTransform(J(transform), input);
  EXPECT_TRUE(out.ok()) << transform << " on " << input.dump() << ": " << out.status().ToString();
  return out.ok() ? *out : Json("<error>");
}

// The error message of a transform that must fail (BadRequest).
std::string Error(std::string_view transform, const Json& input) {
  auto out = ApplyTransform(J(transform), input);
  EXPECT_FALSE(out.ok()) << transform << " on " << input.dump() << " gave " << out->dump();
  if (out.ok()) return "";
  EXPECT_EQ(out.status().reason(), core::Reason::kBadRequest) << out.status().ToString();
  return out.status().message();
}

bool Contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// ---- map ----

constexpr std::string_view kMap =
    R"({"type":"map","map":{"nano":"3Gi","small":"10Gi","obj":{"a":[1]},"num":5}})";

TEST(MapTransform, LooksTheInputUpAsAKey) {
  EXPECT_EQ(Apply(kMap, "nano"), "3Gi");
  EXPECT_EQ(Apply(kMap, "small"), "10Gi");
  EXPECT_EQ(Apply(kMap, "obj"), J(R"({"a":[1]})"));
  EXPECT_EQ(Apply(kMap, "num"), 5);
}

TEST(MapTransform, MissingKeyIsAnErrorNamingTheKey) {
  std::string message = Error(kMap, "huge");
  EXPECT_TRUE(Contains(message, "huge")) << message;
  EXPECT_TRUE(Contains(message, "not found")) << message;
}

TEST(MapTransform, NeedsAStringInputAndAMap) {
  EXPECT_TRUE(Contains(Error(kMap, 5), "string")) << Error(kMap, 5);
  Error(kMap, nullptr);
  Error(kMap, J(R"(["nano"])"));
  Error(R"({"type":"map"})", "nano");
}

// ---- match ----

constexpr std::string_view kMatch = R"({"type":"match","match":{"patterns":[
    {"type":"literal","literal":"a","result":"literal-a"},
    {"type":"regexp","regexp":"^b+$","result":{"obj":true}},
    {"type":"regexp","regexp":"c","result":3}],
  "fallbackValue":"fallback"}})";

TEST(MatchTransform, FirstMatchingPatternGivesItsResult) {
  EXPECT_EQ(Apply(kMatch, "a"), "literal-a");
  EXPECT_EQ(Apply(kMatch, "bbb"), J(R"({"obj":true})"));
  EXPECT_EQ(Apply(kMatch, "xcx"), 3);  // regexp is a search, not a full match
  EXPECT_EQ(Apply(kMatch, "abc"), 3);  // literal needs equality
}

TEST(MatchTransform, NoMatchGivesTheFallback) {
  EXPECT_EQ(Apply(kMatch, "zzz"), "fallback");
  EXPECT_EQ(Apply(R"({"type":"match","match":{"patterns":[{"type":"literal","literal":"a",
                     "result":1}],"fallbackTo":"Input"}})",
                  "zzz"),
            "zzz");
  EXPECT_TRUE(
      Apply(
          R"({"type":"match","match":{"patterns":[{"type":"literal","literal":"a","result":1}]}})",
          "zzz")
          .is_null());
  // No patterns at all.
  EXPECT_EQ(Apply(R"({"type":"match","match":{"fallbackValue":7}})", "a"), 7);
}

TEST(MatchTransform, PatternsDefaultToLiteral) {
  EXPECT_EQ(Apply(R"({"type":"match","match":{"patterns":[{"literal":"x","result":1}]}})", "x"), 1);
}

TEST(MatchTransform, BadPatternsAreErrors) {
  std::string message = Error(
      R"({"type":"match","match":{"patterns":[{"type":"regexp","regexp":"(","result":1}]}})", "x");
  EXPECT_TRUE(Contains(message, "regexp")) << message;
  message = Error(
      R"({"type":"match","match":{"patterns":[{"type":"glob","literal":"x","result":1}]}})", "x");
  EXPECT_TRUE(Contains(message, "glob")) << message;
  Error(R"({"type":"match","match":{"patterns":[{"type":"literal","result":1}]}})", "x");
  Error(R"({"type":"match"})", "x");
}

// ---- math ----

TEST(MathTransform, MultipliesKeepingIntegersIntegers) {
  Json out = Apply(R"({"type":"math","math":{"type":"Multiply","multiply":4}})", 3);
  EXPECT_TRUE(out.is_number_integer()) << out.dump();
  EXPECT_EQ(out, 12);
  out = Apply(R"({"type":"math","math":{"multiply":2}})", 1.5);  // Multiply is the default
  EXPECT_TRUE(out.is_number_float()) << out.dump();
  EXPECT_DOUBLE_EQ(out.get<double>(), 3.0);
  EXPECT_EQ(Apply(R"({"type":"math","math":{"type":"Multiply","multiply":-2}})", 21), -42);
}

TEST(MathTransform, IntegerOverflowWrapsAroundAsInGo) {
  // Go's int64 arithmetic wraps; it must not be undefined behaviour here.
  EXPECT_EQ(Apply(R"({"type":"math","math":{"multiply":9223372036854775807}})", 3),
            9223372036854775805LL);
  EXPECT_EQ(Apply(R"({"type":"math","math":{"multiply":-1}})", INT64_MIN), INT64_MIN);
}

TEST(MathTransform, ClampsToBounds) {
  constexpr std::string_view kMin = R"({"type":"math","math":{"type":"ClampMin","clampMin":10}})";
  constexpr std::string_view kMax = R"({"type":"math","math":{"type":"ClampMax","clampMax":10}})";
  EXPECT_EQ(Apply(kMin, 5), 10);
  EXPECT_EQ(Apply(kMin, 12), 12);
  EXPECT_EQ(Apply(kMax, 15), 10);
  EXPECT_EQ(Apply(kMax, 7), 7);
  EXPECT_TRUE(Apply(kMin, 5).is_number_integer());
  EXPECT_DOUBLE_EQ(Apply(kMax, 12.5).get<double>(), 10.0);
}

TEST(MathTransform, NonNumbersAndBadConfigurationsAreErrors) {
  constexpr std::string_view kMul = R"({"type":"math","math":{"type":"Multiply","multiply":2}})";
  std::string message = Error(kMul, "3");
  EXPECT_TRUE(Contains(message, "number")) << message;
  Error(kMul, nullptr);
  Error(kMul, true);
  Error(kMul, J("[1]"));
  message = Error(R"({"type":"math","math":{"type":"Divide","multiply":2}})", 3);
  EXPECT_TRUE(Contains(message, "Divide")) << message;
  Error(R"({"type":"math","math":{"type":"Multiply"}})", 3);
  Error(R"({"type":"math","math":{"type":"ClampMin"}})", 3);
}

// ---- string ----

std::string StringT(std::string_view body) {
  return std::string(R"({"type":"string","string":)") + std::string(body) + "}";
}

TEST(StringTransform, FormatsWithGoFmt) {
  EXPECT_EQ(Apply(StringT(R"({"type":"Format","fmt":"%s-service-broker"})"), "postgresql"),
            "postgresql-service-broker");
  EXPECT_EQ(Apply(StringT(R"({"fmt":"%s-creds"})"), "binding"), "binding-creds");  // default
  EXPECT_EQ(Apply(StringT(R"({"type":"Format","fmt":"%d items"})"), 5), "5 items");
  EXPECT_EQ(Apply(StringT(R"({"type":"Format","fmt":"%v"})"), 1e6), "1e+06");
  EXPECT_EQ(Apply(StringT(R"({"type":"Format","fmt":"%05.1f"})"), 2.25), "002.2");
  EXPECT_EQ(Apply(StringT(R"({"type":"Format","fmt":"%d"})"), "x"), "%!d(string=x)");
  Error(StringT(R"({"type":"Format"})"), "x");
}

TEST(StringTransform, ConvertsCaseEncodingsAndHashes) {
  auto convert = [](std::string_view how) {
    return StringT(std::string(R"({"type":"Convert","convert":")") + std::string(how) + "\"}");
  };
  EXPECT_EQ(Apply(convert("ToLower"), "WARNING"), "warning");
  EXPECT_EQ(Apply(convert("ToUpper"), "Notice"), "NOTICE");
  EXPECT_EQ(Apply(convert("ToUpper"), 12), "12");
  EXPECT_EQ(Apply(convert("ToBase64"), "hello"), "aGVsbG8=");
  EXPECT_EQ(Apply(convert("FromBase64"), "aGVsbG8="), "hello");
  EXPECT_EQ(Apply(convert("ToJson"), J(R"({"a":[1,"x"]})")), R"({"a":[1,"x"]})");
  EXPECT_EQ(Apply(convert("ToJson"), "x"), R"("x")");
  EXPECT_EQ(Apply(convert("ToSha1"), "hello"), "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d");
  EXPECT_EQ(Apply(convert("ToSha256"), "hello"),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
  EXPECT_EQ(Apply(convert("ToSha512"), "hello"),
            "9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca7"
            "2323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043");
  EXPECT_EQ(Apply(convert("ToAdler32"), "hello"), "103547413");
  // Non-strings are hashed as their JSON.
  EXPECT_EQ(Apply(convert("ToSha256"), J(R"({"a":1})")), Apply(convert("ToSha256"), R"({"a":1})"));

  std::string message = Error(convert("FromBase64"), "not base64!");
  EXPECT_TRUE(Contains(message, "base64")) << message;
  message = Error(convert("ToRot13"), "x");
  EXPECT_TRUE(Contains(message, "ToRot13")) << message;
}

TEST(StringTransform, TrimsPrefixesAndSuffixes) {
  EXPECT_EQ(Apply(StringT(R"({"type":"TrimPrefix","trim":"a9s-postgresql"})"), "a9s-postgresql13"),
            "13");
  EXPECT_EQ(Apply(StringT(R"({"type":"TrimPrefix","trim":"x"})"), "abc"), "abc");
  EXPECT_EQ(Apply(StringT(R"({"type":"TrimSuffix","trim":"-ssl"})"), "mariadb-single-nano-ssl"),
            "mariadb-single-nano");
  EXPECT_EQ(Apply(StringT(R"({"type":"TrimSuffix","trim":"-ssl"})"), "ssl-x"), "ssl-x");
  // Once only.
  EXPECT_EQ(Apply(StringT(R"({"type":"TrimPrefix","trim":"ab"})"), "ababc"), "abc");
}

TEST(StringTransform, RegexpGivesTheWholeMatchOrAGroup) {
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"\\b(\\w+)$"}})"),
                  "postgresql-single-small"),
            "small");
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"-(.*?)-"}})"),
                  "postgresql-single-small"),
            "-single-");
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"-(.*?)-","group":1}})"),
                  "postgresql-replica-big"),
            "replica");
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"[0-9]+"}})"), 1234), "1234");
}

TEST(StringTransform, RegexpErrorsSayWhatFailed) {
  std::string message =
      Error(StringT(R"({"type":"Regexp","regexp":{"match":"-(.*?)-"}})"), "postgresql");
  EXPECT_TRUE(Contains(message, "no match")) << message;
  EXPECT_TRUE(Contains(message, "-(.*?)-")) << message;
  message = Error(StringT(R"({"type":"Regexp","regexp":{"match":"a","group":1}})"), "a");
  EXPECT_TRUE(Contains(message, "group 1")) << message;
  message = Error(StringT(R"({"type":"Regexp","regexp":{"match":"(a"}})"), "a");
  EXPECT_TRUE(Contains(message, "(a")) << message;
  Error(StringT(R"({"type":"Regexp"})"), "a");
}

TEST(StringTransform, RegexpsUseGoSyntax) {
  // Go's regexp is RE2: flags, named groups, \A and \z all work; a group that took no part in
  // the match is "".
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"(?i)SMALL"}})"), "pg-small"),
            "small");
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"-(?P<size>\\w+)\\z",
                             "group":1}})"),
                  "pg-single-big"),
            "big");
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"\\A\\w+"}})"), "pg-x"), "pg");
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"a(x)?b","group":1}})"), "ab"), "");
  // Leftmost-first alternation, as in Go.
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"a|ab"}})"), "ab"), "a");
  // Back-references are not Go syntax.
  Error(StringT(R"({"type":"Regexp","regexp":{"match":"(a)\\1"}})"), "aa");
  EXPECT_EQ(Apply(R"({"type":"match","match":{"patterns":[{"type":"regexp",
                     "regexp":"(?i)^PROD","result":"p"}],"fallbackValue":"other"}})",
                  "production"),
            "p");
}

TEST(StringTransform, RegexpsOnLongValuesNeitherCrashNorFloodTheError) {
  // The a8s-postgresql patterns against a megabyte-long plan: std::regex overflowed the stack.
  const std::string plan = "postgresql-" + std::string(1 << 20, 'a') + "-small";
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"\\b(\\w+)$"}})"), plan), "small");
  EXPECT_EQ(Apply(StringT(R"({"type":"Regexp","regexp":{"match":"-(.*?)-"}})"), plan)
                .get<std::string>()
                .size(),
            (1u << 20) + 2);
  EXPECT_EQ(Apply(R"({"type":"match","match":{"patterns":[{"type":"regexp","regexp":"(a|b)*-small$",
                     "result":1}]}})",
                  plan),
            1);
  const std::string message = Error(StringT(R"({"type":"Regexp","regexp":{"match":"xyz"}})"), plan);
  EXPECT_LT(message.size(), 1000u);
}

TEST(StringTransform, JoinsArraysAndReplaces) {
  EXPECT_EQ(Apply(StringT(R"({"type":"Join","join":{"separator":","}})"), J(R"(["a","b",1])")),
            "a,b,1");
  EXPECT_EQ(Apply(StringT(R"({"type":"Join","join":{"separator":""}})"), J("[]")), "");
  std::string message = Error(StringT(R"({"type":"Join","join":{"separator":","}})"), "a,b");
  EXPECT_TRUE(Contains(message, "array")) << message;
  EXPECT_EQ(Apply(StringT(R"({"type":"Replace","replace":{"search":"-","replace":"_"}})"), "a-b-c"),
            "a_b_c");
  EXPECT_EQ(Apply(StringT(R"({"type":"Replace","replace":{"search":"aa","replace":"a"}})"), "aaaa"),
            "aa");
  EXPECT_EQ(Apply(StringT(R"({"type":"Replace","replace":{"search":"x","replace":""}})"), "axbxc"),
            "abc");
}

TEST(StringTransform, UnknownTypeIsAnError) {
  std::string message = Error(StringT(R"({"type":"Reverse"})"), "x");
  EXPECT_TRUE(Contains(message, "Reverse")) << message;
  Error(R"({"type":"string"})", "x");
}

// ---- convert ----

Json Convert(std::string_view to, const Json& input, std::string_view format = "") {
  Json t{{"type", "convert"}, {"convert", {{"toType", to}}}};
  if (!format.empty()) t["convert"]["format"] = format;
  return Apply(t.dump(), input);
}

std::string ConvertError(std::string_view to, const Json& input, std::string_view format = "") {
  Json t{{"type", "convert"}, {"convert", {{"toType", to}}}};
  if (!format.empty()) t["convert"]["format"] = format;
  return Error(t.dump(), input);
}

TEST(ConvertTransform, ParsesStrings) {
  Json v = Convert("int", "13");
  EXPECT_TRUE(v.is_number_integer());
  EXPECT_EQ(v, 13);
  EXPECT_EQ(Convert("int64", "-5"), -5);
  EXPECT_EQ(Convert("int", "+5"), 5);
  EXPECT_DOUBLE_EQ(Convert("float64", "1.5").get<double>(), 1.5);
  EXPECT_TRUE(Convert("float64", "2").is_number_float());
  EXPECT_DOUBLE_EQ(Convert("float64", "+2.5e3").get<double>(), 2500.0);
  EXPECT_DOUBLE_EQ(Convert("float64", "-.5").get<double>(), -0.5);
  EXPECT_EQ(Convert("bool", "true"), true);
  EXPECT_EQ(Convert("bool", "t"), true);
  EXPECT_EQ(Convert("bool", "FALSE"), false);
  EXPECT_EQ(Convert("bool", "0"), false);
  EXPECT_EQ(Convert("string", "x"), "x");
  EXPECT_EQ(Convert("object", R"({"a":1})", "json"), J(R"({"a":1})"));
  EXPECT_EQ(Convert("array", R"([1,"b"])", "json"), J(R"([1,"b"])"));
}

TEST(ConvertTransform, BadStringsAreErrorsNamingTheInput) {
  std::string message = ConvertError("int", "abc");
  EXPECT_TRUE(Contains(message, "abc")) << message;
  for (const char* bad : {"", "1.5", " 5", "5 ", "0x10", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    ConvertError("int", bad);
  }
  for (const char* bad :
       {"", "abc", " 1.5", "1.5 ", "1.5x", "0x10", "inf", "NaN", "1e400", "+", "++1"}) {
    SCOPED_TRACE(bad);
    ConvertError("float64", bad);
  }
  ConvertError("bool", "yes");
  ConvertError("object", "[1]", "json");
  ConvertError("array", R"({"a":1})", "json");
  ConvertError("object", "{", "json");
  ConvertError("object", R"({"a":1})");  // needs format: json
}

TEST(ConvertTransform, ParsesQuantities) {
  EXPECT_EQ(Convert("int64", "10Gi", "quantity"), 10737418240LL);
  EXPECT_EQ(Convert("int", "2k", "quantity"), 2000);
  EXPECT_EQ(Convert("int", "500m", "quantity"), 1);  // Quantity.Value() rounds up
  EXPECT_DOUBLE_EQ(Convert("float64", "500m", "quantity").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(Convert("float64", "1.5Mi", "quantity").get<double>(), 1572864.0);
  EXPECT_DOUBLE_EQ(Convert("float64", "1e3", "quantity").get<double>(), 1000.0);
  EXPECT_EQ(Convert("int", "8E", "quantity"), 8000000000000000000LL);
  ConvertError("int", "10E", "quantity");  // beyond int64
  ConvertError("int", "1e100", "quantity");
  std::string message = ConvertError("int", "ten", "quantity");
  EXPECT_TRUE(Contains(message, "ten")) << message;
}

TEST(ConvertTransform, ConvertsNumbersAndBools) {
  EXPECT_EQ(Convert("string", 13), "13");
  EXPECT_EQ(Convert("string", 1.5), "1.5");
  EXPECT_EQ(Convert("string", 1e21), "1000000000000000000000");  // 'f' format, not %g
  EXPECT_EQ(Convert("string", 5432.0), "5432");
  EXPECT_EQ(Convert("string", true), "true");
  EXPECT_EQ(Convert("int", 1.9), 1);  // truncation
  EXPECT_EQ(Convert("int", -1.9), -1);
  EXPECT_EQ(Convert("int", -9223372036854775808.0), INT64_MIN);
  // Out of the int64 range: an error, not undefined behaviour.
  EXPECT_TRUE(Contains(ConvertError("int", 1e300), "range"));
  ConvertError("int", 9223372036854775808.0);
  ConvertError("int", -1e19);
  EXPECT_TRUE(Convert("float64", 3).is_number_float());
  EXPECT_EQ(Convert("int", true), 1);
  EXPECT_EQ(Convert("int64", false), 0);
  EXPECT_DOUBLE_EQ(Convert("float64", true).get<double>(), 1.0);
  EXPECT_EQ(Convert("bool", 1), true);
  EXPECT_EQ(Convert("bool", 2), false);
  EXPECT_EQ(Convert("bool", 1.0), true);
  EXPECT_EQ(Convert("int", 7), 7);
  // Beyond int64 a JSON integer is a float64 to Go.
  EXPECT_EQ(Convert("string", J("18446744073709551615")), "18446744073709551616");
  EXPECT_EQ(Convert("object", J(R"({"a":1})")), J(R"({"a":1})"));
  EXPECT_EQ(Convert("array", J("[1]")), J("[1]"));
}

TEST(ConvertTransform, UnsupportedConversionsAreErrors) {
  ConvertError("string", nullptr);
  ConvertError("int", nullptr);
  ConvertError("string", J(R"({"a":1})"));
  ConvertError("int", J("[1]"));
  ConvertError("object", 1);
  ConvertError("array", true);
  std::string message = ConvertError("decimal", "1");
  EXPECT_TRUE(Contains(message, "decimal")) << message;
  Error(R"({"type":"convert","convert":{}})", "1");
  Error(R"({"type":"convert"})", "1");
}

// ---- chains and dispatch ----

TEST(ApplyTransform, UnknownTypeIsAnError) {
  std::string message = Error(R"({"type":"encrypt"})", "x");
  EXPECT_TRUE(Contains(message, "encrypt")) << message;
  Error(R"({})", "x");
  Error(R"("map")", "x");
}

TEST(ApplyTransforms, NullOrEmptyListPassesTheInputThrough) {
  auto out = ApplyTransforms(Json(), "x");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "x");
  out = ApplyTransforms(Json::array(), 5);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, 5);
  EXPECT_FALSE(ApplyTransforms(J(R"({"type":"map"})"), "x").ok());
}

TEST(ApplyTransforms, ErrorNamesTheTransformIndexAndType) {
  Json chain = J(R"([{"type":"string","string":{"type":"Regexp","regexp":{"match":"\\b(\\w+)$"}}},
                     {"type":"map","map":{"small":"10Gi"}}])");
  auto out = ApplyTransforms(chain, "postgresql-single-huge");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().reason(), core::Reason::kBadRequest);
  EXPECT_TRUE(Contains(out.status().message(), "transform 1 (map)")) << out.status().message();
  EXPECT_TRUE(Contains(out.status().message(), "huge")) << out.status().message();
}

// The chains of the a8s-postgresql Composition (data-services.md §5.2).
TEST(ApplyTransforms, A8sPostgresqlChains) {
  const Json version = J(R"([
      {"type":"string","string":{"type":"TrimPrefix","trim":"a9s-postgresql"}},
      {"type":"convert","convert":{"toType":"int"}}])");
  for (const auto& [service, want] : std::vector<std::pair<std::string, int>>{
           {"a9s-postgresql13", 13}, {"a9s-postgresql14", 14}}) {
    auto out = ApplyTransforms(version, service);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_TRUE(out->is_number_integer());
    EXPECT_EQ(*out, want);
  }

  const Json volume = J(R"([
      {"type":"string","string":{"type":"Regexp","regexp":{"match":"\\b(\\w+)$"}}},
      {"type":"map","map":{"nano":"3Gi","small":"10Gi","medium":"50Gi","big":"100Gi"}}])");
  for (const auto& [plan, want] :
       std::vector<std::pair<std::string, std::string>>{{"postgresql-single-nano", "3Gi"},
                                                        {"postgresql-single-small", "10Gi"},
                                                        {"postgresql-replica-medium", "50Gi"},
                                                        {"postgresql-replica-big", "100Gi"}}) {
    auto out = ApplyTransforms(volume, plan);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(*out, want);
  }

  const Json replicas = J(R"([
      {"type":"string","string":{"type":"Regexp","regexp":{"match":"-(.*?)-"}}},
      {"type":"map","map":{"-single-":"1","-replica-":"3"}},
      {"type":"convert","convert":{"toType":"int"}}])");
  auto out = ApplyTransforms(replicas, "postgresql-single-small");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->is_number_integer());
  EXPECT_EQ(*out, 1);
  out = ApplyTransforms(replicas, "postgresql-replica-nano");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, 3);
  // Intermediate steps, one at a time.
  EXPECT_EQ(Apply(replicas[0].dump(), "postgresql-single-small"), "-single-");
  EXPECT_EQ(Apply(replicas[1].dump(), "-single-"), "1");
  EXPECT_EQ(Apply(replicas[2].dump(), "1"), 1);

  const Json lower = J(R"([{"type":"string","string":{"type":"Convert","convert":"ToLower"}}])");
  out = ApplyTransforms(lower, "WARNING");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "warning");
}

}  // namespace
}  // namespace klutch::compose::transforms_test
