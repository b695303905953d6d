#include "schema/formats.h"

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cel/quantity.h"
#include "core/duration.h"
#include "core/ip.h"

namespace klutch::schema {
namespace {

bool Full(const std::string& s, const RE2& re) { return RE2::FullMatch(s, re); }

bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// net.ParseIP: netip.ParseAddr without a zone; IPv4-mapped IPv6 addresses are addresses.
bool IsNetIp(std::string_view s) {
  return core::ParseIp(s, {.allow_zone = false, .allow_ipv4_mapped = true}).has_value();
}

// net.ParseCIDR, which reads the prefix length with leading zeros.
bool IsCidr(std::string_view s) {
  return core::ParseIpPrefix(s, {.allow_length_leading_zeros = true, .allow_ipv4_mapped = true})
      .has_value();
}

bool IsMac(const std::string& s) {
  if (s.size() < 14) return false;
  if (s[2] == ':' || s[2] == '-') {
    if ((s.size() + 1) % 3 != 0) return false;
    size_t n = (s.size() + 1) / 3;
    if (n != 6 && n != 8 && n != 20) return false;
    for (size_t x = 0, i = 0; x < n; ++x, i += 3) {
      if (!IsHex(s[i]) || !IsHex(s[i + 1])) return false;
      if (i + 2 < s.size() && s[i + 2] != s[2]) return false;
    }
    return true;
  }
  if (s[4] == '.') {
    if ((s.size() + 1) % 5 != 0) return false;
    size_t n = 2 * (s.size() + 1) / 5;
    if (n != 6 && n != 8 && n != 20) return false;
    for (size_t i = 0; i < s.size(); i += 5) {
      for (size_t k = 0; k < 4; ++k) {
        if (!IsHex(s[i + k])) return false;
      }
      if (i + 4 < s.size() && s[i + 4] != '.') return false;
    }
    return true;
  }
  return false;
}

bool IsLeap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// time.Parse("2006-01-02", s).
bool IsDate(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!IsDigit(s[i])) return false;
  }
  int y = std::stoi(std::string(s.substr(0, 4)));
  int m = std::stoi(std::string(s.substr(5, 2)));
  int d = std::stoi(std::string(s.substr(8, 2)));
  static constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12 || d < 1) return false;
  int max = kDays[m - 1] + (m == 2 && IsLeap(y) ? 1 : 0);
  return d <= max;
}

// strfmt.IsDateTime: a valid date, "t", then hh:mm:ss[.frac](z|±hh:mm), case-insensitive.
bool IsDateTime(const std::string& str) {
  if (str.size() < 4) return false;
  std::string lower = str;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t t = lower.find('t', start);
    parts.push_back(lower.substr(start, t == std::string::npos ? std::string::npos : t - start));
    if (t == std::string::npos) break;
    start = t + 1;
  }
  if (parts.size() < 2 || !IsDate(parts[0])) return false;
  static const RE2 kTime(
      R"(([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2})))");
  std::string h, m, s;
  if (!RE2::FullMatch(parts[1], kTime, &h, &m, &s)) return false;
  return h <= "23" && m <= "59" && s <= "59";
}

// strfmt.ParseDuration: time.ParseDuration, or else a run of "<digits> <unit>" pairs with units
// such as d, days or weeks.
bool IsDuration(const std::string& s) {
  if (core::ParseGoDuration(s).ok()) return true;
  static const RE2 kPart(R"((\d+)\s*([A-Za-z\x{b5}]+))");
  static const std::vector<std::vector<std::string>> kUnits = {
      {"ns", "nanoseconds"},  {"us", "\xc2\xb5s", "microseconds"},
      {"ms", "milliseconds"}, {"s", "seconds"},
      {"m", "minutes"},       {"h", "hours"},
      {"d", "days"},          {"w", "weeks"}};
  re2::StringPiece in(s);
  std::string n, unit;
  while (RE2::FindAndConsume(&in, kPart, &n, &unit)) {
    if (n.size() > 18) return false;  // strconv.Atoi overflow is an error
    std::transform(unit.begin(), unit.end(), unit.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    for (const auto& variants : kUnits) {
      if (std::find(variants.begin(), variants.end(), unit) != variants.end()) return true;
    }
  }
  return false;
}

bool IsIsbn10(std::string s) {
  s.erase(std::remove_if(s.begin(), s.end(),
                         [](unsigned char c) { return c == '-' || std::isspace(c); }),
          s.end());
  static const RE2 kIsbn10("(?:[0-9]{9}X|[0-9]{10})");
  if (!Full(s, kIsbn10)) return false;
  int sum = 0;
  for (int i = 0; i < 9; ++i) sum += (i + 1) * (s[i] - '0');
  sum += s[9] == 'X' ? 10 * 10 : 10 * (s[9] - '0');
  return sum % 11 == 0;
}

bool IsIsbn13(std::string s) {
  s.erase(std::remove_if(s.begin(), s.end(),
                         [](unsigned char c) { return c == '-' || std::isspace(c); }),
          s.end());
  static const RE2 kIsbn13("[0-9]{13}");
  if (!Full(s, kIsbn13)) return false;
  int sum = 0;
  for (int i = 0; i < 12; ++i) sum += (i % 2 == 0 ? 1 : 3) * (s[i] - '0');
  return (s[12] - '0') - ((10 - (sum % 10)) % 10) == 0;
}

bool IsCreditCard(const std::string& str) {
  std::string s;
  for (char c : str) {
    if (IsDigit(c)) s += c;
  }
  static const RE2 kCard(
      R"((?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}))");
  if (!Full(s, kCard)) return false;
  int sum = 0;
  bool dbl = false;
  for (size_t i = s.size(); i-- > 0;) {
    int d = s[i] - '0';
    if (dbl) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    dbl = !dbl;
  }
  return sum % 10 == 0;
}

// net/mail.ParseAddress, simplified: an optional display name with <addr>, or a bare
// local@domain with dot-atom or quoted local part and dot-atom or literal domain.
bool IsEmail(const std::string& s) {
  static const RE2 kAddr(
      R"(((?:[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\x{80}-\x{10FFFF}]+(?:\.[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\x{80}-\x{10FFFF}]+)*)|"(?:[^"\\]|\\.)*")@((?:[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\x{80}-\x{10FFFF}]+(?:\.[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\x{80}-\x{10FFFF}]+)*)|\[[^\[\]\\]*\]))");
  static const RE2 kNamed(R"([^<>]*<([^<>]+)>\s*)");
  std::string trimmed = s;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.front()))) {
    trimmed.erase(trimmed.begin());
  }
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) {
    trimmed.pop_back();
  }
  std::string inner;
  if (RE2::FullMatch(trimmed, kNamed, &inner)) return Full(inner, kAddr);
  return Full(trimmed, kAddr);
}

