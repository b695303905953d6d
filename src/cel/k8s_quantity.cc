// Kubernetes' quantity library (k8s.io/apiserver/pkg/cel/library/quantity.go): quantity,
// isQuantity, sign, isInteger, asInteger, asApproximateFloat, add, sub, isGreaterThan,
// isLessThan, compareTo and equality, on opaque "kubernetes.Quantity" values.
//
// Parsing follows resource.ParseQuantity: a fast path keeping an int64 mantissa and a
// decimal scale (Go's int64Amount), and a slow path (Go's inf.Dec) that rounds up to
// nano precision and caps BinarySI values at 2^63-1. Which path a value took is visible
// through isInteger/asInteger (only int64Amount values at scale >= 0 convert), so it is
// tracked here too. Values are exact: an __int128 mantissa with a decimal exponent;
// comparisons never round. Limitation: a slow-path mantissa beyond 38 significant digits,
// or a sum that does not fit, is reported as an error by quantity() where Go would use big
// integers; isQuantity() and cel::IsQuantity (quantity.h) still accept such text, as Go does.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cel/cel.h"
#include "cel/internal.h"
#include "cel/library_util.h"
#include "cel/quantity.h"
#include "cel/value.h"

namespace klutch::cel {
namespace {

constexpr std::string_view kQuantityType = "kubernetes.Quantity";
using int128 = Int128;

constexpr int128 kInt128Max = ~(static_cast<int128>(1) << 127);
constexpr int kMaxDigits = 38;

struct Amount {
  bool dec = false;  // Go's inf.Dec form (else int64Amount, value within int64)
  int128 value = 0;  // the value is value * 10^scale
  int32_t scale = 0;
};

int128 Abs(int128 v) { return v < 0 ? -v : v; }

// v * 10^n, false on overflow.
bool ScaleUp(int128 v, int64_t n, int128* out) {
  int128 r = v;
  for (int64_t i = 0; i < n; ++i) {
    if (r == 0) break;
    if (Abs(r) > kInt128Max / 10) return false;
    r *= 10;
  }
  *out = r;
  return true;
}

// Exact three-way comparison of a.value*10^a.scale and b.value*10^b.scale.
int CompareAmounts(const Amount& a, const Amount& b) {
  const int sa = a.value > 0 ? 1 : (a.value < 0 ? -1 : 0);
  const int sb = b.value > 0 ? 1 : (b.value < 0 ? -1 : 0);
  if (sa != sb || sa == 0) return sa < sb ? -1 : (sa > sb ? 1 : 0);
  // Same non-zero sign: bring the larger exponent down to the smaller one.
  int128 x = a.value;
  int128 y = b.value;
  if (a.scale > b.scale) {
    if (!ScaleUp(a.value, static_cast<int64_t>(a.scale) - b.scale, &x)) return sa;
  } else if (b.scale > a.scale) {
    if (!ScaleUp(b.value, static_cast<int64_t>(b.scale) - a.scale, &y)) return -sa;
  }
  return x < y ? -1 : (x > y ? 1 : 0);
}

// Exact sum in the dec form; nullopt when it does not fit.
std::optional<Amount> DecAdd(const Amount& a, const Amount& b) {
  if (b.value == 0) return Amount{true, a.value, a.scale};
  if (a.value == 0) return Amount{true, b.value, b.scale};
  const int32_t scale = std::min(a.scale, b.scale);
  int128 x = 0;
  int128 y = 0;
  if (!ScaleUp(a.value, static_cast<int64_t>(a.scale) - scale, &x) ||
      !ScaleUp(b.value, static_cast<int64_t>(b.scale) - scale, &y)) {
    return std::nullopt;
  }
  int128 sum = 0;
  if (__builtin_add_overflow(x, y, &sum)) return std::nullopt;
  return Amount{true, sum, scale};
}

bool FitsInt64(int128 v) {
  return v >= std::numeric_limits<int64_t>::min() && v <= std::numeric_limits<int64_t>::max();
}

// Go's int64Amount.Add.
bool Int64AmountAdd(Amount* a, const Amount& b) {
  if (b.value == 0) return true;
  if (a->value == 0) {
    *a = b;
    return true;
  }
  int128 x = a->value;
  int128 y = b.value;
  int32_t scale = a->scale;
  if (a->scale > b.scale) {
    if (!ScaleUp(a->value, a->scale - b.scale, &x) || !FitsInt64(x)) return false;
    scale = b.scale;
  } else if (b.scale > a->scale) {
    if (!ScaleUp(b.value, b.scale - a->scale, &y) || !FitsInt64(y)) return false;
  }
  const int128 sum = x + y;
  if (!FitsInt64(sum)) return false;
  a->value = sum;
  a->scale = scale;
  return true;
}

std::optional<Amount> Add(const Amount& a, const Amount& b) {
  if (!a.dec && !b.dec) {
    Amount r = a;
    if (Int64AmountAdd(&r, b)) return r;
  }
  return DecAdd(a, b);
}

Amount Negate(Amount a) {
  a.value = -a.value;
  return a;
}

// Go's int64Amount.AsInt64 behind Quantity.AsInt64: only the fast form converts, and only at
// a scale >= 0.
std::optional<int64_t> AsInt64(const Amount& a) {
  if (a.dec || a.scale < 0) return std::nullopt;
  int128 v = 0;
  if (!ScaleUp(a.value, a.scale, &v) || !FitsInt64(v)) return std::nullopt;
  return static_cast<int64_t>(v);
}

double AsApproximateFloat(const Amount& a) {
  if (a.value == 0) return 0;
  const double base = static_cast<double>(a.value);
  if (a.scale == 0) return base;
  return static_cast<double>(static_cast<long double>(base) *
                             std::pow(10.0L, static_cast<long double>(a.scale)));
}

constexpr std::string_view kErrFormatWrong =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr std::string_view kErrNumeric = "unable to parse numeric part of quantity";
constexpr std::string_view kErrSuffix = "unable to parse quantity's suffix";

enum class QuantityFormat { kDecimalExponent, kBinarySI, kDecimalSI };

// Go's suffixHandler.interpret.
bool InterpretSuffix(std::string_view s, int* base, int64_t* exponent, QuantityFormat* format) {
  struct Entry {
    std::string_view suffix;
    int base;
    int exponent;
  };
  static constexpr Entry kDecimal[] = {{"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"", 10, 0},
                                       {"k", 10, 3},  {"M", 10, 6},  {"G", 10, 9},  {"T", 10, 12},
                                       {"P", 10, 15}, {"E", 10, 18}};
  static constexpr Entry kBinary[] = {{"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30},
                                      {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60}};
  for (const Entry& e : kDecimal) {
    if (e.suffix == s) {
      *base = e.base;
      *exponent = e.exponent;
      *format = QuantityFormat::kDecimalSI;
      return true;
    }
  }
  for (const Entry& e : kBinary) {
    if (e.suffix == s) {
      *base = e.base;
      *exponent = e.exponent;
      *format = QuantityFormat::kBinarySI;
      return true;
    }
  }
  if (s.size() > 1 && (s[0] == 'e' || s[0] == 'E')) {
    // strconv.ParseInt(s[1:], 10, 64): optional sign, then digits only.
    std::string_view digits = s.substr(1);
    bool negative = false;
    if (digits[0] == '+' || digits[0] == '-') {
      negative = digits[0] == '-';
      digits.remove_prefix(1);
    }
    if (digits.empty()) return false;
    int64_t v = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
      if (v > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10) return false;
      v = v * 10 + (c - '0');
    }
    *base = 10;
    *exponent = static_cast<int32_t>(negative ? -v : v);  // Go truncates to int32 too
    *format = QuantityFormat::kDecimalExponent;
    return true;
  }
  return false;
}

struct Scanned {
  bool positive = true;
  bool digits = false;  // whether the number part has any digit ("" in "-Pi", "." in ".Ei")
  std::string num;
  std::string denom;
  std::string suffix;
};

// Go's parseQuantityString.
bool ScanQuantity(std::string_view str, Scanned* out) {
  size_t pos = 0;
  const size_t end = str.size();
  if (pos < end && (str[0] == '-' || str[0] == '+')) {
    out->positive = str[0] != '-';
    ++pos;
  }
  const size_t zeros_begin = pos;
  while (pos < end && str[pos] == '0') ++pos;
  out->digits = pos > zeros_begin;
  if (pos >= end) {
    out->num = "0";
    return true;
  }
  const size_t num_begin = pos;
  while (pos < end && str[pos] >= '0' && str[pos] <= '9') ++pos;
  out->num = std::string(str.substr(num_begin, pos - num_begin));
  out->digits = out->digits || !out->num.empty();
  if (pos >= end) return true;
  if (out->num.empty()) out->num = "0";
  if (str[pos] == '.') {
    ++pos;
    const size_t denom_begin = pos;
    while (pos < end && str[pos] >= '0' && str[pos] <= '9') ++pos;
    out->denom = std::string(str.substr(denom_begin, pos - denom_begin));
    out->digits = out->digits || !out->denom.empty();
    if (pos >= end) return true;
  }
  const size_t suffix_begin = pos;
  while (pos < end && std::string_view("eEinumkKMGTP").find(str[pos]) != std::string_view::npos) {
    ++pos;
  }
  if (pos < end && (str[pos] == '-' || str[pos] == '+')) ++pos;
  while (pos < end && str[pos] >= '0' && str[pos] <= '9') ++pos;
  if (pos < end) return false;
  out->suffix = std::string(str.substr(suffix_begin));
  return true;
}

bool ParseDigits(std::string_view digits, int128* out) {
  int128 v = 0;
  for (char c : digits) {
    if (v > (kInt128Max - (c - '0')) / 10) return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// resource.ParseQuantity. `beyond_limits` (when given) is set when the failure is only this
// implementation's (see the file comment), not Go's: the text is a quantity.
std::optional<Amount> ParseQuantity(std::string_view str, std::string* error,
                                    bool* beyond_limits = nullptr) {
  auto too_large = [&] {
    *error = kErrNumeric;
    if (beyond_limits != nullptr) *beyond_limits = true;
    return std::nullopt;
  };
  if (str.empty()) {
    *error = kErrFormatWrong;
    return std::nullopt;
  }
  if (str == "0") return Amount{};
  Scanned q;
  if (!ScanQuantity(str, &q)) {
    *error = kErrFormatWrong;
    return std::nullopt;
  }
  int base = 10;
  int64_t exponent = 0;
  QuantityFormat format = QuantityFormat::kDecimalSI;
  if (!InterpretSuffix(q.suffix, &base, &exponent, &format)) {
    *error = kErrSuffix;
    return std::nullopt;
  }
  // Fast path: an int64 mantissa (Go's int64Amount).
  int64_t precision = 0;
  int64_t scale = 0;
  int64_t mantissa = 1;
  if (format == QuantityFormat::kBinarySI) {
    if (exponent >= 0 && q.denom.empty()) {
      mantissa = int64_t{1} << exponent;
      precision = 15 - static_cast<int64_t>(q.num.size()) -
                  static_cast<int64_t>(static_cast<float>(exponent) * 3 / 10) - 1;
    } else {
      precision = -1;
    }
  } else {
    scale = exponent;
    precision = 18 - static_cast<int64_t>(q.num.size() + q.denom.size());
  }
  if (precision >= 0) {
    scale -= static_cast<int64_t>(q.denom.size());
    if (scale >= -9) {
      int128 value = 0;
      ParseDigits(q.num + q.denom, &value);  // at most 18 digits
      const int128 result = value * mantissa;
      if (FitsInt64(result)) {
        return Amount{false, q.positive ? result : -result, static_cast<int32_t>(scale)};
      }
    }
  }
  // Slow path (Go's inf.Dec): exact, rounded up to nano precision. inf.Dec refuses a number
  // without digits, which the fast path reads as zero.
  if (!q.digits) {
    *error = kErrNumeric;
    return std::nullopt;
  }
  std::string digits = q.num + q.denom;
  int64_t exp10 = -static_cast<int64_t>(q.denom.size());
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return Amount{true, 0, 0};
  digits = digits.substr(first);
  while (digits.size() > 1 && digits.back() == '0') {
    digits.pop_back();
    ++exp10;
  }
  int128 m = 0;
  if (digits.size() > kMaxDigits || !ParseDigits(digits, &m)) return too_large();
  if (base == 10) {
    exp10 += exponent;
  } else {
    for (int64_t i = 0; i < exponent; ++i) {
      if (m > kInt128Max / 2) return too_large();
      m *= 2;
    }
  }
  if (exp10 < -9) {
    const int64_t k = -9 - exp10;
    if (k > kMaxDigits) {
      m = 1;
    } else {
      int128 p = 1;
      for (int64_t i = 0; i < k; ++i) p *= 10;
      m = m / p + (m % p != 0 ? 1 : 0);
    }
    exp10 = -9;
  }
  if (exp10 > std::numeric_limits<int32_t>::max()) return too_large();
  Amount amount{true, m, static_cast<int32_t>(exp10)};
  const Amount max_allowed{true, std::numeric_limits<int64_t>::max(), 0};
  if (format == QuantityFormat::kBinarySI && CompareAmounts(amount, max_allowed) > 0)
    amount = max_allowed;
  if (!q.positive) amount.value = -amount.value;
  return amount;
}

std::string RenderAmount(const Amount& a) {
  if (a.value == 0) return "0";
  std::string digits;
  for (int128 v = Abs(a.value); v > 0; v /= 10) {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
  }
  std::string out = a.value < 0 ? "-" : "";
  if (a.scale >= 0) return out + digits + (a.scale > 0 ? "e" + std::to_string(a.scale) : "");
  const size_t frac = static_cast<size_t>(-static_cast<int64_t>(a.scale));
  if (digits.size() <= frac) digits.insert(0, frac - digits.size() + 1, '0');
  return out + digits.substr(0, digits.size() - frac) + "." + digits.substr(digits.size() - frac);
}

class QuantityValue final : public OpaqueValue {
 public:
  explicit QuantityValue(Amount amount) : amount_(amount) {}
  std::string_view type_name() const override { return kQuantityType; }
  bool Equals(const OpaqueValue& other) const override {
    const auto* o = dynamic_cast<const QuantityValue*>(&other);
    return o != nullptr && CompareAmounts(amount_, o->amount_) == 0;
  }
  std::string DebugString() const override { return "quantity(\"" + RenderAmount(amount_) + "\")"; }
  const Amount& amount() const { return amount_; }

 private:
  Amount amount_;
};

const Amount& AmountOf(const Value& v) {
  return static_cast<const QuantityValue&>(v.opaque()).amount();
}

Value MakeQuantity(const Amount& a) { return Value::Opaque(std::make_shared<QuantityValue>(a)); }

Value AddOrError(const Amount& a, const Amount& b) {
  auto sum = Add(a, b);
  if (!sum) return Value::MakeError("quantity overflow");
  return MakeQuantity(*sum);
}

using internal::CostExceeded;

}  // namespace

bool IsQuantity(std::string_view text) {
  std::string error;
  bool beyond_limits = false;
  return ParseQuantity(text, &error, &beyond_limits).has_value() || beyond_limits;
}

std::optional<double> QuantityAsDouble(std::string_view view) {
  const std::string text(view);
  if (!cel::IsQuantity(text)) return std::nullopt;
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                               text[end] == '.' || text[end] == '+' || text[end] == '-')) {
    ++end;
  }
  std::string number = text.substr(0, end);
  std::string suffix = text.substr(end);
  if (number.empty() || number == "+" || number == "-" || number == ".") number += "0";
  char* stop = nullptr;
  double v = std::strtod(number.c_str(), &stop);
  static const std::map<std::string, double> kSuffixes = {{"", 1},
                                                          {"n", 1e-9},
                                                          {"u", 1e-6},
                                                          {"m", 1e-3},
                                                          {"k", 1e3},
                                                          {"M", 1e6},
                                                          {"G", 1e9},
                                                          {"T", 1e12},
                                                          {"P", 1e15},
                                                          {"E", 1e18},
                                                          {"Ki", 1024.0},
                                                          {"Mi", 1048576.0},
                                                          {"Gi", 1073741824.0},
                                                          {"Ti", 1099511627776.0},
                                                          {"Pi", 1125899906842624.0},
                                                          {"Ei", 1152921504606846976.0}};
  auto it = kSuffixes.find(suffix);
  if (it != kSuffixes.end()) return v * it->second;
  if (!suffix.empty() && (suffix[0] == 'e' || suffix[0] == 'E')) {
    return v * std::pow(10.0, std::strtod(suffix.c_str() + 1, nullptr));
  }
  return std::nullopt;
}

void internal::InstallQuantityLibrary(FunctionRegistry& registry) {
  const Param str = Param::Of(Kind::kString);
  const Param quantity = Param::OfOpaque(kQuantityType);
  const Param int_p = Param::Of(Kind::kInt);
  registry.Add("quantity", false, {str}, [](std::span<const Value> a, EvalContext& ctx) {
    const std::string& s = a[0].string_value();
    if (!ctx.Charge(internal::TraversalCost(s.size()))) return CostExceeded();
    std::string error;
    auto amount = ParseQuantity(s, &error);
    if (!amount) return Value::MakeError(error);
    return MakeQuantity(*amount);
  });
  registry.Add("isQuantity", false, {str}, [](std::span<const Value> a, EvalContext& ctx) {
    const std::string& s = a[0].string_value();
    if (!ctx.Charge(internal::TraversalCost(s.size()))) return CostExceeded();
    return Value::Bool(IsQuantity(s));
  });
  registry.AddBoth("sign", {quantity}, [](std::span<const Value> a, EvalContext&) {
    const int128 v = AmountOf(a[0]).value;
    return Value::Int(v > 0 ? 1 : (v < 0 ? -1 : 0));
  });
  registry.Add("isInteger", true, {quantity}, [](std::span<const Value> a, EvalContext&) {
    return Value::Bool(AsInt64(AmountOf(a[0])).has_value());
  });
  registry.Add("asInteger", true, {quantity}, [](std::span<const Value> a, EvalContext&) {
    auto v = AsInt64(AmountOf(a[0]));
    if (!v) return Value::MakeError("cannot convert value to integer");
    return Value::Int(*v);
  });
  registry.Add("asApproximateFloat", true, {quantity}, [](std::span<const Value> a, EvalContext&) {
    return Value::Double(AsApproximateFloat(AmountOf(a[0])));
  });
  registry.Add("isGreaterThan", true, {quantity, quantity},
               [](std::span<const Value> a, EvalContext&) {
                 return Value::Bool(CompareAmounts(AmountOf(a[0]), AmountOf(a[1])) > 0);
               });
  registry.Add("isLessThan", true, {quantity, quantity},
               [](std::span<const Value> a, EvalContext&) {
                 return Value::Bool(CompareAmounts(AmountOf(a[0]), AmountOf(a[1])) < 0);
               });
  registry.Add("compareTo", true, {quantity, quantity}, [](std::span<const Value> a, EvalContext&) {
    return Value::Int(CompareAmounts(AmountOf(a[0]), AmountOf(a[1])));
  });
  registry.Add("add", true, {quantity, quantity}, [](std::span<const Value> a, EvalContext&) {
    return AddOrError(AmountOf(a[0]), AmountOf(a[1]));
  });
  registry.Add("add", true, {quantity, int_p}, [](std::span<const Value> a, EvalContext&) {
    return AddOrError(AmountOf(a[0]), Amount{false, a[1].int_value(), 0});
  });
  registry.Add("sub", true, {quantity, quantity}, [](std::span<const Value> a, EvalContext&) {
    return AddOrError(AmountOf(a[0]), Negate(AmountOf(a[1])));
  });
  registry.Add("sub", true, {quantity, int_p}, [](std::span<const Value> a, EvalContext&) {
    return AddOrError(AmountOf(a[0]), Amount{false, -static_cast<int128>(a[1].int_value()), 0});
  });
}

}  // namespace klutch::cel
