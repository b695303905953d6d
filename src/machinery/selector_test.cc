#include "machinery/selector.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/support/json_text.h"
#include "test/support/param_name.h"

namespace klutch::machinery::selector_test {
namespace {

using fixture::J;

// ---- LabelSelector::Parse ----

struct ParseCase {
  const char* text;
  const char* canonical;  // ToString() of the parsed selector
};

class LabelSelectorParse : public testing::TestWithParam<ParseCase> {};

TEST_P(LabelSelectorParse, ParsesToCanonicalForm) {
  const ParseCase& c = GetParam();
  auto s = LabelSelector::Parse(c.text);
  ASSERT_TRUE(s.ok()) << c.text << ": " << s.status().ToString();
  EXPECT_EQ(s->ToString(), c.canonical);
  // The canonical form parses back to the same selector.
  auto again = LabelSelector::Parse(s->ToString());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->requirements(), s->requirements());
}

INSTANTIATE_TEST_SUITE_P(Cases, LabelSelectorParse,
                         testing::ValuesIn(std::vector<ParseCase>{
                             {"", ""},
                             {"   ", ""},
                             {"app=web", "app=web"},
                             {"app==web", "app==web"},
                             {"app!=web", "app!=web"},
                             {"app", "app"},
                             {"!app", "!app"},
                             {" ! app ", "!app"},
                             {"env in (prod, dev)", "env in (dev,prod)"},
                             {"env notin (b,a,b)", "env notin (a,b)"},
                             {"env in(x)", "env in (x)"},
                             {"env in ()", "env in ()"},
                             {"env in (,a)", "env in (,a)"},
                             {"env in (a,)", "env in (,a)"},
                             {"env in (a,,b)", "env in (,a,b)"},
                             {"tier=front,app=web", "app=web,tier=front"},
                             {"  app = web ,  tier != db , !legacy", "app=web,!legacy,tier!=db"},
                             {"replicas>1,replicas<10", "replicas>1,replicas<10"},
                             {"app=", "app="},
                             {"app=,b", "app=,b"},
                             {"example.com/app=web", "example.com/app=web"},
                             {"in in (in,notin)", "in in (in,notin)"},
                             {"notin=in", "notin=in"},
                             {"a.b_c-d=E.f_g-9", "a.b_c-d=E.f_g-9"},
                             {"k\t=\nv", "k=v"},
                         }),
                         [](const testing::TestParamInfo<ParseCase>& info) {
                           return fixture::ParamName(info.index, info.param.text);
                         });

struct ErrorCase {
  const char* text;
  const char* message;
};

class LabelSelectorParseErrors : public testing::TestWithParam<ErrorCase> {};

TEST_P(LabelSelectorParseErrors, RejectsWithKubernetesMessage) {
  const ErrorCase& c = GetParam();
  auto s = LabelSelector::Parse(c.text);
  ASSERT_FALSE(s.ok()) << c.text << " parsed as " << s->ToString();
  EXPECT_EQ(s.status().reason(), core::Reason::kBadRequest);
  EXPECT_EQ(s.status().message(), c.message) << c.text;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LabelSelectorParseErrors,
    testing::ValuesIn(std::vector<ErrorCase>{
        {"a,", "found '', expected: identifier after ','"},
        {"a,,b", "found ',', expected: identifier after ','"},
        {",a", "found ',', expected: !, identifier, or 'end of string'"},
        {"=a", "found '=', expected: !, identifier, or 'end of string'"},
        {"a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"},
        {"a=b c", "found 'c', expected: ',' or 'end of string'"},
        {"a=b=c", "found '=', expected: ',' or 'end of string'"},
        {"!a=b", "found '=', expected: ',' or 'end of string'"},
        {"!", "unable to parse requirement: found '', expected: identifier"},
        {"a=(b)", "unable to parse requirement: found '(', expected: identifier"},
        {"a in b", "unable to parse requirement: found 'b' expected: '('"},
        {"a in (b", "unable to parse requirement: found '', expected: ',' or ')'"},
        {"a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"},
        {"a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"},
        {"a in (b,=)", "unable to parse requirement: found '=', expected: ',', or identifier"},
        {"a>=1", "unable to parse requirement: found '=', expected: identifier"},
        {"a>b",
         "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' "
         "operators, the value must be an integer"},
        {"a<-1",
         "unable to parse requirement: values[0][a]: Invalid value: \"-1\": a valid label must be "
         "an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
         "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
         "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"},
        {"a=-b",
         "unable to parse requirement: values[0][a]: Invalid value: \"-b\": a valid label must be "
         "an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
         "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
         "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"},
        {"a=0123456789012345678901234567890123456789012345678901234567890123",
         "unable to parse requirement: values[0][a]: Invalid value: "
         "\"0123456789012345678901234567890123456789012345678901234567890123\": must be no more "
         "than 63 characters"},
        {"-a",
         "unable to parse requirement: key: Invalid value: \"-a\": name part must consist of "
         "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
         "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
         "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
        {"Example.com/a",
         "unable to parse requirement: key: Invalid value: \"Example.com/a\": prefix part a "
         "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
         "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
         "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
         "')"},
        {"/a",
         "unable to parse requirement: key: Invalid value: \"/a\": prefix part must be non-empty"},
        {"a/",
         "unable to parse requirement: key: Invalid value: \"a/\": name part must be non-empty; "
         "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
         "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
         "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
        {"a/b/c",
         "unable to parse requirement: key: Invalid value: \"a/b/c\": a qualified name must "
         "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
         "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
         "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
         "subdomain prefix and '/' (e.g. 'example.com/MyName')"},
        {"a\x01=b",
         "unable to parse requirement: key: Invalid value: \"a\\x01\": name part must consist of "
         "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
         "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
         "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
    }),
    [](const testing::TestParamInfo<ErrorCase>& info) {
      return fixture::ParamName(info.index, info.param.text);
    });

TEST(LabelSelector, KeyNamePartAndPrefixLengthLimits) {
  std::string name63(63, 'a');
  EXPECT_TRUE(LabelSelector::Parse(name63).ok());
  auto too_long = LabelSelector::Parse(name63 + "a");
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("name part must be no more than 63 characters"),
            std::string::npos);
  std::string prefix253 = std::string(63, 'p') + "." + std::string(63, 'q') + "." +
                          std::string(63, 'r') + "." + std::string(61, 's');
  ASSERT_EQ(prefix253.size(), 253u);
  EXPECT_TRUE(LabelSelector::Parse(prefix253 + "/k").ok());
  auto long_prefix = LabelSelector::Parse(prefix253 + "s/k");
  ASSERT_FALSE(long_prefix.ok());
  EXPECT_NE(long_prefix.status().message().find("prefix part must be no more than 253 characters"),
            std::string::npos);
}

// ---- Matching ----

struct MatchCase {
  const char* selector;
  const char* labels;
  bool matches;
};

class LabelSelectorMatches : public testing::TestWithParam<MatchCase> {};

TEST_P(LabelSelectorMatches, EvaluatesEveryRequirement) {
  const MatchCase& c = GetParam();
  auto s = LabelSelector::Parse(c.selector);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->Matches(J(c.labels)), c.matches) << c.selector << " on " << c.labels;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LabelSelectorMatches,
    testing::ValuesIn(std::vector<MatchCase>{
        {"", "null", true},
        {"", R"({"a":"b"})", true},
        {"app=web", R"({"app":"web"})", true},
        {"app=web", R"({"app":"db"})", false},
        {"app=web", R"({})", false},
        {"app=web", "null", false},
        {"app==web", R"({"app":"web"})", true},
        {"app!=web", R"({"app":"db"})", true},
        {"app!=web", R"({})", true},
        {"app!=web", R"({"app":"web"})", false},
        {"env in (a,b)", R"({"env":"b"})", true},
        {"env in (a,b)", R"({"env":"c"})", false},
        {"env in (a,b)", R"({})", false},
        {"env notin (a,b)", R"({"env":"c"})", true},
        {"env notin (a,b)", R"({})", true},
        {"env notin (a,b)", R"({"env":"a"})", false},
        {"env in ()", R"({"env":""})", true},
        {"app", R"({"app":""})", true},
        {"app", R"({"other":"x"})", false},
        {"!app", R"({"other":"x"})", true},
        {"!app", R"({"app":"x"})", false},
        {"app=", R"({"app":""})", true},
        {"app=", R"({})", false},
        {"n>5", R"({"n":"6"})", true},
        {"n>5", R"({"n":"5"})", false},
        {"n>5", R"({"n":"x"})", false},
        {"n>5", R"({})", false},
        {"n<5", R"({"n":"-3"})", true},
        {"n<5", R"({"n":"+4"})", true},
        {"n<5", R"({"n":" 4"})", false},
        {"app=web,tier=front", R"({"app":"web","tier":"front","x":"y"})", true},
        {"app=web,tier=front", R"({"app":"web","tier":"back"})", false},
        {"app=web", R"({"app":1})", false},  // a non-string value counts as absent
        {"!app", R"({"app":1})", true},
    }),
    [](const testing::TestParamInfo<MatchCase>& info) {
      return fixture::ParamName(info.index, info.param.selector);
    });

TEST(LabelSelector, EmptyAndNothing) {
  LabelSelector everything;
  EXPECT_TRUE(everything.Empty());
  EXPECT_TRUE(everything.Matches(J(R"({"a":"b"})")));
  LabelSelector nothing = LabelSelector::Nothing();
  EXPECT_FALSE(nothing.Empty());
  EXPECT_FALSE(nothing.Matches(J("{}")));
  EXPECT_FALSE(LabelSelector::Parse("a").value().Empty());
}

// ---- LabelSelector::FromJson (metav1.LabelSelector) ----

TEST(LabelSelectorFromJson, CombinesMatchLabelsAndExpressions) {
  auto s = LabelSelector::FromJson(J(R"({
      "matchLabels":{"app":"web","tier":"front"},
      "matchExpressions":[
        {"key":"env","operator":"In","values":["prod","dev"]},
        {"key":"zone","operator":"NotIn","values":["x"]},
        {"key":"canary","operator":"DoesNotExist"},
        {"key":"owner","operator":"Exists","values":[]}]})"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->ToString(), "app=web,!canary,env in (dev,prod),owner,tier=front,zone notin (x)");
  EXPECT_TRUE(s->Matches(J(R"({"app":"web","tier":"front","env":"dev","owner":"me"})")));
  EXPECT_FALSE(s->Matches(J(R"({"app":"web","tier":"front","env":"dev"})")));
  EXPECT_FALSE(s->Matches(J(R"({"app":"web","tier":"front","env":"dev","owner":"me",
                                "canary":"1"})")));
}

TEST(LabelSelectorFromJson, NullMatchesNothingAndEmptyMatchesEverything) {
  auto nothing = LabelSelector::FromJson(J("null"));
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing->Matches(J("{}")));
  auto everything = LabelSelector::FromJson(J(R"({"matchLabels":null,"matchExpressions":[]})"));
  ASSERT_TRUE(everything.ok());
  EXPECT_TRUE(everything->Empty());
  EXPECT_TRUE(everything->Matches(J(R"({"x":"y"})")));
}

TEST(LabelSelectorFromJson, RejectsMalformedSelectors) {
  struct Case {
    const char* json;
    const char* message;
  } cases[] = {
      {R"({"matchExpressions":[{"key":"a","operator":"Foo","values":["x"]}]})",
       "\"Foo\" is not a valid label selector operator"},
      {R"({"matchExpressions":[{"key":"a","operator":"In","values":[]}]})",
       "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"},
      {R"({"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]})",
       "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not "
       "exist"},
      {R"({"matchExpressions":[{"key":"a","operator":"NotIn"}]})",
       "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"},
      {R"({"matchLabels":{"a":"-x"}})", "values[0][a]: Invalid value: \"-x\": a valid label"},
      {R"({"matchLabels":{"a b":"x"}})", "key: Invalid value: \"a b\": name part must consist"},
      {R"({"matchLabels":{"a":1}})", "invalid label selector: matchLabels[a] must be a string"},
      {R"({"matchLabels":[]})", "invalid label selector: matchLabels must be an object"},
      {R"({"matchExpressions":{}})", "invalid label selector: matchExpressions must be a list"},
      {R"({"matchExpressions":[{"operator":"Exists"}]})", "matchExpressions[0] must be an object"},
      {R"({"matchExpressions":[{"key":"a","operator":"In","values":[1]}]})",
       "matchExpressions[0].values must be strings"},
      {R"("app=web")", "invalid label selector: expected an object, not string"},
  };
  for (const auto& c : cases) {
    auto s = LabelSelector::FromJson(J(c.json));
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_EQ(s.status().reason(), core::Reason::kBadRequest);
    EXPECT_NE(s.status().message().find(c.message), std::string::npos)
        << c.json << " -> " << s.status().message();
  }
}

