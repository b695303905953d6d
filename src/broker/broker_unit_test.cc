// The broker's pure parts: catalog and plan-change rules, OSB request checks, state records.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "broker/catalog.h"
#include "broker/osb.h"
#include "broker/state.h"
#include "broker/state_dir.h"
#include "core/file.h"
#include "core/random.h"
#include "machinery/object.h"

namespace klutch::broker {
namespace {

namespace fs = std::filesystem;

const Plan& PlanNamed(const Service& s, std::string_view name) {
  for (const auto& p : s.plans) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << "no plan " << name;
  return s.plans.front();
}

TEST(CatalogTest, OffersWhatTheXrdsAllowAndRunsHere) {
  auto pg = ServicesOfType("postgresql");
  ASSERT_EQ(pg.size(), 1u);
  EXPECT_EQ(pg[0]->name, "a9s-postgresql15");
  std::set<std::string> names;
  for (const auto& p : pg[0]->plans) names.insert(p.name);
  EXPECT_EQ(names.size(), 10u);
  for (const char* n :
       {"postgresql-single-nano", "postgresql-single-small", "postgresql-single-big",
        "postgresql-replica-small", "postgresql-replica-big", "postgresql-single-nano-ssl",
        "postgresql-replica-big-ssl"}) {
    EXPECT_TRUE(names.contains(n)) << n;
  }
  auto kv = ServicesOfType("keyvalue");
  ASSERT_EQ(kv.size(), 1u);
  EXPECT_EQ(kv[0]->name, "a9s-keyvalue8");
  EXPECT_NE(kv[0]->description.find("Redis 7"), std::string::npos);
  for (const auto& p : kv[0]->plans) EXPECT_TRUE(p.limits.tls) << p.name;
  // MariaDB: both of Klutch's service names, served by 10.11 and saying so where the name
  // asks for another version; a9s-mariadb1011 has TLS plans only, as upstream's XRD says.
  auto mariadb = ServicesOfType("mariadb");
  ASSERT_EQ(mariadb.size(), 2u);
  EXPECT_EQ(mariadb[0]->name, "a9s-mariadb106");
  EXPECT_NE(mariadb[0]->served_by.find("MariaDB 10.11"), std::string::npos);
  EXPECT_EQ(mariadb[0]->plans.size(), 10u);
  EXPECT_EQ(mariadb[1]->name, "a9s-mariadb1011");
  EXPECT_TRUE(mariadb[1]->served_by.empty());
  EXPECT_EQ(mariadb[1]->plans.size(), 5u);
  std::set<std::string> plan_ids;
  for (const Service* s : ServicesOfType("")) {
    for (const auto& p : s->plans) {
      EXPECT_TRUE(plan_ids.insert(p.id).second) << "plan id " << p.id << " is not unique";
    }
  }
  for (const auto& p : mariadb[1]->plans) EXPECT_TRUE(p.limits.tls) << p.name;
  // Prometheus: its Alertmanager is the second node; Grafana is not claimed.
  auto prometheus = ServicesOfType("prometheus");
  ASSERT_EQ(prometheus.size(), 1u);
  EXPECT_EQ(prometheus[0]->plans.size(), 6u);
  for (const auto& p : prometheus[0]->plans) {
    EXPECT_EQ(p.limits.nodes, 2) << p.name;
    if (p.name.find("grafana") != std::string::npos || p.name.starts_with("promgraf")) {
      EXPECT_NE(p.description.find("Grafana is not packaged by Debian"), std::string::npos);
    }
  }
  // Messaging: RabbitMQ 3.10 for every name, single-node plans only; 4 ports per instance.
  auto messaging = ServicesOfType("messaging");
  ASSERT_EQ(messaging.size(), 4u);
  for (const Service* s : messaging) {
    EXPECT_EQ(s->plans.size(), 6u) << s->name;
    EXPECT_EQ(s->served_by.empty(), s->name == "a9s-messaging310") << s->name;
    for (const auto& p : s->plans) EXPECT_EQ(p.limits.PortCount(), 4) << p.name;
  }
  EXPECT_EQ(ServicesOfType("").size(), 9u);
  EXPECT_FALSE(KnownType("mongodb"));
  EXPECT_TRUE(KnownType("keyvalue"));
}

TEST(CatalogTest, SizesAreRealLimits) {
  const Service& pg = *ServicesOfType("postgresql")[0];
  const Plan& nano = PlanNamed(pg, "postgresql-single-nano");
  const Plan& big = PlanNamed(pg, "postgresql-replica-big");
  EXPECT_EQ(nano.limits.nodes, 1);
  EXPECT_EQ(big.limits.nodes, 3);
  EXPECT_LT(nano.limits.shared_buffers_mb, big.limits.shared_buffers_mb);
  EXPECT_LT(nano.limits.max_connections, big.limits.max_connections);
  EXPECT_LT(nano.limits.disk_quota_bytes, big.limits.disk_quota_bytes);
}

TEST(CatalogTest, CatalogDocumentHasTheOsbShape) {
  Json c = CatalogJson("postgresql");
  ASSERT_TRUE(c["services"].is_array());
  ASSERT_EQ(c["services"].size(), 1u);
  const Json& s = c["services"][0];
  for (const char* k : {"id", "name", "description", "bindable", "plans"})
    EXPECT_TRUE(s.contains(k)) << k;
  for (const auto& p : s["plans"]) {
    for (const char* k : {"id", "name", "description"}) EXPECT_TRUE(p.contains(k)) << k;
  }
  EXPECT_EQ(CatalogJson("")["services"].size(), 9u);
  // What serves a name that promises another version is in the service's metadata.
  EXPECT_NE(machinery::GetString(CatalogJson("mariadb")["services"][0], {"metadata", "servedBy"})
                .find("this machine has no MariaDB 10.6"),
            std::string::npos);
}

TEST(CatalogTest, PlanChangeRules) {
  const Service& pg = *ServicesOfType("postgresql")[0];
  auto check = [&](const char* from, const char* to) {
    return CheckPlanChange(pg, PlanNamed(pg, from), PlanNamed(pg, to));
  };
  EXPECT_TRUE(check("postgresql-single-nano", "postgresql-single-small").ok());
  EXPECT_TRUE(check("postgresql-single-big", "postgresql-replica-big").ok());
  EXPECT_TRUE(check("postgresql-single-nano", "postgresql-replica-small").ok());
  auto down = check("postgresql-single-big", "postgresql-single-small");
  EXPECT_NE(down.message().find("Transition from bigger to smaller plan size is not supported."),
            std::string::npos);
  EXPECT_FALSE(check("postgresql-replica-big", "postgresql-single-big").ok());
  EXPECT_FALSE(check("postgresql-single-nano", "postgresql-single-nano-ssl").ok());
  const Service& kv = *ServicesOfType("keyvalue")[0];
  EXPECT_TRUE(CheckPlanChange(kv, PlanNamed(kv, "keyvalue-single-nano-ssl"),
                              PlanNamed(kv, "keyvalue-single-medium-ssl"))
                  .ok());
  EXPECT_FALSE(CheckPlanChange(kv, PlanNamed(kv, "keyvalue-single-small-ssl"),
                               PlanNamed(kv, "keyvalue-replica-small-ssl"))
                   .ok());
  const Service& mdb = *ServicesOfType("mariadb")[0];
  EXPECT_TRUE(CheckPlanChange(mdb, PlanNamed(mdb, "mariadb-single-nano-ssl"),
                              PlanNamed(mdb, "mariadb-cluster-small-ssl"))
                  .ok());
  EXPECT_FALSE(CheckPlanChange(mdb, PlanNamed(mdb, "mariadb-cluster-small"),
                               PlanNamed(mdb, "mariadb-single-big"))
                   .ok());
  EXPECT_FALSE(CheckPlanChange(mdb, PlanNamed(mdb, "mariadb-single-nano"),
                               PlanNamed(mdb, "mariadb-single-nano-ssl"))
                   .ok());
  const Service& prom = *ServicesOfType("prometheus")[0];
  EXPECT_NE(CheckPlanChange(prom, PlanNamed(prom, "prometheus-single-small"),
                            PlanNamed(prom, "prometheus-single-big"))
                .message()
                .find("Upgrade functionality for Prometheus plans is not supported"),
            std::string::npos);
}

TEST(OsbTest, ApiVersion) {
  EXPECT_FALSE(CheckApiVersion("2.14"));
  EXPECT_FALSE(CheckApiVersion("2.11"));
  EXPECT_FALSE(CheckApiVersion("2.17"));
  for (const char* bad : {"", "2.10", "3.0", "2", "x.y", "2.18", "2.14.1"}) {
    auto e = CheckApiVersion(bad);
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->status, 412) << bad;
    EXPECT_FALSE(e->description.empty());
  }
}

TEST(OsbTest, Ids) {
  EXPECT_FALSE(CheckId("instance_id", "0b0c3ad5-1b9c-4d5b-9c2e-1f2f3f4f5f6f-1764000000"));
  EXPECT_TRUE(CheckId("instance_id", ""));
  EXPECT_TRUE(CheckId("instance_id", "a/b"));
  EXPECT_TRUE(CheckId("instance_id", std::string(256, 'a')));
  // "." and ".." are path segments, not IDs; names that merely contain dots are fine.
  for (const char* dots : {".", ".."}) {
    auto e = CheckId("binding_id", dots);
    ASSERT_TRUE(e) << dots;
    EXPECT_EQ(e->status, 400);
    EXPECT_NE(e->description.find("binding_id"), std::string::npos) << e->description;
  }
  EXPECT_FALSE(CheckId("instance_id", "..."));
  EXPECT_FALSE(CheckId("instance_id", "a.b"));
}

TEST(OsbTest, AsyncRequired) {
  EXPECT_FALSE(RequireAsync("true"));
  auto e = RequireAsync(std::nullopt);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 422);
  EXPECT_EQ(e->error, "AsyncRequired");
  EXPECT_TRUE(RequireAsync("false"));
}

