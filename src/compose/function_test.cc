// function-patch-and-transform, built in: the REAL Compositions and example claims of the
// upstream Klutch package (read at run time from ../shared/conformance/klutch/crossplane-api),
// with expected values written from data-services.md §5, plus the mechanics the package does
// not exercise (readiness checks, connection details, policies, PatchSets, errors).
#include "compose/function.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "compose/fieldpath.h"
#include "compose/xrd.h"
#include "machinery/json.h"
#include "test/support/json_text.h"

namespace klutch::compose::function_test {
namespace {

namespace fs = std::filesystem;

const fs::path kPackage = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/crossplane-api";

using fixture::J;

Json LoadYaml(const fs::path& relative) {
  const fs::path path = kPackage / relative;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(text.str().empty()) << "cannot read " << path;
  auto parsed = machinery::ParseYaml(text.str());
  EXPECT_TRUE(parsed.ok()) << path << ": " << parsed.status().ToString();
  return parsed.ok() ? *parsed : Json();
}

// The patch-and-transform step input of a Composition file (spec.pipeline[0].input).
Json StepInput(const fs::path& composition) {
  Json c = LoadYaml(fs::path("api") / composition);
  EXPECT_EQ(c.value("kind", ""), "Composition") << composition;
  const Json* input = GetPath(c, *ParseFieldPath("spec.pipeline[0].input"));
  EXPECT_NE(input, nullptr) << composition;
  return input ? *input : Json();
}

// The XR Crossplane makes of a claim: the claim's spec, the claim labels, an X-prefixed kind.
Json XrFromClaim(const Json& claim) {
  const std::string name = claim["metadata"].value("name", "");
  const std::string ns = claim["metadata"].value("namespace", "");
  Json xr{{"apiVersion", claim.value("apiVersion", "")},
          {"kind", "X" + claim.value("kind", "")},
          {"metadata",
           {{"name", name + "-x7k2p"},
            {"labels",
             {{std::string(kLabelClaimName), name}, {std::string(kLabelClaimNamespace), ns}}}}},
          {"spec", claim["spec"]}};
  return xr;
}

Json XrFromExample(const fs::path& example) {
  return XrFromClaim(LoadYaml(fs::path("examples") / example));
}

StepResult Step(const Json& input, const Json& xr,
                const std::map<std::string, ObservedResource>& observed = {}) {
  auto result = RunPatchAndTransform(input, xr, observed);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? *std::move(result) : StepResult();
}

// The value at `path` of `object`, null when absent.
Json At(const Json& object, std::string_view path) {
  auto parsed = ParseFieldPath(path);
  EXPECT_TRUE(parsed.ok()) << path;
  if (!parsed.ok()) return Json();
  const Json* v = GetPath(object, *parsed);
  return v ? *v : Json();
}

bool Has(const Json& object, std::string_view path) {
  auto parsed = ParseFieldPath(path);
  return parsed.ok() && GetPath(object, *parsed) != nullptr;
}

std::string RunError(const Json& input, const Json& xr,
                     const std::map<std::string, ObservedResource>& observed = {}) {
  auto result = RunPatchAndTransform(input, xr, observed);
  EXPECT_FALSE(result.ok()) << "expected an error";
  if (result.ok()) return "";
  EXPECT_EQ(result.status().reason(), core::Reason::kBadRequest) << result.status().ToString();
  return result.status().message();
}

bool Contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

Json ReadyConditions(const char* ready = "True") {
  return Json::array({Json{{"type", "Synced"}, {"status", "True"}, {"reason", "ReconcileSuccess"}},
                      Json{{"type", "Ready"}, {"status", ready}, {"reason", "Available"}}});
}

// ---- a8s-postgresql (§5.2) ----

TEST(A8sPostgresql, ExampleClaimGivesTheOperatorManifest) {
  const Json xr = XrFromExample("a8s/postgresql-claim.yaml");
  StepResult r = Step(StepInput("a8s/postgresql/composition.yaml"), xr);
  ASSERT_EQ(r.resources.size(), 1u);
  const DesiredResource& d = r.resources[0];
  EXPECT_EQ(d.name, "a8s-postgresql");
  EXPECT_EQ(d.object["apiVersion"], "kubernetes.crossplane.io/v1alpha1");
  EXPECT_EQ(d.object["kind"], "Object");
  EXPECT_EQ(At(d.object, "spec.providerConfigRef.name"), "kubernetes-provider");

  const Json manifest = At(d.object, "spec.forProvider.manifest");
  EXPECT_EQ(manifest["apiVersion"], "postgresql.anynines.com/v1beta3");
  EXPECT_EQ(manifest["kind"], "Postgresql");
  EXPECT_EQ(manifest["metadata"], J(R"({"name":"example-a8s-postgresql","namespace":"default"})"));
  const Json& spec = manifest["spec"];
  EXPECT_TRUE(spec["version"].is_number_integer()) << spec["version"].dump();
  EXPECT_EQ(spec["version"], 13);
  EXPECT_EQ(spec["volumeSize"], "10Gi");
  EXPECT_EQ(spec["resources"], J(R"({"requests":{"cpu":"2","memory":"2Gi"},
                                     "limits":{"cpu":"2","memory":"2Gi"}})"));
  EXPECT_TRUE(spec["replicas"].is_number_integer()) << spec["replicas"].dump();
  EXPECT_EQ(spec["replicas"], 1);
  EXPECT_EQ(spec["expose"], "Internal");  // the claim's value replaces the base's LoadBalancer
  EXPECT_FALSE(spec.contains("parameters"));

  // Nothing observed yet: not ready, and the XR is left as it was.
  EXPECT_FALSE(d.ready);
  EXPECT_FALSE(d.unready_reason.empty());
  EXPECT_EQ(r.composite, xr);
  EXPECT_TRUE(r.connection_details.empty());
}

TEST(A8sPostgresql, ExposeDefaultsToTheBaseWhenTheClaimOmitsIt) {
  Json xr = XrFromExample("a8s/postgresql-claim.yaml");
  xr["spec"].erase("expose");
  StepResult r = Step(StepInput("a8s/postgresql/composition.yaml"), xr);
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_EQ(At(r.resources[0].object, "spec.forProvider.manifest.spec.expose"), "LoadBalancer");
}

TEST(A8sPostgresql, PlanSizeTableAndReplicas) {
  struct Size {
    const char* token;
    const char* volume;
    const char* cpu;
    const char* memory;
  };
  const std::vector<Size> sizes = {{"nano", "3Gi", "2", "1Gi"},
                                   {"small", "10Gi", "2", "2Gi"},
                                   {"medium", "50Gi", "2", "4Gi"},
                                   {"big", "100Gi", "4", "16Gi"}};
  const Json input = StepInput("a8s/postgresql/composition.yaml");
  for (const auto& [kind, replicas] :
       std::vector<std::pair<std::string, int>>{{"single", 1}, {"replica", 3}}) {
    for (const Size& size : sizes) {
      const std::string plan = "postgresql-" + kind + "-" + size.token;
      SCOPED_TRACE(plan);
      Json xr = XrFromExample("a8s/postgresql-claim.yaml");
      xr["spec"]["plan"] = plan;
      StepResult r = Step(input, xr);
      ASSERT_EQ(r.resources.size(), 1u);
      const Json spec = At(r.resources[0].object, "spec.forProvider.manifest.spec");
      EXPECT_EQ(spec["volumeSize"], size.volume);
      EXPECT_EQ(At(spec, "resources.requests.cpu"), size.cpu);
      EXPECT_EQ(At(spec, "resources.limits.cpu"), size.cpu);
      EXPECT_EQ(At(spec, "resources.requests.memory"), size.memory);
      EXPECT_EQ(At(spec, "resources.limits.memory"), size.memory);
      EXPECT_EQ(spec["replicas"], replicas);
    }
  }
  // a8s-postgresql14 -> version 14.
  Json xr = XrFromExample("a8s/postgresql-claim.yaml");
  xr["spec"]["service"] = "a9s-postgresql14";
  StepResult r = Step(input, xr);
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_EQ(At(r.resources[0].object, "spec.forProvider.manifest.spec.version"), 14);
}

TEST(A8sPostgresql, ParametersExampleMapsEveryParameter) {
  StepResult r = Step(StepInput("a8s/postgresql/composition.yaml"),
                      XrFromExample("a8s/postgresql-claim-parameters.yaml"));
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_EQ(At(r.resources[0].object, "spec.forProvider.manifest.spec.parameters"), J(R"({
      "maxConnections": 120,
      "tempFileLimitKiloBytes": 1024,
      "trackIOTiming": "on",
      "archiveTimeoutSeconds": 1000,
      "statementTimeoutMillis": 3000,
      "walWriterDelayMillis": 400,
      "maxLocksPerTransaction": 128,
      "maxReplicationSlots": 12,
      "maxWALSenders": 12,
      "synchronousCommit": "local",
      "sslCiphers": "NULL-MD5",
      "sslMinProtocolVersion": "TLSv1",
      "clientMinMessages": "log",
      "logMinMessages": "notice",
      "logMinErrorStatement": "warning",
      "logStatement": "ddl",
      "logErrorVerbosity": "TERSE"})"));
}

TEST(A8sPostgresql, ObservedOperatorStatusReachesTheComposite) {
  const Json xr = XrFromExample("a8s/postgresql-claim.yaml");
  StepResult first = Step(StepInput("a8s/postgresql/composition.yaml"), xr);
  ASSERT_EQ(first.resources.size(), 1u);
  ObservedResource observed{.object = first.resources[0].object};
  observed.object["metadata"]["name"] = "example-a8s-postgresql-x7k2p-abcde";
  observed.object["status"] = {
      {"atProvider",
       {{"manifest", {{"status", {{"clusterStatus", "Running"}, {"readyReplicas", 1}}}}}}},
      {"conditions", ReadyConditions()}};
  StepResult r =
      Step(StepInput("a8s/postgresql/composition.yaml"), xr, {{"a8s-postgresql", observed}});
  EXPECT_EQ(At(r.composite, "status.managed"),
            J(R"({"clusterStatus":"Running","readyReplicas":1})"));
  // The rest of the XR is untouched.
  Json without_status = r.composite;
  without_status.erase("status");
  EXPECT_EQ(without_status, xr);
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_TRUE(r.resources[0].ready) << r.resources[0].unready_reason;
  EXPECT_EQ(r.resources[0].unready_reason, "");
  // Desired state is still computed from the base, not from what was observed.
  EXPECT_FALSE(r.resources[0].object.contains("status"));
  EXPECT_EQ(r.resources[0].object, first.resources[0].object);
}

// ---- a9s instances (§5.1) ----

struct A9sService {
  std::string name;  // directory and composition suffix
  // claim parameter path -> broker parameter path (relative to spec.parameters /
  // spec.forProvider.parameters)
  std::vector<std::pair<std::string, std::string>> parameters;
};

const std::vector<A9sService>& A9sServices() {
  static const auto* services = new std::vector<A9sService>{
      {"postgresql",
       {{"dataChecksums", "data_checksums"},
        {"maxConnections", "max_connections"},
        {"effectiveCacheSize", "effective_cache_size"},
        {"workMem", "work_mem"},
        {"maintenanceWorkMem", "maintenance_work_mem"},
        {"tempFileLimit", "temp_file_limit"},
        {"trackIoTiming", "track_io_timing"},
        {"archiveTimeout", "archive_timeout"},
        {"statementTimeout", "statement_timeout"},
        {"idleInTransactionSessionTimeout", "idle_in_transaction_session_timeout"},
        {"rolePrivileges", "role_privileges"},
        {"walLevelLogical", "wal_level_logical"},
        {"walWriterDelay", "wal_writer_delay"},
        {"maxReplicationSlots", "max_replication_slots"},
        {"maxWalSenders", "max_wal_senders"},
        {"synchronousCommit", "synchronous_commit"},
        {"clientMinMessages", "client_min_messages"},
        {"logMinMessages", "pg_log_min_messages"},
        {"logMinErrorStatement", "pg_log_min_error_statement"},
        {"logStatement", "log_statement"},
        {"logErrorVerbosity", "log_error_verbosity"}}},
      {"keyvalue",
       {{"snapshot", "snapshot"},
        {"replBacklogSize", "repl-backlog-size"},
        {"minReplicasToWrite", "min-replicas-to-write"},
        {"minReplicasMaxLag", "min-replicas-max-lag"},
        {"lazyfreeLazyEviction", "lazyfree-lazy-eviction"},
        {"lazyfreeLazyExpire", "lazyfree-lazy-expire"},
        {"maxmemory", "maxmemory"},
        {"maxmemoryPolicy", "maxmemory-policy"},
        {"maxmemorySamples", "maxmemory-samples"},
        {"maxclients", "maxclients"},
        {"downAfterMilliseconds", "down-after-milliseconds"},
        {"failoverTimeout", "failover-timeout"},
        {"hostnameResolution", "hostname-resolution"},
        {"tlsProtocols", "tls-protocols"},
        {"tlsCiphers", "tls-ciphers"},
        {"tlsCiphersuites", "tls-ciphersuites"},
        {"luaTimeLimit", "lua-time-limit"},
        {"notifyKeyspaceEvents", "notify-keyspace-events"}}},
      {"logme2",
       {{"javaHeapspace", "java_heapspace"},
        {"javaMaxmetaspace", "java_maxmetaspace"},
        {"javaGarbageCollector", "java_garbage_collector"},
        {"ismJobInterval", "ism_job_interval"},
        {"ismDeletionAfter", "ism_deletion_after"},
        {"ismJitter", "ism_jitter"},
        {"opensearchTlsProtocols", "opensearch-tls-protocols"},
        {"opensearchTlsCiphers", "opensearch-tls-ciphers"},
        {"fluentdUdp", "fluentd-udp"},
        {"fluentdTcp", "fluentd-tcp"},
        {"fluentdTls", "fluentd-tls"},
        {"fluentdTlsCiphers", "fluentd-tls-ciphers"},
        {"fluentdTlsVersion", "fluentd-tls-version"},
        {"fluentdTlsMinVersion", "fluentd-tls-min-version"},
        {"fluentdTlsMaxVersion", "fluentd-tls-max-version"},
        {"groks", "groks"}}},
      {"mariadb",
       {{"binlogExpireDays", "binlog_expire_days"},
        {"databases", "databases"},
        {"grantPerformanceSchemaPermissions", "grant_performance_schema_permissions"}}},
      {"messaging",
       {{"consumerTimeout", "consumer_timeout"},
        {"tlsProtocols", "tls-protocols"},
        {"tlsCiphers", "tls-ciphers"}}},
      {"mongodb",
       {{"setClusterParameter.changeStreamOptions.preAndPostImages.expireAfterSeconds",
         "set_cluster_parameter.changeStreamOptions.preAndPostImages.expireAfterSeconds"}}},
      {"prometheus",
       {{"mappingStrictMatch", "mapping_strict_match"}, {"scrapeConfigs", "scrape_configs"}}},
      {"search",
       {{"javaHeapspace", "java_heapspace"},
        {"javaMaxmetaspace", "java_maxmetaspace"},
        {"javaGarbageCollector", "java_garbage_collector"},
        {"tlsProtocols", "tls-protocols"},
        {"tlsCiphers", "tls-ciphers"}}},
  };
  return *services;
}

// What spec.forProvider.parameters must be for the claim parameters `given`.
Json ExpectedBrokerParameters(const A9sService& service, const Json& given) {
  Json want;
  for (const auto& [claim_key, broker_key] : service.parameters) {
    const Json* v = GetPath(given, *ParseFieldPath(claim_key));
    if (v) {
      EXPECT_TRUE(SetPath(want, *ParseFieldPath(broker_key), *v).ok());
    }
  }
  return want;
}

void ExpectServiceInstanceBase(const DesiredResource& d, const std::string& service,
                               const Json& xr) {
  EXPECT_EQ(d.name, "a9s-" + service);
  EXPECT_EQ(d.object["apiVersion"], "dataservices.anynines.com/v1");
  EXPECT_EQ(d.object["kind"], "ServiceInstance");
  EXPECT_EQ(At(d.object, "spec.providerConfigRef.name"), service + "-service-broker");
  const Json fp = At(d.object, "spec.forProvider");
  EXPECT_EQ(fp["acceptsIncomplete"], true);
  EXPECT_EQ(fp["organizationGuid"], "a1d46b5c-b639-4f43-85c7-e9a0e5f01f75");
  EXPECT_EQ(fp["spaceGuid"], "1bf71cf3-9017-4846-bffc-b9b31872bfaf");
  EXPECT_EQ(fp["serviceName"], At(xr, "spec.service"));
  EXPECT_EQ(fp["planName"], At(xr, "spec.plan"));
  EXPECT_EQ(At(d.object, "metadata.labels"),
            At(xr, "metadata.labels"));  // exactly the two claim labels
}

TEST(A9sInstances, ExampleClaimsGiveServiceInstances) {
  for (const A9sService& service : A9sServices()) {
    SCOPED_TRACE(service.name);
    const Json xr = XrFromExample(fs::path("a9s") / service.name / "serviceinstance-claim.yaml");
    StepResult r = Step(StepInput(fs::path("a9s") / service.name / "composition.yaml"), xr);
    ASSERT_EQ(r.resources.size(), 1u);
    ExpectServiceInstanceBase(r.resources[0], service.name, xr);
    EXPECT_FALSE(Has(r.resources[0].object, "spec.forProvider.parameters"));
    EXPECT_EQ(r.composite, xr);
  }
}

TEST(A9sInstances, ParametersExamplesMapEveryParameterToItsBrokerKey) {
  for (const A9sService& service : A9sServices()) {
    SCOPED_TRACE(service.name);
    const Json xr =
        XrFromExample(fs::path("a9s") / service.name / "serviceinstance-claim-parameters.yaml");
    ASSERT_TRUE(Has(xr, "spec.parameters"));
    StepResult r = Step(StepInput(fs::path("a9s") / service.name / "composition.yaml"), xr);
    ASSERT_EQ(r.resources.size(), 1u);
    ExpectServiceInstanceBase(r.resources[0], service.name, xr);
    const Json want = ExpectedBrokerParameters(service, xr["spec"]["parameters"]);
    EXPECT_FALSE(want.is_null());
    EXPECT_EQ(At(r.resources[0].object, "spec.forProvider.parameters"), want);
  }
}

TEST(A9sInstances, EveryDocumentedParameterIsPatched) {
  // Each claim parameter of §5.1 set to a distinct value reaches its broker key, unchanged
  // (PostgreSQL's upper-case enums included).
  for (const A9sService& service : A9sServices()) {
    SCOPED_TRACE(service.name);
    Json xr = XrFromExample(fs::path("a9s") / service.name / "serviceinstance-claim.yaml");
    Json given;
    int n = 0;
    for (const auto& [claim_key, broker_key] : service.parameters) {
      ASSERT_TRUE(SetPath(given, *ParseFieldPath(claim_key), "VALUE-" + std::to_string(n++)).ok());
    }
    xr["spec"]["parameters"] = given;
    StepResult r = Step(StepInput(fs::path("a9s") / service.name / "composition.yaml"), xr);
    ASSERT_EQ(r.resources.size(), 1u);
    EXPECT_EQ(At(r.resources[0].object, "spec.forProvider.parameters"),
              ExpectedBrokerParameters(service, given));
  }
}

TEST(A9sInstances, RemovingAParameterRemovesItFromTheDesiredResource) {
  const Json input = StepInput("a9s/postgresql/composition.yaml");
  Json xr = XrFromExample("a9s/postgresql/serviceinstance-claim-parameters.yaml");
  StepResult before = Step(input, xr);
  ASSERT_EQ(before.resources.size(), 1u);
  EXPECT_EQ(At(before.resources[0].object, "spec.forProvider.parameters.temp_file_limit"), 4096);

  xr["spec"]["parameters"].erase("tempFileLimit");
  StepResult after = Step(input, xr);
  ASSERT_EQ(after.resources.size(), 1u);
  EXPECT_FALSE(Has(after.resources[0].object, "spec.forProvider.parameters.temp_file_limit"));
  EXPECT_EQ(At(after.resources[0].object, "spec.forProvider.parameters.archive_timeout"), 700);

  // Even when the resource was observed with the parameter still set.
  ObservedResource observed{.object = before.resources[0].object};
  StepResult observed_after = Step(input, xr, {{"a9s-postgresql", observed}});
  ASSERT_EQ(observed_after.resources.size(), 1u);
  EXPECT_FALSE(
      Has(observed_after.resources[0].object, "spec.forProvider.parameters.temp_file_limit"));

  xr["spec"].erase("parameters");
  StepResult none = Step(input, xr);
  ASSERT_EQ(none.resources.size(), 1u);
  EXPECT_FALSE(Has(none.resources[0].object, "spec.forProvider.parameters"));
}

TEST(A9sInstances, AcceptsIncompleteFromTheClaimOverridesTheBase) {
  Json xr = XrFromExample("a9s/mariadb/serviceinstance-claim.yaml");
  xr["spec"]["acceptsIncomplete"] = false;
  StepResult r = Step(StepInput("a9s/mariadb/composition.yaml"), xr);
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_EQ(At(r.resources[0].object, "spec.forProvider.acceptsIncomplete"), false);
}

TEST(A9sInstances, ObservedStatusReachesTheCompositeAndReadinessFollowsReady) {
  for (const A9sService& service : A9sServices()) {
    SCOPED_TRACE(service.name);
    const Json input = StepInput(fs::path("a9s") / service.name / "composition.yaml");
    const Json xr = XrFromExample(fs::path("a9s") / service.name / "serviceinstance-claim.yaml");
    StepResult first = Step(input, xr);
    ASSERT_EQ(first.resources.size(), 1u);
    ObservedResource observed{.object = first.resources[0].object};
    observed.object["status"] = {{"atProvider",
                                  {{"createdAt", "2024-01-01T00:00:00Z"},
                                   {"provisionedAt", "2024-01-01T00:01:00Z"},
                                   {"updatedAt", "2024-01-01T00:02:00Z"},
                                   {"state", "succeeded"},
                                   {"instanceID", "not-propagated"}}},
                                 {"conditions", ReadyConditions()}};
    StepResult r = Step(input, xr, {{"a9s-" + service.name, observed}});
    Json want_managed{{"createdAt", "2024-01-01T00:00:00Z"},
                      {"provisionedAt", "2024-01-01T00:01:00Z"},
                      {"updatedAt", "2024-01-01T00:02:00Z"},
                      {"state", "succeeded"},
                      {"conditions", ReadyConditions()}};
    EXPECT_EQ(At(r.composite, "status.managed"), want_managed);
    ASSERT_EQ(r.resources.size(), 1u);
    EXPECT_TRUE(r.resources[0].ready) << r.resources[0].unready_reason;

    // Ready=False: not ready, with a reason naming the condition; status still propagated.
    observed.object["status"]["conditions"] = ReadyConditions("False");
    observed.object["status"]["atProvider"]["state"] = "in progress";
    r = Step(input, xr, {{"a9s-" + service.name, observed}});
    ASSERT_EQ(r.resources.size(), 1u);
    EXPECT_FALSE(r.resources[0].ready);
    EXPECT_TRUE(Contains(r.resources[0].unready_reason, "Ready")) << r.resources[0].unready_reason;
    EXPECT_EQ(At(r.composite, "status.managed.state"), "in progress");

    // Observed, but no status yet: nothing to copy, not ready.
    observed.object.erase("status");
    r = Step(input, xr, {{"a9s-" + service.name, observed}});
    EXPECT_EQ(r.composite, xr);
    ASSERT_EQ(r.resources.size(), 1u);
    EXPECT_FALSE(r.resources[0].ready);
  }
}

TEST(A9sInstances, ObservedResourceOfAnotherNameIsIgnored) {
  const Json xr = XrFromExample("a9s/search/serviceinstance-claim.yaml");
  ObservedResource other{.object = J(R"({"status":{"atProvider":{"state":"succeeded"}}})")};
  StepResult r = Step(StepInput("a9s/search/composition.yaml"), xr, {{"a9s-postgresql", other}});
  EXPECT_EQ(r.composite, xr);
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_FALSE(r.resources[0].ready);
}

// ---- bindings, backups, restores (§5.3, §5.5) ----

const std::vector<std::string> kServiceTypes = {"keyvalue", "logme2",     "mariadb",    "messaging",
                                                "mongodb",  "postgresql", "prometheus", "search"};

TEST(A9sServiceBinding, WritesItsConnectionSecretNextToTheClaim) {
  const Json input = StepInput("a9s/servicebinding/composition.yaml");
  for (const std::string& type : kServiceTypes) {
    SCOPED_TRACE(type);
    const Json xr = XrFromExample(fs::path("a9s") / type / "servicebinding-claim.yaml");
    const std::string claim =
        At(xr, "metadata.labels[crossplane.io/claim-name]").get<std::string>();
    const Json ns = At(xr, "metadata.labels[crossplane.io/claim-namespace]");
    StepResult r = Step(input, xr);
    ASSERT_EQ(r.resources.size(), 1u);
    const Json& o = r.resources[0].object;
    EXPECT_EQ(r.resources[0].name, "a9s-servicebinding");
    EXPECT_EQ(o["apiVersion"], "dataservices.anynines.com/v1");
    EXPECT_EQ(o["kind"], "ServiceBinding");
    EXPECT_EQ(At(o, "spec.providerConfigRef.name"), type + "-service-broker");
    EXPECT_EQ(At(o, "spec.writeConnectionSecretToRef"),
              (Json{{"name", claim + "-creds"}, {"namespace", ns}}));
    EXPECT_EQ(At(o, "spec.forProvider.instanceName"), At(xr, "spec.instanceRef"));
    EXPECT_EQ(At(o, "spec.forProvider.acceptsIncomplete"), true);
    EXPECT_EQ(At(o, "metadata.labels"), (Json{{"klutch.io/instance-type", type},
                                              {std::string(kLabelClaimName), claim},
                                              {std::string(kLabelClaimNamespace), ns}}));
  }
}

TEST(A9sServiceBinding, PostgresqlExampleValues) {
  StepResult r = Step(StepInput("a9s/servicebinding/composition.yaml"),
                      XrFromExample("a9s/postgresql/servicebinding-claim.yaml"));
  ASSERT_EQ(r.resources.size(), 1u);
  const Json& o = r.resources[0].object;
  EXPECT_EQ(At(o, "spec.providerConfigRef.name"), "postgresql-service-broker");
  EXPECT_EQ(At(o, "spec.writeConnectionSecretToRef"),
            J(R"({"name":"example-a9s-postgresql-creds","namespace":"default"})"));
  EXPECT_EQ(At(o, "spec.forProvider.instanceName"), "example-a9s-postgresql");
}

TEST(A9sServiceBinding, ObservedStatusReachesTheCompositeButNotTheConnectionDetails) {
  const Json input = StepInput("a9s/servicebinding/composition.yaml");
  const Json xr = XrFromExample("a9s/postgresql/servicebinding-claim.yaml");
  ObservedResource observed{.object = Step(input, xr).resources.at(0).object};
  observed.object["status"] = {
      {"atProvider",
       {{"serviceBindingID", "b-123"},
        {"state", "succeeded"},
        {"connectionDetails", Json::array({Json{{"host", "pg.example"}, {"port", "5432"}}})}}},
      {"conditions", ReadyConditions()}};
  observed.connection = {{"username", "u"}, {"password", "p"}};
  StepResult r = Step(input, xr, {{"a9s-servicebinding", observed}});
  EXPECT_EQ(At(r.composite, "status.managed"), (Json{{"serviceBindingID", "b-123"},
                                                     {"state", "succeeded"},
                                                     {"conditions", ReadyConditions()}}));
  EXPECT_TRUE(r.connection_details.empty());  // the composition declares none
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_TRUE(r.resources[0].ready);
}

TEST(A9sBackup, ProviderConfigIsTheServiceTypesBackupManager) {
  const Json input = StepInput("a9s/backup/composition.yaml");
  for (const std::string& type : kServiceTypes) {
    SCOPED_TRACE(type);
    const Json xr = XrFromExample(fs::path("a9s") / type / "backup-claim.yaml");
    StepResult r = Step(input, xr);
    ASSERT_EQ(r.resources.size(), 1u);
    const Json& o = r.resources[0].object;
    EXPECT_EQ(o["apiVersion"], "dataservices.anynines.com/v1");
    EXPECT_EQ(o["kind"], "Backup");
    EXPECT_EQ(At(o, "spec.providerConfigRef.name"), type + "-backup-manager");
    EXPECT_EQ(At(o, "spec.forProvider.instanceName"), At(xr, "spec.instanceRef"));
    EXPECT_EQ(At(o, "metadata.labels"), At(xr, "metadata.labels"));
    EXPECT_FALSE(Has(o, "spec.writeConnectionSecretToRef"));
  }
}

TEST(A9sBackup, ObservedBackupStatusReachesTheComposite) {
  const Json input = StepInput("a9s/backup/composition.yaml");
  const Json xr = XrFromExample("a9s/postgresql/backup-claim.yaml");
  ObservedResource observed{.object = Step(input, xr).resources.at(0).object};
  const Json at_provider = J(R"({"downloadable":true,"finished_at":"2024-01-01T00:00:00Z",
      "id":42,"size":1024,"status":"done","triggered_at":"2024-01-01T00:00:00Z",
      "other":"not propagated"})");
  observed.object["status"] = {{"atProvider", at_provider}, {"conditions", ReadyConditions()}};
  StepResult r = Step(input, xr, {{"a9s-backup", observed}});
  Json want = at_provider;
  want.erase("other");
  want["conditions"] = ReadyConditions();
  EXPECT_EQ(At(r.composite, "status.managed"), want);
}

TEST(A9sRestore, PatchesTheBackupNameAndProviderConfig) {
  const Json input = StepInput("a9s/restore/composition.yaml");
  for (const std::string& type : kServiceTypes) {
    SCOPED_TRACE(type);
    const Json xr = XrFromExample(fs::path("a9s") / type / "restore-claim.yaml");
    StepResult r = Step(input, xr);
    ASSERT_EQ(r.resources.size(), 1u);
    const Json& o = r.resources[0].object;
    EXPECT_EQ(o["kind"], "Restore");
    EXPECT_EQ(At(o, "spec.providerConfigRef.name"), type + "-backup-manager");
    EXPECT_EQ(At(o, "spec.forProvider.backupName"), At(xr, "spec.backupRef"));
    EXPECT_EQ(At(o, "metadata.labels"), At(xr, "metadata.labels"));
  }
}

TEST(A8sServiceBinding, WrapsTheOperatorsServiceBinding) {
  const Json xr = XrFromExample("a8s/servicebinding-claim.yaml");
  StepResult r = Step(StepInput("a8s/servicebinding/composition.yaml"), xr);
  ASSERT_EQ(r.resources.size(), 1u);
  const Json manifest = At(r.resources[0].object, "spec.forProvider.manifest");
  EXPECT_EQ(manifest["apiVersion"], "servicebindings.anynines.com/v1beta3");
  EXPECT_EQ(manifest["kind"], "ServiceBinding");
  EXPECT_EQ(manifest["metadata"],
            (Json{{"name", At(xr, "metadata.labels[crossplane.io/claim-name]")},
                  {"namespace", At(xr, "metadata.labels[crossplane.io/claim-namespace]")}}));
  EXPECT_EQ(At(manifest, "spec.instance"),
            (Json{{"apiVersion", "postgresql.anynines.com/v1beta3"},
                  {"kind", "Postgresql"},
                  {"namespace", At(xr, "metadata.labels[crossplane.io/claim-namespace]")},
                  {"name", At(xr, "spec.instanceRef")}}));
  EXPECT_EQ(At(r.resources[0].object, "spec.providerConfigRef.name"), "kubernetes-provider");

  ObservedResource observed{.object = r.resources[0].object};
  observed.object["status"] = {
      {"atProvider",
       {{"manifest",
         {{"status",
           {{"implemented", true},
            {"secret", {{"name", "sb-secret"}, {"namespace", "default"}}}}}}}}},
      {"conditions", ReadyConditions()}};
  StepResult o = Step(StepInput("a8s/servicebinding/composition.yaml"), xr,
                      {{"a8s-servicebinding", observed}});
  EXPECT_EQ(At(o.composite, "status.managed"),
            J(R"({"implemented":true,"secret":{"name":"sb-secret","namespace":"default"}})"));
}

TEST(A8sServiceBinding, UnsupportedInstanceTypeFailsNamingTheResourceAndKey) {
  Json xr = XrFromExample("a8s/servicebinding-claim.yaml");
  xr["spec"]["serviceInstanceType"] = "mariadb";
  std::string message = RunError(StepInput("a8s/servicebinding/composition.yaml"), xr);
  EXPECT_TRUE(Contains(message, "a8s-servicebinding")) << message;
  EXPECT_TRUE(Contains(message, "mariadb")) << message;
  EXPECT_TRUE(Contains(message, "patches[")) << message;
}

TEST(A8sBackupAndRestore, WrapTheOperatorsBackupAndRestore) {
  const Json backup_xr = XrFromExample("a8s/backup-claim.yaml");
  StepResult b = Step(StepInput("a8s/backup/composition.yaml"), backup_xr);
  ASSERT_EQ(b.resources.size(), 1u);
  const Json bm = At(b.resources[0].object, "spec.forProvider.manifest");
  EXPECT_EQ(bm["apiVersion"], "backups.anynines.com/v1beta3");
  EXPECT_EQ(bm["kind"], "Backup");
  EXPECT_EQ(At(bm, "spec.serviceInstance"), (Json{{"apiGroup", "postgresql.anynines.com"},
                                                  {"kind", "PostgreSQL"},
                                                  {"name", At(backup_xr, "spec.instanceRef")}}));
  EXPECT_EQ(At(bm, "metadata.name"), At(backup_xr, "metadata.labels[crossplane.io/claim-name]"));

  const Json restore_xr = XrFromExample("a8s/restore-claim.yaml");
  StepResult r = Step(StepInput("a8s/restore/composition.yaml"), restore_xr);
  ASSERT_EQ(r.resources.size(), 1u);
  const Json rm = At(r.resources[0].object, "spec.forProvider.manifest");
  EXPECT_EQ(rm["kind"], "Restore");
  EXPECT_EQ(At(rm, "spec.backupName"), At(restore_xr, "spec.backupRef"));
  EXPECT_EQ(At(rm, "spec.serviceInstance.kind"), "PostgreSQL");
}

// ---- readiness checks ----

TEST(CheckReadiness, DefaultNeedsReadyTrue) {
  const Json ready = Json{{"status", {{"conditions", ReadyConditions()}}}};
  const Json unready = Json{{"status", {{"conditions", ReadyConditions("False")}}}};
  for (const Json& checks : {Json(), Json::array()}) {
    EXPECT_EQ(CheckReadiness(checks, ready), "");
    EXPECT_NE(CheckReadiness(checks, unready), "");
    EXPECT_NE(CheckReadiness(checks, J(R"({"status":{}})")), "");
    EXPECT_NE(CheckReadiness(checks, J(R"({})")), "");
    EXPECT_NE(CheckReadiness(checks, J(R"({"status":{"conditions":[{"type":"Synced",
                                         "status":"True"}]}})")),
              "");
  }
  EXPECT_TRUE(Contains(CheckReadiness(Json(), unready), "Ready"));
}