bool IsHostname(const std::string& s) {
  static const RE2 kHost(
      R"(^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z0-9\p{S}\p{L}])(-?[a-zA-Z0-9\p{S}\p{L}]){1,62})$)");
  if (!RE2::PartialMatch(s, kHost) || s.size() > 255) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    size_t len = (dot == std::string::npos ? s.size() : dot) - start;
    if (len > 63) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// url.ParseRequestURI, simplified: an absolute path or scheme ":" rest, no control
// characters, valid percent escapes, no spaces in the authority.
bool IsRequestUri(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size() || !IsHex(s[i + 1]) || !IsHex(s[i + 2])) return false;
    }
  }
  std::string rest;
  if (!s.empty() && s[0] == '/') {
    rest = s;
  } else {
    static const RE2 kScheme(R"(([a-zA-Z][a-zA-Z0-9+.\-]*):(.*))");
    std::string scheme;
    if (!RE2::FullMatch(s, kScheme, &scheme, &rest)) return false;
    if (rest.empty() || rest[0] != '/') return true;  // opaque
  }
  if (rest.rfind("//", 0) == 0) {
    size_t end = rest.find('/', 2);
    std::string authority = rest.substr(2, end == std::string::npos ? end : end - 2);
    if (authority.find(' ') != std::string::npos) return false;
  }
  return true;
}

const std::set<std::string, std::less<>>& Supported() {
  static const std::set<std::string, std::less<>> kFormats = {
      "bsonobjectid", "uri",        "email",    "hostname", "ipv4",     "ipv6", "cidr",
      "mac",          "uuid",       "uuid3",    "uuid4",    "uuid5",    "isbn", "isbn10",
      "isbn13",       "creditcard", "ssn",      "hexcolor", "rgbcolor", "byte", "password",
      "date",         "duration",   "datetime", "quantity"};
  return kFormats;
}

}  // namespace

std::string NormalizeFormat(std::string_view format) {
  std::string out;
  for (char c : format) {
    if (c != '-') out += c;
  }
  return out;
}

bool IsValidatedFormat(std::string_view type, std::string_view format) {
  if (format.empty() || (!type.empty() && type != "string")) return false;
  return Supported().contains(NormalizeFormat(format));
}

bool MatchesFormat(std::string_view format, const std::string& v) {
  const std::string f = NormalizeFormat(format);
  static const RE2 kUuid("(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}");
  static const RE2 kUuid3("(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}");
  static const RE2 kUuid4(
      "(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}");
  static const RE2 kUuid5(
      "(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}");
  static const RE2 kSsn(R"(\d{3}[- ]?\d{2}[- ]?\d{4})");
  static const RE2 kHexColor("#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})");
  static const RE2 kRgb(
      R"(rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\))");
  static const RE2 kBase64(
      R"((?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|[A-Za-z0-9+\/]{4}))");
  static const RE2 kBson("[0-9a-fA-F]{24}");
  if (f == "bsonobjectid") return Full(v, kBson);
  if (f == "uri") return IsRequestUri(v);
  if (f == "email") return IsEmail(v);
  if (f == "hostname") return IsHostname(v);
  // govalidator's IsIPv4 and IsIPv6: net.ParseIP, told apart by the separator they contain.
  if (f == "ipv4") return IsNetIp(v) && v.find('.') != std::string::npos;
  if (f == "ipv6") return IsNetIp(v) && v.find(':') != std::string::npos;
  if (f == "cidr") return IsCidr(v);
  if (f == "mac") return IsMac(v);
  if (f == "uuid") return Full(v, kUuid);
  if (f == "uuid3") return Full(v, kUuid3);
  if (f == "uuid4") return Full(v, kUuid4);
  if (f == "uuid5") return Full(v, kUuid5);
  if (f == "isbn") return IsIsbn10(v) || IsIsbn13(v);
  if (f == "isbn10") return IsIsbn10(v);
  if (f == "isbn13") return IsIsbn13(v);
  if (f == "creditcard") return IsCreditCard(v);
  if (f == "ssn") return v.size() == 11 && Full(v, kSsn);
  if (f == "hexcolor") return Full(v, kHexColor);
  if (f == "rgbcolor") return Full(v, kRgb);
  if (f == "byte") return Full(v, kBase64);
  if (f == "password") return true;
  if (f == "date") return IsDate(v);
  if (f == "duration") return IsDuration(v);
  if (f == "datetime") return IsDateTime(v);
  if (f == "quantity") return cel::IsQuantity(v);
  return true;
}

}  // namespace klutch::schema
