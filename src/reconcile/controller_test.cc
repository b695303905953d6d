#include "reconcile/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/sync.h"

namespace klutch::reconcile {
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

}  // namespace
}  // namespace klutch::reconcile
