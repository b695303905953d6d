// cel-go's strings extension (ext.Strings) as kube-apiserver enables it: charAt, indexOf,
// lastIndexOf, lowerAscii, upperAscii, replace, split, substring, trim, join, reverse,
// strings.quote and string.format. Indices count code points; results and error messages
// follow cel-go and the cel-spec string_ext conformance data.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cel/cel.h"
#include "cel/library_util.h"
#include "cel/value.h"
#include "core/strings.h"

namespace klutch::cel {
namespace {

using internal::FromRunes;
using internal::RuneCount;
using internal::ToRunes;
using internal::TraversalCost;

using internal::CostExceeded;

Value IndexOutOfRange(int64_t index) {
  return Value::MakeError("index out of range: " + std::to_string(index));
}

Value CharAt(const std::string& s, int64_t index) {
  const auto runes = ToRunes(s);
  if (index < 0 || index > static_cast<int64_t>(runes.size())) return IndexOutOfRange(index);
  if (index == static_cast<int64_t>(runes.size())) return Value::String("");
  return Value::String(FromRunes(runes, index, index + 1));
}

Value IndexOf(const std::string& s, const std::string& sub) {
  if (sub.empty()) return Value::Int(0);
  const size_t at = s.find(sub);
  if (at == std::string::npos) return Value::Int(-1);
  return Value::Int(RuneCount(s, at));
}

bool RunesMatchAt(const std::vector<char32_t>& runes, const std::vector<char32_t>& sub, size_t at) {
  for (size_t j = 0; j < sub.size(); ++j) {
    if (runes[at + j] != sub[j]) return false;
  }
  return true;
}

Value IndexOfOffset(const std::string& s, const std::string& sub, int64_t offset) {
  if (sub.empty()) return Value::Int(offset);
  const auto runes = ToRunes(s);
  const auto subrunes = ToRunes(sub);
  const auto n = static_cast<int64_t>(runes.size());
  const auto m = static_cast<int64_t>(subrunes.size());
  if (offset < 0 || offset >= n) return IndexOutOfRange(offset);
  for (int64_t i = offset; i < n - (m - 1); ++i) {
    if (RunesMatchAt(runes, subrunes, i)) return Value::Int(i);
  }
  return Value::Int(-1);
}

Value LastIndexOf(const std::string& s, const std::string& sub) {
  if (sub.empty()) return Value::Int(RuneCount(s));
  const size_t at = s.rfind(sub);
  if (at == std::string::npos) return Value::Int(-1);
  return Value::Int(RuneCount(s, at));
}

Value LastIndexOfOffset(const std::string& s, const std::string& sub, int64_t offset) {
  if (sub.empty()) return Value::Int(offset);
  const auto runes = ToRunes(s);
  const auto subrunes = ToRunes(sub);
  const auto n = static_cast<int64_t>(runes.size());
  const auto m = static_cast<int64_t>(subrunes.size());
  if (offset < 0 || offset >= n) return IndexOutOfRange(offset);
  int64_t start = std::min(offset, n - m);
  for (int64_t i = start; i >= 0; --i) {
    if (RunesMatchAt(runes, subrunes, i)) return Value::Int(i);
  }
  return Value::Int(-1);
}

std::string MapAscii(std::string s, bool upper) {
  for (char& c : s) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// Go's strings.Replace: an empty `old` matches before every code point and at the end.
std::string ReplaceN(const std::string& s, const std::string& old_s, const std::string& new_s,
                     int64_t n) {
  if (old_s == new_s || n == 0) return s;
  int64_t matches = 0;
  if (old_s.empty()) {
    matches = RuneCount(s) + 1;
  } else {
    for (size_t at = s.find(old_s); at != std::string::npos;
         at = s.find(old_s, at + old_s.size())) {
      ++matches;
    }
  }
  if (matches == 0) return s;
  if (n < 0 || matches < n) n = matches;
  std::string out;
  size_t start = 0;
  for (int64_t i = 0; i < n; ++i) {
    size_t j = start;
    if (old_s.empty()) {
      if (i > 0) internal::DecodeRune(s, &j);
    } else {
      j = s.find(old_s, start);
    }
    out.append(s, start, j - start);
    out += new_s;
    start = j + old_s.size();
  }
  out.append(s, start, std::string::npos);
  return out;
}

// Go's strings.SplitN.
std::vector<Value> SplitN(const std::string& s, const std::string& sep, int64_t n) {
  std::vector<Value> parts;
  if (n == 0) return parts;
  if (sep.empty()) {
    const auto runes = ToRunes(s);
    auto count = static_cast<int64_t>(runes.size());
    if (n < 0 || n > count) n = count;
    size_t pos = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (i == n - 1) {
        parts.push_back(Value::String(s.substr(pos)));
        break;
      }
      const size_t begin = pos;
      internal::DecodeRune(s, &pos);
      parts.push_back(Value::String(s.substr(begin, pos - begin)));
    }
    return parts;
  }
  size_t start = 0;
  while (n < 0 || static_cast<int64_t>(parts.size()) < n - 1) {
    const size_t at = s.find(sep, start);
    if (at == std::string::npos) break;
    parts.push_back(Value::String(s.substr(start, at - start)));
    start = at + sep.size();
  }
  parts.push_back(Value::String(s.substr(start)));
  return parts;
}

Value Substring(const std::string& s, int64_t start, std::optional<int64_t> end) {
  const auto runes = ToRunes(s);
  const auto n = static_cast<int64_t>(runes.size());
  if (!end) {
    if (start < 0 || start > n) return IndexOutOfRange(start);
    return Value::String(FromRunes(runes, start, n));
  }
  if (start > *end) {
    return Value::MakeError("invalid substring range. start: " + std::to_string(start) +
                            ", end: " + std::to_string(*end));
  }
  if (start < 0 || start > n) return IndexOutOfRange(start);
  if (*end < 0 || *end > n) return IndexOutOfRange(*end);
  return Value::String(FromRunes(runes, start, *end));
}

// Go's unicode.IsSpace.
bool IsUnicodeSpace(char32_t r) {
  switch (r) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return r >= 0x2000 && r <= 0x200A;
  }
}

std::string Trim(const std::string& s) {
  const auto runes = ToRunes(s);
  size_t begin = 0;
  size_t end = runes.size();
  while (begin < end && IsUnicodeSpace(runes[begin])) ++begin;
  while (end > begin && IsUnicodeSpace(runes[end - 1])) --end;
  return FromRunes(runes, begin, end);
}

Value Join(const ListValue& list, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) {
    Value elem = list.Get(i);
    if (elem.is_error()) return elem;
    if (elem.kind() != Kind::kString) {
      return Value::MakeError("join: invalid input: " + elem.DebugString());
    }
    if (i != 0) out += separator;
    out += elem.string_value();
  }
  return Value::String(std::move(out));
}

