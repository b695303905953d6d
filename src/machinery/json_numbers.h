// Integers read from JSON without exceptions: a parsed document keeps non-negative integers as
// unsigned and negative ones as signed, and a caller wants one int64_t either way.
#pragma once

#include <cstdint>
#include <optional>

#include "machinery/json.h"

namespace klutch::machinery {

// `v` as an int64_t when it is an integer in range; nullopt for anything else (floats, strings).
inline std::optional<int64_t> AsInt64(const Json& v) {
  if (const auto* i = v.get_ptr<const int64_t*>()) return *i;
  if (const auto* u = v.get_ptr<const uint64_t*>(); u != nullptr && *u <= uint64_t{INT64_MAX}) {
    return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}

}  // namespace klutch::machinery
