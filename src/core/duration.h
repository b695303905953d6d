// Go's duration syntax, as time.ParseDuration reads it: "300ms", "-1.5h", "2h45m", "1µs". The one
// parser of Go durations in the project: command-line flags, the OpenAPI "duration" format and
// CEL's duration() all use it.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace klutch::core {

// A span of time as whole seconds plus nanoseconds with the same sign (both <= 0 or both >= 0),
// so that spans beyond the +-292 years of an int64 nanosecond count can be represented.
struct GoDuration {
  int64_t seconds = 0;
  int32_t nanos = 0;  // in (-1e9, 1e9)
  bool operator==(const GoDuration&) const = default;
};

// The spans a caller accepts, inclusive.
struct DurationRange {
  GoDuration min;
  GoDuration max;
};

// Go's time.Duration: an int64 count of nanoseconds, -2^63ns to 2^63-1ns (about 292 years).
inline constexpr DurationRange kGoDurationRange = {{-9223372036, -854775808},
                                                   {9223372036, 854775807}};

// Parses `text` as Go's time.ParseDuration does: an optional sign, then one or more decimal
// numbers with an optional fraction, each followed by a unit (ns, us, µs, μs, ms, s, m, h); or
// "0" alone. The value is exact (Go adds a fraction through a float64, which can differ in the
// last nanosecond). BadRequest with Go's wording ("time: invalid duration \"1x\"", "time:
// missing unit in duration \"5\"", "time: unknown unit \"d\" in duration \"1d\"") when the text
// is malformed or the span lies outside `range`.
Result<GoDuration> ParseGoDuration(std::string_view text,
                                   const DurationRange& range = kGoDurationRange);

}  // namespace klutch::core
