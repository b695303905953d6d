// The operator's pure parts: a Postgresql spec read into what the engine runs (the upstream
// examples' specs as the a8s composition writes them, and every refusal naming its field),
// spec changes, engine messages in the spec's terms, and the instance record on disk.
#include <gtest/gtest.h>

#include "a8s/instance_store.h"
#include "a8s/postgresql_spec.h"
#include "core/file.h"
#include "engines/data_service.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/process.h"

namespace klutch::a8s {
namespace {

using machinery::Json;

// The spec the a8s-postgresql composition writes for upstream's
// examples/a8s/postgresql-claim-parameters.yaml (plan postgresql-single-small), after the API
// server's defaulting.
Json ParametersExampleSpec() {
  return Json::parse(R"({
    "version": 13, "replicas": 1, "volumeSize": "10Gi", "expose": "Internal",
    "resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
    "parameters": {"maxConnections": 120, "tempFileLimitKiloBytes": 1024, "trackIOTiming": "on",
      "archiveTimeoutSeconds": 1000, "statementTimeoutMillis": 3000, "walWriterDelayMillis": 400,
      "maxReplicationSlots": 12, "maxWALSenders": 12, "synchronousCommit": "local",
      "sslCiphers": "NULL-MD5", "sslMinProtocolVersion": "TLSv1", "clientMinMessages": "log",
      "logMinMessages": "notice", "logMinErrorStatement": "warning", "logStatement": "ddl",
      "logErrorVerbosity": "TERSE", "maxLocksPerTransaction": 128, "sharedBuffers": 1024}})");
}

TEST(PostgresqlSpec, TheParametersExampleMapsEveryParameterToItsServerSetting) {
  auto spec = ParsePostgresqlSpec(ParametersExampleSpec());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->requested_version, 13);
  EXPECT_EQ(spec->replicas, 1);
  EXPECT_EQ(spec->volume_bytes, 10LL << 30);
  EXPECT_EQ(spec->memory_bytes, 2LL << 30);
  EXPECT_DOUBLE_EQ(spec->cpu, 2);
  EXPECT_EQ(spec->limits.nodes, 1);
  EXPECT_EQ(spec->limits.disk_quota_bytes, 10LL << 30);
  EXPECT_EQ(spec->limits.max_connections, 120);
  EXPECT_EQ(spec->limits.shared_buffers_mb, 8);  // 1024 pages of 8 kB
  EXPECT_TRUE(spec->limits.tls);
  EXPECT_TRUE(spec->limits.tls_optional);
  const Json want = Json::parse(R"({
    "max_connections": 120, "temp_file_limit": 1024, "track_io_timing": "on",
    "archive_timeout": 1000, "statement_timeout": 3000, "wal_writer_delay": 400,
    "max_replication_slots": 12, "max_wal_senders": 12, "synchronous_commit": "local",
    "ssl_ciphers": "NULL-MD5", "ssl_min_protocol_version": "TLSv1", "client_min_messages": "log",
    "pg_log_min_messages": "notice", "pg_log_min_error_statement": "warning",
    "log_statement": "ddl", "log_error_verbosity": "TERSE", "max_locks_per_transaction": 128})");
  EXPECT_EQ(spec->parameters, want) << machinery::Dump(Json::diff(want, spec->parameters));
  // ... and the engine takes every one of them, as PostgreSQL would.
  auto engine = engines::NewPostgresService(engines::EngineContext{});
  auto valid = engine->ValidateParameters(spec->parameters);
  EXPECT_TRUE(valid.ok()) << valid.ToString();
}

TEST(PostgresqlSpec, TheDefaultsOfTheCrdAreAcceptedByTheEngine) {
  // What the API server fills in for `parameters: {}` (deploy/operator/crds/postgresqls.yaml).
  auto spec = ParsePostgresqlSpec(Json::parse(R"({"version": 15, "parameters": {
      "archiveTimeoutSeconds": 0, "clientMinMessages": "notice", "logErrorVerbosity": "DEFAULT",
      "logMinErrorStatement": "error", "logMinMessages": "warning", "logStatement": "none",
      "maxConnections": 100, "maxLocksPerTransaction": 100, "maxReplicationSlots": 10,
      "maxWALSenders": 10, "sharedBuffers": 1024, "sslCiphers": "HIGH:MEDIUM:+3DES:!aNULL",
      "sslMinProtocolVersion": "TLSv1.2", "statementTimeoutMillis": 0, "synchronousCommit": "on",
      "tempFileLimitKiloBytes": -1, "trackIOTiming": "off", "walWriterDelayMillis": 200}})"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->volume_bytes, 1LL << 30);  // volumeSize's default when absent
  auto engine = engines::NewPostgresService(engines::EngineContext{});
  auto valid = engine->ValidateParameters(spec->parameters);
  EXPECT_TRUE(valid.ok()) << valid.ToString();
}

