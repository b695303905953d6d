#include "core/duration.h"

#include <string>

#include "core/strings.h"

namespace klutch::core {
namespace {

__extension__ typedef __int128 Int128;  // __extension__ keeps -Wpedantic quiet

constexpr Int128 kNanosPerSecond = 1000000000;
// Larger integer parts fail before the arithmetic could overflow: every range the callers use
// lies far below 2^100 nanoseconds.
constexpr Int128 kLimit = static_cast<Int128>(1) << 100;

Int128 TotalNanos(const GoDuration& d) {
  return static_cast<Int128>(d.seconds) * kNanosPerSecond + d.nanos;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Nanoseconds per unit; 0 for an unknown unit.
Int128 UnitNanos(std::string_view unit) {
  if (unit == "ns") return 1;
  // "µs" is U+00B5 (micro sign), "μs" U+03BC (Greek small letter mu): Go accepts both.
  if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") return 1000;
  if (unit == "ms") return 1000000;
  if (unit == "s") return kNanosPerSecond;
  if (unit == "m") return 60 * kNanosPerSecond;
  if (unit == "h") return 3600 * kNanosPerSecond;
  return 0;
}

}  // namespace

Result<GoDuration> ParseGoDuration(std::string_view text, const DurationRange& range) {
  const std::string quoted = GoQuote(text);
  auto invalid = [&] { return BadRequest("time: invalid duration " + quoted); };
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  Int128 total = 0;
  if (s != "0") {
    if (s.empty()) return invalid();
    while (!s.empty()) {
      if (s[0] != '.' && !IsDigit(s[0])) return invalid();
      Int128 whole = 0;
      size_t i = 0;
      for (; i < s.size() && IsDigit(s[i]); ++i) {
        whole = whole * 10 + (s[i] - '0');
        if (whole > kLimit) return invalid();
      }
      const bool had_whole = i > 0;
      // Digits past the 18th of a fraction cannot change the nanoseconds.
      Int128 fraction = 0;
      Int128 scale = 1;
      bool had_fraction = false;
      if (i < s.size() && s[i] == '.') {
        for (++i; i < s.size() && IsDigit(s[i]); ++i) {
          if (scale < static_cast<Int128>(1000000000000000000LL)) {
            fraction = fraction * 10 + (s[i] - '0');
            scale *= 10;
          }
          had_fraction = true;
        }
      }
      if (!had_whole && !had_fraction) return invalid();  // ".s", "-.s"
      size_t unit_start = i;
      while (i < s.size() && s[i] != '.' && !IsDigit(s[i])) ++i;
      std::string_view unit = s.substr(unit_start, i - unit_start);
      if (unit.empty()) return BadRequest("time: missing unit in duration " + quoted);
      Int128 nanos = UnitNanos(unit);
      if (nanos == 0) {
        return BadRequest("time: unknown unit " + GoQuote(unit) + " in duration " + quoted);
      }
      total += whole * nanos + fraction * nanos / scale;
      if (total > kLimit) return invalid();
      s.remove_prefix(i);
    }
  }
  if (negative) total = -total;
  if (total < TotalNanos(range.min) || total > TotalNanos(range.max)) return invalid();
  return GoDuration{static_cast<int64_t>(total / kNanosPerSecond),
                    static_cast<int32_t>(total % kNanosPerSecond)};
}

}  // namespace klutch::core
