// Helpers shared by the extension libraries (ext_strings.cc, k8s_*.cc); not a public API.
//
// UTF-8 code point handling (CEL indexes strings by code point), Go-compatible quoting for
// error messages (strconv.Quote), and cost charging with cel-go's string traversal factor.
// All functions are pure and thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cel/cel.h"
#include "cel/value.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace klutch::cel::internal {

// cel-go's common.StringTraversalCostFactor and RegexStringLengthCostFactor.
inline constexpr double kStringTraversalCostFactor = 0.1;
inline constexpr double kRegexStringLengthCostFactor = 0.25;

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes one code point at `s[*pos]` and advances `*pos`; invalid sequences decode as
// U+FFFD consuming one byte (as Go's range loop does).
char32_t DecodeRune(std::string_view s, size_t* pos);

std::vector<char32_t> ToRunes(std::string_view s);
std::string FromRunes(const std::vector<char32_t>& runes, size_t begin, size_t end);
// Number of code points in s[0, byte_offset).
int64_t RuneCount(std::string_view s, size_t byte_offset = std::string_view::npos);

// Go's strconv.Quote: double-quoted, escaping quotes, backslashes and non-printable runes.

// ceil(size * factor), the cost cel-go's Kubernetes estimator charges for a traversal.
inline uint64_t TraversalCost(size_t size, double factor = kStringTraversalCostFactor) {
  return static_cast<uint64_t>(std::ceil(static_cast<double>(size) * factor));
}

// cel-go's error when an evaluation runs over its cost limit.
inline Value CostExceeded() {
  return Value::MakeError("operation cancelled: actual cost limit exceeded");
}

// Charges `units`; returns an error Value when the limit is exceeded, else nullopt-like
// empty error (check with `.is_error()`).
inline bool ChargeOrFail(EvalContext& ctx, uint64_t units, Value* error) {
  if (ctx.Charge(units)) return true;
  *error = CostExceeded();
  return false;
}

// The "no such overload" error cel-go reports for arguments of unexpected kinds.
inline Value NoSuchOverload() { return Value::MakeError("no such overload"); }

// A compiled RE2 for `pattern` from a bounded per-thread cache, or null with `*error` set to
// Go's wording ("error parsing regexp: missing closing ): `(a`").
std::shared_ptr<const re2::RE2> CompileRegex(std::string_view pattern, std::string* error);
// Go's regexp.Compile message for a pattern RE2 rejected (see regex.h).
std::string GoRegexpErrorOf(const re2::RE2& re);

// The Kubernetes libraries installed by InstallKubernetesLibraries (k8s_library.cc).
void InstallListsLibrary(FunctionRegistry& registry);
void InstallRegexLibrary(FunctionRegistry& registry);
void InstallURLLibrary(FunctionRegistry& registry);
void InstallQuantityLibrary(FunctionRegistry& registry);
void InstallIPLibrary(FunctionRegistry& registry);

}  // namespace klutch::cel::internal