TEST(CheckReadiness, FieldChecks) {
  const Json o = J(R"({"status":{"phase":"Running","replicas":3,"ok":true,"no":false,
                       "empty":"","nothing":null,"list":[]}})");
  struct Case {
    const char* check;
    bool ready;
  };
  const std::vector<Case> cases = {
      {R"({"type":"MatchString","fieldPath":"status.phase","matchString":"Running"})", true},
      {R"({"type":"MatchString","fieldPath":"status.phase","matchString":"Pending"})", false},
      {R"({"type":"MatchString","fieldPath":"status.missing","matchString":"Running"})", false},
      {R"({"type":"MatchString","fieldPath":"status.replicas","matchString":"3"})", false},
      {R"({"type":"MatchInteger","fieldPath":"status.replicas","matchInteger":3})", true},
      {R"({"type":"MatchInteger","fieldPath":"status.replicas","matchInteger":1})", false},
      {R"({"type":"MatchInteger","fieldPath":"status.phase","matchInteger":3})", false},
      {R"({"type":"MatchInteger","fieldPath":"status.missing","matchInteger":0})", false},
      {R"({"type":"NonEmpty","fieldPath":"status.phase"})", true},
      {R"({"type":"NonEmpty","fieldPath":"status.list"})", true},
      {R"({"type":"NonEmpty","fieldPath":"status.missing"})", false},
      {R"({"type":"MatchTrue","fieldPath":"status.ok"})", true},
      {R"({"type":"MatchTrue","fieldPath":"status.no"})", false},
      {R"({"type":"MatchTrue","fieldPath":"status.missing"})", false},
      {R"({"type":"MatchFalse","fieldPath":"status.no"})", true},
      {R"({"type":"MatchFalse","fieldPath":"status.ok"})", false},
      {R"({"type":"None"})", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.check);
    std::string reason = CheckReadiness(Json::array({J(c.check)}), o);
    EXPECT_EQ(reason.empty(), c.ready) << reason;
  }
}

