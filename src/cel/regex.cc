#include "cel/regex.h"

#include <re2/re2.h>

#include "cel/library_util.h"

namespace klutch::cel {
namespace {

// Go's regexp/syntax error codes for RE2's.
std::string_view GoErrorCode(re2::RE2::ErrorCode code) {
  switch (code) {
    case re2::RE2::ErrorBadEscape:
      return "invalid escape sequence";
    case re2::RE2::ErrorBadCharClass:
      return "invalid character class";
    case re2::RE2::ErrorBadCharRange:
      return "invalid character class range";
    case re2::RE2::ErrorMissingBracket:
      return "missing closing ]";
    case re2::RE2::ErrorMissingParen:
      return "missing closing )";
    case re2::RE2::ErrorUnexpectedParen:
      return "unexpected )";
    case re2::RE2::ErrorTrailingBackslash:
      return "trailing backslash at end of expression";
    case re2::RE2::ErrorRepeatArgument:
      return "missing argument to repetition operator";
    case re2::RE2::ErrorRepeatSize:
      return "invalid repeat count";
    case re2::RE2::ErrorRepeatOp:
      return "invalid nested repetition operator";
    case re2::RE2::ErrorBadPerlOp:
      return "invalid or unsupported Perl syntax";
    case re2::RE2::ErrorBadUTF8:
      return "invalid UTF-8";
    case re2::RE2::ErrorBadNamedCapture:
      return "invalid named capture";
    case re2::RE2::ErrorPatternTooLarge:
      return "expression too large";
    default:
      return "regexp/syntax: internal error";
  }
}

}  // namespace

std::string internal::GoRegexpErrorOf(const re2::RE2& re) {
  std::string expr = re.error_arg();
  switch (re.error_code()) {
    // Go quotes the whole expression for unbalanced parentheses, nothing for a trailing
    // backslash, and the offending part otherwise.
    case re2::RE2::ErrorMissingParen:
    case re2::RE2::ErrorUnexpectedParen:
      expr = re.pattern();
      break;
    case re2::RE2::ErrorTrailingBackslash:
      expr.clear();
      break;
    default:
      break;
  }
  return "error parsing regexp: " + std::string(GoErrorCode(re.error_code())) + ": `" + expr + "`";
}

std::string GoRegexpError(std::string_view pattern) {
  re2::RE2::Options options;
  options.set_log_errors(false);
  re2::RE2 re(re2::StringPiece(pattern.data(), pattern.size()), options);
  return re.ok() ? std::string() : internal::GoRegexpErrorOf(re);
}

}  // namespace klutch::cel
