// Helpers shared by the files of src/cel (not part of its public API).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "cel/value.h"

namespace klutch::cel {

// 128-bit integers for exact nanosecond arithmetic (__extension__ keeps -Wpedantic quiet).
__extension__ typedef __int128 Int128;

// RFC 3339 with fractional seconds only as needed ("2009-02-13T23:31:30Z",
// "2009-02-13T23:31:30.123Z"), always in UTC.
std::string FormatTimestamp(Timestamp t);
// Seconds with fractional part as needed and an "s" suffix ("1.5s", "-3s"), as protobuf
// JSON renders durations.
std::string FormatDuration(Duration d);
// RFC 3339 (with "Z" or a numeric offset); nullopt when malformed or out of CEL's range.
std::optional<Timestamp> ParseTimestamp(std::string_view text);
// Go's duration syntax ("1h2m3.5s", "-1.5ms", "300us"); nullopt when malformed or out of range.
std::optional<Duration> ParseDuration(std::string_view text);
bool TimestampInRange(Timestamp t);
bool DurationInRange(Duration d);

// Number of Unicode code points in a UTF-8 string (invalid bytes count one each).
size_t CodePointCount(std::string_view s);

}  // namespace klutch::cel
