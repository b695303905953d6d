// The parsed form of a CEL expression (internal to src/cel).
//
// Macros are expanded by the parser into comprehensions, as the CEL spec describes them, so
// the evaluator knows only these node kinds. Nodes are owned by their parent; Program owns
// the root. Immutable after Compile(), except for the resolution fields Compile() fills.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cel/value.h"

namespace re2 {
class RE2;
}

namespace klutch::cel {

struct Overload;

struct Expr {
  enum class Type {
    kConst,
    kIdent,
    kSelect,  // operand.field; test_only for has(); optional for operand.?field
    kCall,    // function(args) or target.function(args) (target is args[0] when member)
    kList,    // [args...]; optional_indices mark `?elem` entries
    kMap,     // {args[0]: args[1], ...}; optional_indices mark `?key: value` entries
    kStruct,  // Name{field: value}: message construction (no message types are known)
    kComprehension,
  };
  Type type = Type::kConst;
  int32_t offset = 0;  // byte offset into the source, for error positions

  Value constant;    // kConst
  std::string name;  // kIdent name, kSelect field, kCall function, kStruct type name
  bool test_only = false;
  bool optional = false;  // kSelect `.?`
  bool quoted = false;    // kSelect of a `quoted` field name
  bool member = false;    // kCall with a target
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<int> optional_indices;     // kList element / kMap entry indices marked `?`
  std::vector<std::string> field_names;  // kStruct

  // kComprehension (CEL spec semantics): for iter_var (and iter_var2) over iter_range,
  // accumulate in accu_var starting at accu_init while loop_condition holds, stepping with
  // loop_step; the value is result.
  std::string iter_var, iter_var2, accu_var;
  std::unique_ptr<Expr> iter_range, accu_init, loop_condition, loop_step, result;

  // Filled by Compile(): the overloads of a kCall (nullptr for the built-in operators the
  // evaluator handles itself) and a precompiled pattern for `matches` with a constant.
  const std::vector<Overload>* overloads = nullptr;
  std::shared_ptr<const re2::RE2> regex;
  int op = -1;  // built-in operator code (interpreter.cc)
  // kSelect chains that spell a dotted name ("a.b.c"): the name, tried as a variable (or a
  // type such as google.protobuf.Timestamp) before field selection, longest name first.
  std::string qualified;
};

// Parses `source`; macros expanded. On error returns nullptr and sets `error` to
// "ERROR: <input>:L:C: message" lines as cel-go prints them.
std::unique_ptr<Expr> ParseExpr(std::string_view source, int max_depth, std::string& error);

// Accumulator variable name used by macro expansions (cannot clash with user identifiers).
inline constexpr char kAccuVar[] = "@result";

}  // namespace klutch::cel
