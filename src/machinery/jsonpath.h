// JSONPath as Kubernetes evaluates it (client-go's util/jsonpath): in CRD printer columns,
// which kube-apiserver parses as the template `{<jsonPath>}`, and in `kubectl get -o
// jsonpath`. One action, with or without the surrounding braces:
//
//   .field        a map key. The name runs to the next unescaped `.` `,` `[` `]` `$` `@`
//                 `{` `}` or blank; a backslash escapes the next character and every
//                 backslash is then dropped, so `.metadata.annotations.crossplane\.io/x`
//                 names the key "crossplane.io/x". `.*` selects every value of a map or
//                 element of an array.
//   ..field       recursive descent: every non-empty object and array below (and
//                 including) the current value, then `field` (or whatever follows) in each.
//   [N] [a:b:s]   index or slice of an array (negative counts from the end); `[*]` is `[:]`.
//   [x,y]         union: each part evaluated on the same input, results concatenated.
//   ['k']         the quoted text re-read as a field path (`['a.b']` is `.a.b`, as in
//                 client-go; escape the dot to name one key).
//   [?(...)]      filter of an array: `@.path` exists, or `<operand> op <operand>` with
//                 ==, !=, <, >, <=, >= where an operand is a path from the element, a quoted
//                 string, a number, true or false.
//   @ $           the current value (skipped); a lone `.` (kubectl's `{.}`) is the document.
//
// Evaluation follows client-go with missing keys allowed: a missing key selects nothing,
// while what client-go reports as an error (an index out of range, indexing or filtering a
// value that is not an array, comparing values of different types) makes the whole path
// select nothing. Quoted text, numbers and identifiers (`range`, `end`) outside filters are
// not supported and fail to compile.
//
// A compiled JsonPath is immutable and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::machinery {

class JsonPath {
 public:
  // kBadRequest naming the position and the problem for expressions client-go's parser
  // refuses (and for the unsupported constructs above).
  static core::Result<JsonPath> Compile(std::string_view expression);
  // Every value the path selects, in document order (pointers into `root`; object members
  // in key order). Empty when nothing matches or evaluation fails as described above.
  std::vector<const Json*> Evaluate(const Json& root) const;

  struct Step;

 private:
  std::shared_ptr<const std::vector<Step>> steps_;
};

}  // namespace klutch::machinery
