// ResourceQuota object counts through RestStorage on the memory store: creates refused with
// kube-apiserver's 403 once a namespace is full, status.hard and status.used kept as the quota
// controller keeps them, custom resources counted, and no two racing creates taking the last
// slot.
#include "apiserver/quota.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "apiserver/builtin_resources.h"
#include "apiserver/crd.h"
#include "apiserver/rest_storage.h"
#include "storage/memory/memory_store.h"

namespace klutch::apiserver::quota_test {
namespace {

class QuotaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.SetOwner("builtin", BuiltinResources());
    for (const char* ns : {"demo", "other"}) {
      ASSERT_TRUE(
          rest_.Create(*Res("namespaces"), "", Json{{"metadata", {{"name", ns}}}}, Opts()).ok());
    }
  }
  ResourcePtr Res(std::string_view plural, std::string_view group = "",
                  std::string_view version = "v1") {
    return registry_.Find(group, version, plural);
  }
  static WriteOptions Opts(std::string manager = "test") {
    WriteOptions o;
    o.field_manager = std::move(manager);
    return o;
  }
  static Json Cm(const std::string& name) {
    return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}};
  }
  core::Status CreateCm(const std::string& ns, const std::string& name) {
    return rest_.Create(*Res("configmaps"), ns, Cm(name), Opts()).status();
  }
  void CreateQuota(const std::string& ns, const std::string& name, Json hard) {
    Json q = {{"apiVersion", "v1"},
              {"kind", "ResourceQuota"},
              {"metadata", {{"name", name}}},
              {"spec", {{"hard", std::move(hard)}}}};
    auto r = rest_.Create(*Res("resourcequotas"), ns, q, Opts());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  Json Status(const std::string& ns, const std::string& name) {
    auto q = rest_.Get(*Res("resourcequotas"), ns, name);
    EXPECT_TRUE(q.ok()) << q.status().ToString();
    return q.ok() && q->contains("status") ? (*q)["status"] : Json();
  }

  storage::MemoryStore store_;
  Registry registry_;
  RestStorage rest_{store_, registry_, core::RealClock::Get()};
};