// ---- FieldSelector ----

struct FieldCase {
  const char* text;
  std::vector<FieldSelector::Requirement> requirements;
};

class FieldSelectorParse : public testing::TestWithParam<FieldCase> {};

TEST_P(FieldSelectorParse, SplitsSortsAndUnescapes) {
  const FieldCase& c = GetParam();
  auto s = FieldSelector::Parse(c.text);
  ASSERT_TRUE(s.ok()) << c.text << ": " << s.status().ToString();
  EXPECT_EQ(s->requirements(), c.requirements) << c.text;
  auto again = FieldSelector::Parse(s->ToString());
  ASSERT_TRUE(again.ok()) << s->ToString() << ": " << again.status().ToString();
  EXPECT_EQ(again->requirements(), c.requirements);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FieldSelectorParse,
    testing::ValuesIn(std::vector<FieldCase>{
        {"", {}},
        {",,", {}},
        {"metadata.name=a", {{"metadata.name", true, "a"}}},
        {"metadata.name==a", {{"metadata.name", true, "a"}}},
        {"metadata.name!=a", {{"metadata.name", false, "a"}}},
        {"metadata.name=", {{"metadata.name", true, ""}}},
        {"type=x,metadata.namespace=ns", {{"metadata.namespace", true, "ns"}, {"type", true, "x"}}},
        {R"(a=x\,y\=z\\w)", {{"a", true, R"(x,y=z\w)"}}},
        {"involvedObject.name=n,involvedObject.kind=Pod,involvedObject.uid=1-2",
         {{"involvedObject.kind", true, "Pod"},
          {"involvedObject.name", true, "n"},
          {"involvedObject.uid", true, "1-2"}}},
        {"a==", {{"a", true, ""}}},
        {"=x", {{"", true, "x"}}},  // field names are the caller's to check
        {"a==x,a=w,a!=v", {{"a", false, "v"}, {"a", true, "w"}, {"a", true, "x"}}},
    }),
    [](const testing::TestParamInfo<FieldCase>& info) {
      return fixture::ParamName(info.index, info.param.text);
    });

