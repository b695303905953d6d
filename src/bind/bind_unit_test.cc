// Pure parts of the backend: the CRD snapshot and its hash, heartbeat health, binder rules.
#include <gtest/gtest.h>

#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/ids.h"
#include "bind/cluster_binding_reconciler.h"
#include "bind/snapshot.h"
#include "core/clock.h"

namespace klutch::bind::bind_unit_test {
namespace {

using machinery::Json;

Json Crd(std::string conversion = "None") {
  Json schema = {{"type", "object"}, {"description", "A database."}};
  return {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", "widgets.example.com"}}},
      {"spec",
       {{"group", "example.com"},
        {"scope", "Namespaced"},
        {"conversion", {{"strategy", conversion}}},
        {"names",
         {{"plural", "widgets"},
          {"singular", "widget"},
          {"kind", "Widget"},
          {"listKind", "WidgetList"},
          {"shortNames", {"wd"}}}},
        {"versions",
         Json::array(
             {{{"name", "v1alpha1"},
               {"served", false},
               {"storage", false},
               {"schema", {{"openAPIV3Schema", schema}}}},
              {{"name", "v1beta1"},
               {"served", true},
               {"storage", false},
               {"deprecated", true},
               {"deprecationWarning", "use v1"},
               {"schema", {{"openAPIV3Schema", schema}}}},
              {{"name", "v1"},
               {"served", true},
               {"storage", true},
               {"subresources", {{"status", Json::object()}}},
               {"additionalPrinterColumns",
                Json::array({{{"name", "Plan"}, {"type", "string"}, {"jsonPath", ".spec.plan"}}})},
               {"schema", {{"openAPIV3Schema", schema}}}}})}}}};
}

// An upgraded backend must not collect, at its first pass, spaces bound before binds recorded
// their time (a konnector installed later by a GitOps pipeline would find its space gone).
TEST(UnconnectedDeadline, CountsFromTheLastBindAndNeverForSpacesWithoutOne) {
  Json cb = {{"metadata", {{"creationTimestamp", "2026-01-01T00:00:00Z"}}}};
  Json ns = {
      {"metadata", {{"annotations", {{std::string(apis::klutch::kIdentityAnnotation), "user"}}}}}};
  EXPECT_FALSE(UnconnectedDeadline(cb, ns, std::chrono::hours(1)));
  ns["metadata"]["annotations"][std::string(apis::klutch::kLastBoundAnnotation)] =
      "2026-01-02T00:00:00Z";
  auto due = UnconnectedDeadline(cb, ns, std::chrono::hours(1));
  ASSERT_TRUE(due);
  EXPECT_EQ(core::FormatTime(*due), "2026-01-02T01:00:00Z");
  cb["status"]["lastHeartbeatTime"] = "2026-01-01T00:00:05Z";
  EXPECT_FALSE(UnconnectedDeadline(cb, ns, std::chrono::hours(1)));
}

TEST(CrdSnapshot, KeepsServedVersionsAndTheCrdFacts) {
  auto snapshot = CrdSnapshot(Crd());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  EXPECT_EQ((*snapshot)["group"], "example.com");
  EXPECT_EQ((*snapshot)["scope"], "Namespaced");
  EXPECT_EQ((*snapshot)["names"]["shortNames"], Json::array({"wd"}));
  ASSERT_EQ((*snapshot)["versions"].size(), 2u);
  const Json& beta = (*snapshot)["versions"][0];
  EXPECT_EQ(beta["name"], "v1beta1");
  EXPECT_EQ(beta["deprecated"], true);
  EXPECT_EQ(beta["deprecationWarning"], "use v1");
  EXPECT_EQ(beta["subresources"], Json::object());  // always present
  const Json& v1 = (*snapshot)["versions"][1];
  EXPECT_EQ(v1["storage"], true);
  EXPECT_FALSE(v1.contains("deprecated"));
  EXPECT_EQ(v1["subresources"], Json({{"status", Json::object()}}));
  EXPECT_EQ(v1["additionalPrinterColumns"][0]["name"], "Plan");
  EXPECT_EQ(v1["schema"]["openAPIV3Schema"]["description"], "A database.");
  EXPECT_FALSE(snapshot->contains("conversion"));
}

TEST(CrdSnapshot, WebhookConversionKeepsOnlyTheStorageVersion) {
  auto snapshot = CrdSnapshot(Crd("Webhook"));
  ASSERT_TRUE(snapshot.ok());
  ASSERT_EQ((*snapshot)["versions"].size(), 1u);
  EXPECT_EQ((*snapshot)["versions"][0]["name"], "v1");
  EXPECT_EQ((*snapshot)["versions"][0]["storage"], true);
}

TEST(CrdSnapshot, RejectsWhatCannotBeExported) {
  Json no_served = Crd();
  for (Json& v : no_served["spec"]["versions"]) v["served"] = false;
  auto r = CrdSnapshot(no_served);
  EXPECT_TRUE(core::IsInvalid(r.status()));
  EXPECT_NE(r.status().message().find("widgets.example.com"), std::string::npos);
  EXPECT_NE(r.status().message().find("no served version"), std::string::npos);

  Json no_kind = Crd();
  no_kind["spec"]["names"].erase("kind");
  EXPECT_NE(CrdSnapshot(no_kind).status().message().find("spec.names.kind"), std::string::npos);
  Json mistyped = Crd();
  mistyped["spec"]["versions"][2]["served"] = "yes";  // read as not served, never a throw
  ASSERT_TRUE(CrdSnapshot(mistyped).ok());
  EXPECT_EQ((*CrdSnapshot(mistyped))["versions"].size(), 1u);
  Json no_schema = Crd();
  no_schema["spec"]["versions"][2].erase("schema");
  EXPECT_NE(CrdSnapshot(no_schema).status().message().find("spec.versions[2].schema"),
            std::string::npos);
}

TEST(SnapshotHash, IsStableAndFollowsEveryChange) {
  auto a = CrdSnapshot(Crd());
  auto b = CrdSnapshot(Crd());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(SnapshotHash(*a), SnapshotHash(*b));
  EXPECT_EQ(SnapshotHash(*a), apis::klutch::Sha224Base62(machinery::Dump(*a)));
  Json changed = Crd();
  changed["spec"]["versions"][2]["schema"]["openAPIV3Schema"]["description"] = "Another.";
  EXPECT_NE(SnapshotHash(*CrdSnapshot(changed)), SnapshotHash(*a));
  // Metadata of the CRD is no part of the snapshot.
  Json relabelled = Crd();
  relabelled["metadata"]["labels"] = {{"x", "y"}};
  EXPECT_EQ(SnapshotHash(*CrdSnapshot(relabelled)), SnapshotHash(*a));
}

TEST(WithSnapshot, ReplacesOnlyTheCrdPart) {
  Json spec = {{"group", "old"},
               {"names", {{"plural", "olds"}}},
               {"scope", "Cluster"},
               {"versions", Json::array()},
               {"informerScope", "Namespaced"},
               {"permissionClaims", Json::array({{{"resource", "secrets"}}})},
               {"clusterScopedIsolation", "Prefixed"}};
  Json out = WithSnapshot(spec, *CrdSnapshot(Crd()));
  EXPECT_EQ(out["group"], "example.com");
  EXPECT_EQ(out["scope"], "Namespaced");
  EXPECT_EQ(out["informerScope"], "Namespaced");
  EXPECT_EQ(out["permissionClaims"], spec["permissionClaims"]);
  EXPECT_EQ(out["clusterScopedIsolation"], "Prefixed");
}

// ---- heartbeat health (§2.6.1, the intent: drift only for timestamps in the future) ----

Json ClusterBinding(std::string last, std::string interval) {
  Json cb = {{"status", Json::object()}};
  if (!last.empty()) cb["status"]["lastHeartbeatTime"] = last;
  if (!interval.empty()) cb["status"]["heartbeatInterval"] = interval;
  return cb;
}

TEST(HeartbeatHealth, FollowsTheHeartbeat) {
  const auto now = *core::ParseTime("2026-01-01T12:00:00Z");
  const auto drift = std::chrono::seconds(10);
  auto pending = HeartbeatHealth(ClusterBinding("", ""), now, drift);
  EXPECT_EQ(pending.condition.reason, "FirstHeartbeatPending");
  EXPECT_EQ(pending.condition.severity, "Info");
  EXPECT_EQ(pending.recheck.count(), 0);
  EXPECT_EQ(
      HeartbeatHealth(ClusterBinding("2026-01-01T11:59:00Z", ""), now, drift).condition.reason,
      "HeartbeatIntervalMissing");
  // A fresh heartbeat is healthy (upstream calls it drift); rechecked when it would time out.
  auto fresh = HeartbeatHealth(ClusterBinding("2026-01-01T11:59:58Z", "30s"), now, drift);
  EXPECT_EQ(fresh.condition.status, "True");
  EXPECT_EQ(fresh.condition.reason, "");
  EXPECT_EQ(fresh.recheck, std::chrono::milliseconds(59000));
  auto late = HeartbeatHealth(ClusterBinding("2026-01-01T11:58:59Z", "30s"), now, drift);
  EXPECT_EQ(late.condition.reason, "HeartbeatTimeout");
  EXPECT_EQ(late.condition.severity, "Error");
  EXPECT_NE(late.condition.message.find("2026-01-01T11:58:59Z"), std::string::npos);
  auto future = HeartbeatHealth(ClusterBinding("2026-01-01T12:01:00Z", "30s"), now, drift);
  EXPECT_EQ(future.condition.reason, "HeartbeatTimeDrift");
  EXPECT_EQ(future.condition.severity, "Warning");
  EXPECT_EQ(
      HeartbeatHealth(ClusterBinding("2026-01-01T12:00:05Z", "30s"), now, drift).condition.status,
      "True");
}

// ---- binder rules ----

TEST(BinderRules, OneRulePerGroupDeduplicatedWithStatus) {
  auto exported = [](std::string group, std::string plural, Json claims) {
    return std::make_shared<const Json>(
        Json{{"spec",
              {{"group", group}, {"names", {{"plural", plural}}}, {"permissionClaims", claims}}}});
  };
  Json secrets = {{"group", ""}, {"resource", "secrets"}, {"version", "v1"}};
  Json configmaps = {{"group", ""}, {"resource", "configmaps"}, {"version", "v1"}};
  Json rules =
      BinderRules({exported("anynines.com", "postgresqlinstances", Json::array({secrets})),
                   exported("anynines.com", "servicebindings", Json::array({secrets, configmaps})),
                   exported("anynines.com", "postgresqlinstances", Json::array())});
  const Json all = {"create", "delete", "get", "list", "patch", "update", "watch"};
  EXPECT_EQ(rules,
            Json::array({
                {{"apiGroups", {""}}, {"resources", {"configmaps", "secrets"}}, {"verbs", all}},
                {{"apiGroups", {"anynines.com"}},
                 {"resources", {"postgresqlinstances", "servicebindings"}},
                 {"verbs", all}},
                {{"apiGroups", {"anynines.com"}},
                 {"resources", {"postgresqlinstances/status", "servicebindings/status"}},
                 {"verbs", {"get", "patch", "update"}}},
            }));
  EXPECT_EQ(BinderRules({}), Json::array());
}

}  // namespace
}  // namespace klutch::bind::bind_unit_test
