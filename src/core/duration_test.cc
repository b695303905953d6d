#include "core/duration.h"

#include <gtest/gtest.h>

#include <string>

namespace klutch::core::duration_test {
namespace {

TEST(ParseGoDuration, ReadsGoSyntax) {
  struct Case {
    std::string text;
    GoDuration want;
  };
  const Case cases[] = {
      {"0", {0, 0}},
      {"+0", {0, 0}},
      {"-0", {0, 0}},
      {"0s", {0, 0}},
      {"5s", {5, 0}},
      {"300ms", {0, 300000000}},
      {"-1.5h", {-5400, 0}},
      {"2h45m", {9900, 0}},
      {"1h2m3.5s", {3723, 500000000}},
      {"1.s", {1, 0}},
      {".5s", {0, 500000000}},
      {"1ns", {0, 1}},
      {"1us", {0, 1000}},
      {"1\xC2\xB5s", {0, 1000}},  // micro sign
      {"1\xCE\xBCs", {0, 1000}},  // Greek mu
      {"-1.5ms", {0, -1500000}},
      {"1.0000000009s", {1, 0}},  // finer than a nanosecond is dropped
      {"0.1234567891234567891234s", {0, 123456789}},
      {"9223372036854775807ns", {9223372036, 854775807}},
      {"-9223372036854775808ns", {-9223372036, -854775808}},
      {"2562047h47m16.854775807s", {9223372036, 854775807}},
  };
  for (const Case& c : cases) {
    Result<GoDuration> got = ParseGoDuration(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.want) << c.text << " -> " << got->seconds << "s " << got->nanos << "ns";
  }
}

TEST(ParseGoDuration, RefusesWhatGoRefusesWithGoWording) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"", "time: invalid duration \"\""},
      {"-", "time: invalid duration \"-\""},
      {"1", "time: missing unit in duration \"1\""},
      {"1h2", "time: missing unit in duration \"1h2\""},
      {"1d", "time: unknown unit \"d\" in duration \"1d\""},
      {"1 s", "time: unknown unit \" s\" in duration \"1 s\""},
      {"1H", "time: unknown unit \"H\" in duration \"1H\""},
      {".s", "time: invalid duration \".s\""},
      {"s", "time: invalid duration \"s\""},
      {"1s-2s", "time: unknown unit \"s-\" in duration \"1s-2s\""},
      {"--1s", "time: invalid duration \"--1s\""},
      {"9223372036854775808ns", "time: invalid duration \"9223372036854775808ns\""},
      {"-9223372036854775809ns", "time: invalid duration \"-9223372036854775809ns\""},
      {"2562048h", "time: invalid duration \"2562048h\""},
      {"99999999999999999999999999999999999h",
       "time: invalid duration \"99999999999999999999999999999999999h\""},
  };
  for (const Case& c : cases) {
    Result<GoDuration> got = ParseGoDuration(c.text);
    ASSERT_FALSE(got.ok()) << c.text;
    EXPECT_EQ(got.status().reason(), Reason::kBadRequest);
    EXPECT_EQ(got.status().message(), c.message);
  }
}

TEST(ParseGoDuration, CallersMayNarrowOrWidenTheRange) {
  const DurationRange positive = {{0, 1}, kGoDurationRange.max};
  EXPECT_TRUE(ParseGoDuration("1ns", positive).ok());
  EXPECT_FALSE(ParseGoDuration("0s", positive).ok());
  EXPECT_FALSE(ParseGoDuration("-1h", positive).ok());
  const DurationRange ten_thousand_years = {{-315576000000, 0}, {315576000000, 0}};
  Result<GoDuration> wide = ParseGoDuration("87600000h", ten_thousand_years);
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->seconds, 315360000000);
  EXPECT_FALSE(ParseGoDuration("87600000h").ok());
  EXPECT_FALSE(ParseGoDuration("87700000h", ten_thousand_years).ok());
}

}  // namespace
}  // namespace klutch::core::duration_test