// cel-go's strings.quote: escapes like a CEL string literal, invalid UTF-8 becomes U+FFFD.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t r = internal::DecodeRune(s, &pos);
    switch (r) {
      case '\a':
        out += "\\a";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\v':
        out += "\\v";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      default:
        core::AppendUtf8(out, r);
    }
  }
  out += '"';
  return out;
}

std::string Reverse(const std::string& s) {
  auto runes = ToRunes(s);
  std::reverse(runes.begin(), runes.end());
  return FromRunes(runes, 0, runes.size());
}

// ---- string.format -------------------------------------------------------------------------

// Go's strconv.FormatFloat(f, 'f', -1, 64): the shortest digits that round-trip, no exponent.
std::string ShortestFixed(double d) {
  char buf[400];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::fixed);
  return std::string(buf, res.ptr);
}

std::string FormatDoubleForString(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return ShortestFixed(d);
}

constexpr std::string_view kStringClauseTypes =
    "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
    "types, durations, and timestamps, was given ";

// The %s rendering; an error Value (already worded) on failure.
bool AppendAsString(const Value& v, std::string* out, Value* error) {
  switch (v.kind()) {
    case Kind::kNull:
      *out += "null";
      return true;
    case Kind::kBool:
      *out += v.bool_value() ? "true" : "false";
      return true;
    case Kind::kInt:
      *out += std::to_string(v.int_value());
      return true;
    case Kind::kUint:
      *out += std::to_string(v.uint_value());
      return true;
    case Kind::kDouble:
      *out += FormatDoubleForString(v.double_value());
      return true;
    case Kind::kString:
      *out += v.string_value();
      return true;
    case Kind::kBytes:
      *out += v.bytes_value();
      return true;
    case Kind::kTimestamp:
      *out += FormatTimestamp(v.timestamp());
      return true;
    case Kind::kDuration:
      *out += FormatDuration(v.duration());
      return true;
    case Kind::kType:
      *out += v.type_name();
      return true;
    case Kind::kList: {
      const ListValue& list = v.list();
      *out += '[';
      for (size_t i = 0; i < list.size(); ++i) {
        if (i > 0) *out += ", ";
        if (!AppendAsString(list.Get(i), out, error)) return false;
      }
      *out += ']';
      return true;
    }
    case Kind::kMap: {
      const MapValue& map = v.map();
      std::vector<std::pair<std::string, std::string>> entries;
      for (const Value& key : map.Keys()) {
        std::string key_str;
        std::string val_str;
        if (!AppendAsString(key, &key_str, error)) return false;
        std::optional<Value> val = map.Find(key);
        if (!val) {
          *error = Value::MakeError("key missing from map: '" + key_str + "'");
          return false;
        }
        if (!AppendAsString(*val, &val_str, error)) return false;
        entries.emplace_back(std::move(key_str), std::move(val_str));
      }
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      *out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) *out += ", ";
        *out += entries[i].first;
        *out += ": ";
        *out += entries[i].second;
      }
      *out += '}';
      return true;
    }
    case Kind::kError:
      *error = v;
      return false;
    default:
      *error = Value::MakeError("error during formatting: " + std::string(kStringClauseTypes) +
                                v.TypeName());
      return false;
  }
}

