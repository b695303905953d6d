#include "core/clock.h"

#include <gtest/gtest.h>

namespace klutch::core {
namespace {

using std::chrono::seconds;

TEST(Clock, FormatsAndParsesRfc3339) {
  auto t = ParseTime("2026-11-22T05:02:18Z");
  ASSERT_TRUE(t);
  EXPECT_EQ(FormatTime(*t), "2026-11-22T05:02:18Z");
  auto m = ParseTime("2026-11-22T05:02:18.123456Z");
  ASSERT_TRUE(m);
  EXPECT_EQ(FormatMicroTime(*m), "2026-11-22T05:02:18.123456Z");
  auto off = ParseTime("2026-11-22T07:02:18+02:00");
  ASSERT_TRUE(off);
  EXPECT_EQ(FormatTime(*off), "2026-11-22T05:02:18Z");
}

TEST(Clock, RejectsMalformedTimes) {
  for (const char* bad : {"", "2026-11-22", "2026-13-01T00:00:00Z", "2026-11-22T05:02:18",
                          "2026-11-22T05:02:18Zjunk", "2026-11-22T05:02:18."}) {
    EXPECT_FALSE(ParseTime(bad)) << bad;
  }
}

TEST(Clock, HumanDurationMatchesKubectl) {
  EXPECT_EQ(HumanDuration(seconds(3)), "3s");
  EXPECT_EQ(HumanDuration(seconds(119)), "119s");
  EXPECT_EQ(HumanDuration(seconds(150)), "2m30s");
  EXPECT_EQ(HumanDuration(seconds(300)), "5m");
  EXPECT_EQ(HumanDuration(seconds(45 * 60)), "45m");
  EXPECT_EQ(HumanDuration(seconds(5 * 3600)), "5h");
  EXPECT_EQ(HumanDuration(seconds(5 * 3600 + 120)), "5h2m");
  EXPECT_EQ(HumanDuration(seconds(30 * 3600)), "30h");
  EXPECT_EQ(HumanDuration(seconds(3 * 86400)), "3d");
  EXPECT_EQ(HumanDuration(seconds(100 * 86400)), "100d");
  EXPECT_EQ(HumanDuration(seconds(-5)), "<invalid>");
}

TEST(FakeClock, AdvancesOnlyByHand) {
  FakeClock clock(*ParseTime("2026-01-01T00:00:00Z"));
  clock.Advance(seconds(61));
  EXPECT_EQ(FormatTime(clock.Now()), "2026-01-01T00:01:01Z");
}

}  // namespace
}  // namespace klutch::core
