// CEL's standard function library (cel-spec langdef.md, "Standard Definitions"):
// arithmetic with overflow errors, ordering, size, string predicates, regular expressions,
// type conversions, and timestamp/duration arithmetic and accessors.

#include <re2/re2.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <unordered_map>

#include "cel/cel.h"
#include "cel/internal.h"
#include "cel/library_util.h"
#include "cel/timezone.h"

namespace klutch::cel {
namespace {

using Args = std::span<const Value>;

Param P(Kind k) { return Param::Of(k); }

Value Err(std::string m) { return Value::MakeError(std::move(m)); }
Value Overflow() { return Err("integer overflow"); }

constexpr int64_t kNanosPerSecond = 1000000000;
// CEL's timestamp range: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z.
constexpr int64_t kMinTimestampSeconds = -62135596800;
constexpr int64_t kMaxTimestampSeconds = 253402300799;

Duration Normalize(Int128 nanos) {
  Duration d;
  d.seconds = static_cast<int64_t>(nanos / kNanosPerSecond);
  d.nanos = static_cast<int32_t>(nanos % kNanosPerSecond);
  return d;
}

Int128 TotalNanos(Duration d) { return static_cast<Int128>(d.seconds) * kNanosPerSecond + d.nanos; }
Int128 TotalNanos(Timestamp t) {
  return static_cast<Int128>(t.seconds) * kNanosPerSecond + t.nanos;
}

Value MakeTimestamp(Int128 nanos) {
  Int128 secs = nanos / kNanosPerSecond;
  Int128 rem = nanos % kNanosPerSecond;
  if (rem < 0) {
    rem += kNanosPerSecond;
    secs -= 1;
  }
  if (secs < kMinTimestampSeconds || secs > kMaxTimestampSeconds) {
    return Err("timestamp overflow");
  }
  return Value::Time(Timestamp{static_cast<int64_t>(secs), static_cast<int32_t>(rem)});
}

Value MakeDuration(Int128 nanos) {
  Duration d = Normalize(nanos);
  if (!DurationInRange(d)) return Err("duration overflow");
  return Value::Span(d);
}

// Days since 1970-01-01 for a civil date, and back (proleptic Gregorian, std::chrono).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  return std::chrono::sys_days{std::chrono::year{static_cast<int>(y)} / std::chrono::month{m} /
                               std::chrono::day{d}}
      .time_since_epoch()
      .count();
}

struct Civil {
  int64_t year;
  unsigned month, day;
};

Civil CivilFromDays(int64_t z) {
  std::chrono::year_month_day ymd{std::chrono::sys_days{std::chrono::days{z}}};
  return Civil{static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
               static_cast<unsigned>(ymd.day())};
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// ------------------------------------------------------------------------------ numbers

Value AddInt(Args a, EvalContext&) {
  int64_t r;
  if (__builtin_add_overflow(a[0].int_value(), a[1].int_value(), &r)) return Overflow();
  return Value::Int(r);
}
Value SubInt(Args a, EvalContext&) {
  int64_t r;
  if (__builtin_sub_overflow(a[0].int_value(), a[1].int_value(), &r)) return Overflow();
  return Value::Int(r);
}
Value MulInt(Args a, EvalContext&) {
  int64_t r;
  if (__builtin_mul_overflow(a[0].int_value(), a[1].int_value(), &r)) return Overflow();
  return Value::Int(r);
}
Value DivInt(Args a, EvalContext&) {
  int64_t x = a[0].int_value(), y = a[1].int_value();
  if (y == 0) return Err("division by zero");
  if (x == INT64_MIN && y == -1) return Overflow();
  return Value::Int(x / y);
}
Value ModInt(Args a, EvalContext&) {
  int64_t x = a[0].int_value(), y = a[1].int_value();
  if (y == 0) return Err("modulus by zero");
  if (x == INT64_MIN && y == -1) return Overflow();
  return Value::Int(x % y);
}
Value AddUint(Args a, EvalContext&) {
  uint64_t r;
  if (__builtin_add_overflow(a[0].uint_value(), a[1].uint_value(), &r)) return Overflow();
  return Value::Uint(r);
}
Value SubUint(Args a, EvalContext&) {
  uint64_t r;
  if (__builtin_sub_overflow(a[0].uint_value(), a[1].uint_value(), &r)) return Overflow();
  return Value::Uint(r);
}
Value MulUint(Args a, EvalContext&) {
  uint64_t r;
  if (__builtin_mul_overflow(a[0].uint_value(), a[1].uint_value(), &r)) return Overflow();
  return Value::Uint(r);
}
Value DivUint(Args a, EvalContext&) {
  if (a[1].uint_value() == 0) return Err("division by zero");
  return Value::Uint(a[0].uint_value() / a[1].uint_value());
}
Value ModUint(Args a, EvalContext&) {
  if (a[1].uint_value() == 0) return Err("modulus by zero");
  return Value::Uint(a[0].uint_value() % a[1].uint_value());
}

// ------------------------------------------------------------------------------ strings

size_t Utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c >> 5) == 0x6) {
      n = 2;
      cp = c & 0x1F;
    } else if ((c >> 4) == 0xE) {
      n = 3;
      cp = c & 0x0F;
    } else if ((c >> 3) == 0x1E) {
      n = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) {
      return false;
    }
    i += n;
  }
  return true;
}

