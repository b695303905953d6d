// Helpers shared by the files of src/cel (not part of its public API).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "cel/value.h"

namespace klutch::cel {

// 128-bit integers for exact nanosecond arithmetic (__extension__ keeps -Wpedantic quiet).
__extension__ typedef __int128 Int128;

// Number of Unicode code points in a UTF-8 string (invalid bytes count one each).
size_t CodePointCount(std::string_view s);

}  // namespace klutch::cel
