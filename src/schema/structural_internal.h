// Helpers the sources of structural.h (structural.cc, openapi_validation.cc,
// structural_walks.cc) share for reading schema nodes and values. Not a public API.
#pragma once

#include <cstdint>
#include <limits>

#include "machinery/json.h"

namespace klutch::schema::internal {

using machinery::Json;

// Whether schema node `node` has `key` set to true.
inline bool Bool(const Json* node, const char* key) {
  if (node == nullptr) return false;
  auto it = node->find(key);
  return it != node->end() && it->is_boolean() && it->get<bool>();
}

// Member `key` of schema node `node`; nullptr when absent or `node` is not an object.
inline const Json* Get(const Json* node, const char* key) {
  if (node == nullptr || !node->is_object()) return nullptr;
  auto it = node->find(key);
  return it == node->end() ? nullptr : &*it;
}

// Go's JSON decoding into interface{}: integers that fit int64 stay int64, all other
// numbers are float64.
inline bool IsInt(const Json& v) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return true;
  return v.is_number_unsigned() &&
         v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

}  // namespace klutch::schema::internal
