#include "machinery/gofmt.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "core/strings.h"

namespace klutch::machinery {
namespace {

struct Spec {
  bool minus = false, plus = false, sharp = false, zero = false, space = false;
  int width = -1;
  int precision = -1;
  char verb = 'v';
};

std::string GoTypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "bool";
    case Json::value_t::number_integer:
      return "int64";
    case Json::value_t::number_unsigned:
      return "uint64";
    case Json::value_t::number_float:
      return "float64";
    case Json::value_t::array:
      return "[]interface {}";
    case Json::value_t::object:
      return "map[string]interface {}";
    default:
      return "";
  }
}

// Shortest round-trip digits and decimal exponent of a finite, non-zero |d|:
// d = 0.<digits> * 10^(exp+1), i.e. the first digit is at 10^exp.
void ShortestDigits(double d, std::string& digits, int& exp) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(d), std::chars_format::scientific);
  std::string s(buf, r.ptr);
  size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  exp = std::stoi(s.substr(e + 1));
  digits.clear();
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
}

std::string ExpSuffix(int exp, bool upper) {
  std::string out(1, upper ? 'E' : 'e');
  out += exp < 0 ? '-' : '+';
  int a = std::abs(exp);
  if (a < 10) out += '0';
  out += std::to_string(a);
  return out;
}

// strconv.FormatFloat(d, 'g' or 'e', -1, 64) without the sign.
std::string ShortestFloat(double d, char verb) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return "Inf";
  if (d == 0) return verb == 'e' || verb == 'E' ? std::string("0e+00") : "0";
  std::string digits;
  int exp;
  ShortestDigits(d, digits, exp);
  const bool upper = verb == 'E' || verb == 'G';
  bool use_exp = verb == 'e' || verb == 'E' || exp < -4 || exp >= 6;
  if (use_exp) {
    std::string out(1, digits[0]);
    if (digits.size() > 1) out += "." + digits.substr(1);
    return out + ExpSuffix(exp, upper);
  }
  // Fixed notation.
  int point = exp + 1;  // digits before the decimal point
  std::string out;
  if (point <= 0) {
    out = "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (static_cast<size_t>(point) >= digits.size()) {
    out = digits + std::string(static_cast<size_t>(point) - digits.size(), '0');
  } else {
    out = digits.substr(0, static_cast<size_t>(point)) + "." +
          digits.substr(static_cast<size_t>(point));
  }
  return out;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
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
      case '\a':
        out += "\\a";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\v':
        out += "\\v";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string Hex(const std::string& bytes, bool upper) {
  static const char* lower_digits = "0123456789abcdef";
  static const char* upper_digits = "0123456789ABCDEF";
  const char* d = upper ? upper_digits : lower_digits;
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string IntInBase(int64_t v, int base, bool upper) {
  bool neg = v < 0;
  uint64_t u = neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string out;
  const char* d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  do {
    out.insert(out.begin(), d[u % static_cast<uint64_t>(base)]);
    u /= static_cast<uint64_t>(base);
  } while (u);
  return neg ? "-" + out : out;
}

// Adds sign, padding per flags to a number's text.
std::string PadNumber(std::string text, const Spec& s) {
  std::string sign;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    sign = text.substr(0, 1);
    text = text.substr(1);
  } else if (s.plus) {
    sign = "+";
  } else if (s.space) {
    sign = " ";
  }
  int len = static_cast<int>(sign.size() + text.size());
  if (s.width > len) {
    size_t pad = static_cast<size_t>(s.width - len);
    if (s.minus) return sign + text + std::string(pad, ' ');
    if (s.zero) return sign + std::string(pad, '0') + text;
    return std::string(pad, ' ') + sign + text;
  }
  return sign + text;
}

std::string Pad(const std::string& text, const Spec& s) {
  // Width counts runes.
  int runes = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++runes;
  }
  if (s.width <= runes) return text;
  size_t pad = static_cast<size_t>(s.width - runes);
  if (s.minus) return text + std::string(pad, ' ');
  return std::string(pad, s.zero ? '0' : ' ') + text;
}

std::string BadVerb(const Spec& s, const Json& v) {
  if (v.is_null()) return std::string("%!") + s.verb + "(<nil>)";
  return std::string("%!") + s.verb + "(" + GoTypeName(v) + "=" + GoSprint(v) + ")";
}

std::string FormatOne(const Spec& s, const Json& v);

