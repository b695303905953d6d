#include "client/workqueue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace klutch::client::workqueue_test {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// Waits (polling) until `pred` holds; false when `limit` passed first. Used instead of sleeps.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::steady_clock::duration limit = seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(microseconds(200));
  }
  return true;
}

// Get() for single-threaded tests: fails instead of blocking forever when nothing is queued.
std::optional<std::string> GetQueued(WorkQueue& q) {
  if (q.Len() == 0 && !q.ShuttingDown()) {
    ADD_FAILURE() << "Get() would block: nothing is queued";
    return std::nullopt;
  }
  return q.Get();
}

WorkQueueOptions FakeOptions(const core::FakeClock& clock) {
  WorkQueueOptions o;
  o.name = "klutch-test-widget";
  o.clock = &clock;
  o.rate_limiter = NewItemExponentialRateLimiter(milliseconds(1), seconds(1));
  return o;
}

// For checks that something did NOT happen yet: advances `clock` by `d` once the queue's timer
// thread is parked on it, and returns after the timer has seen the new time and parked again
// (so `d` must leave something waiting).
void AdvanceAndRepark(core::FakeClock& clock, nanoseconds d) {
  ASSERT_TRUE(WaitFor([&] { return clock.blocked_waiters() == 1; }));
  uint64_t waits = clock.blocking_waits();
  clock.Advance(d);
  ASSERT_TRUE(WaitFor([&] { return clock.blocking_waits() > waits; }));
}