Value Matches(Args a, EvalContext& ctx) {
  std::string error;
  auto re = internal::CompileRegex(a[1].string_value(), &error);
  if (!re) return Err(error);
  ctx.Charge(1 + a[0].string_value().size() / 10);
  return Value::Bool(RE2::PartialMatch(a[0].string_value(), *re));
}

// Go's strconv.FormatFloat(d, 'g', -1, 64), which cel-go uses for string(double).
std::string FormatDouble(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "+Inf" : "-Inf";
  if (d == 0) return std::signbit(d) ? "-0" : "0";
  char buf[64];
  int prec = 0;
  for (prec = 0; prec < 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  // buf is like "-1.2345e+06": split digits and exponent.
  std::string s(buf);
  bool neg = s[0] == '-';
  if (neg) s = s.substr(1);
  size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  int exp = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 21) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + eb;
  }
  if (exp < 0) {
    return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  }
  if (static_cast<size_t>(exp) + 1 >= digits.size()) {
    return out + digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0');
  }
  return out + digits.substr(0, static_cast<size_t>(exp) + 1) + "." +
         digits.substr(static_cast<size_t>(exp) + 1);
}

std::optional<int64_t> ParseInt(const std::string& s) {
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || std::isspace(static_cast<unsigned char>(s[0]))) {
    return std::nullopt;
  }
  return v;
}

std::optional<uint64_t> ParseUint(const std::string& s) {
  if (s.empty() || s[0] == '-' || s[0] == '+' || std::isspace(static_cast<unsigned char>(s[0]))) {
    return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return v;
}

// ------------------------------------------------------------------------------ time

struct LocalTime {
  int64_t local_seconds;  // seconds since the epoch in the zone's wall clock
  int32_t nanos;
};

Value ToLocal(const Value& ts, const std::string* tz, LocalTime& out) {
  Timestamp t = ts.timestamp();
  int64_t offset = 0;
  if (tz != nullptr) {
    auto off = UtcOffsetAt(*tz, t.seconds);
    if (!off) return Err("unknown timezone: " + *tz);
    offset = *off;
  }
  out.local_seconds = t.seconds + offset;
  out.nanos = t.nanos;
  return Value::Null();
}

template <typename F>
void AddTimeAccessor(FunctionRegistry& r, const char* name, F f) {
  r.Add(name, true, {P(Kind::kTimestamp)}, [f](Args a, EvalContext&) {
    LocalTime lt;
    Value err = ToLocal(a[0], nullptr, lt);
    if (err.is_error()) return err;
    return Value::Int(f(lt));
  });
  r.Add(name, true, {P(Kind::kTimestamp), P(Kind::kString)}, [f](Args a, EvalContext&) {
    LocalTime lt;
    Value err = ToLocal(a[0], &a[1].string_value(), lt);
    if (err.is_error()) return err;
    return Value::Int(f(lt));
  });
}

}  // namespace