TEST(CheckReadiness, NonEmptyMeansPresentAsInFunctionPatchAndTransform) {
  // function-patch-and-transform's NonEmpty only asks whether the field exists.
  const Json o = J(R"({"status":{"empty":"","nothing":null}})");
  EXPECT_EQ(CheckReadiness(J(R"([{"type":"NonEmpty","fieldPath":"status.empty"}])"), o), "");
  EXPECT_EQ(CheckReadiness(J(R"([{"type":"NonEmpty","fieldPath":"status.nothing"}])"), o), "");
}

TEST(CheckReadiness, MatchConditionAndCombinations) {
  const Json o = J(R"({"status":{"phase":"Running","conditions":[
      {"type":"Ready","status":"False"},{"type":"Healthy","status":"True"}]}})");
  EXPECT_EQ(CheckReadiness(J(R"([{"type":"MatchCondition",
                                  "matchCondition":{"type":"Healthy","status":"True"}}])"),
                           o),
            "");
  EXPECT_NE(CheckReadiness(J(R"([{"type":"MatchCondition",
                                  "matchCondition":{"type":"Ready","status":"True"}}])"),
                           o),
            "");
  EXPECT_EQ(CheckReadiness(J(R"([{"type":"MatchCondition",
                                  "matchCondition":{"type":"Ready","status":"False"}}])"),
                           o),
            "");
  // An absent condition has status Unknown, as Crossplane's GetCondition reports it.
  EXPECT_EQ(CheckReadiness(J(R"([{"type":"MatchCondition",
                                  "matchCondition":{"type":"Synced","status":"Unknown"}}])"),
                           o),
            "");
  // None replaces the default: ready whatever the conditions say.
  EXPECT_EQ(CheckReadiness(J(R"([{"type":"None"}])"), o), "");
  // Every check must pass.
  EXPECT_EQ(CheckReadiness(J(R"([
      {"type":"MatchString","fieldPath":"status.phase","matchString":"Running"},
      {"type":"MatchCondition","matchCondition":{"type":"Healthy","status":"True"}}])"),
                           o),
            "");
  std::string reason = CheckReadiness(J(R"([
      {"type":"MatchString","fieldPath":"status.phase","matchString":"Running"},
      {"type":"MatchCondition","matchCondition":{"type":"Ready","status":"True"}}])"),
                                      o);
  EXPECT_TRUE(Contains(reason, "Ready")) << reason;
  reason = CheckReadiness(J(R"([{"type":"MatchString","fieldPath":"status.phase",
                                 "matchString":"Pending"}])"),
                          o);
  EXPECT_TRUE(Contains(reason, "status.phase")) << reason;
  EXPECT_TRUE(Contains(reason, "Pending")) << reason;
  // Unknown check types and bad paths are never ready.
  EXPECT_NE(CheckReadiness(J(R"([{"type":"MatchPhase","fieldPath":"status.phase"}])"), o), "");
  EXPECT_NE(CheckReadiness(J(R"([{"type":"NonEmpty","fieldPath":"status["}])"), o), "");
}