Value FormatClauseError(std::string message) {
  return Value::MakeError("error during formatting: " + std::move(message));
}

// Digits of |v| in `base`, with a leading '-' for negative signed values (Go's %x, %o, %b).
std::string FormatInBase(bool negative, uint64_t magnitude, int base, bool upper) {
  char buf[80];
  auto res = std::to_chars(buf, buf + sizeof(buf), magnitude, base);
  std::string digits(buf, res.ptr);
  if (upper) {
    for (char& c : digits) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return negative ? "-" + digits : digits;
}

bool IntegerParts(const Value& v, bool* negative, uint64_t* magnitude) {
  if (v.kind() == Kind::kInt) {
    const int64_t i = v.int_value();
    *negative = i < 0;
    *magnitude = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
    return true;
  }
  if (v.kind() == Kind::kUint) {
    *negative = false;
    *magnitude = v.uint_value();
    return true;
  }
  return false;
}

std::string PrintfDouble(const char* conversion, int precision, double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  const std::string fmt = std::string("%.*") + conversion;
  const int n = std::snprintf(nullptr, 0, fmt.c_str(), precision, d);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), fmt.c_str(), precision, d);
  out.resize(static_cast<size_t>(n));
  return out;
}

bool AsDouble(const Value& v, double* d) {
  switch (v.kind()) {
    case Kind::kDouble:
      *d = v.double_value();
      return true;
    case Kind::kInt:
      *d = static_cast<double>(v.int_value());
      return true;
    case Kind::kUint:
      *d = static_cast<double>(v.uint_value());
      return true;
    default:
      return false;
  }
}

constexpr int kDefaultPrecision = 6;
constexpr int kMaxPrecision = 1000;

