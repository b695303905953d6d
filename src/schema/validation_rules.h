// x-kubernetes-validations: the CEL rules of a CRD schema, compiled once per schema and
// evaluated against objects on create, update and status update as kube-apiserver does.
//
// Compile() walks an openAPIV3Schema, compiles every rule and messageExpression with the
// Kubernetes CEL environment (variables `self` and `oldSelf`), and reports what
// kube-apiserver rejects at CRD creation (compile errors, unknown reasons, bad fieldPaths).
// Validate() evaluates the rules top-down: rules that read oldSelf (transition rules) run
// only on update where the old value can be correlated (object properties, map values,
// list-type=map items by key) unless optionalOldSelf is set; a rule failing on a value equal
// to its old value is only a warning (ratcheting); each evaluation
// has kube-apiserver's per-call cost limit and the request a total budget. Failures are
// causes with kube-apiserver's field paths and wording, e.g. `spec: Invalid value: "object":
// Unsupported plan used for postgresql`.
//
// Two additions to kube-apiserver's wording say what to do (issue #23). A failed rule that
// compares fields of self with constants (`self.plan == 'a'`, `self.plan in ['a', 'b']`)
// gets, after its message, the constants with which it would hold when that one field
// changes, the rules of the same object that read the field and held still holding:
// `...postgresql; supported values for spec.plan: "a", "b" (or spec.compositionRef.name:
// "x")`. Rules that fail with `no such key` because they read a field the object lacks
// become one cause for that field: `spec.compositionRef: Required value: rules "A" and "B"
// read spec.compositionRef.name: set it (supported values: "x")`. Finding the values
// evaluates changed copies, only for failed rules, at most 256 rule evaluations a request
// (past that no values are named rather than some).
//
// A ValidationRules is immutable after Compile() and safe to use from many threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::schema {

using machinery::Json;

// kube-apiserver's limits (k8s.io/apiserver/pkg/apis/cel/config.go).
inline constexpr uint64_t kPerCallCostLimit = 1000000;
inline constexpr uint64_t kRuntimeCostBudget = 10000000;

class ValidationRules {
 public:
  ~ValidationRules();
  ValidationRules(const ValidationRules&) = delete;
  ValidationRules& operator=(const ValidationRules&) = delete;

  // Compiles the rules of `schema` (an openAPIV3Schema, kept alive by the returned object
  // through `owner`). Problems are appended to `errors` with field paths under `path`
  // (e.g. "spec.versions[0].schema.openAPIV3Schema"); rules that failed to compile are
  // left out of the result.
  static std::shared_ptr<const ValidationRules> Compile(std::shared_ptr<const Json> owner,
                                                        const Json& schema, std::string_view path,
                                                        std::vector<core::Cause>& errors);

  // Whether the schema has no rules at all (Validate would do nothing).
  bool empty() const;
  // Number of compiled rules.
  size_t size() const;

  // Evaluates the rules against `object`; `old` is the stored object on update (nullptr on
  // create). Appends one cause per failed rule. A rule failing on a value equal to its old
  // value (ratcheting) is appended to `warnings` instead ("field: message"), when given.
  void Validate(const Json& object, const Json* old, std::vector<core::Cause>& causes,
                std::vector<std::string>* warnings = nullptr) const;

  struct Node;

 private:
  ValidationRules();
  std::shared_ptr<const Json> owner_;
  std::unique_ptr<Node> root_;
  size_t count_ = 0;
};

// Whether `causes` holds a schema error that makes kube-apiserver skip CEL rules (a wrong
// type, an unsupported enum value, a missing required field, a too long string or list),
// and the cause it reports then.
bool HasBlockingError(const std::vector<core::Cause>& causes);
core::Cause RulesNotCheckedCause();

}  // namespace klutch::schema