TEST(RunPatchAndTransform, ReadinessChecksOfTheResourceApply) {
  Json input = J(R"({"resources":[{"name":"r","base":{"apiVersion":"v1","kind":"ConfigMap"},
      "readinessChecks":[{"type":"MatchString","fieldPath":"data.state","matchString":"up"}]}]})");
  ObservedResource observed{.object = J(R"({"data":{"state":"up"}})")};
  StepResult r = Step(input, J(R"({"spec":{}})"), {{"r", observed}});
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_TRUE(r.resources[0].ready) << r.resources[0].unready_reason;
  observed.object["data"]["state"] = "down";
  r = Step(input, J(R"({"spec":{}})"), {{"r", observed}});
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_FALSE(r.resources[0].ready);
  EXPECT_TRUE(Contains(r.resources[0].unready_reason, "data.state"));
}

// ---- connection details ----

TEST(RunPatchAndTransform, ConnectionDetailsFromValueFieldPathAndSecretKey) {
  Json input = J(R"({"resources":[{"name":"db","base":{"apiVersion":"v1","kind":"X"},
      "connectionDetails":[
        {"name":"static","type":"FromValue","value":"fixed"},
        {"name":"host","type":"FromFieldPath","fromFieldPath":"status.atProvider.host"},
        {"name":"port","type":"FromFieldPath","fromFieldPath":"status.atProvider.port"},
        {"name":"tags","type":"FromFieldPath","fromFieldPath":"status.atProvider.tags"},
        {"name":"absent","type":"FromFieldPath","fromFieldPath":"status.atProvider.nope"},
        {"name":"user","type":"FromConnectionSecretKey","fromConnectionSecretKey":"username"},
        {"name":"gone","type":"FromConnectionSecretKey","fromConnectionSecretKey":"missing"}]}]})");
  const Json xr = J(R"({"spec":{}})");

  // Nothing observed: no connection details at all.
  EXPECT_TRUE(Step(input, xr).connection_details.empty());

  ObservedResource observed{.object = J(R"({"status":{"atProvider":{"host":"db.example","port":5432,
                                             "tags":["a","b"]}}})"),
                            .connection = {{"username", "admin"}, {"password", "secret"}}};
  StepResult r = Step(input, xr, {{"db", observed}});
  EXPECT_EQ(r.connection_details,
            (std::map<std::string, std::string>{{"static", "fixed"},
                                                {"host", "db.example"},
                                                {"port", "5432"},  // non-strings as JSON
                                                {"tags", R"(["a","b"])"},
                                                {"user", "admin"}}));
}