TEST(OsbTest, ProvisionBodies) {
  ProvisionRequest p;
  EXPECT_FALSE(ParseProvision(
      R"({"service_id":"s","plan_id":"p","organization_guid":"o","space_guid":"x",
          "parameters":{"max_connections":100},"context":{"platform":"kubernetes"}})",
      &p));
  EXPECT_EQ(p.service_id, "s");
  EXPECT_EQ(p.parameters["max_connections"], 100);
  struct Case {
    const char* body;
    const char* mentions;
  };
  for (const Case& c :
       std::vector<Case>{{"", "empty"},
                         {"{", "not valid JSON"},
                         {"[]", "JSON object"},
                         {R"({"plan_id":"p"})", "service_id is required"},
                         {R"({"service_id":"s"})", "plan_id is required"},
                         {R"({"service_id":1,"plan_id":"p"})", "service_id must be a string"},
                         {R"({"service_id":"","plan_id":"p"})", "must not be empty"},
                         {R"({"service_id":"s","plan_id":"p","organization_guid":"o",
                              "space_guid":"x","parameters":[1]})",
                          "parameters must be a JSON object"},
                         // Required non-empty strings (OSB 2.11-2.17).
                         {R"({"service_id":"s","plan_id":"p","space_guid":"x"})",
                          "organization_guid is required"},
                         {R"({"service_id":"s","plan_id":"p","organization_guid":"o"})",
                          "space_guid is required"},
                         {R"({"service_id":"s","plan_id":"p","organization_guid":"",
                              "space_guid":"x"})",
                          "organization_guid must not be empty"},
                         {R"({"service_id":"s","plan_id":"p","organization_guid":"o",
                              "space_guid":7})",
                          "space_guid must be a string"}}) {
    ProvisionRequest out;
    auto e = ParseProvision(c.body, &out);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->status, 400);
    EXPECT_NE(e->description.find(c.mentions), std::string::npos)
        << c.body << ": " << e->description;
    Json body = ErrorBody(*e);
    EXPECT_EQ(body["error"], "BadRequest");
  }
}