TEST(PostgresqlSpec, ReplicaPlansAreThreeNodesAndSharedBuffersStayWithinTheMemoryLimit) {
  Json s = ParametersExampleSpec();
  s["replicas"] = 3;
  s["resources"]["limits"]["memory"] = "64Mi";
  s["parameters"]["sharedBuffers"] = 1 << 20;  // 8 GiB asked
  auto spec = ParsePostgresqlSpec(s);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->limits.nodes, 3);
  EXPECT_EQ(spec->limits.shared_buffers_mb, 16);  // a quarter of 64Mi
}

TEST(PostgresqlSpec, EachRefusalNamesItsFieldAndWhatToUse) {
  struct Case {
    const char* patch;  // merged into the example's spec
    const char* want;   // a part of the message
  };
  const Case cases[] = {
      {R"({"replicas": 2})", "spec.replicas: 2 is not offered: use 1 (one server) or 3"},
      {R"({"replicas": 0})", "spec.replicas: 0 is not offered"},
      {R"({"replicas": "three"})", "spec.replicas: three is not offered"},
      {R"({"version": 12})", "spec.version: 12 is not a PostgreSQL major version from 13 to 16"},
      {R"({"version": null})", "spec.version: <none>"},
      {R"({"volumeSize": "ten gigs"})", "spec.volumeSize: \"ten gigs\" is not a positive quantity"},
      {R"({"volumeSize": "-1Gi"})", "spec.volumeSize"},
      {R"({"volumeSize": true})", "spec.volumeSize: true is not a quantity"},
      {R"({"resources": {"limits": {"memory": "1Mi"}}})",
       "spec.resources.limits.memory: PostgreSQL needs at least 64Mi"},
      {R"({"resources": {"limits": {"cpu": "lots"}}})", "spec.resources.limits.cpu: \"lots\""},
      {R"({"parameters": {"workMem": "4MB"}})",
       "spec.parameters.workMem: unknown parameter; a Postgresql takes maxConnections"},
      {R"({"parameters": "none"})", "spec.parameters: must be an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.patch);
    Json s = ParametersExampleSpec();
    s.merge_patch(Json::parse(c.patch));
    auto spec = ParsePostgresqlSpec(s);
    ASSERT_FALSE(spec.ok());
    EXPECT_TRUE(core::IsInvalid(spec.status()));
    EXPECT_NE(spec.status().message().find(c.want), std::string::npos) << spec.status().message();
  }
  EXPECT_FALSE(ParsePostgresqlSpec(Json::array()).ok());
}

TEST(PostgresqlSpec, EngineMessagesAreSaidInTheSpecsTerms) {
  Json s = ParametersExampleSpec();
  s["parameters"]["walWriterDelayMillis"] = 0;
  auto spec = ParsePostgresqlSpec(s);
  ASSERT_TRUE(spec.ok());
  auto engine = engines::NewPostgresService(engines::EngineContext{});
  auto refused = engine->ValidateParameters(spec->parameters);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(InSpecTerms(refused.message()),
            "spec.parameters.walWriterDelayMillis: 0 is not an integer from 1 to 10000");
  EXPECT_EQ(InSpecTerms("something else"), "something else");
}

TEST(PostgresqlSpec, AClusterOnlyGrows) {
  auto base = ParsePostgresqlSpec(ParametersExampleSpec());
  ASSERT_TRUE(base.ok());
  auto with = [&](const char* patch) {
    Json s = ParametersExampleSpec();
    s.merge_patch(Json::parse(patch));
    auto parsed = ParsePostgresqlSpec(s);
    EXPECT_TRUE(parsed.ok());
    return *parsed;
  };
  EXPECT_TRUE(CheckSpecChange(*base, with(R"({"replicas": 3, "volumeSize": "50Gi"})")).ok());
  EXPECT_TRUE(CheckSpecChange(*base, with(R"({"parameters": {"maxConnections": 50}})")).ok());
  auto three = with(R"({"replicas": 3})");
  auto down = CheckSpecChange(three, *base);
  EXPECT_NE(down.message().find("spec.replicas: cannot go from 3 to 1"), std::string::npos)
      << down.message();
  EXPECT_NE(CheckSpecChange(*base, with(R"({"volumeSize": "3Gi"})"))
                .message()
                .find("spec.volumeSize: cannot shrink"),
            std::string::npos);
  EXPECT_NE(CheckSpecChange(*base, with(R"({"version": 14})"))
                .message()
                .find("spec.version: cannot change from 13 to 14"),
            std::string::npos);
}

TEST(InstanceStore, RecordsSurviveARestartAndNumbersAndPortsAreNeverReused) {
  testing::TempDir dir("klutch-a8s-store");
  std::string uid_a, uid_b;
  {
    InstanceStore store{engines::StateDir(dir.path())};
    ASSERT_TRUE(store.Load(nullptr).ok());
    auto a = store.Create("uid-a", "ns", "a", 3, "127.0.0.1");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->number, 1);
    EXPECT_EQ(a->ports.size(), 3u);
    EXPECT_EQ(a->database, "a9s_apps_default_db");
    EXPECT_EQ(a->encryption_key.size(), 64u);
    a->bindings["sb-1"] = BindingAccount{{.username = "u", .password = "p"}, "sb-1"};
    a->applied_spec = ParametersExampleSpec();
    a->provisioned = true;
    a->rejoining = {2};
    a->set_aside = {2};
    ASSERT_TRUE(store.Save(*a).ok());
    auto b = store.Create("uid-b", "ns", "b", 1, "127.0.0.1");
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->number, 2);
    for (int p : b->ports) EXPECT_EQ(std::count(a->ports.begin(), a->ports.end(), p), 0);
    ASSERT_TRUE(store.Remove(*b).ok());
  }
  InstanceStore again{engines::StateDir(dir.path())};
  std::vector<std::string> errors;
  ASSERT_TRUE(again.Load(&errors).ok());
  EXPECT_TRUE(errors.empty());
  auto a = again.Get("uid-a");
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->provisioned);
  EXPECT_EQ(a->applied_spec, ParametersExampleSpec());
  EXPECT_EQ(a->rejoining, std::vector<int>{2});
  EXPECT_EQ(a->set_aside, std::vector<int>{2});
  ASSERT_EQ(a->bindings.count("sb-1"), 1u);
  EXPECT_EQ(a->bindings["sb-1"].username, "u");
  EXPECT_FALSE(again.Get("uid-b").has_value());
  // Instance 2 was removed, and 1 is taken: the next one is 2 again only because nothing of
  // instance 2 is left on disk.
  auto c = again.Create("uid-c", "ns", "c", 1, "127.0.0.1");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->number, 2);
  EXPECT_FALSE(again.Started("uid-a"));
  again.SetStarted("uid-a");
  EXPECT_TRUE(again.Started("uid-a"));
}

