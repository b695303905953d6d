// Readable, stable names for value-parameterized tests, as INSTANTIATE_TEST_SUITE_P's fourth
// argument: without one gtest numbers the cases, and ctest shows the parameter's bytes (pointer
// values that change per run) in the test name. Header-only, for tests of any module (the
// fixture namespace keeps it apart from gtest's `testing`).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace klutch::fixture {

// `text` as a gtest name: each run of characters other than [A-Za-z0-9] becomes one '_', none
// at either end; "empty" when nothing is left. Names must stay unique within a table (gtest
// refuses duplicates when the binary starts).
inline std::string ParamName(std::string_view text) {
  std::string out;
  bool gap = false;
  for (char c : text) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!word) {
      gap = true;
      continue;
    }
    if (gap && !out.empty()) out += '_';
    gap = false;
    out += c;
  }
  return out.empty() ? "empty" : out;
}

// The same, prefixed by the case's index ("07_app_web"), for tables of inputs whose texts
// collide once punctuation is dropped ("app=web", "app==web").
inline std::string ParamName(size_t index, std::string_view text) {
  std::string number = std::to_string(index);
  if (number.size() < 2) number.insert(0, 2 - number.size(), '0');
  return number + "_" + ParamName(text);
}

}  // namespace klutch::fixture
