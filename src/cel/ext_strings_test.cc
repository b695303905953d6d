#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cel/cel.h"

namespace klutch::cel::ext_strings_test {
namespace {

Value Eval(std::string_view expr) {
  CompileOptions options;
  options.variables = {"s"};
  auto program = Env::Kubernetes()->Compile(expr, options);
  EXPECT_TRUE(program.ok()) << expr << ": " << program.status().message();
  if (!program.ok()) return Value::MakeError(program.status().message());
  MapActivation vars;
  vars.Bind("s", Value::String("%.3f"));
  return (*program)->Evaluate(vars).value;
}

struct Case {
  const char* expr;
  const char* want;  // the string result, or "true" for predicates
};

void ExpectStrings(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const Value v = Eval(c.expr);
    if (v.kind() == Kind::kString) {
      EXPECT_EQ(v.string_value(), c.want) << c.expr;
    } else {
      EXPECT_EQ(v.DebugString(), c.want) << c.expr;
    }
  }
}

TEST(StringsExtension, IndexesByCodePoint) {
  ExpectStrings({
      {"'tacocat'.charAt(3)", "o"},
      {"'tacocat'.charAt(7)", ""},
      {"'©αT'.charAt(1) == 'α'", "true"},
      {"'tacocat'.indexOf('') == 0 && 'tacocat'.indexOf('ac') == 1", "true"},
      {"'tacocat'.indexOf('none') == -1 && 'tacocat'.indexOf('', 3) == 3", "true"},
      {"'ta©o©αT'.indexOf('©', 3) == 4 && 'ta©o©αT'.indexOf('©α', 5) == -1", "true"},
      {"'tacocat'.lastIndexOf('') == 7 && ''.lastIndexOf('@@') == -1", "true"},
      {"'ta©o©αT'.lastIndexOf('©') == 4 && 'ta©o©αT'.lastIndexOf('©', 3) == 2", "true"},
      {"'bananananana'.lastIndexOf('nana', 7) == 6", "true"},
      {"'ta©o©αT'.substring(2, 6)", "©o©α"},
      {"'tacocat'.substring(4)", "cat"},
      {"'tacocat'.substring(7, 7)", ""},
      {"'Ta©oCαt'.reverse()", "tαCo©aT"},
  });
}

TEST(StringsExtension, TransformsStrings) {
  ExpectStrings({
      {"'TacoCÆt Xii'.lowerAscii()", "tacocÆt xii"},
      {"'tacoCαt'.upperAscii()", "TACOCαT"},
      {"'{0} days {0} hours'.replace('{0}', '2', 1).replace('{0}', '23')", "2 days 23 hours"},
      {"'1 ©αT taco'.replace('αT', 'o©α')", "1 ©o©α taco"},
      {"'abc'.replace('', '-')", "-a-b-c-"},
      {"'hello hello'.replace('he', 'we', 0)", "hello hello"},
      {"'hello world'.split(' ') == ['hello', 'world']", "true"},
      {"'hello world events!'.split(' ', 0) == []", "true"},
      {"'hello world events!'.split(' ', 2) == ['hello', 'world events!']", "true"},
      {"'o©o©o©o'.split('©', -1) == ['o', 'o', 'o', 'o']", "true"},
      {"'abc'.split('', 2) == ['a', 'bc']", "true"},
      {"' \\f\\n\\r\\t\\vtext  '.trim()", "text"},
      {"'\\u0085\\u00a0\\u1680text\\u2000\\u3000'.trim()", "text"},
      {"'\\u200btext'.trim() == '\\u200btext'", "true"},
      {"['x', 'y'].join()", "xy"},
      {"['x', 'y'].join('-')", "x-y"},
      {"[].join('-')", ""},
      {"strings.quote(\"first\\nsecond\\a\\\\ \\\"q\\\"\")", "\"first\\nsecond\\a\\\\ \\\"q\\\"\""},
      {"strings.quote('ta©o©αT')", "\"ta©o©αT\""},
  });
}

TEST(StringsExtension, FormatsLikeCelGo) {
  ExpectStrings({
      {"'%% and %s'.format(['text'])", "% and text"},
      {"'%d %d, %s'.format([1, uint(2), 'A'])", "1 2, A"},
      {"'%.3f'.format([1.2345])", "1.234"},
      {"'%.0f %.0f %.0f'.format([2.5, 3.5001, 1.5])", "2 4 2"},
      {"'%f %f'.format([2, 3u])", "2.000000 3.000000"},
      {"'%.6e'.format([1052.032911275])", "1.052033e+03"},
      {"'%e'.format([2])", "2.000000e+00"},
      {"'%f %e'.format([double('NaN'), double('-Infinity')])", "NaN -Infinity"},
      {"'%b %b %b'.format([5, uint(64), true])", "101 1000000 1"},
      {"'%o %x %X'.format([11, 30, 30])", "13 1e 1E"},
      {"'%x'.format([-30])", "-1e"},
      {"'%x %X'.format(['Hello', b'byte'])", "48656c6c6f 62797465"},
      {"'%d %d'.format([2.5, double('NaN')])", "2.5 NaN"},
      {"'%s'.format([null])", "null"},
      {"'%s'.format([b'xyz'])", "xyz"},
      {"'%s'.format([type('')])", "string"},
      {"'%s'.format([timestamp('2023-02-03T23:31:20+00:00')])", "2023-02-03T23:31:20Z"},
      {"'%s'.format([duration('1h45m47s')])", "6347s"},
      {"'%s'.format([['abc', 3.14, null, [9, 8], true]])", "[abc, 3.14, null, [9, 8], true]"},
      {"'%s'.format([{'strKey': 'x', 6: duration('422s'), true: 42}])",
       "{6: 422s, strKey: x, true: 42}"},
      {"'%s'.format([[double('NaN'), double('Infinity')]])", "[NaN, Infinity]"},
      {"s.format([1.2345])", "1.234"},
  });
}

TEST(StringsExtension, ReportsCelGoErrors) {
  const Case cases[] = {
      {"'tacocat'.charAt(30)", "index out of range: 30"},
      {"'tacocat'.indexOf('a', 30)", "index out of range: 30"},
      {"'tacocat'.lastIndexOf('a', -1)", "index out of range: -1"},
      {"'tacocat'.substring(40)", "index out of range: 40"},
      {"'tacocat'.substring(1, 50)", "index out of range: 50"},
      {"'tacocat'.substring(49, 50)", "index out of range: 49"},
      {"'tacocat'.substring(4, 3)", "invalid substring range. start: 4, end: 3"},
      {"'%a'.format([1])",
       "could not parse formatting clause: unrecognized formatting clause \"a\""},
      {"'%E'.format([0.5])",
       "could not parse formatting clause: unrecognized formatting clause \"E\""},
      {"'%d %d %d'.format([0, 1])", "index 2 out of range"},
      {"'%b'.format(['abc'])",
       "error during formatting: only integers and bools can be formatted as binary, was given "
       "string"},
      {"'%d'.format([duration('30m2s')])",
       "error during formatting: decimal clause can only be used on integers, was given "
       "google.protobuf.Duration"},
      {"'%o'.format(['a'])",
       "error during formatting: octal clause can only be used on integers, was given string"},
      {"'%x'.format([0.5])",
       "error during formatting: only integers, byte buffers, and strings can be formatted as "
       "hex, was given double"},
      {"'%e'.format([null])",
       "error during formatting: scientific clause can only be used on doubles, was given "
       "null_type"},
      {"'%f'.format([null])",
       "error during formatting: fixed-point clause can only be used on doubles, was given "
       "null_type"},
      {"'%s'.format([quantity('1')])",
       "error during formatting: string clause can only be used on strings, bools, bytes, ints, "
       "doubles, maps, lists, types, durations, and timestamps, was given kubernetes.Quantity"},
      {"[1].join()", "join: invalid input: 1"},
  };
  for (const Case& c : cases) {
    const Value v = Eval(c.expr);
    ASSERT_TRUE(v.is_error()) << c.expr << " = " << v.DebugString();
    EXPECT_EQ(v.error_message(), c.want) << c.expr;
  }
}

TEST(StringsExtension, RegistersDirectlyCallableOverloads) {
  FunctionRegistry registry;
  InstallStringsExtension(registry);
  const auto* overloads = registry.Find("charAt");
  ASSERT_NE(overloads, nullptr);
  ASSERT_EQ(overloads->size(), 1u);
  EvalContext ctx;
  const Value args[] = {Value::String("abc"), Value::Int(1)};
  const Value v = (*overloads)[0].body(args, ctx);
  ASSERT_EQ(v.kind(), Kind::kString);
  EXPECT_EQ(v.string_value(), "b");
  EXPECT_GT(ctx.cost, 0u);
}

TEST(StringsExtension, StopsAtTheCostLimit) {
  FunctionRegistry registry;
  InstallStringsExtension(registry);
  EvalContext ctx;
  ctx.cost_limit = 10;
  const Value args[] = {Value::String(std::string(1000, 'a'))};
  const Value v = (*registry.Find("trim"))[0].body(args, ctx);
  ASSERT_TRUE(v.is_error());
  EXPECT_EQ(v.error_message(), "operation cancelled: actual cost limit exceeded");
}

}  // namespace
}  // namespace klutch::cel::ext_strings_test