// A port that is not one makes the record unreadable (never a shorter list that shifts nodes
// to other ports), and the store says why for that Postgresql instead of forgetting it.
TEST(InstanceStore, ARecordWithABadPortIsUnreadableAndSaysWhy) {
  testing::TempDir dir("klutch-a8s-store");
  {
    InstanceStore store{engines::StateDir(dir.path())};
    ASSERT_TRUE(store.Load(nullptr).ok());
    auto a = store.Create("uid-a", "ns", "a", 3, "127.0.0.1");
    ASSERT_TRUE(a.ok());
    Json bad = ToJson(*a);
    bad["ports"][1] = 70000;
    EXPECT_EQ(InstanceFromJson(bad).status().message(), "ports[1]: 70000 is not a TCP port");
    ASSERT_TRUE(engines::StateDir(dir.path()).SaveJson(a->number, bad).ok());
  }
  InstanceStore again{engines::StateDir(dir.path())};
  std::vector<std::string> errors;
  ASSERT_TRUE(again.Load(&errors).ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_FALSE(again.Get("uid-a").has_value());
  auto why = again.Unreadable("uid-a");
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, (dir.path() / "i" / "1" / "instance.json").string() +
                      ": ports[1]: 70000 is not a TCP port");
  EXPECT_FALSE(again.Unreadable("uid-b").has_value());
  // The next instance does not take the unreadable one's number.
  auto b = again.Create("uid-b", "ns", "b", 1, "127.0.0.1");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->number, 2);
}

// deploy/operator: every file parses, RBAC names every group, resource and verb (the operator
// test runs with exactly these rules), the StatefulSet runs `klutch operator` as non-root with
// its state on a volume.
TEST(DeployOperator, ManifestsParseAndGrantNoWildcard) {
  const std::filesystem::path dir = std::filesystem::path(KLUTCH_SOURCE_DIR) / "deploy/operator";
  int rules = 0;
  bool statefulset = false;
  for (const char* file :
       {"namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "statefulset.yaml"}) {
    SCOPED_TRACE(file);
    const std::string text = testing::ReadFileOrEmpty(dir / file);
    ASSERT_FALSE(text.empty());
    for (const std::string& doc : testing::SplitYamlDocuments(text)) {
      auto object = machinery::ParseYaml(doc);
      ASSERT_TRUE(object.ok()) << object.status().ToString();
      if (!object->is_object() || object->empty()) continue;
      if (const Json* list = machinery::Find(*object, {"rules"})) {
        for (const Json& rule : *list) {
          ++rules;
          for (const char* key : {"apiGroups", "resources", "verbs"}) {
            for (const Json& v : rule[key]) EXPECT_NE(v, "*") << machinery::Dump(rule);
          }
        }
      }
      if (machinery::Kind(*object) == "StatefulSet") {
        statefulset = true;
        const Json& pod = (*object)["spec"]["template"]["spec"];
        EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
        EXPECT_EQ(pod["containers"][0]["command"], Json::array({"klutch", "operator"}));
        EXPECT_EQ(pod["containers"][0]["volumeMounts"][0]["mountPath"], "/var/lib/klutch-operator");
        EXPECT_EQ((*object)["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "state");
      }
    }
  }
  EXPECT_GE(rules, 10);
  EXPECT_TRUE(statefulset);
}

}  // namespace
}  // namespace klutch::a8s