TEST(RunPatchAndTransform, ConnectionDetailsOfSeveralResourcesAreMerged) {
  Json input = J(R"({"resources":[
      {"name":"a","base":{"apiVersion":"v1","kind":"X"},
       "connectionDetails":[{"name":"a-key","type":"FromConnectionSecretKey",
                             "fromConnectionSecretKey":"k"}]},
      {"name":"b","base":{"apiVersion":"v1","kind":"X"},
       "connectionDetails":[{"name":"b-key","type":"FromValue","value":"v"}]}]})");
  StepResult r = Step(input, J("{}"),
                      {{"a", ObservedResource{.object = J("{}"), .connection = {{"k", "ka"}}}},
                       {"b", ObservedResource{.object = J("{}")}}});
  EXPECT_EQ(r.connection_details,
            (std::map<std::string, std::string>{{"a-key", "ka"}, {"b-key", "v"}}));
}

// ---- patch types, policies, PatchSets ----

Json OneResource(const Json& patches, const Json& patch_sets = Json()) {
  Json input{{"resources", Json::array({Json{{"name", "thing"},
                                             {"base",
                                              {{"apiVersion", "example.org/v1"},
                                               {"kind", "Thing"},
                                               {"spec", {{"labels", {{"base", "b"}}}}}}},
                                             {"patches", patches}}})}};
  if (!patch_sets.is_null()) input["patchSets"] = patch_sets;
  return input;
}

