// Label and field selectors: the `labelSelector=` / `fieldSelector=` query parameters of list and
// watch requests, and metav1.LabelSelector objects inside API objects.
//
// Both parse the syntax kube-apiserver accepts and reject what it rejects, with its messages
// (reason BadRequest). Which field names a resource supports in a field selector is the caller's
// business; this only parses and matches.
//
// Selectors are immutable values once built; const use from many threads is safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::machinery {

// A conjunction of label requirements (k8s.io/apimachinery/pkg/labels). The default-constructed
// selector is empty and matches everything.
class LabelSelector {
 public:
  enum class Operator {
    kEquals,        // k=v
    kDoubleEquals,  // k==v
    kNotEquals,     // k!=v
    kIn,            // k in (a,b)
    kNotIn,         // k notin (a,b)
    kExists,        // k
    kDoesNotExist,  // !k
    kGreaterThan,   // k>1 (integers)
    kLessThan,      // k<1 (integers)
  };

  struct Requirement {
    std::string key;
    Operator op = Operator::kExists;
    // Sorted and unique for kIn/kNotIn; one value for the comparison operators; none for
    // kExists/kDoesNotExist.
    std::vector<std::string> values;
    bool operator==(const Requirement&) const = default;
  };

  LabelSelector() = default;

  // Parses the string syntax: comma-separated requirements (AND), each `k=v`, `k==v`, `k!=v`,
  // `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>n`, `k<n`; whitespace between tokens is
  // ignored; "" selects everything. Keys are qualified names with an optional DNS-subdomain
  // prefix (`example.com/key`), values label values (<= 63 characters, alphanumeric at both ends,
  // `-_.` inside); `>`/`<` need an integer. Requirements are kept sorted by key.
  // Errors: BadRequest, e.g. "unable to parse requirement: ..." (invalid key or value) or
  // "found ',', expected: identifier after ','" (syntax), as labels.Parse words them.
  static core::Result<LabelSelector> Parse(std::string_view text);

  // Builds a selector from a metav1.LabelSelector object: `matchLabels` (k=v each) and
  // `matchExpressions` ({key, operator: In|NotIn|Exists|DoesNotExist, values}), ANDed.
  // `null` gives a selector matching nothing (as metav1.LabelSelectorAsSelector(nil)); `{}`
  // one matching everything. Errors: BadRequest for a malformed object, an unknown operator
  // ("\"Foo\" is not a valid label selector operator"), or an invalid key, value or value count.
  static core::Result<LabelSelector> FromJson(const Json& label_selector);

  // A selector that matches no object.
  static LabelSelector Nothing();

  // Whether a set of labels (a JSON object of strings, or null for none) satisfies every
  // requirement. Members whose value is not a string count as absent.
  bool Matches(const Json& labels) const;

  // True when the selector has no requirements and so matches everything.
  bool Empty() const { return requirements_.empty() && !nothing_; }

  // The canonical string form, parseable by Parse: requirements sorted by key, set values
  // sorted, e.g. "app=web,env in (dev,prod),!legacy". Empty (and Nothing) give "".
  std::string ToString() const;

  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
  bool nothing_ = false;
};

// A conjunction of `field=value` / `field!=value` terms (k8s.io/apimachinery/pkg/fields).
class FieldSelector {
 public:
  struct Requirement {
    std::string field;
    bool equal = true;  // `=` or `==`; false for `!=`
    std::string value;  // unescaped
    bool operator==(const Requirement&) const = default;
  };

  FieldSelector() = default;

  // Parses comma-separated terms `f=v`, `f==v`, `f!=v`. In values, `\,` `\=` `\\` escape those
  // characters; an unescaped `,` splits terms and an unescaped `=` in a value is an error.
  // Empty terms are skipped ("" selects everything); requirements are kept sorted by field,
  // operator (!= first) and value, whatever the spelling. Field names
  // are not trimmed or checked. Errors: BadRequest, "invalid selector: 'x'; can't understand
  // 'x'" for a term without an operator, "invalid field selector: ..." for bad escapes.
  static core::Result<FieldSelector> Parse(std::string_view text);

  // Whether every requirement holds; `get` returns a field's value, nullopt comparing as "".
  bool Matches(const std::function<std::optional<std::string>(std::string_view field)>& get) const;

  bool Empty() const { return requirements_.empty(); }

  // The canonical string form (values re-escaped), e.g. "metadata.name=a\,b,type!=x".
  std::string ToString() const;

  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

}  // namespace klutch::machinery