// Formats one clause; `clause` is the clause letter, `precision` -1 when absent.
Value FormatClause(char clause, int precision, const Value& arg) {
  if (arg.is_error()) return arg;
  bool negative = false;
  uint64_t magnitude = 0;
  switch (clause) {
    case 's': {
      std::string out;
      Value error;
      if (!AppendAsString(arg, &out, &error)) return error;
      return Value::String(std::move(out));
    }
    case 'd':
      // As cel-go's newer formatter (and the conformance data): doubles print in full.
      if (arg.kind() == Kind::kDouble) {
        return Value::String(FormatDoubleForString(arg.double_value()));
      }
      if (!IntegerParts(arg, &negative, &magnitude)) {
        return FormatClauseError("decimal clause can only be used on integers, was given " +
                                 arg.TypeName());
      }
      return Value::String(FormatInBase(negative, magnitude, 10, false));
    case 'f':
    case 'e': {
      double d = 0;
      if (!AsDouble(arg, &d)) {
        return FormatClauseError(std::string(clause == 'f' ? "fixed-point" : "scientific") +
                                 " clause can only be used on doubles, was given " +
                                 arg.TypeName());
      }
      const char* conversion = clause == 'f' ? "f" : "e";
      return Value::String(
          PrintfDouble(conversion, precision < 0 ? kDefaultPrecision : precision, d));
    }
    case 'b':
      if (arg.kind() == Kind::kBool) return Value::String(arg.bool_value() ? "1" : "0");
      if (!IntegerParts(arg, &negative, &magnitude)) {
        return FormatClauseError("only integers and bools can be formatted as binary, was given " +
                                 arg.TypeName());
      }
      return Value::String(FormatInBase(negative, magnitude, 2, false));
    case 'o':
      if (!IntegerParts(arg, &negative, &magnitude)) {
        return FormatClauseError("octal clause can only be used on integers, was given " +
                                 arg.TypeName());
      }
      return Value::String(FormatInBase(negative, magnitude, 8, false));
    case 'x':
    case 'X': {
      const bool upper = clause == 'X';
      if (arg.kind() == Kind::kString || arg.kind() == Kind::kBytes) {
        const std::string& data =
            arg.kind() == Kind::kString ? arg.string_value() : arg.bytes_value();
        const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
        std::string out;
        out.reserve(data.size() * 2);
        for (unsigned char c : data) {
          out += digits[c >> 4];
          out += digits[c & 0xF];
        }
        return Value::String(std::move(out));
      }
      if (!IntegerParts(arg, &negative, &magnitude)) {
        return FormatClauseError(
            "only integers, byte buffers, and strings can be formatted as hex, was given " +
            arg.TypeName());
      }
      return Value::String(FormatInBase(negative, magnitude, 16, upper));
    }
    default:
      return Value::MakeError(std::string("could not parse formatting clause: ") +
                              "unrecognized formatting clause \"" + clause + "\"");
  }
}

Value Format(const std::string& format, const ListValue& args) {
  std::string out;
  size_t arg_index = 0;
  size_t i = 0;
  while (i < format.size()) {
    if (format[i] != '%') {
      out += format[i++];
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '%') {
      out += '%';
      i += 2;
      continue;
    }
    if (arg_index >= args.size()) {
      return Value::MakeError("index " + std::to_string(arg_index) + " out of range");
    }
    if (i + 1 >= format.size()) return Value::MakeError("unexpected end of string");
    size_t j = i + 1;
    int precision = -1;
    if (format[j] == '.') {
      ++j;
      const size_t digits_begin = j;
      while (j < format.size() && format[j] >= '0' && format[j] <= '9') ++j;
      if (j >= format.size()) {
        return Value::MakeError(
            "could not parse formatting clause: error while parsing precision: could not find "
            "end of precision specifier");
      }
      const std::string digits = format.substr(digits_begin, j - digits_begin);
      if (digits.empty()) {
        return Value::MakeError(
            "could not parse formatting clause: error while parsing precision: error while "
            "converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax");
      }
      if (digits.size() > 4 || std::stoi(digits) > kMaxPrecision) {
        return Value::MakeError(
            "could not parse formatting clause: error while parsing precision: precision " +
            digits + " is larger than " + std::to_string(kMaxPrecision));
      }
      precision = std::stoi(digits);
    }
    // The clause letter is a single byte in cel-go; a multi-byte rune is reported by its
    // first code point.
    size_t clause_end = j;
    const char32_t clause_rune = internal::DecodeRune(format, &clause_end);
    if (clause_rune >= 0x80) {
      std::string rune;
      core::AppendUtf8(rune, clause_rune);
      return Value::MakeError(
          "could not parse formatting clause: unrecognized formatting clause \"" + rune + "\"");
    }
    Value formatted = FormatClause(format[j], precision, args.Get(arg_index));
    if (formatted.is_error()) return formatted;
    out += formatted.string_value();
    ++arg_index;
    i = j + 1;
  }
  return Value::String(std::move(out));
}

