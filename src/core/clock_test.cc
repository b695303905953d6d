#include "core/clock.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace klutch::core::clock_test {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// A thread parked on `clock` until `deadline`, as WorkQueue/Informer timers park.
class Sleeper {
 public:
  Sleeper(const Clock& clock, nanoseconds d) : clock_(clock) {
    thread_ = std::thread([this, d] {
      MutexLock lock(mu_);
      const MonoTime deadline = clock_.After(d);
      while (!cancelled_ && clock_.MonotonicNow() < deadline) clock_.WaitUntil(cv_, mu_, deadline);
      woke_ = !cancelled_;
      done_.Notify();
    });
  }
  ~Sleeper() {
    {
      MutexLock lock(mu_);
      cancelled_ = true;
    }
    cv_.SignalAll();
    thread_.join();
  }
  bool Woke(milliseconds within) {
    if (!done_.WaitFor(within)) return false;
    MutexLock lock(mu_);
    return woke_;
  }

 private:
  const Clock& clock_;
  Mutex mu_;
  CondVar cv_;
  bool cancelled_ GUARDED_BY(mu_) = false;
  bool woke_ GUARDED_BY(mu_) = false;
  Notification done_;
  std::thread thread_;
};

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
  const MonoTime mono = clock.MonotonicNow();
  clock.Advance(seconds(61));
  EXPECT_EQ(FormatTime(clock.Now()), "2026-01-01T00:01:01Z");
  EXPECT_EQ(clock.MonotonicNow() - mono, seconds(61)) << "both faces move together";
}

TEST(FakeClock, WakesAWaiterOnlyWhenSimulatedTimeReachesItsDeadline) {
  FakeClock clock;
  Sleeper sleeper(clock, hours(1));
  ASSERT_TRUE(clock.WaitForWaiters(1));
  const uint64_t waits = clock.blocking_waits();
  clock.Advance(std::chrono::minutes(59));
  // The sleeper re-checks and parks again: an hour has not passed.
  ASSERT_TRUE(clock.WaitForWaiters(1));
  for (int i = 0; i < 1000 && clock.blocking_waits() == waits; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_GT(clock.blocking_waits(), waits) << "the waiter did not re-check after Advance";
  EXPECT_FALSE(sleeper.Woke(milliseconds(0)));
  clock.Advance(std::chrono::minutes(1));
  EXPECT_TRUE(sleeper.Woke(seconds(20)));
  EXPECT_EQ(clock.blocked_waiters(), 0);
}

TEST(FakeClock, AdvanceToNextDeadlineJumpsToTheEarliestWaiter) {
  FakeClock clock;
  const MonoTime start = clock.MonotonicNow();
  EXPECT_FALSE(clock.AdvanceToNextDeadline()) << "nobody waits";
  Sleeper late(clock, hours(2));
  Sleeper early(clock, seconds(30));
  ASSERT_TRUE(clock.WaitForWaiters(2));
  ASSERT_TRUE(clock.AdvanceToNextDeadline());
  EXPECT_EQ(clock.MonotonicNow() - start, seconds(30));
  EXPECT_TRUE(early.Woke(seconds(20)));
  EXPECT_FALSE(late.Woke(milliseconds(0)));
}

TEST(FakeClock, HugeWaitsSaturateInsteadOfOverflowing) {
  FakeClock clock;
  Sleeper forever(clock, nanoseconds::max());
  ASSERT_TRUE(clock.WaitForWaiters(1));
  clock.Advance(hours(24 * 365));
  EXPECT_FALSE(forever.Woke(milliseconds(0)));
  EXPECT_GT(clock.After(nanoseconds::max()), clock.MonotonicNow());
}

TEST(FakeClock, WaitForWaitersTimesOutWhenNobodyParks) {
  FakeClock clock;
  EXPECT_FALSE(clock.WaitForWaiters(1, milliseconds(10)));
}

TEST(RealClock, WaitUntilReturnsAtAPassedDeadline) {
  const Clock& clock = RealClock::Get();
  auto waited = std::async(std::launch::async, [&] {
    Mutex mu;
    CondVar cv;
    MutexLock lock(mu);
    clock.WaitUntil(cv, mu, clock.MonotonicNow() - seconds(1));
  });
  EXPECT_EQ(waited.wait_for(seconds(20)), std::future_status::ready)
      << "a wait for a deadline in the past blocked";
}

}  // namespace
}  // namespace klutch::core::clock_test