std::string FormatFloat(const Spec& s, double d) {
  char verb = s.verb == 'v' ? 'g' : s.verb;
  std::string text;
  if (std::isnan(d)) {
    text = "NaN";
  } else if (std::isinf(d)) {
    text = d < 0 ? "-Inf" : "+Inf";
    if (d > 0 && !s.plus) text = "+Inf";
  } else if (s.precision < 0 && (verb == 'g' || verb == 'G')) {
    text = (std::signbit(d) ? "-" : "") + ShortestFloat(d, verb);
  } else {
    int prec = s.precision < 0 ? 6 : s.precision;
    char fmt[16];
    char conv = verb == 'F' ? 'f' : verb;
    std::snprintf(fmt, sizeof fmt, "%%%s.%d%c", s.sharp ? "#" : "", prec, conv);
    // %f of a large number with a large precision can be hundreds of digits long.
    int n = std::snprintf(nullptr, 0, fmt, d);
    text.assign(static_cast<size_t>(std::max(n, 0)) + 1, '\0');
    std::snprintf(text.data(), text.size(), fmt, d);
    text.resize(static_cast<size_t>(std::max(n, 0)));
  }
  if (std::isinf(d) && d > 0 && !s.plus) text = "+Inf";
  Spec padding = s;
  if (std::isinf(d) || std::isnan(d)) padding.zero = false;
  return PadNumber(text, padding);
}

// An integer in `base` as Go's fmtInteger prints it: precision is a minimum digit count
// (%.0d of 0 prints nothing); without one, the 0 flag zero-fills the digits to the width
// (less the sign), before any 0x prefix; the rest of the width is spaces.
std::string FormatIntDigits(const Spec& s, int64_t v, int base, bool upper,
                            std::string_view prefix) {
  const bool neg = v < 0;
  std::string digits = IntInBase(v, base, upper);
  if (neg) digits.erase(0, 1);
  int prec = -1;
  if (s.precision >= 0) {
    prec = s.precision;
    if (prec == 0 && v == 0) digits.clear();
  } else if (s.zero && !s.minus && s.width > 0) {
    prec = s.width;
    if (neg || s.plus || s.space) --prec;
  }
  if (prec > static_cast<int>(digits.size())) {
    digits.insert(0, static_cast<size_t>(prec) - digits.size(), '0');
  }
  if (prefix == "0" && !digits.empty() && digits[0] == '0') prefix = "";
  std::string sign = neg ? "-" : s.plus ? "+" : s.space ? " " : "";
  Spec padding = s;
  padding.zero = false;
  return Pad(sign + std::string(prefix) + digits, padding);
}

std::string FormatInt(const Spec& s, int64_t v) {
  switch (s.verb) {
    case 'v':
    case 'd':
      return FormatIntDigits(s, v, 10, false, "");
    case 'x':
    case 'X':
      return FormatIntDigits(s, v, 16, s.verb == 'X', s.sharp ? (s.verb == 'X' ? "0X" : "0x") : "");
    case 'o':
      return FormatIntDigits(s, v, 8, false, s.sharp ? "0" : "");
    case 'b':
      return FormatIntDigits(s, v, 2, false, s.sharp ? "0b" : "");
    case 'c': {
      std::string out;
      // Go prints U+FFFD for what is not a Unicode code point (AppendUtf8 does the same).
      core::AppendUtf8(out, v < 0 || v > 0x10FFFF ? 0xFFFD : static_cast<uint32_t>(v));
      return Pad(out, s);
    }
    default:
      return BadVerb(s, Json(v));
  }
}