TEST(WorkQueue, AddDeduplicatesQueuedItems) {
  core::FakeClock clock;
  WorkQueue q(FakeOptions(clock));
  q.Add("ns/a");
  q.Add("ns/b");
  q.Add("ns/a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(GetQueued(q), "ns/a");
  EXPECT_EQ(GetQueued(q), "ns/b");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueue, AddWhileProcessingRequeuesAfterDone) {
  core::FakeClock clock;
  WorkQueue q(FakeOptions(clock));
  q.Add("a");
  ASSERT_EQ(GetQueued(q), "a");
  q.Add("a");
  q.Add("a");
  EXPECT_EQ(q.Len(), 0u) << "an item being processed must not be handed to a second worker";
  q.Done("a");
  EXPECT_EQ(q.Len(), 1u);
  ASSERT_EQ(GetQueued(q), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0u) << "processed once per batch of adds";
}

TEST(WorkQueue, DoneForAnItemNotBeingProcessedIsIgnored) {
  core::FakeClock clock;
  WorkQueue q(FakeOptions(clock));
  q.Add("a");
  q.Done("a");
  q.Done("never-added");
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(GetQueued(q), "a");
}

TEST(WorkQueue, AddAfterQueuesInReadyTimeOrder) {
  core::FakeClock clock;
  WorkQueue q(FakeOptions(clock));
  q.AddAfter("a", milliseconds(30));
  q.AddAfter("b", milliseconds(10));
  q.AddAfter("c", milliseconds(20));
  q.AddAfter("now", nanoseconds(0));
  EXPECT_EQ(q.Len(), 1u) << "a non-positive delay adds at once";
  EXPECT_EQ(GetQueued(q), "now");

  AdvanceAndRepark(clock, milliseconds(9));
  EXPECT_EQ(q.Len(), 0u) << "nothing is due before its time";
  clock.Advance(milliseconds(1));
  ASSERT_TRUE(WaitFor([&] { return q.Len() == 1; }));
  clock.Advance(milliseconds(20));
  ASSERT_TRUE(WaitFor([&] { return q.Len() == 3; }));
  EXPECT_EQ(GetQueued(q), "b");
  EXPECT_EQ(GetQueued(q), "c");
  EXPECT_EQ(GetQueued(q), "a");
}

TEST(WorkQueue, AddAfterOnlyMovesAWaitingItemEarlier) {
  core::FakeClock clock;
  WorkQueue q(FakeOptions(clock));
  q.AddAfter("earlier", milliseconds(50));
  q.AddAfter("earlier", milliseconds(10));
  q.AddAfter("later", milliseconds(10));
  q.AddAfter("later", milliseconds(50));
  clock.Advance(milliseconds(10));
  ASSERT_TRUE(WaitFor([&] { return q.Len() == 2; }));
  std::vector<std::string> got = {*GetQueued(q), *GetQueued(q)};
  EXPECT_EQ(got, (std::vector<std::string>{"earlier", "later"}));
  q.Done("earlier");
  q.Done("later");
  // Neither is still waiting: the timer adds due items in one pass in deadline order, so once
  // the marker (due after the old deadlines) is queued, stale entries would be queued too.
  q.AddAfter("marker", milliseconds(100));
  clock.Advance(milliseconds(100));
  ASSERT_TRUE(WaitFor([&] { return q.Len() >= 1; }));
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(GetQueued(q), "marker");
}

TEST(WorkQueue, DelayedItemIsDeduplicatedWithQueuedCopy) {
  core::FakeClock clock;
  WorkQueue q(FakeOptions(clock));
  q.Add("a");
  q.AddAfter("a", milliseconds(5));
  q.AddAfter("z", milliseconds(5));  // due with "a"; queued in the same timer pass
  clock.Advance(milliseconds(5));
  ASSERT_TRUE(WaitFor([&] { return q.Len() >= 2; }));
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(GetQueued(q), "a");
  EXPECT_EQ(GetQueued(q), "z");
}

TEST(WorkQueue, AddRateLimitedBacksOffUntilForget) {
  core::FakeClock clock;
  WorkQueue q(FakeOptions(clock));  // exponential 1ms .. 1s
  q.AddRateLimited("a");            // due after 1ms
  EXPECT_EQ(q.NumRequeues("a"), 1);
  clock.Advance(milliseconds(1));
  ASSERT_TRUE(WaitFor([&] { return q.Len() == 1; }));
  ASSERT_EQ(GetQueued(q), "a");
  q.Done("a");

  q.AddRateLimited("a");  // due after 2ms
  EXPECT_EQ(q.NumRequeues("a"), 2);
  AdvanceAndRepark(clock, milliseconds(1));
  EXPECT_EQ(q.Len(), 0u);
  clock.Advance(milliseconds(1));
  ASSERT_TRUE(WaitFor([&] { return q.Len() == 1; }));

  q.Forget("a");
  EXPECT_EQ(q.NumRequeues("a"), 0);
}

TEST(RateLimiter, ItemExponentialDoublesPerItemUpToMax) {
  struct Case {
    nanoseconds base, max;
    std::vector<nanoseconds> want;
  };
  std::vector<Case> cases = {
      {milliseconds(5),
       seconds(1000),
       {milliseconds(5), milliseconds(10), milliseconds(20), milliseconds(40), milliseconds(80)}},
      {milliseconds(1),
       milliseconds(5),
       {milliseconds(1), milliseconds(2), milliseconds(4), milliseconds(5), milliseconds(5)}},
      {seconds(1), seconds(1), {seconds(1), seconds(1)}},
  };
  for (const auto& c : cases) {
    auto rl = NewItemExponentialRateLimiter(c.base, c.max);
    for (size_t i = 0; i < c.want.size(); ++i) {
      EXPECT_EQ(rl->When("x"), c.want[i]) << "attempt " << i << " base " << c.base.count();
    }
    EXPECT_EQ(rl->NumRequeues("x"), static_cast<int>(c.want.size()));
    EXPECT_EQ(rl->When("other"), c.base) << "items back off independently";
    rl->Forget("x");
    EXPECT_EQ(rl->NumRequeues("x"), 0);
    EXPECT_EQ(rl->When("x"), c.base);
  }
}

TEST(RateLimiter, ItemExponentialSaturatesInsteadOfOverflowing) {
  auto rl = NewItemExponentialRateLimiter(milliseconds(5), seconds(1000));
  nanoseconds last{};
  for (int i = 0; i < 200; ++i) last = rl->When("x");
  EXPECT_EQ(last, seconds(1000));
  auto huge = NewItemExponentialRateLimiter(nanoseconds(1), nanoseconds::max());
  for (int i = 0; i < 100; ++i) last = huge->When("x");
  EXPECT_EQ(last, nanoseconds::max());
}

TEST(RateLimiter, BucketAllowsBurstThenSpacesByQps) {
  core::FakeClock clock;
  auto rl = NewBucketRateLimiter(10, 3, clock);
  EXPECT_EQ(rl->When("a"), nanoseconds(0));
  EXPECT_EQ(rl->When("b"), nanoseconds(0));
  EXPECT_EQ(rl->When("c"), nanoseconds(0));
  EXPECT_EQ(rl->When("d"), milliseconds(100));
  EXPECT_EQ(rl->When("e"), milliseconds(200));
  clock.Advance(milliseconds(100));  // pays one token of the debt of two
  EXPECT_EQ(rl->When("f"), milliseconds(200));
  clock.Advance(seconds(10));  // refills, but never above the burst
  EXPECT_EQ(rl->When("g"), nanoseconds(0));
  EXPECT_EQ(rl->When("h"), nanoseconds(0));
  EXPECT_EQ(rl->When("i"), nanoseconds(0));
  EXPECT_EQ(rl->When("j"), milliseconds(100));
  EXPECT_EQ(rl->NumRequeues("a"), 0);
  rl->Forget("a");  // no per-item state
  EXPECT_EQ(rl->When("a"), milliseconds(200));
}

TEST(RateLimiter, BucketWithoutRefillOrBurstNeverAdmitsMore) {
  core::FakeClock clock;
  auto no_refill = NewBucketRateLimiter(0, 1, clock);
  EXPECT_EQ(no_refill->When("a"), nanoseconds(0));
  EXPECT_EQ(no_refill->When("a"), nanoseconds::max());
  clock.Advance(hours(1));
  EXPECT_EQ(no_refill->When("a"), nanoseconds::max());
  auto no_burst = NewBucketRateLimiter(10, 0, clock);
  EXPECT_EQ(no_burst->When("a"), nanoseconds::max());
  auto unlimited = NewBucketRateLimiter(std::numeric_limits<double>::infinity(), 0, clock);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(unlimited->When("a"), nanoseconds(0));
}

TEST(RateLimiter, MaxOfTakesTheLargestDelayAndCount) {
  core::FakeClock clock;
  std::vector<std::unique_ptr<RateLimiter>> parts;
  parts.push_back(NewItemExponentialRateLimiter(milliseconds(1), seconds(1)));
  parts.push_back(NewBucketRateLimiter(1, 1, clock));
  auto rl = NewMaxOfRateLimiter(std::move(parts));
  EXPECT_EQ(rl->When("a"), milliseconds(1));  // bucket has a token; exponential wins
  EXPECT_EQ(rl->When("b"), seconds(1));       // bucket empty: 1 qps
  EXPECT_EQ(rl->When("a"), seconds(2));
  EXPECT_EQ(rl->NumRequeues("a"), 2);
  rl->Forget("a");
  EXPECT_EQ(rl->NumRequeues("a"), 0);
  EXPECT_EQ(NewMaxOfRateLimiter({})->When("a"), nanoseconds(0));
}

TEST(RateLimiter, DefaultControllerCombinesBackoffAndBucket) {
  core::FakeClock clock;
  auto rl = DefaultControllerRateLimiter(clock);
  EXPECT_EQ(rl->When("x"), milliseconds(5));
  EXPECT_EQ(rl->When("x"), milliseconds(10));
  EXPECT_EQ(rl->When("x"), milliseconds(20));
  for (int i = 3; i < 100; ++i) rl->When("item-" + std::to_string(i));  // rest of the burst
  EXPECT_EQ(rl->When("fresh"), milliseconds(100)) << "bucket: 10 qps once the burst of 100 is used";
  for (int i = 0; i < 30; ++i) rl->When("x");
  EXPECT_EQ(rl->When("x"), seconds(1000)) << "backoff capped at 1000s";
}

TEST(WorkQueue, EventsReportAddsLatencyAndWorkDuration) {
  core::FakeClock clock;
  std::mutex mu;
  std::vector<WorkQueueEvent> events;
  WorkQueueOptions o = FakeOptions(clock);
  o.on_event = [&](const WorkQueueEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  };
  WorkQueue q(std::move(o));
  q.Add("a");
  q.Add("a");  // de-duplicated: no event
  clock.Advance(milliseconds(5));
  ASSERT_EQ(GetQueued(q), "a");
  clock.Advance(milliseconds(7));
  q.Done("a");
  q.AddAfter("b", nanoseconds(0));

  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(events.size(), 5u);
  using T = WorkQueueEvent::Type;
  EXPECT_EQ(events[0].type, T::kAdd);
  EXPECT_EQ(events[0].depth, 1u);
  EXPECT_EQ(events[0].queue, "klutch-test-widget");
  EXPECT_EQ(events[1].type, T::kGet);
  EXPECT_EQ(events[1].depth, 0u);
  EXPECT_EQ(events[1].queue_latency, milliseconds(5));
  EXPECT_EQ(events[2].type, T::kDone);
  EXPECT_EQ(events[2].queue_latency, milliseconds(5));
  EXPECT_EQ(events[2].work_duration, milliseconds(7));
  EXPECT_EQ(events[3].type, T::kRetry);
  EXPECT_EQ(events[3].item, "b");
  EXPECT_EQ(events[4].type, T::kAdd);
  EXPECT_EQ(events[4].depth, 1u);
}

TEST(WorkQueue, ShutDownUnblocksGetInOtherThreads) {
  WorkQueue q(WorkQueueOptions{});
  std::vector<std::future<std::optional<std::string>>> getters;
  for (int i = 0; i < 3; ++i)
    getters.push_back(std::async(std::launch::async, [&] { return q.Get(); }));
  q.ShutDown();
  for (auto& g : getters) {
    ASSERT_EQ(g.wait_for(seconds(20)), std::future_status::ready);
    EXPECT_EQ(g.get(), std::nullopt);
  }
  EXPECT_TRUE(q.ShuttingDown());
  q.Add("late");
  EXPECT_EQ(q.Len(), 0u) << "adds are ignored once shutting down";
  EXPECT_EQ(q.Get(), std::nullopt);
}

TEST(WorkQueue, ShutDownHandsOutQueuedItemsAndDropsDelayedOnes) {
  core::FakeClock clock;
  WorkQueue q(FakeOptions(clock));
  q.Add("a");
  q.Add("b");
  q.AddAfter("delayed", milliseconds(1));
  ASSERT_EQ(GetQueued(q), "a");
  q.Add("a");  // dirty while processing
  q.ShutDown();
  clock.Advance(seconds(1));
  EXPECT_EQ(GetQueued(q), "b");
  q.Done("a");  // requeued even while shutting down, so the latest add is not lost
  EXPECT_EQ(GetQueued(q), "a");
  EXPECT_EQ(GetQueued(q), std::nullopt);
}

TEST(WorkQueue, ShutDownWithDrainWaitsForInFlightItems) {
  WorkQueue q(WorkQueueOptions{});
  q.Add("a");
  ASSERT_EQ(q.Get(), "a");
  auto drained = std::async(std::launch::async, [&] { q.ShutDownWithDrain(); });
  ASSERT_TRUE(WaitFor([&] { return q.ShuttingDown(); }));
  EXPECT_EQ(drained.wait_for(milliseconds(50)), std::future_status::timeout)
      << "must wait while an item is being processed";
  q.Done("a");
  EXPECT_EQ(drained.wait_for(seconds(20)), std::future_status::ready);

  WorkQueue idle(WorkQueueOptions{});
  idle.ShutDownWithDrain();  // nothing in flight: returns at once
  EXPECT_TRUE(idle.ShuttingDown());
}

TEST(WorkQueue, DestructorStopsTheTimerWithItemsWaiting) {
  // Simulated time never reaches the hour: a destructor that waited for the timer's items
  // would never return.
  core::FakeClock clock;
  std::atomic<int> adds{0};
  WorkQueueOptions o = FakeOptions(clock);
  o.on_event = [&](const WorkQueueEvent& e) {
    if (e.type == WorkQueueEvent::Type::kAdd) ++adds;
  };
  auto q = std::make_unique<WorkQueue>(std::move(o));
  q->AddAfter("far", hours(1));
  q->AddAfter("never", nanoseconds::max());
  ASSERT_TRUE(clock.WaitForWaiters(1)) << "the timer thread never parked on the clock";
  auto destroyed = std::async(std::launch::async, [&] { q.reset(); });
  if (destroyed.wait_for(seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the destructor waited for delayed items instead of stopping the timer";
    // The future's destructor would wait for the stuck destructor: end the test binary now
    // with the failure rather than hang until the ctest timeout.
    std::fflush(stdout);
    std::_Exit(1);
  }
  EXPECT_EQ(clock.blocked_waiters(), 0) << "the timer thread is still parked on the clock";
  EXPECT_EQ(adds.load(), 0) << "delayed items were queued on shutdown";
}

TEST(WorkQueue, ConcurrentProducersAndConsumersProcessEveryAddOneWorkerPerItem) {
  constexpr int kKeys = 64;
  constexpr int kProducers = 4;
  constexpr int kConsumers = 4;
  constexpr int kAddsPerProducer = 3000;

  WorkQueueOptions o;
  o.name = "klutch-test-stress";
  o.rate_limiter = NewItemExponentialRateLimiter(microseconds(1), microseconds(200));
  WorkQueue q(std::move(o));

  // version[k] is bumped before every add of k; a worker records the version it saw. Every add
  // must be followed by a processing that sees at least that version.
  std::vector<std::atomic<int>> version(kKeys), seen(kKeys), in_flight(kKeys);
  std::atomic<int> overlaps{0}, processed{0};

  std::vector<std::thread> consumers;
  for (int c = 0; c < kConsumers; ++c) {
    consumers.emplace_back([&] {
      while (auto item = q.Get()) {
        int k = std::stoi(*item);
        if (in_flight[k].fetch_add(1) != 0) overlaps++;
        int v = version[k].load();
        if (v > seen[k].load()) seen[k].store(v);
        for (int spin = 0; spin < 50; ++spin) std::this_thread::yield();  // "work"
        in_flight[k].fetch_sub(1);
        processed++;
        // Some items fail a few times (rate-limited retries through the timer), then succeed.
        if (v % 5 == 0 && q.NumRequeues(*item) < 3) {
          q.AddRateLimited(*item);
        } else {
          q.Forget(*item);
        }
        q.Done(*item);
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kAddsPerProducer; ++i) {
        int k = (i * 7 + p * 13) % kKeys;
        version[k]++;
        if (i % 3 == 0) {
          q.AddAfter(std::to_string(k), microseconds(i % 50));
        } else {
          q.Add(std::to_string(k));
        }
        std::this_thread::yield();
      }
    });
  }
  for (auto& t : producers) t.join();
  // Quiescent: every add seen by a later processing, and every retry chain ended in success.
  bool quiescent = WaitFor([&] {
    for (int k = 0; k < kKeys; ++k) {
      if (seen[k].load() < version[k].load() || q.NumRequeues(std::to_string(k)) != 0) {
        return false;
      }
    }
    return true;
  });
  q.ShutDown();
  for (auto& t : consumers) t.join();
  EXPECT_TRUE(quiescent) << "an add was never followed by processing";
  EXPECT_EQ(overlaps.load(), 0) << "two workers held the same item at once";
  EXPECT_GE(processed.load(), kKeys);
  EXPECT_EQ(q.Len(), 0u);
}

}  // namespace
}  // namespace klutch::client::workqueue_test