// Wraps a body charging ceil(0.1 * size of the target string) first.
FunctionBody WithStringCost(double factor, FunctionBody body) {
  return [factor, body = std::move(body)](std::span<const Value> args, EvalContext& ctx) {
    const size_t size = args[0].kind() == Kind::kString ? args[0].string_value().size() : 0;
    if (!ctx.Charge(TraversalCost(size, factor))) return CostExceeded();
    return body(args, ctx);
  };
}

}  // namespace

void InstallStringsExtension(FunctionRegistry& registry) {
  const Param str = Param::Of(Kind::kString);
  const Param int_p = Param::Of(Kind::kInt);
  const Param list = Param::Of(Kind::kList);
  constexpr double kScan = internal::kStringTraversalCostFactor;

  registry.Add("charAt", true, {str, int_p},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return CharAt(a[0].string_value(), a[1].int_value());
               }));
  registry.Add("indexOf", true, {str, str},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return IndexOf(a[0].string_value(), a[1].string_value());
               }));
  registry.Add("indexOf", true, {str, str, int_p},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return IndexOfOffset(a[0].string_value(), a[1].string_value(), a[2].int_value());
               }));
  registry.Add("lastIndexOf", true, {str, str},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return LastIndexOf(a[0].string_value(), a[1].string_value());
               }));
  registry.Add("lastIndexOf", true, {str, str, int_p},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return LastIndexOfOffset(a[0].string_value(), a[1].string_value(),
                                          a[2].int_value());
               }));
  registry.Add("lowerAscii", true, {str},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return Value::String(MapAscii(a[0].string_value(), false));
               }));
  registry.Add("upperAscii", true, {str},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return Value::String(MapAscii(a[0].string_value(), true));
               }));
  registry.Add("replace", true, {str, str, str},
               WithStringCost(2 * kScan, [](std::span<const Value> a, EvalContext&) {
                 return Value::String(
                     ReplaceN(a[0].string_value(), a[1].string_value(), a[2].string_value(), -1));
               }));
  registry.Add("replace", true, {str, str, str, int_p},
               WithStringCost(2 * kScan, [](std::span<const Value> a, EvalContext&) {
                 return Value::String(ReplaceN(a[0].string_value(), a[1].string_value(),
                                               a[2].string_value(), a[3].int_value()));
               }));
  registry.Add("split", true, {str, str},
               WithStringCost(2 * kScan, [](std::span<const Value> a, EvalContext&) {
                 return Value::List(SplitN(a[0].string_value(), a[1].string_value(), -1));
               }));
  registry.Add(
      "split", true, {str, str, int_p},
      WithStringCost(2 * kScan, [](std::span<const Value> a, EvalContext&) {
        return Value::List(SplitN(a[0].string_value(), a[1].string_value(), a[2].int_value()));
      }));
  registry.Add("substring", true, {str, int_p},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return Substring(a[0].string_value(), a[1].int_value(), std::nullopt);
               }));
  registry.Add("substring", true, {str, int_p, int_p},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return Substring(a[0].string_value(), a[1].int_value(), a[2].int_value());
               }));
  registry.Add("trim", true, {str},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return Value::String(Trim(a[0].string_value()));
               }));
  registry.Add("reverse", true, {str},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return Value::String(Reverse(a[0].string_value()));
               }));
  auto join = [](std::span<const Value> a, EvalContext& ctx) {
    Value result = Join(a[0].list(), a.size() > 1 ? a[1].string_value() : std::string());
    if (!result.is_error() && !ctx.Charge(TraversalCost(result.string_value().size(), 2 * kScan))) {
      return CostExceeded();
    }
    return result;
  };
  registry.Add("join", true, {list}, join);
  registry.Add("join", true, {list, str}, join);
  registry.Add("strings.quote", false, {str},
               WithStringCost(kScan, [](std::span<const Value> a, EvalContext&) {
                 return Value::String(Quote(a[0].string_value()));
               }));
  registry.Add("format", true, {str, list}, [](std::span<const Value> a, EvalContext& ctx) {
    Value result = Format(a[0].string_value(), a[1].list());
    if (!result.is_error() &&
        !ctx.Charge(TraversalCost(result.string_value().size() + a[0].string_value().size()))) {
      return CostExceeded();
    }
    return result;
  });
}

}  // namespace klutch::cel