std::string FormatOne(const Spec& s, const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      // Go prints a nil interface only for %v (and %T); %s of nil is %!s(<nil>).
      if (s.verb == 'v') return Pad("<nil>", s);
      return BadVerb(s, v);
    case Json::value_t::boolean:
      if (s.verb == 'v' || s.verb == 't')
        return Pad(*v.get_ptr<const Json::boolean_t*>() ? "true" : "false", s);
      return BadVerb(s, v);
    case Json::value_t::string: {
      const std::string& str = *v.get_ptr<const std::string*>();
      switch (s.verb) {
        case 'v':
        case 's': {
          if (s.precision >= 0) {
            // Precision counts runes.
            size_t i = 0;
            int runes = 0;
            while (i < str.size() && runes < s.precision) {
              ++i;
              while (i < str.size() && (static_cast<unsigned char>(str[i]) & 0xC0) == 0x80) ++i;
              ++runes;
            }
            return Pad(str.substr(0, i), s);
          }
          return Pad(str, s);
        }
        case 'q':
          return Pad(Quote(str), s);
        case 'x':
        case 'X':
          return Pad(Hex(str, s.verb == 'X'), s);
        default:
          return BadVerb(s, v);
      }
    }
    case Json::value_t::number_integer:
      return FormatInt(s, *v.get_ptr<const Json::number_integer_t*>());
    case Json::value_t::number_unsigned: {
      uint64_t u = *v.get_ptr<const Json::number_unsigned_t*>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return FormatInt(s, static_cast<int64_t>(u));
      if (s.verb == 'v' || s.verb == 'd') return PadNumber(std::to_string(u), s);
      return BadVerb(s, v);
    }
    case Json::value_t::number_float:
      switch (s.verb) {
        case 'v':
        case 'g':
        case 'G':
        case 'e':
        case 'E':
        case 'f':
        case 'F':
          return FormatFloat(s, *v.get_ptr<const Json::number_float_t*>());
        default:
          return BadVerb(s, v);
      }
    case Json::value_t::array: {
      std::string out = "[";
      bool first = true;
      for (const Json& e : v) {
        if (!first) out += " ";
        first = false;
        Spec inner = s;
        out += FormatOne(inner, e);
      }
      return out + "]";
    }
    case Json::value_t::object: {
      std::map<std::string, const Json*> sorted;
      for (auto it = v.begin(); it != v.end(); ++it) sorted[it.key()] = &*it;
      std::string out = "map[";
      bool first = true;
      for (const auto& [k, e] : sorted) {
        if (!first) out += " ";
        first = false;
        out += FormatOne(s, Json(k)) + ":" + FormatOne(s, *e);
      }
      return out + "]";
    }
    default:
      return BadVerb(s, v);
  }
}

}  // namespace

std::string GoSprint(const Json& value) {
  Spec s;
  return FormatOne(s, value);
}

std::string GoSprintf(std::string_view format, const std::vector<Json>& args) {
  std::string out;
  size_t arg = 0;
  size_t i = 0;
  auto int_arg = [&](int& into) {
    if (arg < args.size() && args[arg].is_number_integer()) {
      const Json& a = args[arg];
      int64_t v = a.is_number_unsigned()
                      ? static_cast<int64_t>(*a.get_ptr<const Json::number_unsigned_t*>())
                      : *a.get_ptr<const Json::number_integer_t*>();
      into = static_cast<int>(std::clamp<int64_t>(v, -1000000, 1000000));
      ++arg;
      return true;
    }
    ++arg;
    out += "%!(BADWIDTH)";
    return false;
  };
  while (i < format.size()) {
    char c = format[i];
    if (c != '%') {
      out += c;
      ++i;
      continue;
    }
    ++i;
    if (i >= format.size()) {
      out += "%!(NOVERB)";
      break;
    }
    Spec s;
    for (; i < format.size(); ++i) {
      char f = format[i];
      if (f == '-') {
        s.minus = true;
      } else if (f == '+') {
        s.plus = true;
      } else if (f == '#') {
        s.sharp = true;
      } else if (f == '0') {
        s.zero = !s.minus;
      } else if (f == ' ') {
        s.space = true;
      } else {
        break;
      }
    }
    if (s.minus) s.zero = false;
    if (i < format.size() && format[i] == '*') {
      ++i;
      if (int_arg(s.width) && s.width < 0) {
        s.minus = true;
        s.width = -s.width;
      }
    } else {
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        s.width = (s.width < 0 ? 0 : s.width) * 10 + (format[i] - '0');
        if (s.width > 1000000) s.width = 1000000;
        ++i;
      }
    }
    if (i < format.size() && format[i] == '.') {
      ++i;
      s.precision = 0;
      if (i < format.size() && format[i] == '*') {
        ++i;
        if (!int_arg(s.precision) || s.precision < 0) s.precision = -1;
      } else {
        while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
          s.precision = s.precision * 10 + (format[i] - '0');
          if (s.precision > 1000) s.precision = 1000;
          ++i;
        }
      }
    }
    if (i >= format.size()) {
      out += "%!(NOVERB)";
      break;
    }
    s.verb = format[i++];
    if (s.verb == '%') {
      out += '%';
      continue;
    }
    if (arg >= args.size()) {
      out += std::string("%!") + s.verb + "(MISSING)";
      continue;
    }
    out += FormatOne(s, args[arg++]);
  }
  if (arg < args.size()) {
    out += "%!(EXTRA ";
    for (size_t k = arg; k < args.size(); ++k) {
      if (k > arg) out += ", ";
      out += args[k].is_null() ? "<nil>" : GoTypeName(args[k]) + "=" + GoSprint(args[k]);
    }
    out += ")";
  }
  return out;
}

}  // namespace klutch::machinery
