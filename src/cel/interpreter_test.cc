#include <gtest/gtest.h>

#include "cel/cel.h"

namespace klutch::cel::interpreter_test {
namespace {

EvalResult Eval(std::string_view expr, const MapActivation& vars = {}) {
  CompileOptions options;
  options.variables = {"self", "oldSelf", "x"};
  auto program = Env::Kubernetes()->Compile(expr, options);
  EXPECT_TRUE(program.ok()) << expr << ": " << program.status().message();
  if (!program.ok()) return EvalResult{Value::MakeError(program.status().message())};
  return (*program)->Evaluate(vars);
}

struct Case {
  const char* expr;
  const char* want;  // DebugString of the result
};

TEST(CelInterpreter, EvaluatesExpressionsAsTheSpecDefines) {
  const Case cases[] = {
      {"1 + 2 * 3", "7"},
      {"-9223372036854775808", "-9223372036854775808"},
      {"--1", "1"},
      {"7 / 2", "3"},
      {"-7 % 3", "-1"},
      {"2u + 3u", "5u"},
      {"1.5 * 2.0", "3"},
      {"1 == 1u && 1 == 1.0 && 1u == 1.0", "true"},
      {"1 < 1.5 && 2u > 1 && -1 < 0u", "true"},
      {"'a' + 'b' == 'ab'", "true"},
      {"'héllo'.size()", "5"},
      {"size(b'\\xff\\x00')", "2"},
      {"[1, 2] + [3]", "[1, 2, 3]"},
      {"{'a': 1}['a']", "1"},
      {"{1: 'x'}[1u]", "\"x\""},
      {"2 in [1, 2, 3]", "true"},
      {"'k' in {'k': 1}", "true"},
      {"true ? 'y' : 'n'", "\"y\""},
      {"[1, 2, 3].all(i, i > 0)", "true"},
      {"[1, 2, 3].exists(i, i == 2)", "true"},
      {"[1, 2, 3].exists_one(i, i > 1)", "false"},
      {"[1, 2, 3].map(i, i * 2)", "[2, 4, 6]"},
      {"[1, 2, 3].map(i, i > 1, i * 2)", "[4, 6]"},
      {"[1, 2, 3].filter(i, i != 2)", "[1, 3]"},
      {"{'a': 1, 'b': 2}.all(k, v, v > 0 && k != '')", "true"},
      {"[5, 6].transformList(i, v, i + v)", "[5, 7]"},
      {"has({'a': 1}.a)", "true"},
      {"has({'a': 1}.b)", "false"},
      {"type(1) == int && type('') == string", "true"},
      {"int('42') + int(2.9)", "44"},
      {"uint(7)", "7u"},
      {"double('1.5')", "1.5"},
      {"string(1.5) + string(2u)", "\"1.52\""},
      {"bool('true')", "true"},
      {"'abc'.contains('b') && 'abc'.startsWith('a') && 'abc'.endsWith('c')", "true"},
      {"'abc'.matches('^a.c$')", "true"},
      {"timestamp('2009-02-13T23:31:30Z').getFullYear()", "2009"},
      {"timestamp('2009-02-13T23:31:30Z') + duration('1h')", "timestamp(\"2009-02-14T00:31:30Z\")"},
      {"duration('1h30m').getMinutes()", "90"},
      {"timestamp('2009-02-13T23:31:30Z').getHours('America/Los_Angeles')", "15"},
      {"timestamp('2009-02-13T23:31:30Z').getHours('+01:00')", "0"},
      {"optional.of(1).orValue(2)", "1"},
      {"optional.none().orValue(2)", "2"},
      {"{'a': 1}.?b.orValue(5)", "5"},
      {"[1, ?optional.none(), ?optional.of(3)]", "[1, 3]"},
      {"false && 1 / 0 == 1", "false"},
      {"1 / 0 == 1 || true", "true"},
      {"cel.bind(y, 2, y * y)", "4"},
  };
  for (const Case& c : cases) {
    EvalResult r = Eval(c.expr);
    EXPECT_EQ(r.value.DebugString(), c.want) << c.expr;
  }
}

TEST(CelInterpreter, ReportsErrorsAsValues) {
  const Case cases[] = {
      {"1 / 0", "error(\"division by zero\")"},
      {"1 % 0", "error(\"modulus by zero\")"},
      {"9223372036854775807 + 1", "error(\"integer overflow\")"},
      {"0u - 1u", "error(\"integer overflow\")"},
      {"{'a': 1}.b", "error(\"no such key: b\")"},
      {"[1][3]", "error(\"index out of bounds: 3\")"},
      {"1 + 1u", "error(\"no such overload: _+_(int, uint)\")"},
      {"int(1e20)", "error(\"range error\")"},
      {"{'a': 1, 'a': 2}", "error(\"Failed with repeated key\")"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Eval(c.expr).value.DebugString(), c.want) << c.expr;
  }
}

TEST(CelInterpreter, BindsVariables) {
  MapActivation vars;
  vars.Bind("self", Value::Map({{Value::String("plan"), Value::String("single-small")}}));
  vars.Bind("oldSelf", Value::Map({{Value::String("plan"), Value::String("single-big")}}));
  EXPECT_EQ(Eval("!(self.plan.contains('small') && oldSelf.plan.contains('big'))", vars)
                .value.DebugString(),
            "false");
}

TEST(CelInterpreter, StopsAtTheCostLimit) {
  auto program = Env::Kubernetes()->Compile(
      "[1,2,3,4,5,6,7,8,9,10].all(i, [1,2,3,4,5,6,7,8,9,10].all(j, i * j > 0))");
  ASSERT_TRUE(program.ok());
  EvalOptions options;
  options.cost_limit = 50;
  EvalResult r = (*program)->Evaluate(MapActivation(), options);
  EXPECT_TRUE(r.cost_exceeded);
  EXPECT_EQ(r.value.DebugString(), "error(\"operation cancelled: actual cost limit exceeded\")");
  EvalResult unlimited = (*program)->Evaluate(MapActivation());
  EXPECT_EQ(unlimited.value.DebugString(), "true");
  EXPECT_GT(unlimited.cost, 100u);
}

}  // namespace
}  // namespace klutch::cel::interpreter_test