TEST(OsbTest, UpdateAndBindBodies) {
  UpdateRequest u;
  EXPECT_FALSE(ParseUpdate(R"({"service_id":"s","parameters":{"a":null}})", &u));
  EXPECT_FALSE(u.plan_id.has_value());
  ASSERT_TRUE(u.parameters.has_value());
  EXPECT_TRUE((*u.parameters)["a"].is_null());
  EXPECT_TRUE(ParseUpdate(R"({"plan_id":"p"})", &u));
  EXPECT_TRUE(ParseUpdate(R"({"service_id":"s","previous_values":3})", &u));
  BindRequest b;
  EXPECT_FALSE(
      ParseBind(R"({"service_id":"s","plan_id":"p","bind_resource":{"app_guid":"x"}})", &b));
  EXPECT_TRUE(ParseBind(R"({"service_id":"s"})", &b));
  EXPECT_TRUE(ParseBind(R"({"service_id":"s","plan_id":"p","bind_resource":"x"})", &b));
}

TEST(StateTest, RecordRoundTripsThroughDisk) {
  fs::path dir = fs::temp_directory_path() / ("klutch-broker-state-" + core::RandomSuffix(8));
  StateDir state(dir);
  ASSERT_TRUE(state.Init().ok());
  InstanceRecord r;
  r.id = "abc-1";
  r.number = 7;
  r.service_id = "svc";
  r.plan_id = "plan";
  r.parameters = {{"max_connections", 120}};
  r.state = kStateProvisioned;
  r.ports = {5000, 5001, 5002};
  r.admin_password = "secret";
  r.bindings["b1"] = BindingRecord{{.username = "u", .password = "p"},
                                   "b1",
                                   "t",
                                   {{"port", 5000}},
                                   "svc",
                                   "plan",
                                   {{"app", "a"}}};
  r.backups.push_back(
      BackupRecord{.id = 2, .status = "done", .size = 99, .file = "2.enc", .key = "k"});
  r.restores.push_back(RestoreRecord{.id = 1, .backup_id = 2, .status = "running"});
  r.next_backup_id = 3;
  ASSERT_TRUE(state.Save(r).ok());
  EXPECT_EQ(
      fs::status(state.InstanceDir(7) / "instance.json").permissions() & fs::perms::others_read,
      fs::perms::none);
  std::vector<std::string> errors;
  auto all = state.LoadAll(&errors);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(ToJson(all[0]), ToJson(r));
  // A broken file is reported, not fatal.
  fs::create_directories(state.InstanceDir(8));
  std::ofstream(state.InstanceDir(8) / "instance.json") << "{not json";
  errors.clear();
  EXPECT_EQ(state.LoadAll(&errors).size(), 1u);
  EXPECT_EQ(errors.size(), 1u);
  ASSERT_TRUE(state.Remove(7).ok());
  EXPECT_FALSE(fs::exists(state.InstanceDir(7)));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace klutch::broker