const Json& TestXr() {
  static const auto* xr = new Json(J(R"({"apiVersion":"example.org/v1","kind":"XThing",
      "metadata":{"name":"x","labels":{"crossplane.io/claim-name":"c"}},
      "spec":{"size":"small","count":3,"region":"eu","labels":{"base":"xr","extra":"e"},
              "list":[1,2]}})"));
  return *xr;
}

TEST(RunPatchAndTransform, FromCompositeSkipsAbsentFieldsAndDefaultsToFieldPath) {
  StepResult r = Step(OneResource(J(R"([
      {"type":"FromCompositeFieldPath","fromFieldPath":"spec.size","toFieldPath":"spec.s"},
      {"fromFieldPath":"spec.absent","toFieldPath":"spec.never"},
      {"fromFieldPath":"spec.region"}])")),
                      TestXr());
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_EQ(r.resources[0].object["spec"],
            J(R"({"labels":{"base":"b"},"s":"small","region":"eu"})"));
}

TEST(RunPatchAndTransform, RequiredPolicyFailsOnAnAbsentFieldNamingThePatch) {
  const std::string message = RunError(OneResource(J(R"([
      {"fromFieldPath":"spec.size","toFieldPath":"spec.s"},
      {"fromFieldPath":"spec.absent","toFieldPath":"spec.never",
       "policy":{"fromFieldPath":"Required"}}])")),
                                       TestXr());
  EXPECT_TRUE(Contains(message, "resources[0]")) << message;
  EXPECT_TRUE(Contains(message, "\"thing\"")) << message;
  EXPECT_TRUE(Contains(message, "patches[1]")) << message;
  EXPECT_TRUE(Contains(message, "spec.absent")) << message;

  // Present: applied as usual; Optional (explicit) behaves like the default.
  StepResult r = Step(OneResource(J(R"([
      {"fromFieldPath":"spec.size","toFieldPath":"spec.s","policy":{"fromFieldPath":"Required"}},
      {"fromFieldPath":"spec.absent","toFieldPath":"spec.t",
       "policy":{"fromFieldPath":"Optional"}}])")),
                      TestXr());
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_EQ(At(r.resources[0].object, "spec.s"), "small");
  EXPECT_FALSE(Has(r.resources[0].object, "spec.t"));
}

