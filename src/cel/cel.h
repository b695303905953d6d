// The CEL language: compile an expression once, evaluate it many times.
//
//   auto env = cel::Env::Kubernetes();
//   auto program = env->Compile("self.plan.contains('small')", {"self", "oldSelf"});
//   cel::MapActivation vars;
//   vars.Bind("self", cel::Value::Map(...));
//   cel::Value result = (*program)->Evaluate(vars);   // a bool, or an error Value
//
// Env holds the function library (CEL's standard functions plus, for Kubernetes, the
// extension libraries kube-apiserver offers to CRD validation rules). Compile() parses,
// expands macros (has, all, exists, exists_one, map, filter and the two-variable forms),
// resolves identifiers and function names, and precompiles constant regular expressions.
// Programs are immutable and may be evaluated from many threads at once; an Env must outlive
// its programs. Evaluation never throws: failures are error Values (see value.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cel/value.h"
#include "core/status.h"

namespace klutch::cel {

struct Expr;

// Per-evaluation state handed to functions: the running cost and its limit.
struct EvalContext {
  uint64_t cost = 0;
  uint64_t cost_limit = UINT64_MAX;
  // Adds `units` to the running cost; false once the limit is exceeded.
  bool Charge(uint64_t units) {
    cost += units;
    return cost <= cost_limit;
  }
};

// One parameter of an overload: any value, or one kind (for kOpaque optionally one type).
struct Param {
  bool any = false;
  Kind kind = Kind::kNull;
  std::string_view opaque_type;  // for kOpaque: the OpaqueValue::type_name() required
  static Param Any() { return Param{true, Kind::kNull, {}}; }
  static Param Of(Kind k) { return Param{false, k, {}}; }
  static Param OfOpaque(std::string_view type) { return Param{false, Kind::kOpaque, type}; }
};

// A function body; arguments are never error Values (strict functions see only values).
using FunctionBody = std::function<Value(std::span<const Value> args, EvalContext& ctx)>;

struct Overload {
  bool member = false;  // called as `target.f(args)`: args[0] is the target
  std::vector<Param> params;
  FunctionBody body;
};

// Functions by name. Overloads are tried in registration order; the first whose parameters
// match the argument kinds runs.
class FunctionRegistry {
 public:
  void Add(std::string_view name, bool member, std::vector<Param> params, FunctionBody body);
  // Global and member forms at once (`size(x)` and `x.size()`).
  void AddBoth(std::string_view name, std::vector<Param> params, const FunctionBody& body);
  const std::vector<Overload>* Find(std::string_view name) const;

 private:
  std::map<std::string, std::vector<Overload>, std::less<>> functions_;
};

// Variable lookup during evaluation.
class Activation {
 public:
  virtual ~Activation() = default;
  virtual std::optional<Value> Find(std::string_view name) const = 0;
};

class MapActivation final : public Activation {
 public:
  void Bind(std::string name, Value value) { vars_[std::move(name)] = std::move(value); }
  std::optional<Value> Find(std::string_view name) const override;

 private:
  std::map<std::string, Value, std::less<>> vars_;
};

struct EvalOptions {
  // Evaluation stops with the error "operation cancelled: actual cost limit exceeded" once
  // the running cost passes this (kube-apiserver's per-call limit is 1,000,000).
  uint64_t cost_limit = UINT64_MAX;
};

struct EvalResult {
  Value value;
  uint64_t cost = 0;
  bool cost_exceeded = false;
};

class Env;

// A chain of field selections on a free variable (`self.spec.plan` is {"self", {"spec",
// "plan"}}), with each selection's source offset: what a schema-aware check needs to find
// fields the schema does not declare.
struct FieldChain {
  std::string variable;
  std::vector<std::string> fields;
  std::vector<int32_t> offsets;
};

// A field chain compared with a constant by `==` or `in`: `self.plan == 'x'`,
// `'x' == self.plan` and `self.plan in ['x', 'y']` name the values 'x' and 'y' for
// self.plan. What a validator needs to tell a user which values a failed rule accepts.
struct ComparedConstant {
  FieldChain chain;
  Value constant;
};

// "ERROR: <input>:L:C: message" plus the source line and a caret, as cel-go reports errors.
std::string FormatError(std::string_view source, int32_t offset, std::string_view message);

class Program {
 public:
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // The value of the expression for `vars`; an error Value on failure.
  EvalResult Evaluate(const Activation& vars, const EvalOptions& options = {}) const;
  const std::string& source() const { return source_; }
  // Whether the expression reads the variable `name` (free occurrences, not shadowed by a
  // comprehension variable): how Kubernetes tells transition rules (oldSelf) apart.
  bool References(std::string_view name) const;
  // Every maximal field-selection chain on a free variable.
  std::vector<FieldChain> FieldChains() const;
  // Every comparison of a free variable's field chain (no has(), no optional selection) with
  // a constant, in source order, duplicates included.
  std::vector<ComparedConstant> ComparedConstants() const;
  // The chain when the whole expression is one (`self.enabled`), else nullopt.
  std::optional<FieldChain> WholeChain() const;
  // Whether the expression certainly yields no bool (a non-bool literal, a list or map
  // literal, arithmetic, a conversion to another type): what a type checker would reject for
  // a rule that must evaluate to a bool.
  bool ObviouslyNotBool() const;

 private:
  friend class Env;
  Program(std::string source, std::unique_ptr<Expr> root);
  std::string source_;
  std::unique_ptr<Expr> root_;
};

struct CompileOptions {
  // Declared variables. When `check_identifiers` is set, any other free identifier is a
  // compile error ("undeclared reference to 'x'"), as kube-apiserver's type checker reports.
  std::vector<std::string> variables;
  bool check_identifiers = true;
  // Rejects expressions nested deeper than this (cel-go's parser limit is 250... we use the
  // same order of magnitude) with a clear error instead of exhausting the stack.
  int max_recursion_depth = 250;
};

class Env {
 public:
  // CEL's standard definitions plus the extension libraries the conformance suite covers
  // (strings, optionals, two-variable comprehensions).
  static std::shared_ptr<const Env> Standard();
  // The environment kube-apiserver gives CRD validation rules: standard CEL, extended
  // strings, lists, regex, URLs, quantity, IP/CIDR, optionals.
  static std::shared_ptr<const Env> Kubernetes();

  // Parses and prepares `source`. Errors (InvalidArgument-like BadRequest Status) carry a
  // message in cel-go's shape: "ERROR: <input>:1:6: Syntax error: ...".
  core::Result<std::unique_ptr<Program>> Compile(std::string_view source,
                                                 const CompileOptions& options = {}) const;

  const FunctionRegistry& functions() const { return functions_; }
  FunctionRegistry& mutable_functions() { return functions_; }

 private:
  FunctionRegistry functions_;
};

// Library installers (stdlib.cc and the ext_*.cc / k8s_*.cc files).
void InstallStandardLibrary(FunctionRegistry& registry);
void InstallStringsExtension(FunctionRegistry& registry);
void InstallOptionalLibrary(FunctionRegistry& registry);
void InstallKubernetesLibraries(FunctionRegistry& registry);

}  // namespace klutch::cel
