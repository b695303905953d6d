// JSON written inline in a test, as a machinery::Json: J(R"({"a": 1})"). Text that does not parse
// fails the running test (naming the text) and gives null, so one typo does not end the suite.
// Header-only, for tests of any module (the fixture namespace keeps it apart from gtest's
// `testing`, which code inside namespace klutch names unqualified).
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "machinery/json.h"

namespace klutch::fixture {

inline machinery::Json J(std::string_view text) {
  auto parsed = machinery::ParseJson(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString() << " in " << text;
  return parsed.ok() ? *parsed : machinery::Json();
}

}  // namespace klutch::fixture