TEST(FieldSelectorErrors, RejectWithKubernetesMessages) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"},
      {"a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"},
      {"a=b=c", "invalid field selector: unescaped character in value: '='"},
      {"a!==b", "invalid field selector: unescaped character in value: '='"},
      {"a=x,y", "invalid selector: 'a=x,y'; can't understand 'y'"},
      {R"(a=b\x)", R"(invalid field selector: invalid escape sequence: \x)"},
      {R"(a=b\)", R"(invalid field selector: invalid escape sequence: \)"},
  };
  for (const auto& c : cases) {
    auto s = FieldSelector::Parse(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().reason(), core::Reason::kBadRequest);
    EXPECT_EQ(s.status().message(), c.message) << c.text;
  }
}

TEST(FieldSelector, MatchesWithGetter) {
  std::map<std::string, std::string> fields = {
      {"metadata.name", "cm1"}, {"metadata.namespace", "default"}, {"type", ""}};
  auto get = [&](std::string_view field) -> std::optional<std::string> {
    auto it = fields.find(std::string(field));
    if (it == fields.end()) return std::nullopt;
    return it->second;
  };
  struct Case {
    const char* selector;
    bool matches;
  } cases[] = {
      {"", true},
      {"metadata.name=cm1", true},
      {"metadata.name==cm1", true},
      {"metadata.name=cm2", false},
      {"metadata.name!=cm2", true},
      {"metadata.name!=cm1", false},
      {"metadata.name=cm1,metadata.namespace=default", true},
      {"metadata.name=cm1,metadata.namespace=other", false},
      {"type=", true},
      {"missing=", true},  // nullopt compares as ""
      {"missing!=x", true},
      {"missing=x", false},
  };
  for (const auto& c : cases) {
    auto s = FieldSelector::Parse(c.selector);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->Matches(get), c.matches) << c.selector;
  }
  EXPECT_TRUE(FieldSelector().Empty());
  EXPECT_FALSE(FieldSelector::Parse("a=b")->Empty());
}

}  // namespace
}  // namespace klutch::machinery::selector_test
