#include "reconcile/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/clock.h"
#include "core/sync.h"

namespace klutch::reconcile::controller_test {
namespace {

TEST(Request, KeysRoundTripWithAndWithoutAResource) {
  for (const Request& r : {Request{"ns", "a"}, Request{"", "cluster-wide"},
                           Request{"ns", "b", "deployments.apps"}, Request{"", "c", "crds"}}) {
    EXPECT_EQ(Request::FromKey(r.Key()), r) << r.Key();
  }
  EXPECT_EQ(Request({"ns", "b", "deployments.apps"}).Key(), "deployments.apps#ns/b");
}

TEST(Controller, StopReconcilesNothingMoreThanWhatIsRunning) {
  std::atomic<int> calls{0};
  core::Notification started, release;
  FuncReconciler reconciler([&](const Request&) -> core::Result<Result> {
    if (++calls == 1) {
      started.Notify();
      release.WaitFor(std::chrono::seconds(30));
    }
    return Result::Done();
  });
  Controller c("klutch-test-stop", reconciler, {.workers = 1});
  for (int i = 0; i < 100; ++i) c.queue().Add("ns/obj-" + std::to_string(i));
  c.Start();
  ASSERT_TRUE(started.WaitFor(std::chrono::seconds(30)));
  std::thread stopper([&] { c.Stop(); });
  // Once the queue shuts down, let the running reconcile finish.
  while (!c.queue().ShuttingDown()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  release.Notify();
  stopper.join();
  EXPECT_EQ(calls.load(), 1);  // the 99 queued keys were not reconciled after Stop()
}

TEST(Controller, ErrorsRequeueAndSuccessForgets) {
  std::atomic<int> calls{0};
  core::Notification done;
  FuncReconciler reconciler([&](const Request& r) -> core::Result<Result> {
    EXPECT_EQ(r.name, "x");
    if (++calls < 3) return core::Unavailable("not yet");
    done.Notify();
    return Result::Done();
  });
  Controller c("klutch-test-retry", reconciler);
  c.queue().Add("ns/x");
  c.Start();
  ASSERT_TRUE(done.WaitFor(std::chrono::seconds(30)));
  c.Stop();
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(c.queue().NumRequeues("ns/x"), 0);
}

TEST(MapFuncs, ControllingOwnerAndLabels) {
  Json dep = Json::parse(R"({"metadata":{"namespace":"n","labels":{"owner":"o1"},
    "ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"not-controller"},
                       {"apiVersion":"apps/v1","kind":"Deployment","name":"web","controller":true}]}})");
  EXPECT_EQ(MapToControllingOwner("apps", "Deployment")(dep), (std::vector<Request>{{"n", "web"}}));
  EXPECT_TRUE(MapToControllingOwner("", "ConfigMap")(dep).empty());
  EXPECT_EQ(MapByLabels("", "owner")(dep), (std::vector<Request>{{"n", "o1"}}));
  EXPECT_TRUE(MapByLabels("", "missing")(dep).empty());
}

TEST(Controller, BacksOffErrorsAndHonoursRequeueAfterInSimulatedTime) {
  core::FakeClock clock;
  std::atomic<int> calls{0};
  FuncReconciler reconciler([&](const Request&) -> core::Result<Result> {
    int n = ++calls;
    if (n <= 2) return core::Unavailable("not yet");  // backoff 5 ms, then 10 ms
    if (n == 3) return Result::RequeueAfter(std::chrono::minutes(10));
    return Result::Done();
  });
  Controller c("klutch-test-time", reconciler, {.clock = &clock});
  c.queue().Add("ns/x");
  c.Start();
  auto wait_calls = [&](int n) {
    for (int i = 0; i < 20000 && calls.load() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return calls.load();
  };
  ASSERT_EQ(wait_calls(1), 1);
  // The retry waits on the clock: it does not happen before 5 ms of simulated time.
  ASSERT_TRUE(clock.WaitForWaiters(1));
  EXPECT_EQ(calls.load(), 1);
  clock.Advance(std::chrono::milliseconds(5));
  ASSERT_EQ(wait_calls(2), 2);
  ASSERT_TRUE(clock.WaitForWaiters(1));
  clock.Advance(std::chrono::milliseconds(9));
  ASSERT_TRUE(clock.WaitForWaiters(1));
  EXPECT_EQ(calls.load(), 2) << "the second backoff is 10 ms";
  clock.Advance(std::chrono::milliseconds(1));
  ASSERT_EQ(wait_calls(3), 3);
  // RequeueAfter forgets the backoff and comes back after exactly its delay.
  ASSERT_TRUE(clock.WaitForWaiters(1));
  EXPECT_EQ(c.queue().NumRequeues("ns/x"), 0);
  clock.Advance(std::chrono::minutes(9));
  ASSERT_TRUE(clock.WaitForWaiters(1));
  EXPECT_EQ(calls.load(), 3);
  clock.Advance(std::chrono::minutes(1));
  EXPECT_EQ(wait_calls(4), 4);
  c.Stop();
}

// A wait computed from a deadline (a cooldown, a grace period) comes out as zero or less when
// the deadline has just passed; that must mean "again now", never "done" (the compose breaker
// and the namespace finalizer each lost a key so before this was the rule).
TEST(Controller, ARequeueAfterOfZeroOrLessComesBackAtOnce) {
  EXPECT_EQ(Result::RequeueAfter(std::chrono::milliseconds(0)).requeue_after.count(), 1);
  EXPECT_EQ(Result::RequeueAfter(std::chrono::milliseconds(-30)).requeue_after.count(), 1);
  EXPECT_EQ(Result::RequeueAfter(std::chrono::milliseconds(7)).requeue_after.count(), 7);
  core::FakeClock clock;
  std::atomic<int> calls{0};
  FuncReconciler reconciler([&](const Request&) -> core::Result<Result> {
    if (++calls == 1) return Result::RequeueAfter(std::chrono::milliseconds(0));
    return Result::Done();
  });
  Controller c("klutch-test-zero-wait", reconciler, {.clock = &clock});
  c.queue().Add("ns/x");
  c.Start();
  ASSERT_TRUE(clock.WaitForWaiters(1));
  EXPECT_EQ(calls.load(), 1);
  clock.Advance(std::chrono::milliseconds(1));
  for (int i = 0; i < 20000 && calls.load() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  EXPECT_EQ(calls.load(), 2);
  c.Stop();
}

}  // namespace
}  // namespace klutch::reconcile::controller_test