TEST_F(QuotaTest, CreatesPastACountQuotaAreForbiddenWithKubeApiserversMessage) {
  CreateQuota("demo", "q", {{"count/configmaps", "2"}});
  EXPECT_EQ(Status("demo", "q"),
            (Json{{"hard", {{"count/configmaps", "2"}}}, {"used", {{"count/configmaps", "0"}}}}));
  ASSERT_TRUE(CreateCm("demo", "a").ok());
  ASSERT_TRUE(CreateCm("demo", "b").ok());
  EXPECT_EQ(Status("demo", "q")["used"], (Json{{"count/configmaps", "2"}}));

  core::Status refused = CreateCm("demo", "c");
  EXPECT_EQ(refused.code(), 403);
  EXPECT_EQ(refused.message(),
            "configmaps \"c\" is forbidden: exceeded quota: q, requested: count/configmaps=1, "
            "used: count/configmaps=2, limited: count/configmaps=2");
  ASSERT_TRUE(refused.details().has_value());
  EXPECT_EQ(refused.details()->name, "c");
  EXPECT_EQ(refused.details()->kind, "configmaps");
  // Dry runs are checked as well; server-side apply creates too.
  WriteOptions dry = Opts();
  dry.dry_run = true;
  EXPECT_EQ(rest_.Create(*Res("configmaps"), "demo", Cm("c"), dry).status().code(), 403);
  PatchRequest apply;
  apply.type = PatchType::kApply;
  apply.body = Cm("c").dump();
  EXPECT_EQ(rest_.Patch(*Res("configmaps"), "demo", "c", apply, Opts("applier")).status().code(),
            403);
  EXPECT_TRUE(core::IsNotFound(rest_.Get(*Res("configmaps"), "demo", "c").status()));
  // Other namespaces and other resources are not limited by it.
  EXPECT_TRUE(CreateCm("other", "c").ok());
  Json secret = {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", {{"name", "s"}}}};
  EXPECT_TRUE(rest_.Create(*Res("secrets"), "demo", secret, Opts()).ok());

  // A deletion frees the slot, and the status says so.
  ASSERT_TRUE(rest_.Delete(*Res("configmaps"), "demo", "a", {}).ok());
  EXPECT_EQ(Status("demo", "q")["used"], (Json{{"count/configmaps", "1"}}));
  EXPECT_TRUE(CreateCm("demo", "c").ok());
  EXPECT_EQ(Status("demo", "q")["used"], (Json{{"count/configmaps", "2"}}));
}

TEST_F(QuotaTest, LegacyNamesCountTooAndEveryExceededLimitIsListed) {
  ASSERT_TRUE(CreateCm("demo", "before").ok());
  CreateQuota("demo", "q",
              {{"configmaps", "1"}, {"count/configmaps", "1"}, {"secrets", "3"}, {"pods", "10"}});
  // Objects that existed before the quota are counted; what the server does not serve is 0.
  EXPECT_EQ(
      Status("demo", "q"),
      (Json{{"hard",
             {{"configmaps", "1"}, {"count/configmaps", "1"}, {"secrets", "3"}, {"pods", "10"}}},
            {"used",
             {{"configmaps", "1"}, {"count/configmaps", "1"}, {"secrets", "0"}, {"pods", "0"}}}}));
  EXPECT_EQ(CreateCm("demo", "after").message(),
            "configmaps \"after\" is forbidden: exceeded quota: q, requested: "
            "configmaps=1,count/configmaps=1, used: configmaps=1,count/configmaps=1, limited: "
            "configmaps=1,count/configmaps=1");

  // Raising the limit in the spec shows in the status at once.
  PatchRequest raise;
  raise.type = PatchType::kMerge;
  raise.body = R"({"spec":{"hard":{"configmaps":"1k","count/configmaps":"5"}}})";
  ASSERT_TRUE(rest_.Patch(*Res("resourcequotas"), "demo", "q", raise, Opts()).ok());
  EXPECT_EQ(Status("demo", "q")["hard"]["count/configmaps"], "5");
  EXPECT_EQ(Status("demo", "q")["hard"]["configmaps"], "1k");
  EXPECT_TRUE(CreateCm("demo", "after").ok());
  EXPECT_EQ(Status("demo", "q")["used"]["configmaps"], "2");

  // The quota objects themselves: a second quota counts against `resourcequotas`.
  CreateQuota("demo", "quotas", {{"count/resourcequotas", "2"}});
  EXPECT_EQ(Status("demo", "quotas")["used"], (Json{{"count/resourcequotas", "2"}}));
  Json third = {{"apiVersion", "v1"},
                {"kind", "ResourceQuota"},
                {"metadata", {{"name", "third"}}},
                {"spec", {{"hard", {{"secrets", "1"}}}}}};
  EXPECT_EQ(rest_.Create(*Res("resourcequotas"), "demo", third, Opts()).status().message(),
            "resourcequotas \"third\" is forbidden: exceeded quota: quotas, requested: "
            "count/resourcequotas=1, used: count/resourcequotas=2, limited: "
            "count/resourcequotas=2");
}

TEST_F(QuotaTest, CustomResourcesAreCountedByResourceAndGroup) {
  Json crd =
      Json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"postgresqlinstances.anynines.com"},
    "spec":{"group":"anynines.com","scope":"Namespaced",
      "names":{"plural":"postgresqlinstances","kind":"PostgresqlInstance"},
      "versions":[{"name":"v1","served":true,"storage":true,
        "schema":{"openAPIV3Schema":{"type":"object","properties":{
          "spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}})");
  auto resources = ResourcesForCrd(crd);
  ASSERT_TRUE(resources.ok()) << resources.status().ToString();
  registry_.SetOwner("postgresqlinstances.anynines.com", *resources);
  auto pg = Res("postgresqlinstances", "anynines.com", "v1");
  ASSERT_NE(pg, nullptr);
  auto instance = [](const std::string& name) {
    return Json{{"apiVersion", "anynines.com/v1"},
                {"kind", "PostgresqlInstance"},
                {"metadata", {{"name", name}}}};
  };
  CreateQuota("demo", "q", {{"count/postgresqlinstances.anynines.com", "1"}});
  ASSERT_TRUE(rest_.Create(*pg, "demo", instance("one"), Opts()).ok());
  EXPECT_EQ(Status("demo", "q")["used"], (Json{{"count/postgresqlinstances.anynines.com", "1"}}));
  core::Status refused = rest_.Create(*pg, "demo", instance("two"), Opts()).status();
  EXPECT_EQ(refused.code(), 403);
  EXPECT_EQ(refused.message(),
            "postgresqlinstances.anynines.com \"two\" is forbidden: exceeded quota: q, requested: "
            "count/postgresqlinstances.anynines.com=1, used: "
            "count/postgresqlinstances.anynines.com=1, limited: "
            "count/postgresqlinstances.anynines.com=1");
  EXPECT_EQ(refused.details()->group, "anynines.com");
}

TEST_F(QuotaTest, RacingCreatesNeverTakeMoreThanTheLastSlot) {
  constexpr int kLimit = 20;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 10;
  CreateQuota("demo", "q", {{"count/configmaps", std::to_string(kLimit)}});
  std::atomic<int> created{0}, forbidden{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        core::Status st = CreateCm("demo", "cm-" + std::to_string(t) + "-" + std::to_string(i));
        if (st.ok()) {
          ++created;
        } else if (st.code() == 403) {
          ++forbidden;
        } else {
          ++other;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created.load(), kLimit);
  EXPECT_EQ(forbidden.load(), kThreads * kPerThread - kLimit);
  EXPECT_EQ(other.load(), 0);
  auto list = rest_.List(*Res("configmaps"), "demo", {});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->items.size(), static_cast<size_t>(kLimit));
  EXPECT_EQ(Status("demo", "q")["used"], (Json{{"count/configmaps", std::to_string(kLimit)}}));
}

TEST_F(QuotaTest, NegativeLimitsAreInvalid) {
  Json q = {{"apiVersion", "v1"},
            {"kind", "ResourceQuota"},
            {"metadata", {{"name", "q"}}},
            {"spec", {{"hard", {{"count/configmaps", "-1"}}}}}};
  core::Status st = rest_.Create(*Res("resourcequotas"), "demo", q, Opts()).status();
  EXPECT_EQ(st.code(), 422);
  EXPECT_EQ(st.message(),
            "ResourceQuota \"q\" is invalid: spec.hard[count/configmaps]: Invalid value: \"-1\": "
            "must be greater than or equal to 0");
  EXPECT_TRUE(CreateCm("demo", "free").ok());
}

TEST(ObjectCountQuotaKeys, AreCountSlashResourceDotGroupAndTheLegacyCoreNames) {
  Registry registry;
  registry.SetOwner("builtin", BuiltinResources());
  auto keys = [&](std::string_view group, std::string_view plural) {
    return ObjectCountQuota::KeysFor(*registry.FindStored(group, plural));
  };
  EXPECT_EQ(keys("", "configmaps"), (std::vector<std::string>{"count/configmaps", "configmaps"}));
  EXPECT_EQ(keys("", "serviceaccounts"), (std::vector<std::string>{"count/serviceaccounts"}));
  EXPECT_EQ(keys("apps", "deployments"), (std::vector<std::string>{"count/deployments.apps"}));
  EXPECT_TRUE(keys("", "namespaces").empty());
}

}  // namespace
}  // namespace klutch::apiserver::quota_test
