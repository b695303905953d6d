// Reading the fields of a function input, patch or transform (function.cc, transforms.cc):
// one copy, so that the two files can share a translation unit (unity builds).
#pragma once

#include <string>
#include <string_view>

#include "machinery/json.h"
#include "machinery/object.h"

namespace klutch::compose {

// The string at `key` of `t` ("" when absent or not a string).
inline std::string Str(const machinery::Json& t, std::string_view key) {
  return machinery::GetString(t, {key});
}

// The member `key` of `t`; nullptr when absent or null.
inline const machinery::Json* Member(const machinery::Json& t, std::string_view key) {
  const machinery::Json* v = machinery::Find(t, {key});
  return v && !v->is_null() ? v : nullptr;
}

}  // namespace klutch::compose
