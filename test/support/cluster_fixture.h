// ClusterTest: a gtest fixture with an in-process TestCluster whose built-in controllers run
// on a FakeClock, and helpers to write objects and wait for what controllers do. Requeues
// and backoff fire only when the test moves simulated time (AdvanceUntil).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "client/dynamic.h"
#include "core/clock.h"
#include "machinery/object.h"
#include "test/support/test_cluster.h"
#include "test/support/wait.h"

namespace klutch::testing {

class ClusterTest : public ::testing::Test {
 protected:
  using Json = machinery::Json;

  void SetUp() override { StartCluster(); }

  void StartCluster(TestClusterOptions options = {}) {
    if (!options.clock) options.clock = &clock_;
    auto cluster = TestCluster::Start(std::move(options));
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = std::move(*cluster);
  }

  client::ResourceClient Resource(const client::GroupVersionResource& gvr,
                                  const std::string& ns = "") {
    return client::ResourceClient(cluster_->admin(), gvr, ns);
  }

  // Creates `object` (namespace from its metadata); the created object, or null after
  // recording a test failure.
  Json Create(const client::GroupVersionResource& gvr, const Json& object) {
    auto r = Resource(gvr, machinery::Namespace(object)).Create(object);
    EXPECT_TRUE(r.ok()) << r.status().ToString() << " creating " << object.dump();
    return r.ok() ? *r : Json();
  }

  bool Exists(const client::GroupVersionResource& gvr, const std::string& ns,
              const std::string& name) {
    return Resource(gvr, ns).Get(name).ok();
  }

  // Polls `done` (real time, bounded) while moving simulated time forward in `step`s, so
  // requeues and backoff of the controllers fire.
  bool AdvanceUntil(const std::function<bool()>& done,
                    std::chrono::milliseconds step = std::chrono::milliseconds(100)) {
    return Eventually([&] {
      if (done()) return true;
      clock_.Advance(step);
      return false;
    });
  }

  // Advances simulated time by `step` and waits (in real time, bounded) until the threads
  // parked on the clock have woken and parked again, so whatever the new time asked of the
  // controllers is done: a test can then assert that something did not happen. A thread
  // whose timer fired for the last time (a one-off requeue, a backoff that ended) parks no
  // more: once the clock has seen new waits, the parked count and the wait count standing
  // still for 300 ms also count as settled (a snapshot taken mid-backoff counted one waiter
  // too many and failed under load).
  bool AdvanceAndSettle(std::chrono::nanoseconds step) {
    const int parked = clock_.blocked_waiters();
    const uint64_t waits = clock_.blocking_waits();
    clock_.Advance(step);
    int last_parked = -1;
    uint64_t last_waits = 0;
    auto still_since = std::chrono::steady_clock::now();
    return Eventually(
        [&] {
          const int now_parked = clock_.blocked_waiters();
          const uint64_t now_waits = clock_.blocking_waits();
          if (now_waits <= waits) return false;
          if (now_parked >= parked) return true;
          auto now = std::chrono::steady_clock::now();
          if (now_parked != last_parked || now_waits != last_waits) {
            last_parked = now_parked;
            last_waits = now_waits;
            still_since = now;
            return false;
          }
          return now - still_since >= std::chrono::milliseconds(300);
        },
        std::chrono::seconds(10));
  }

  static Json ConfigMap(const std::string& ns, const std::string& name,
                        Json owners = Json::array()) {
    Json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", name}, {"namespace", ns}}}};
    if (!owners.empty()) cm["metadata"]["ownerReferences"] = std::move(owners);
    return cm;
  }

  // A namespaced CRD with one served version (v1) that keeps every field. Groups under
  // .k8s.io get the approval annotation kube-apiserver asks of protected groups.
  static Json Crd(const std::string& group, const std::string& plural, const std::string& kind) {
    Json schema = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
    Json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
                {"kind", "CustomResourceDefinition"},
                {"metadata", {{"name", plural + "." + group}}},
                {"spec",
                 {{"group", group},
                  {"scope", "Namespaced"},
                  {"names", {{"plural", plural}, {"kind", kind}}},
                  {"versions", Json::array({{{"name", "v1"},
                                             {"served", true},
                                             {"storage", true},
                                             {"schema", {{"openAPIV3Schema", schema}}}}})}}}};
    if (group.ends_with(".k8s.io")) {
      crd["metadata"]["annotations"] = {{"api-approved.kubernetes.io", "unapproved, test"}};
    }
    return crd;
  }

  static Json OwnerRef(const Json& owner) {
    return Json{{"apiVersion", machinery::GetString(owner, {"apiVersion"})},
                {"kind", machinery::GetString(owner, {"kind"})},
                {"name", machinery::Name(owner)},
                {"uid", machinery::Uid(owner)}};
  }

  core::FakeClock clock_;
  std::unique_ptr<TestCluster> cluster_;
};

}  // namespace klutch::testing
