// Kubernetes' regex library (k8s.io/apiserver/pkg/cel/library/regex.go): find and findAll
// with Go's regexp semantics (RE2 syntax, leftmost-first, FindAllString's rules for empty
// matches). Compiled patterns come from a bounded per-thread cache.
#include <re2/re2.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cel/cel.h"
#include "cel/library_util.h"
#include "cel/value.h"

namespace klutch::cel {
namespace {

constexpr size_t kRegexCacheSize = 128;

Value Find(const std::string& text, const std::string& pattern) {
  std::string error;
  auto re = internal::CompileRegex(pattern, &error);
  if (!re) return Value::MakeError("Illegal regex: " + error);
  re2::StringPiece match;
  if (!re->Match(text, 0, text.size(), re2::RE2::UNANCHORED, &match, 1)) {
    return Value::String("");
  }
  return Value::String(std::string(match.data(), match.size()));
}

// Go's Regexp.FindAllString(text, n): non-overlapping matches; an empty match right after
// the previous match is skipped; n < 0 means all.
Value FindAll(const std::string& text, const std::string& pattern, int64_t n) {
  std::string error;
  auto re = internal::CompileRegex(pattern, &error);
  if (!re) return Value::MakeError("Illegal regex: " + error);
  std::vector<Value> out;
  if (n == 0) return Value::List(std::move(out));
  size_t pos = 0;
  size_t prev_match_end = std::string::npos;
  const re2::StringPiece input(text);
  while ((n < 0 || static_cast<int64_t>(out.size()) < n) && pos <= text.size()) {
    re2::StringPiece match;
    if (!re->Match(input, pos, text.size(), re2::RE2::UNANCHORED, &match, 1)) break;
    const size_t begin = match.data() - text.data();
    const size_t end = begin + match.size();
    bool accept = true;
    if (end == pos) {
      // An empty match: never right after the previous match; step one code point.
      if (begin == prev_match_end) accept = false;
      if (pos < text.size()) {
        internal::DecodeRune(text, &pos);
      } else {
        pos = text.size() + 1;
      }
    } else {
      pos = end;
    }
    prev_match_end = end;
    if (accept) out.push_back(Value::String(text.substr(begin, end - begin)));
  }
  return Value::List(std::move(out));
}

uint64_t RegexCost(const std::string& text, const std::string& pattern) {
  const uint64_t str_cost = internal::TraversalCost(text.size() + 1);
  const uint64_t regex_cost =
      internal::TraversalCost(pattern.size(), internal::kRegexStringLengthCostFactor);
  return str_cost * regex_cost;
}

using internal::CostExceeded;

}  // namespace

std::shared_ptr<const re2::RE2> internal::CompileRegex(std::string_view pattern,
                                                       std::string* error) {
  thread_local std::unordered_map<std::string, std::shared_ptr<const re2::RE2>> cache;
  std::string key(pattern);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  re2::RE2::Options options;
  options.set_log_errors(false);
  auto re =
      std::make_shared<const re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (!re->ok()) {
    *error = internal::GoRegexpErrorOf(*re);
    return nullptr;
  }
  // A simple bound: start over when full (patterns in rules are few and constant).
  if (cache.size() >= kRegexCacheSize) cache.clear();
  cache.emplace(std::move(key), re);
  return re;
}

void internal::InstallRegexLibrary(FunctionRegistry& registry) {
  const Param str = Param::Of(Kind::kString);
  registry.Add("find", true, {str, str}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ctx.Charge(RegexCost(a[0].string_value(), a[1].string_value()))) {
      return CostExceeded();
    }
    return Find(a[0].string_value(), a[1].string_value());
  });
  registry.Add("findAll", true, {str, str}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ctx.Charge(RegexCost(a[0].string_value(), a[1].string_value()))) {
      return CostExceeded();
    }
    return FindAll(a[0].string_value(), a[1].string_value(), -1);
  });
  registry.Add("findAll", true, {str, str, Param::Of(Kind::kInt)},
               [](std::span<const Value> a, EvalContext& ctx) {
                 if (!ctx.Charge(RegexCost(a[0].string_value(), a[1].string_value()))) {
                   return CostExceeded();
                 }
                 return FindAll(a[0].string_value(), a[1].string_value(), a[2].int_value());
               });
}

}  // namespace klutch::cel