size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) i += Utf8Length(static_cast<unsigned char>(s[i]));
  return n;
}

bool TimestampInRange(Timestamp t) {
  return t.seconds >= kMinTimestampSeconds && t.seconds <= kMaxTimestampSeconds;
}

bool DurationInRange(Duration d) {
  // cel-go's durations are Go time.Durations: int64 nanoseconds (about +-292 years).
  Int128 total = TotalNanos(d);
  return total >= INT64_MIN && total <= INT64_MAX;
}

std::string FormatTimestamp(Timestamp t) {
  int64_t days = FloorDiv(t.seconds, 86400);
  int64_t rem = t.seconds - days * 86400;
  Civil c = CivilFromDays(days);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld",
                static_cast<long long>(c.year), c.month, c.day, static_cast<long long>(rem / 3600),
                static_cast<long long>(rem / 60 % 60), static_cast<long long>(rem % 60));
  std::string out = buf;
  if (t.nanos != 0) {
    char frac[16];
    std::snprintf(frac, sizeof frac, "%09d", t.nanos);
    std::string f = frac;
    while (!f.empty() && f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out + "Z";
}

std::string FormatDuration(Duration d) {
  Int128 total = TotalNanos(d);
  bool neg = total < 0;
  if (neg) total = -total;
  long long secs = static_cast<long long>(total / kNanosPerSecond);
  int nanos = static_cast<int>(total % kNanosPerSecond);
  std::string out = (neg ? "-" : "") + std::to_string(secs);
  if (nanos != 0) {
    char frac[16];
    std::snprintf(frac, sizeof frac, "%09d", nanos);
    std::string f = frac;
    while (!f.empty() && f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out + "s";
}

std::optional<Timestamp> ParseTimestamp(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
  auto digits = [&](size_t pos, size_t n, int64_t& out) {
    if (pos + n > s.size()) return false;
    out = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
      out = out * 10 + (s[i] - '0');
    }
    return true;
  };
  int64_t y, mo, d, h, mi, sec;
  if (!digits(0, 4, y) || s.size() < 20 || s[4] != '-' || !digits(5, 2, mo) || s[7] != '-' ||
      !digits(8, 2, d) || (s[10] != 'T' && s[10] != 't') || !digits(11, 2, h) || s[13] != ':' ||
      !digits(14, 2, mi) || s[16] != ':' || !digits(17, 2, sec)) {
    return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > kDays[mo - 1] || (mo == 2 && d == 29 && !leap)) return std::nullopt;
  size_t pos = 19;
  int32_t nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t start = pos;
    int64_t frac = 0;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      if (pos - start < 9) frac = frac * 10 + (s[pos] - '0');
      ++pos;
    }
    if (pos == start) return std::nullopt;
    for (size_t k = pos - start; k < 9; ++k) frac *= 10;
    nanos = static_cast<int32_t>(frac);
  }
  int64_t offset = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int64_t oh, om;
    if (!digits(pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !digits(pos + 4, 2, om)) {
      return std::nullopt;
    }
    offset = (oh * 3600 + om * 60) * (s[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  if (sec == 60) sec = 59;
  int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  Timestamp t{days * 86400 + h * 3600 + mi * 60 + sec - offset, nanos};
  if (!TimestampInRange(t)) return std::nullopt;
  return t;
}

void InstallStandardLibrary(FunctionRegistry& r) {
  const Kind kI = Kind::kInt, kU = Kind::kUint, kD = Kind::kDouble, kS = Kind::kString,
             kB = Kind::kBytes, kL = Kind::kList, kM = Kind::kMap, kT = Kind::kTimestamp,
             kDur = Kind::kDuration, kBool = Kind::kBool;

  // Arithmetic.
  r.Add("_+_", false, {P(kI), P(kI)}, AddInt);
  r.Add("_+_", false, {P(kU), P(kU)}, AddUint);
  r.Add("_+_", false, {P(kD), P(kD)}, [](Args a, EvalContext&) {
    return Value::Double(a[0].double_value() + a[1].double_value());
  });
  r.Add("_+_", false, {P(kS), P(kS)}, [](Args a, EvalContext& ctx) {
    ctx.Charge((a[0].string_value().size() + a[1].string_value().size()) / 10);
    return Value::String(a[0].string_value() + a[1].string_value());
  });
  r.Add("_+_", false, {P(kB), P(kB)}, [](Args a, EvalContext& ctx) {
    ctx.Charge((a[0].bytes_value().size() + a[1].bytes_value().size()) / 10);
    return Value::BytesOf(a[0].bytes_value() + a[1].bytes_value());
  });
  r.Add("_+_", false, {P(kL), P(kL)}, [](Args a, EvalContext& ctx) {
    const ListValue& x = a[0].list();
    const ListValue& y = a[1].list();
    if (y.size() == 0) return a[0];
    if (x.size() == 0) return a[1];
    ctx.Charge((x.size() + y.size()) / 10);
    std::vector<Value> items;
    items.reserve(x.size() + y.size());
    for (size_t i = 0; i < x.size(); ++i) items.push_back(x.Get(i));
    for (size_t i = 0; i < y.size(); ++i) items.push_back(y.Get(i));
    return Value::List(std::move(items));
  });
  r.Add("_+_", false, {P(kT), P(kDur)}, [](Args a, EvalContext&) {
    return MakeTimestamp(TotalNanos(a[0].timestamp()) + TotalNanos(a[1].duration()));
  });
  r.Add("_+_", false, {P(kDur), P(kT)}, [](Args a, EvalContext&) {
    return MakeTimestamp(TotalNanos(a[1].timestamp()) + TotalNanos(a[0].duration()));
  });
  r.Add("_+_", false, {P(kDur), P(kDur)}, [](Args a, EvalContext&) {
    return MakeDuration(TotalNanos(a[0].duration()) + TotalNanos(a[1].duration()));
  });
  r.Add("_-_", false, {P(kI), P(kI)}, SubInt);
  r.Add("_-_", false, {P(kU), P(kU)}, SubUint);
  r.Add("_-_", false, {P(kD), P(kD)}, [](Args a, EvalContext&) {
    return Value::Double(a[0].double_value() - a[1].double_value());
  });
  r.Add("_-_", false, {P(kT), P(kT)}, [](Args a, EvalContext&) {
    return MakeDuration(TotalNanos(a[0].timestamp()) - TotalNanos(a[1].timestamp()));
  });
  r.Add("_-_", false, {P(kT), P(kDur)}, [](Args a, EvalContext&) {
    return MakeTimestamp(TotalNanos(a[0].timestamp()) - TotalNanos(a[1].duration()));
  });
  r.Add("_-_", false, {P(kDur), P(kDur)}, [](Args a, EvalContext&) {
    return MakeDuration(TotalNanos(a[0].duration()) - TotalNanos(a[1].duration()));
  });
  r.Add("_*_", false, {P(kI), P(kI)}, MulInt);
  r.Add("_*_", false, {P(kU), P(kU)}, MulUint);
  r.Add("_*_", false, {P(kD), P(kD)}, [](Args a, EvalContext&) {
    return Value::Double(a[0].double_value() * a[1].double_value());
  });
  r.Add("_/_", false, {P(kI), P(kI)}, DivInt);
  r.Add("_/_", false, {P(kU), P(kU)}, DivUint);
  r.Add("_/_", false, {P(kD), P(kD)}, [](Args a, EvalContext&) {
    return Value::Double(a[0].double_value() / a[1].double_value());
  });
  r.Add("_%_", false, {P(kI), P(kI)}, ModInt);
  r.Add("_%_", false, {P(kU), P(kU)}, ModUint);
  r.Add("-_", false, {P(kI)}, [](Args a, EvalContext&) {
    if (a[0].int_value() == INT64_MIN) return Overflow();
    return Value::Int(-a[0].int_value());
  });
  r.Add("-_", false, {P(kD)},
        [](Args a, EvalContext&) { return Value::Double(-a[0].double_value()); });
  r.Add("-_", false, {P(kDur)},
        [](Args a, EvalContext&) { return MakeDuration(-TotalNanos(a[0].duration())); });

  // Ordering: one body per operator over every orderable pair of kinds.
  struct Rel {
    const char* name;
    bool (*test)(std::partial_ordering);
  };
  static constexpr Rel kRels[] = {
      {"_<_", [](std::partial_ordering o) { return o < 0; }},
      {"_<=_", [](std::partial_ordering o) { return o <= 0; }},
      {"_>_", [](std::partial_ordering o) { return o > 0; }},
      {"_>=_", [](std::partial_ordering o) { return o >= 0; }},
  };
  for (const Rel& rel : kRels) {
    auto test = rel.test;
    std::string name = rel.name;
    r.Add(rel.name, false, {Param::Any(), Param::Any()}, [test, name](Args a, EvalContext&) {
      Ordering o = Compare(a[0], a[1]);
      if (!o.comparable) {
        return Err("no such overload: " + name + "(" + a[0].TypeName() + ", " + a[1].TypeName() +
                   ")");
      }
      return Value::Bool(test(o.order));
    });
  }

  // size
  r.AddBoth("size", {P(kS)}, [](Args a, EvalContext&) {
    return Value::Int(static_cast<int64_t>(CodePointCount(a[0].string_value())));
  });
  r.AddBoth("size", {P(kB)}, [](Args a, EvalContext&) {
    return Value::Int(static_cast<int64_t>(a[0].bytes_value().size()));
  });
  r.AddBoth("size", {P(kL)}, [](Args a, EvalContext&) {
    return Value::Int(static_cast<int64_t>(a[0].list().size()));
  });
  r.AddBoth("size", {P(kM)}, [](Args a, EvalContext&) {
    return Value::Int(static_cast<int64_t>(a[0].map().size()));
  });

  // String predicates and regular expressions.
  r.Add("contains", true, {P(kS), P(kS)}, [](Args a, EvalContext& ctx) {
    ctx.Charge(1 + a[0].string_value().size() / 10);
    return Value::Bool(a[0].string_value().find(a[1].string_value()) != std::string::npos);
  });
  r.Add("startsWith", true, {P(kS), P(kS)}, [](Args a, EvalContext&) {
    return Value::Bool(a[0].string_value().starts_with(a[1].string_value()));
  });
  r.Add("endsWith", true, {P(kS), P(kS)}, [](Args a, EvalContext&) {
    return Value::Bool(a[0].string_value().ends_with(a[1].string_value()));
  });
  r.AddBoth("matches", {P(kS), P(kS)}, Matches);

  // Conversions.
  r.Add("int", false, {P(kI)}, [](Args a, EvalContext&) { return a[0]; });
  r.Add("int", false, {P(kU)}, [](Args a, EvalContext&) {
    if (a[0].uint_value() > static_cast<uint64_t>(INT64_MAX)) return Err("range error");
    return Value::Int(static_cast<int64_t>(a[0].uint_value()));
  });
  r.Add("int", false, {P(kD)}, [](Args a, EvalContext&) {
    double d = a[0].double_value();
    // Go converts only values strictly inside (-2^63, 2^63); cel-go reports the rest.
    if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) return Err("range error");
    return Value::Int(static_cast<int64_t>(d));
  });
  r.Add("int", false, {P(kS)}, [](Args a, EvalContext&) {
    auto v = ParseInt(a[0].string_value());
    if (!v) return Err("cannot convert string to int");
    return Value::Int(*v);
  });
  r.Add("int", false, {P(kT)},
        [](Args a, EvalContext&) { return Value::Int(a[0].timestamp().seconds); });
  r.Add("uint", false, {P(kU)}, [](Args a, EvalContext&) { return a[0]; });
  r.Add("uint", false, {P(kI)}, [](Args a, EvalContext&) {
    if (a[0].int_value() < 0) return Err("range error");
    return Value::Uint(static_cast<uint64_t>(a[0].int_value()));
  });
  r.Add("uint", false, {P(kD)}, [](Args a, EvalContext&) {
    double d = a[0].double_value();
    if (!(d > -1.0 && d < 18446744073709551616.0)) return Err("range error");
    return Value::Uint(static_cast<uint64_t>(d));
  });
  r.Add("uint", false, {P(kS)}, [](Args a, EvalContext&) {
    auto v = ParseUint(a[0].string_value());
    if (!v) return Err("cannot convert string to uint");
    return Value::Uint(*v);
  });
  r.Add("double", false, {P(kD)}, [](Args a, EvalContext&) { return a[0]; });
  r.Add("double", false, {P(kI)},
        [](Args a, EvalContext&) { return Value::Double(static_cast<double>(a[0].int_value())); });
  r.Add("double", false, {P(kU)},
        [](Args a, EvalContext&) { return Value::Double(static_cast<double>(a[0].uint_value())); });
  r.Add("double", false, {P(kS)}, [](Args a, EvalContext&) {
    const std::string& s = a[0].string_value();
    if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) {
      return Err("cannot convert string to double");
    }
    char* end = nullptr;
    errno = 0;
    double d = std::strtod(s.c_str(), &end);
    if (*end != '\0') return Err("cannot convert string to double");
    return Value::Double(d);
  });
  r.Add("string", false, {P(kS)}, [](Args a, EvalContext&) { return a[0]; });
  r.Add("string", false, {P(kI)},
        [](Args a, EvalContext&) { return Value::String(std::to_string(a[0].int_value())); });
  r.Add("string", false, {P(kU)},
        [](Args a, EvalContext&) { return Value::String(std::to_string(a[0].uint_value())); });
  r.Add("string", false, {P(kD)},
        [](Args a, EvalContext&) { return Value::String(FormatDouble(a[0].double_value())); });
  r.Add("string", false, {P(kBool)},
        [](Args a, EvalContext&) { return Value::String(a[0].bool_value() ? "true" : "false"); });
  r.Add("string", false, {P(kB)}, [](Args a, EvalContext&) {
    if (!ValidUtf8(a[0].bytes_value()))
      return Err("invalid UTF-8 in bytes, cannot convert to string");
    return Value::String(a[0].bytes_value());
  });
  r.Add("string", false, {P(kT)},
        [](Args a, EvalContext&) { return Value::String(FormatTimestamp(a[0].timestamp())); });
  r.Add("string", false, {P(kDur)},
        [](Args a, EvalContext&) { return Value::String(FormatDuration(a[0].duration())); });
  r.Add("bytes", false, {P(kB)}, [](Args a, EvalContext&) { return a[0]; });
  r.Add("bytes", false, {P(kS)},
        [](Args a, EvalContext&) { return Value::BytesOf(a[0].string_value()); });
  r.Add("bool", false, {P(kBool)}, [](Args a, EvalContext&) { return a[0]; });
  r.Add("bool", false, {P(kS)}, [](Args a, EvalContext&) {
    const std::string& s = a[0].string_value();
    if (s == "1" || s == "t" || s == "T" || s == "true" || s == "TRUE" || s == "True") {
      return Value::Bool(true);
    }
    if (s == "0" || s == "f" || s == "F" || s == "false" || s == "FALSE" || s == "False") {
      return Value::Bool(false);
    }
    return Err("Type conversion error from 'string' to 'bool'");
  });
  r.Add("timestamp", false, {P(kT)}, [](Args a, EvalContext&) { return a[0]; });
  r.Add("timestamp", false, {P(kS)}, [](Args a, EvalContext&) {
    auto t = ParseTimestamp(a[0].string_value());
    if (!t) return Err("invalid timestamp: \"" + a[0].string_value() + "\"");
    return Value::Time(*t);
  });
  r.Add("timestamp", false, {P(kI)}, [](Args a, EvalContext&) {
    Timestamp t{a[0].int_value(), 0};
    if (!TimestampInRange(t)) return Err("timestamp overflow");
    return Value::Time(t);
  });
  r.Add("duration", false, {P(kDur)}, [](Args a, EvalContext&) { return a[0]; });
  r.Add("duration", false, {P(kS)}, [](Args a, EvalContext&) {
    auto d = ParseDuration(a[0].string_value());
    if (!d) return Err("invalid duration: \"" + a[0].string_value() + "\"");
    return Value::Span(*d);
  });

  // Timestamp accessors (UTC or a named/offset time zone).
  AddTimeAccessor(r, "getFullYear", [](const LocalTime& t) {
    return static_cast<int64_t>(CivilFromDays(FloorDiv(t.local_seconds, 86400)).year);
  });
  AddTimeAccessor(r, "getMonth", [](const LocalTime& t) {
    return static_cast<int64_t>(CivilFromDays(FloorDiv(t.local_seconds, 86400)).month) - 1;
  });
  AddTimeAccessor(r, "getDayOfYear", [](const LocalTime& t) {
    int64_t days = FloorDiv(t.local_seconds, 86400);
    Civil c = CivilFromDays(days);
    return days - DaysFromCivil(c.year, 1, 1);
  });
  AddTimeAccessor(r, "getDayOfMonth", [](const LocalTime& t) {
    return static_cast<int64_t>(CivilFromDays(FloorDiv(t.local_seconds, 86400)).day) - 1;
  });
  AddTimeAccessor(r, "getDate", [](const LocalTime& t) {
    return static_cast<int64_t>(CivilFromDays(FloorDiv(t.local_seconds, 86400)).day);
  });
  AddTimeAccessor(r, "getDayOfWeek", [](const LocalTime& t) {
    int64_t days = FloorDiv(t.local_seconds, 86400);
    return ((days % 7) + 7 + 4) % 7;  // 1970-01-01 was a Thursday (4)
  });
  AddTimeAccessor(r, "getHours", [](const LocalTime& t) {
    return (t.local_seconds - FloorDiv(t.local_seconds, 86400) * 86400) / 3600;
  });
  AddTimeAccessor(r, "getMinutes", [](const LocalTime& t) {
    return (t.local_seconds - FloorDiv(t.local_seconds, 86400) * 86400) / 60 % 60;
  });
  AddTimeAccessor(r, "getSeconds", [](const LocalTime& t) {
    return (t.local_seconds - FloorDiv(t.local_seconds, 86400) * 86400) % 60;
  });
  AddTimeAccessor(r, "getMilliseconds",
                  [](const LocalTime& t) { return static_cast<int64_t>(t.nanos / 1000000); });
  // Duration accessors: whole units, truncated toward zero.
  auto dur_acc = [&r](const char* name, int64_t unit_nanos) {
    r.Add(name, true, {Param::Of(Kind::kDuration)}, [unit_nanos](Args a, EvalContext&) {
      return Value::Int(static_cast<int64_t>(TotalNanos(a[0].duration()) / unit_nanos));
    });
  };
  dur_acc("getHours", 3600 * kNanosPerSecond);
  dur_acc("getMinutes", 60 * kNanosPerSecond);
  dur_acc("getSeconds", kNanosPerSecond);
  r.Add("getMilliseconds", true, {P(kDur)},
        [](Args a, EvalContext&) { return Value::Int(a[0].duration().nanos / 1000000); });

  // Internal: transformMap's accumulation step.
  r.Add("@map_insert", false, {P(kM), Param::Any(), Param::Any()}, [](Args a, EvalContext&) {
    if (!IsValidMapKey(a[1])) return Err("unsupported key type");
    if (a[0].map().Find(a[1]))
      return Err("insert failed: key " + a[1].DebugString() + " already exists");
    std::vector<std::pair<Value, Value>> entries;
    for (const Value& k : a[0].map().Keys()) entries.emplace_back(k, *a[0].map().Find(k));
    entries.emplace_back(a[1], a[2]);
    return Value::Map(std::move(entries));
  });
}

}  // namespace klutch::cel
