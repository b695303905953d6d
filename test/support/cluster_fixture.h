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
  // controllers is done: a test can then assert that something did not happen.
  bool AdvanceAndSettle(std::chrono::nanoseconds step) {
    const int parked = clock_.blocked_waiters();
    const uint64_t waits = clock_.blocking_waits();
    clock_.Advance(step);
    return Eventually(
        [&] { return clock_.blocking_waits() > waits && clock_.blocked_waiters() >= parked; },
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
