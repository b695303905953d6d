#include "schema/field_error.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

namespace klutch::schema {
namespace {

// Shortest round-trip digits and decimal exponent of d (d finite, non-zero): d = 0.DIGITS
// * 10^point, as strconv's decimal representation keeps them.
struct Digits {
  std::string digits;
  int point = 0;
  bool negative = false;
};

Digits ShortestDigits(double d) {
  Digits out;
  out.negative = std::signbit(d);
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(d), std::chars_format::scientific);
  std::string s(buf, res.ptr);
  size_t e = s.find('e');
  std::string mantissa = s.substr(0, e);
  int exp = std::stoi(s.substr(e + 1));
  for (char c : mantissa) {
    if (c != '.') out.digits += c;
  }
  out.point = exp + 1;
  return out;
}

std::string Exponent(const Digits& dg, bool at_least_two) {
  std::string out = dg.negative ? "-" : "";
  out += dg.digits.substr(0, 1);
  if (dg.digits.size() > 1) out += "." + dg.digits.substr(1);
  int exp = dg.point - 1;
  out += exp < 0 ? "e-" : "e+";
  std::string e = std::to_string(std::abs(exp));
  if (at_least_two && e.size() < 2) e = "0" + e;
  return out + e;
}

std::string Fixed(const Digits& dg) {
  std::string out = dg.negative ? "-" : "";
  const std::string& ds = dg.digits;
  if (dg.point <= 0) {
    out += "0." + std::string(-dg.point, '0') + ds;
  } else if (static_cast<size_t>(dg.point) >= ds.size()) {
    out += ds + std::string(dg.point - ds.size(), '0');
  } else {
    out += ds.substr(0, dg.point) + "." + ds.substr(dg.point);
  }
  return out;
}

}  // namespace

namespace {

bool IsGoInt(const Json& v) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return true;
  return v.is_number_unsigned() &&
         v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<int64_t>::max());
}

std::string GoNumber(const Json& v) {
  if (IsGoInt(v)) return std::to_string(v.get<int64_t>());
  return GoFloat(v.get<double>());
}

// %#v of a decoded JSON value nested in interface{}.
std::string SharpV(const Json& v) {
  if (v.is_null()) return "interface {}(nil)";
  if (v.is_string()) return GoQuote(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return GoNumber(v);
  std::string out;
  bool first = true;
  if (v.is_object()) {
    out = "map[string]interface {}{";
    for (const auto& [k, e] : v.items()) {
      out += (first ? "" : ", ") + GoQuote(k) + ":" + SharpV(e);
      first = false;
    }
  } else {
    out = "[]interface {}{";
    for (const auto& e : v) {
      out += (first ? "" : ", ") + SharpV(e);
      first = false;
    }
  }
  return out + "}";
}

core::Cause Make(const char* reason, const char* type, std::string field, const Json* value,
                 std::string_view detail) {
  std::string msg = type;
  if (value != nullptr) msg += ": " + GoValue(*value);
  if (!detail.empty()) msg += ": " + std::string(detail);
  return {reason, std::move(msg), std::move(field)};
}

}  // namespace

std::string GoFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
  if (d == 0) return std::signbit(d) ? "-0" : "0";
  Digits dg = ShortestDigits(d);
  // strconv's 'g' with the shortest precision switches to %e below 1e-4 and from 1e6 on.
  int exp = dg.point - 1;
  if (exp < -4 || exp >= 6) return Exponent(dg, true);
  return Fixed(dg);
}

std::string GoJson(const Json& v) {
  if (v.is_number() && !IsGoInt(v)) {
    double d = v.get<double>();
    if (d == 0) return "0";
    double a = std::fabs(d);
    Digits dg = ShortestDigits(d);
    if (a < 1e-6 || a >= 1e21) return Exponent(dg, false);
    return Fixed(dg);
  }
  if (v.is_number()) return GoNumber(v);
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, e] : v.items()) {
      out += (first ? "" : ",") + Json(k).dump() + ":" + GoJson(e);
      first = false;
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    bool first = true;
    for (const auto& e : v) {
      out += (first ? "" : ",") + GoJson(e);
      first = false;
    }
    return out + "]";
  }
  return v.dump();
}

std::string GoValue(const Json& v) {
  if (v.is_null()) return "\"null\"";
  if (v.is_string()) return GoQuote(v.get<std::string>());
  return SharpV(v);
}

core::Cause Invalid(std::string field, const Json& value, std::string_view detail) {
  return Make("FieldValueInvalid", "Invalid value", std::move(field), &value, detail);
}

core::Cause TypeInvalid(std::string field, const Json& value, std::string_view detail) {
  return Make("FieldValueTypeInvalid", "Invalid value", std::move(field), &value, detail);
}

core::Cause Required(std::string field, std::string_view detail) {
  return Make("FieldValueRequired", "Required value", std::move(field), nullptr, detail);
}

core::Cause Forbidden(std::string field, std::string_view detail) {
  return Make("FieldValueForbidden", "Forbidden", std::move(field), nullptr, detail);
}

core::Cause NotSupported(std::string field, const Json& value,
                         const std::vector<std::string>& supported) {
  std::string detail;
  for (size_t i = 0; i < supported.size(); ++i) {
    detail += (i == 0 ? "supported values: " : ", ") + GoQuote(supported[i]);
  }
  return Make("FieldValueNotSupported", "Unsupported value", std::move(field), &value, detail);
}

core::Cause TooLong(std::string field, long long max_length) {
  std::string detail = max_length < 0 ? "value is too long"
                                      : fmt::format("may not be more than {} {}", max_length,
                                                    max_length == 1 ? "byte" : "bytes");
  return Make("FieldValueTooLong", "Too long", std::move(field), nullptr, detail);
}

core::Cause TooMany(std::string field, long long actual, long long max) {
  std::string detail =
      max < 0 ? "has too many items" : fmt::format("must have at most {} items", max);
  if (actual < 0) return Make("FieldValueTooMany", "Too many", std::move(field), nullptr, detail);
  Json a(static_cast<int64_t>(actual));
  return Make("FieldValueTooMany", "Too many", std::move(field), &a, detail);
}

core::Cause Duplicate(std::string field, const Json& value) {
  return Make("FieldValueDuplicate", "Duplicate value", std::move(field), &value, "");
}

bool IsBlocking(const core::Cause& cause) {
  return cause.reason == "FieldValueNotSupported" || cause.reason == "FieldValueRequired" ||
         cause.reason == "FieldValueTooLong" || cause.reason == "FieldValueTooMany" ||
         cause.reason == "FieldValueTypeInvalid";
}

}  // namespace klutch::schema