TEST(RunPatchAndTransform, ToFieldPathPolicies) {
  struct Case {
    std::string policy;  // JSON of the patch's policy, "" for none
    const char* want;
  };
  const std::vector<Case> cases = {
      {"", R"({"base":"xr","extra":"e"})"},
      {R"({"toFieldPath":"Replace"})", R"({"base":"xr","extra":"e"})"},
      {R"({"toFieldPath":"MergeObjects"})", R"({"base":"b","extra":"e"})"},
      {R"({"toFieldPath":"MergeObjectsAppendArrays"})", R"({"base":"b","extra":"e"})"},
      {R"({"toFieldPath":"ForceMergeObjects"})", R"({"base":"xr","extra":"e"})"},
      {R"({"toFieldPath":"ForceMergeObjectsAppendArrays"})", R"({"base":"xr","extra":"e"})"},
      // Legacy mergeOptions.
      {R"({"mergeOptions":{"keepMapValues":true}})", R"({"base":"b","extra":"e"})"},
      {R"({"mergeOptions":{}})", R"({"base":"xr","extra":"e"})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.policy);
    Json patch = J(R"({"fromFieldPath":"spec.labels","toFieldPath":"spec.labels"})");
    if (!c.policy.empty()) patch["policy"] = J(c.policy);
    StepResult r = Step(OneResource(Json::array({patch})), TestXr());
    ASSERT_EQ(r.resources.size(), 1u);
    EXPECT_EQ(At(r.resources[0].object, "spec.labels"), J(c.want));
  }
  // Arrays: appended (without duplicates) by the *AppendArrays policies.
  Json patches = J(R"([
      {"fromFieldPath":"spec.list","toFieldPath":"spec.list"},
      {"fromFieldPath":"spec.list","toFieldPath":"spec.list",
       "policy":{"toFieldPath":"ForceMergeObjectsAppendArrays"}},
      {"fromFieldPath":"spec.count","toFieldPath":"spec.list[3]"},
      {"fromFieldPath":"spec.list","toFieldPath":"spec.list",
       "policy":{"toFieldPath":"MergeObjectsAppendArrays"}}])");
  StepResult r = Step(OneResource(patches), TestXr());
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_EQ(At(r.resources[0].object, "spec.list"), J("[1,2,null,3]"));

  const std::string message =
      RunError(OneResource(J(R"([{"fromFieldPath":"spec.size","toFieldPath":"spec.s",
                                  "policy":{"toFieldPath":"Smash"}}])")),
               TestXr());
  EXPECT_TRUE(Contains(message, "Smash")) << message;
}

TEST(RunPatchAndTransform, CombinePatches) {
  Json patches = J(R"([
      {"type":"CombineFromComposite","toFieldPath":"metadata.annotations[name]",
       "combine":{"strategy":"string","variables":[{"fromFieldPath":"spec.size"},
                  {"fromFieldPath":"spec.count"}],"string":{"fmt":"%s-%d"}}},
      {"type":"CombineFromComposite","toFieldPath":"spec.skipped",
       "combine":{"strategy":"string","variables":[{"fromFieldPath":"spec.size"},
                  {"fromFieldPath":"spec.absent"}],"string":{"fmt":"%s-%s"}}},
      {"type":"CombineToComposite","toFieldPath":"status.endpoint",
       "combine":{"strategy":"string","variables":[{"fromFieldPath":"status.host"},
                  {"fromFieldPath":"status.port"}],"string":{"fmt":"%s:%v"}},
       "transforms":[{"type":"string","string":{"type":"Convert","convert":"ToUpper"}}]}])");
  StepResult r = Step(OneResource(patches), TestXr());
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_EQ(At(r.resources[0].object, "metadata.annotations"), J(R"({"name":"small-3"})"));
  EXPECT_FALSE(Has(r.resources[0].object, "spec.skipped"));
  EXPECT_FALSE(Has(r.composite, "status"));

  ObservedResource observed{.object = J(R"({"status":{"host":"db","port":5432}})")};
  r = Step(OneResource(patches), TestXr(), {{"thing", observed}});
  EXPECT_EQ(At(r.composite, "status.endpoint"), "DB:5432");

  // Missing variables with Required fail.
  Json required = patches[1];
  required["policy"] = J(R"({"fromFieldPath":"Required"})");
  std::string message = RunError(OneResource(Json::array({required})), TestXr());
  EXPECT_TRUE(Contains(message, "spec.absent")) << message;
  // Bad combine configurations.
  for (const char* bad : {
           R"({"type":"CombineFromComposite","toFieldPath":"a"})",
           R"({"type":"CombineFromComposite","toFieldPath":"a","combine":{"strategy":"string",
               "variables":[],"string":{"fmt":"%s"}}})",
           R"({"type":"CombineFromComposite","toFieldPath":"a","combine":{"strategy":"concat",
               "variables":[{"fromFieldPath":"spec.size"}],"string":{"fmt":"%s"}}})",
           R"({"type":"CombineFromComposite","toFieldPath":"a","combine":{"strategy":"string",
               "variables":[{"fromFieldPath":"spec.size"}]}})",
       }) {
    SCOPED_TRACE(bad);
    message = RunError(OneResource(Json::array({J(bad)})), TestXr());
    EXPECT_TRUE(Contains(message, "patches[0]")) << message;
  }
}

