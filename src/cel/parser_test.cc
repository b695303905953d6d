#include <gtest/gtest.h>

#include "cel/cel.h"

namespace klutch::cel::parser_test {
namespace {

TEST(CelParser, RejectsMalformedExpressionsWithPositions) {
  struct Case {
    const char* expr;
    const char* want;  // prefix of the error message
  };
  const Case cases[] = {
      {"1 +", "ERROR: <input>:1:4: Syntax error: mismatched input '<EOF>'"},
      {"(1", "ERROR: <input>:1:3: Syntax error: mismatched input '<EOF>' expecting ')'"},
      {"a.", "ERROR: <input>:1:3: Syntax error: mismatched input '<EOF>' expecting IDENTIFIER"},
      {"'abc", "ERROR: <input>:1:1: Syntax error: unterminated string literal"},
      {"1 = 2", "ERROR: <input>:1:3: Syntax error: token recognition error at: '='"},
      {"if", "ERROR: <input>:1:1: reserved identifier: if"},
      {"has(a)", "ERROR: <input>:1:5: invalid argument to has() macro"},
      {"[1].all(1, true)", "ERROR: <input>:1:9: argument must be a simple name"},
      {"9223372036854775808", "ERROR: <input>:1:1: invalid int literal"},
      {"foo(1)", "ERROR: <input>:1:4: undeclared reference to 'foo'"},
      {"nope + 1", "ERROR: <input>:1:1: undeclared reference to 'nope'"},
      {"'x'.matches('[')", "ERROR: <input>:1:13: error parsing regexp: missing closing ]: `[`"},
  };
  for (const Case& c : cases) {
    auto program = Env::Kubernetes()->Compile(c.expr);
    ASSERT_FALSE(program.ok()) << c.expr;
    EXPECT_TRUE(program.status().message().starts_with(c.want))
        << c.expr << " -> " << program.status().message();
  }
}

TEST(CelParser, LimitsNesting) {
  std::string deep(300, '(');
  deep += "1" + std::string(300, ')');
  auto program = Env::Kubernetes()->Compile(deep);
  ASSERT_FALSE(program.ok());
  EXPECT_NE(program.status().message().find("recursion limit"), std::string::npos);
  std::string ok(50, '[');
  ok += std::string(50, ']');
  EXPECT_TRUE(Env::Kubernetes()->Compile(ok).ok());
  // Left-associative chains and operator runs must not build trees deep enough to exhaust
  // the stack while compiling, evaluating or destroying them.
  std::string sum = "1";
  for (int i = 0; i < 30000; ++i) sum += "+1";
  auto deep_sum = Env::Kubernetes()->Compile(sum);
  ASSERT_FALSE(deep_sum.ok());
  EXPECT_NE(deep_sum.status().message().find("recursion limit"), std::string::npos);
  std::string select = "{'a': 1}";
  for (int i = 0; i < 30000; ++i) select += ".a";
  EXPECT_FALSE(Env::Kubernetes()->Compile(select).ok());
  // Runs of ! and - keep only their parity, as cel-go's parser does; && and || chains are
  // balanced, so long ones stay shallow.
  auto nots = Env::Kubernetes()->Compile(std::string(30001, '!') + "true");
  ASSERT_TRUE(nots.ok());
  EXPECT_EQ((*nots)->Evaluate(MapActivation()).value.DebugString(), "false");
  std::string ors = "false";
  for (int i = 0; i < 9000; ++i) ors += " || false";
  ors += " || true";
  auto long_or = Env::Kubernetes()->Compile(ors);
  ASSERT_TRUE(long_or.ok()) << long_or.status().message();
  EXPECT_EQ((*long_or)->Evaluate(MapActivation()).value.DebugString(), "true");
}

TEST(CelParser, DecodesLiterals) {
  struct Case {
    const char* expr;
    const char* want;
  };
  const Case cases[] = {
      {"0x1F", "31"},
      {"0x1Fu", "31u"},
      {"1e3", "1000"},
      {".5", "0.5"},
      {"r'\\n'", "\"\\\\n\""},
      {"'\\u00e9'", "\"\xC3\xA9\""},
      {"b'\\xff'", "b\"\xff\""},
      {"'''a'b'''", "\"a'b\""},
      {"\"\\101\"", "\"A\""},
  };
  for (const Case& c : cases) {
    auto program = Env::Kubernetes()->Compile(c.expr);
    ASSERT_TRUE(program.ok()) << c.expr << ": " << program.status().message();
    EXPECT_EQ((*program)->Evaluate(MapActivation()).value.DebugString(), c.want) << c.expr;
  }
}

}  // namespace
}  // namespace klutch::cel::parser_test
