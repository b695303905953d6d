// cel-spec's `cel.expr.Value` messages (read by textproto.h) as cel::Value, and the strict
// equality the conformance runner compares results with.
//
// Test-only code. A Value message converts to the cel::Value of its one set kind; values this
// project cannot represent (protobuf messages other than Timestamp and Duration, enum values)
// are reported as unsupported with a reason rather than as errors, so the runner can tell
// "the harness cannot express this" from "the file is malformed". Stateless; thread-safe.
#pragma once

#include <string>

#include "cel/value.h"
#include "core/status.h"
#include "test/conformance/cel/textproto.h"

namespace klutch::cel_conformance {

// A converted value, or (when `unsupported` is non-empty) why it cannot be expressed.
struct Converted {
  cel::Value value;
  std::string unsupported;
};

// Converts a cel.expr.Value message. BadRequest for malformed input (no kind set, a scalar
// that does not parse, a timestamp out of range).
core::Result<Converted> ToCelValue(const textproto::Message& value);

// Exact equality for checking results: kinds must match (int 3 is not double 3.0, nor uint
// 3u), NaN equals NaN, lists compare element-wise in order, maps by key sets (keys matched
// with the same exact rules) and values. Errors never equal anything.
bool ExactlyEqual(const cel::Value& a, const cel::Value& b);

}  // namespace klutch::cel_conformance