TEST(RunPatchAndTransform, ToCompositeNeedsAnObservedResource) {
  Json patches = J(R"([{"type":"ToCompositeFieldPath","fromFieldPath":"status.id",
                        "toFieldPath":"status.managed.id"}])");
  StepResult r = Step(OneResource(patches), TestXr());
  EXPECT_EQ(r.composite, TestXr());
  ObservedResource observed{.object = J(R"({"status":{"id":"abc"}})")};
  r = Step(OneResource(patches), TestXr(), {{"thing", observed}});
  EXPECT_EQ(At(r.composite, "status.managed.id"), "abc");
  // A ToComposite patch never writes the composed resource.
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_FALSE(Has(r.resources[0].object, "status"));
}

TEST(RunPatchAndTransform, EnvironmentPatchesSeeAnEmptyEnvironment) {
  StepResult r = Step(OneResource(J(R"([
      {"type":"FromEnvironmentFieldPath","fromFieldPath":"region","toFieldPath":"spec.region"},
      {"type":"ToEnvironmentFieldPath","fromFieldPath":"spec.size","toFieldPath":"size"}])")),
                      TestXr());
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_FALSE(Has(r.resources[0].object, "spec.region"));
}

TEST(RunPatchAndTransform, PatchSetsAreExpandedInPlace) {
  Json sets = J(R"([{"name":"common","patches":[
      {"fromFieldPath":"metadata.labels[crossplane.io/claim-name]",
       "toFieldPath":"metadata.labels[crossplane.io/claim-name]"},
      {"fromFieldPath":"spec.size","toFieldPath":"spec.s"}]}])");
  StepResult r = Step(OneResource(J(R"([
      {"fromFieldPath":"spec.region","toFieldPath":"spec.s"},
      {"type":"PatchSet","patchSetName":"common"},
      {"fromFieldPath":"spec.count","toFieldPath":"spec.c"}])"),
                                  sets),
                      TestXr());
  ASSERT_EQ(r.resources.size(), 1u);
  EXPECT_EQ(At(r.resources[0].object, "metadata.labels"), J(R"({"crossplane.io/claim-name":"c"})"));
  EXPECT_EQ(At(r.resources[0].object, "spec.s"), "small");  // the set's patch ran after
  EXPECT_EQ(At(r.resources[0].object, "spec.c"), 3);
}

TEST(RunPatchAndTransform, UndefinedOrNestedPatchSetsAreErrors) {
  std::string message =
      RunError(OneResource(J(R"([{"type":"PatchSet","patchSetName":"missing"}])")), TestXr());
  EXPECT_TRUE(Contains(message, "\"thing\"")) << message;
  EXPECT_TRUE(Contains(message, "missing")) << message;
  message = RunError(OneResource(J(R"([{"type":"PatchSet","patchSetName":"outer"}])"),
                                 J(R"([{"name":"outer","patches":[
                                   {"type":"PatchSet","patchSetName":"inner"}]},
                                   {"name":"inner","patches":[]}])")),
                     TestXr());
  EXPECT_TRUE(Contains(message, "outer")) << message;
}

TEST(RunPatchAndTransform, BadPathsAndFailingTransformsNameTheResourceAndPatch) {
  struct Case {
    const char* patches;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {R"([{"fromFieldPath":"spec.size","toFieldPath":"spec.ok"},
           {"fromFieldPath":"spec.size","toFieldPath":"spec["}])",
       {"resources[0]", "\"thing\"", "patches[1]", "spec["}},
      {R"([{"fromFieldPath":"spec..size","toFieldPath":"spec.x"}])",
       {"\"thing\"", "patches[0]", "spec..size"}},
      {R"([{"fromFieldPath":"spec.size","toFieldPath":"spec.x"},
           {"fromFieldPath":"spec.size","toFieldPath":"spec.y",
            "transforms":[{"type":"map","map":{"big":"100Gi"}}]}])",
       {"\"thing\"", "patches[1]", "transform 0 (map)", "small"}},
      {R"([{"fromFieldPath":"spec.size","toFieldPath":"spec.x",
            "transforms":[{"type":"convert","convert":{"toType":"int"}}]}])",
       {"\"thing\"", "patches[0]", "small"}},
      // Crossing a scalar in the composed resource.
      {R"([{"fromFieldPath":"spec.size","toFieldPath":"spec.labels.base.deeper"}])",
       {"\"thing\"", "patches[0]"}},
      {R"([{"type":"Teleport","fromFieldPath":"spec.size","toFieldPath":"spec.x"}])",
       {"\"thing\"", "patches[0]", "Teleport"}},
      {R"([{"type":"FromCompositeFieldPath","toFieldPath":"spec.x"}])", {"patches[0]"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.patches);
    const std::string message = RunError(OneResource(J(c.patches)), TestXr());
    for (const std::string& part : c.mentions) {
      EXPECT_TRUE(Contains(message, part)) << "missing " << part << " in: " << message;
    }
  }
}

TEST(RunPatchAndTransform, ErrorsInALaterResourceNameThatResource) {
  Json input = J(R"({"resources":[
      {"name":"first","base":{"apiVersion":"v1","kind":"A"}},
      {"name":"second","base":{"apiVersion":"v1","kind":"B"},
       "patches":[{"fromFieldPath":"spec.size","toFieldPath":"a]"}]}]})");
  const std::string message = RunError(input, TestXr());
  EXPECT_TRUE(Contains(message, "resources[1] \"second\" patches[0]")) << message;
}

TEST(RunPatchAndTransform, ResourcesKeepTheirOrderAndNeedANameAndABase) {
  Json input = J(R"({"resources":[
      {"name":"z","base":{"apiVersion":"v1","kind":"A"}},
      {"name":"a","base":{"apiVersion":"v1","kind":"B"}}]})");
  StepResult r = Step(input, TestXr());
  ASSERT_EQ(r.resources.size(), 2u);
  EXPECT_EQ(r.resources[0].name, "z");
  EXPECT_EQ(r.resources[1].name, "a");

  EXPECT_TRUE(Contains(
      RunError(J(R"({"resources":[{"base":{"apiVersion":"v1","kind":"A"}}]})"), TestXr()), "name"));
  EXPECT_TRUE(Contains(RunError(J(R"({"resources":[{"name":"r"}]})"), TestXr()), "base"));
  EXPECT_TRUE(Contains(RunError(J(R"({"resources":[{"name":"r","base":{"kind":"A"}}]})"), TestXr()),
                       "apiVersion"));
  RunError(J(R"({"resources":{"name":"r"}})"), TestXr());
  // No resources: nothing to do.
  StepResult empty = Step(J(R"({"patchSets":[]})"), TestXr());
  EXPECT_TRUE(empty.resources.empty());
  EXPECT_EQ(empty.composite, TestXr());
}

TEST(RunPatchAndTransform, ErrorsLeaveNothingHalfApplied) {
  // The whole step fails: the caller gets no resources to apply.
  Json input = J(R"({"resources":[
      {"name":"good","base":{"apiVersion":"v1","kind":"A"},
       "patches":[{"fromFieldPath":"spec.size","toFieldPath":"spec.s"}]},
      {"name":"bad","base":{"apiVersion":"v1","kind":"B"},
       "patches":[{"fromFieldPath":"spec.size","toFieldPath":"spec.s",
                   "policy":{"fromFieldPath":"Required"}},
                  {"fromFieldPath":"spec.nope","toFieldPath":"spec.t",
                   "policy":{"fromFieldPath":"Required"}}]}]})");
  auto result = RunPatchAndTransform(input, TestXr(), {});
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(Contains(result.status().message(), "resources[1] \"bad\" patches[1]"))
      << result.status().message();
}

}  // namespace
}  // namespace klutch::compose::function_test
