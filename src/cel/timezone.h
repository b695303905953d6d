// Time-zone offsets for CEL's timestamp accessors (`ts.getHours('Europe/Berlin')`).
//
// Zones are fixed offsets ("+05:30", "-08:00", "UTC") or IANA names read from the system's
// tz database (/usr/share/zoneinfo, Debian's tzdata), with the POSIX rule in the file's
// footer for instants past its last transition. Parsed zones are cached per process.
// Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace klutch::cel {

// The zone's offset from UTC in seconds at the instant `utc_seconds`; nullopt when the
// zone is unknown or malformed.
std::optional<int64_t> UtcOffsetAt(const std::string& zone, int64_t utc_seconds);

}  // namespace klutch::cel
