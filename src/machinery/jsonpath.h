// JSONPath as Kubernetes uses it in printer columns and `kubectl get -o jsonpath`: a
// dotted path with optional braces, `.field`, `['field']`, `[N]`, `[*]`, `..field`
// (recursive descent) and filters `[?(@.type=="Ready")]` with ==, !=, <, >, <=, >= and
// existence `[?(@.x)]`.
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
  // kBadRequest naming the position for malformed expressions.
  static core::Result<JsonPath> Compile(std::string_view expression);
  // Every value the path selects, in document order (pointers into `root`).
  std::vector<const Json*> Evaluate(const Json& root) const;

  struct Step;

 private:
  std::shared_ptr<const std::vector<Step>> steps_;
};

}  // namespace klutch::machinery
