// The composition engine (engine.h) and provider-kubernetes' Object (object_provider.h) on an
// in-process cluster, in real time, with Klutch's upstream Crossplane package applied unchanged:
// definitions become CRDs, every example claim is composed as data-services.md §5 says, status
// flows back, connection details reach the claim's Secret, deletion follows the claim's
// policy, drift is repaired, bad input becomes a condition a user can act on, and nothing is
// written while nothing changes. The provider-anynines managed resources have no provider
// here: the test writes their status as provider-anynines would. ComposeOwnPackageTest runs the
// a9s examples against this repository's own package and CRDs (deploy/) instead.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/dynamic.h"
#include "compose/composer.h"
#include "compose/names.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "providers/object_provider.h"
#include "reconcile/conditions.h"
#include "reconcile/crd_installer.h"
#include "reconcile/manager.h"
#include "test/support/process.h"
#include "test/support/test_cluster.h"
#include "test/support/wait.h"

namespace klutch::compose {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using client::GroupVersionResource;
using client::ResourceClient;
using machinery::Dump;
using machinery::GetString;
using machinery::Json;
using testing::Eventually;

const fs::path kPackage = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/crossplane-api";
const fs::path kProviderCrds =
    fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/provider-anynines/package/crds";
// This repository's own a9s package and provider-anynines CRDs (deploy/), which the sandbox
// applies instead of the upstream files.
const fs::path kOwnPackage = fs::path(KLUTCH_SOURCE_DIR) / "deploy/package";
const fs::path kOwnProviderCrds = fs::path(KLUTCH_SOURCE_DIR) / "deploy/provider-anynines/crds";

const GroupVersionResource kObjects{"kubernetes.crossplane.io", "v1alpha1", "objects"};
const GroupVersionResource kKubernetesProviderConfigs{"kubernetes.crossplane.io", "v1alpha1",
                                                      "providerconfigs"};
const GroupVersionResource kCrds = client::resources::kCustomResourceDefinitions;
const GroupVersionResource kServiceInstances{"dataservices.anynines.com", "v1", "serviceinstances"};
const GroupVersionResource kMrServiceBindings{"dataservices.anynines.com", "v1", "servicebindings"};
const GroupVersionResource kMrBackups{"dataservices.anynines.com", "v1", "backups"};
const GroupVersionResource kMrRestores{"dataservices.anynines.com", "v1", "restores"};
// The a8s operators' kinds, as far as the Object provider needs them.
const GroupVersionResource kPostgresqls{"postgresql.anynines.com", "v1beta3", "postgresqls"};
const GroupVersionResource kA8sBackups{"backups.anynines.com", "v1beta3", "backups"};
const GroupVersionResource kA8sRestores{"backups.anynines.com", "v1beta3", "restores"};
const GroupVersionResource kA8sServiceBindings{"servicebindings.anynines.com", "v1beta3",
                                               "servicebindings"};
// The test's own definition (widgets.test.klutch.io) for compositions of its own.
const GroupVersionResource kWidgets{"test.klutch.io", "v1", "widgets"};
const GroupVersionResource kXWidgets{"test.klutch.io", "v1", "xwidgets"};

constexpr const char* kHoldFinalizer = "test.klutch.io/hold";
constexpr const char* kTransitionTime = "2024-05-01T10:00:00Z";

// The value at `path` (object keys), or null.
Json At(const Json& o, const std::vector<std::string>& path) {
  const Json* cur = &o;
  for (const auto& k : path) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return *cur;
}

std::string PathText(const std::vector<std::string>& path) { return core::Join(path, "."); }

Json Yaml(std::string_view text) {
  auto parsed = machinery::ParseYaml(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : Json::object();
}

std::vector<fs::path> FilesUnder(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Json> Documents(const fs::path& file) {
  std::vector<Json> out;
  for (const std::string& doc : testing::SplitYamlDocuments(testing::ReadFileOrEmpty(file))) {
    if (doc.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    Json parsed = Yaml(doc);
    if (parsed.is_object() && !parsed.empty()) out.push_back(std::move(parsed));
  }
  return out;
}

// A namespaced kind with a permissive schema and a status subresource.
Json WrappedCrd(const std::string& group, const std::string& kind, const std::string& plural) {
  Json open = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", plural + "." + group}}},
          {"spec",
           {{"group", group},
            {"scope", "Namespaced"},
            {"names", {{"plural", plural}, {"kind", kind}, {"listKind", kind + "List"}}},
            {"versions",
             Json::array({{{"name", "v1beta3"},
                           {"served", true},
                           {"storage", true},
                           {"subresources", {{"status", Json::object()}}},
                           {"schema",
                            {{"openAPIV3Schema",
                              {{"type", "object"},
                               {"properties", {{"spec", open}, {"status", open}}}}}}}}})}}}};
}

// Conditions as a Crossplane provider reports a ready, synced managed resource.
Json ReadyConditions() {
  return Json::array({{{"type", "Ready"},
                       {"status", "True"},
                       {"reason", "Available"},
                       {"lastTransitionTime", kTransitionTime}},
                      {{"type", "Synced"},
                       {"status", "True"},
                       {"reason", "ReconcileSuccess"},
                       {"lastTransitionTime", kTransitionTime}}});
}

// ---------------------------------------------------------------------------------------------
// What data-services.md §5 says a claim composes.

using Fields = std::vector<std::pair<std::vector<std::string>, Json>>;

struct Expected {
  GroupVersionResource composed;  // the composed resource's kind
  Fields fields;                  // on the composed resource, each compared exactly
  // Where the test writes status as the owning controller would: the managed resource's own
  // status (provider-anynines) or the wrapped object's (an a8s operator).
  bool wrapped = false;
  GroupVersionResource wrapped_gvr;
  Json status;   // the status object the test writes
  Json managed;  // the XR's and the claim's status.managed that follows
};

// §5.1: claim parameter -> broker parameter, per a9s service.
const std::map<std::string, std::vector<std::pair<std::string, std::string>>>& A9sParameters() {
  static const auto* table =
      new std::map<std::string, std::vector<std::pair<std::string, std::string>>>{
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
          {"mongodb", {}},  // the one nested parameter is handled below
          {"prometheus",
           {{"mappingStrictMatch", "mapping_strict_match"}, {"scrapeConfigs", "scrape_configs"}}},
          {"search",
           {{"javaHeapspace", "java_heapspace"},
            {"javaMaxmetaspace", "java_maxmetaspace"},
            {"javaGarbageCollector", "java_garbage_collector"},
            {"tlsProtocols", "tls-protocols"},
            {"tlsCiphers", "tls-ciphers"}}},
      };
  return *table;
}

// §5.2: claim parameter -> a8s Postgresql parameter, and whether the value is lower-cased.
struct A8sParameter {
  std::string from, to;
  bool lower = false;
};
const std::vector<A8sParameter>& A8sParameters() {
  static const auto* table = new std::vector<A8sParameter>{
      {"maxConnections", "maxConnections"},
      {"tempFileLimit", "tempFileLimitKiloBytes"},
      {"trackIoTiming", "trackIOTiming"},
      {"archiveTimeout", "archiveTimeoutSeconds"},
      {"statementTimeout", "statementTimeoutMillis"},
      {"walWriterDelay", "walWriterDelayMillis"},
      {"maxLocksPerTransaction", "maxLocksPerTransaction"},
      {"maxReplicationSlots", "maxReplicationSlots"},
      {"maxWalSenders", "maxWALSenders"},
      {"synchronousCommit", "synchronousCommit"},
      {"sslCiphers", "sslCiphers"},
      {"sslMinProtocolVersion", "sslMinProtocolVersion"},
      {"clientMinMessages", "clientMinMessages", true},
      {"logMinMessages", "logMinMessages", true},
      {"logMinErrorStatement", "logMinErrorStatement", true},
      {"logStatement", "logStatement"},
      {"logErrorVerbosity", "logErrorVerbosity"},
  };
  return *table;
}

Fields ClaimLabels(const std::string& name, const std::string& ns) {
  return {{{"metadata", "labels", "crossplane.io/claim-name"}, name},
          {{"metadata", "labels", "crossplane.io/claim-namespace"}, ns}};
}

Expected ExpectedFor(const Json& claim) {
  Expected e;
  const std::string composition = GetString(claim, {"spec", "compositionRef", "name"});
  const std::string name = machinery::Name(claim);
  const std::string ns = machinery::Namespace(claim);
  const Json spec = At(claim, {"spec"});
  const std::string type = GetString(spec, {"serviceInstanceType"});
  auto add = [&](std::vector<std::string> path, Json value) {
    e.fields.emplace_back(std::move(path), std::move(value));
  };
  auto a8s_manifest = [&](const std::string& api_version, const std::string& kind, Json m_spec) {
    Json manifest = {{"apiVersion", api_version},
                     {"kind", kind},
                     {"metadata", {{"name", name}, {"namespace", ns}}}};
    if (!m_spec.empty()) manifest["spec"] = std::move(m_spec);
    e.composed = kObjects;
    e.wrapped = true;
    add({"spec", "providerConfigRef", "name"}, "kubernetes-provider");
    add({"spec", "forProvider", "manifest"}, manifest);
  };
  auto a8s_service_instance = [&]() {
    return Json{{"apiGroup", "postgresql.anynines.com"},
                {"kind", "PostgreSQL"},
                {"name", GetString(spec, {"instanceRef"})}};
  };

  if (composition == "a8s-postgresql") {
    static const std::map<std::string, std::array<std::string, 3>> kSizes = {
        {"nano", {"3Gi", "2", "1Gi"}},
        {"small", {"10Gi", "2", "2Gi"}},
        {"medium", {"50Gi", "2", "4Gi"}},
        {"big", {"100Gi", "4", "16Gi"}}};
    const std::string plan = GetString(spec, {"plan"});
    const std::string size = plan.substr(plan.rfind('-') + 1);
    const auto& [volume, cpu, memory] = kSizes.at(size);
    const std::string service = GetString(spec, {"service"});
    Json m_spec = {{"expose", spec.contains("expose") ? spec["expose"] : Json("LoadBalancer")},
                   {"version", std::stoi(service.substr(std::string("a9s-postgresql").size()))},
                   {"volumeSize", volume},
                   {"resources",
                    {{"requests", {{"cpu", cpu}, {"memory", memory}}},
                     {"limits", {{"cpu", cpu}, {"memory", memory}}}}},
                   {"replicas", plan.find("-replica-") != std::string::npos ? 3 : 1}};
    Json params = Json::object();
    for (const auto& p : A8sParameters()) {
      Json v = At(spec, {"parameters", p.from});
      if (v.is_null()) continue;
      params[p.to] = p.lower ? Json(core::ToLower(v.get<std::string>())) : v;
    }
    if (!params.empty()) m_spec["parameters"] = params;
    a8s_manifest("postgresql.anynines.com/v1beta3", "Postgresql", m_spec);
    e.wrapped_gvr = kPostgresqls;
    e.status = {{"clusterStatus", "Running"}, {"readyReplicas", m_spec["replicas"]}};
    e.managed = e.status;
  } else if (composition == "a8s-servicebinding") {
    a8s_manifest("servicebindings.anynines.com/v1beta3", "ServiceBinding",
                 {{"instance",
                   {{"apiVersion", "postgresql.anynines.com/v1beta3"},
                    {"kind", "Postgresql"},
                    {"namespace", ns},
                    {"name", GetString(spec, {"instanceRef"})}}}});
    e.wrapped_gvr = kA8sServiceBindings;
    e.status = {{"implemented", true},
                {"secret", {{"name", name + "-service-binding"}, {"namespace", ns}}}};
    e.managed = e.status;
  } else if (composition == "a8s-backup") {
    a8s_manifest("backups.anynines.com/v1beta3", "Backup",
                 {{"serviceInstance", a8s_service_instance()}});
    e.wrapped_gvr = kA8sBackups;
    e.status = {{"backupID", "1714557600"},
                {"conditions", Json::array({{{"type", "Complete"},
                                             {"status", "True"},
                                             {"reason", "BackupCompleted"},
                                             {"lastTransitionTime", kTransitionTime}}})},
                {"lastObservationTime", kTransitionTime},
                {"podUsedNamespacedName", ns + "/" + GetString(spec, {"instanceRef"}) + "-0"},
                {"podUsedUID", "7f3c1b2a-0000-4000-8000-000000000001"},
                {"retries", 0}};
    e.managed = e.status;
  } else if (composition == "a8s-restore") {
    Json m_spec = {{"serviceInstance", a8s_service_instance()},
                   {"backupName", GetString(spec, {"backupRef"})}};
    a8s_manifest("backups.anynines.com/v1beta3", "Restore", m_spec);
    e.wrapped_gvr = kA8sRestores;
    e.status = {{"conditions", Json::array({{{"type", "Complete"},
                                             {"status", "True"},
                                             {"reason", "RestoreCompleted"},
                                             {"lastTransitionTime", kTransitionTime}}})},
                {"lastObservationTime", kTransitionTime},
                {"podToPoll",
                 {{"ip", "10.0.0.7"},
                  {"namespacedName", ns + "/" + GetString(spec, {"instanceRef"}) + "-0"},
                  {"uid", "7f3c1b2a-0000-4000-8000-000000000002"}}},
                {"restoreID", "1714557601"}};
    e.managed = e.status;
  } else if (composition == "a9s-servicebinding") {
    e.composed = kMrServiceBindings;
    for (auto& f : ClaimLabels(name, ns)) add(f.first, f.second);
    add({"metadata", "labels", "klutch.io/instance-type"}, type);
    add({"spec", "forProvider"},
        {{"acceptsIncomplete", true}, {"instanceName", GetString(spec, {"instanceRef"})}});
    add({"spec", "providerConfigRef", "name"}, type + "-service-broker");
    add({"spec", "writeConnectionSecretToRef"}, {{"name", name + "-creds"}, {"namespace", ns}});
    e.status = {
        {"atProvider", {{"state", "Created"}, {"serviceBindingID", 7}, {"instanceId", "4711"}}},
        {"conditions", ReadyConditions()}};
    e.managed = {{"state", "Created"}, {"serviceBindingID", 7}, {"conditions", ReadyConditions()}};
  } else if (composition == "a9s-backup") {
    e.composed = kMrBackups;
    for (auto& f : ClaimLabels(name, ns)) add(f.first, f.second);
    add({"spec", "forProvider"}, {{"instanceName", GetString(spec, {"instanceRef"})}});
    add({"spec", "providerConfigRef", "name"}, type + "-backup-manager");
    Json at = {{"downloadable", false},
               {"finished_at", "2024-05-01T10:01:00.000Z"},
               {"id", 42},
               {"size", 1024},
               {"status", "done"},
               {"triggered_at", "2024-05-01T10:00:00.000Z"}};
    e.status = {{"atProvider", at}, {"conditions", ReadyConditions()}};
    at["instanceId"] = "4711";  // not propagated
    e.status["atProvider"] = at;
    e.managed = e.status["atProvider"];
    e.managed.erase("instanceId");
    e.managed["conditions"] = ReadyConditions();
  } else if (composition == "a9s-restore") {
    e.composed = kMrRestores;
    for (auto& f : ClaimLabels(name, ns)) add(f.first, f.second);
    add({"spec", "forProvider"}, {{"backupName", GetString(spec, {"backupRef"})}});
    add({"spec", "providerConfigRef", "name"}, type + "-backup-manager");
    e.status = {{"atProvider",
                 {{"backupId", 42},
                  {"instanceId", "4711"},
                  {"restoreId", 43},
                  {"state", "done"},
                  {"triggeredAt", "2024-05-01T10:00:00.000Z"},
                  {"finishedAt", "2024-05-01T10:02:00.000Z"}}},
                {"conditions", ReadyConditions()}};
    e.managed = {{"restoreId", 43},
                 {"state", "done"},
                 {"triggeredAt", "2024-05-01T10:00:00.000Z"},
                 {"finishedAt", "2024-05-01T10:02:00.000Z"},
                 {"conditions", ReadyConditions()}};
  } else if (composition.rfind("a9s-", 0) == 0) {
    const std::string service = composition.substr(4);
    e.composed = kServiceInstances;
    for (auto& f : ClaimLabels(name, ns)) add(f.first, f.second);
    Json for_provider = {
        {"acceptsIncomplete",
         spec.contains("acceptsIncomplete") ? spec["acceptsIncomplete"] : Json(true)},
        {"organizationGuid", "a1d46b5c-b639-4f43-85c7-e9a0e5f01f75"},
        {"spaceGuid", "1bf71cf3-9017-4846-bffc-b9b31872bfaf"},
        {"serviceName", spec["service"]},
        {"planName", spec["plan"]}};
    Json params = Json::object();
    auto table = A9sParameters().find(service);
    if (table != A9sParameters().end()) {
      for (const auto& [from, to] : table->second) {
        Json v = At(spec, {"parameters", from});
        if (!v.is_null()) params[to] = v;
      }
    }
    if (service == "mongodb") {
      Json v = At(spec, {"parameters", "setClusterParameter", "changeStreamOptions",
                         "preAndPostImages", "expireAfterSeconds"});
      if (!v.is_null()) {
        params["set_cluster_parameter"]["changeStreamOptions"]["preAndPostImages"]
              ["expireAfterSeconds"] = v;
      }
    }
    if (!params.empty()) for_provider["parameters"] = params;
    add({"spec", "forProvider"}, for_provider);
    add({"spec", "providerConfigRef", "name"}, service + "-service-broker");
    e.status = {{"atProvider",
                 {{"state", "provisioned"},
                  {"createdAt", "2024-05-01T10:00:00Z"},
                  {"provisionedAt", "2024-05-01T10:05:00Z"},
                  {"updatedAt", "2024-05-01T10:06:00Z"},
                  {"instanceId", "4711"}}},
                {"conditions", ReadyConditions()}};
    e.managed = {{"state", "provisioned"},
                 {"createdAt", "2024-05-01T10:00:00Z"},
                 {"provisionedAt", "2024-05-01T10:05:00Z"},
                 {"updatedAt", "2024-05-01T10:06:00Z"},
                 {"conditions", ReadyConditions()}};
  } else {
    ADD_FAILURE() << "no expectation for composition " << composition;
  }
  return e;
}

// ---------------------------------------------------------------------------------------------

struct Definition {
  std::string xrd;  // the XRD's name
  GroupVersionResource xr, claim;
  std::string xr_kind, claim_kind;
};

class ComposeEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = testing::TestCluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = std::move(*cluster);
    core::Status installed = InstallManagerApis(admin(), 30s);
    ASSERT_TRUE(installed.ok()) << installed.ToString();

    // provider-anynines' managed resource kinds and the a8s operators' kinds.
    std::vector<Json> crds;
    const fs::path& provider_crds = own_package_ ? kOwnProviderCrds : kProviderCrds;
    for (const fs::path& f : FilesUnder(provider_crds)) {
      for (Json& d : Documents(f)) crds.push_back(std::move(d));
    }
    ASSERT_FALSE(crds.empty()) << "no CRDs under " << provider_crds;
    crds.push_back(WrappedCrd("postgresql.anynines.com", "Postgresql", "postgresqls"));
    crds.push_back(WrappedCrd("backups.anynines.com", "Backup", "backups"));
    crds.push_back(WrappedCrd("backups.anynines.com", "Restore", "restores"));
    crds.push_back(WrappedCrd("servicebindings.anynines.com", "ServiceBinding", "servicebindings"));
    // Created at once and then awaited together: the cluster establishes them in parallel,
    // where one InstallCrd after the other waited a poll interval for each.
    for (const Json& crd : crds) Create(kCrds, crd);
    ASSERT_TRUE(Eventually([&] {
      for (const Json& crd : crds) {
        if (!reconcile::IsConditionTrue(Get(kCrds, "", machinery::Name(crd)), "Established")) {
          return false;
        }
      }
      return true;
    })) << "the provider's and the a8s operators' CRDs did not become Established";
    CreateNamespace("crossplane-system");  // where XRs' connection Secrets go
    Create(kKubernetesProviderConfigs, Yaml(R"(
apiVersion: kubernetes.crossplane.io/v1alpha1
kind: ProviderConfig
metadata: {name: kubernetes-provider}
spec: {credentials: {source: InjectedIdentity}}
)"));

    if (own_package_) {
      // Ours: every document of every file, as `kubectl apply -R -f deploy/package` takes them.
      for (const fs::path& f : FilesUnder(kOwnPackage)) {
        for (const Json& doc : Documents(f)) AddPackageObject(doc);
      }
      ASSERT_EQ(definitions_.size(), 11u);
      // a9s: the 8 instance kinds + binding, backup, restore; a8s: PostgreSQL + the same three
      ASSERT_EQ(compositions_.size(), 15u);
    } else {
      // The upstream package: every definition and composition, unchanged.
      for (const fs::path& f : FilesUnder(kPackage / "api")) {
        const std::string file = f.filename().string();
        if (file == "crossplane.yaml") continue;  // package metadata
        bool definition = file.size() >= 15 && file.ends_with("definition.yaml");
        if (!definition && file != "composition.yaml") continue;
        for (const Json& doc : Documents(f)) AddPackageObject(doc);
      }
      ASSERT_EQ(definitions_.size(), 11u);
      ASSERT_EQ(compositions_.size(), 15u);  // a8s: 4, a9s: 8 instances + 3
    }

    manager_ = std::make_unique<reconcile::Manager>(
        admin(), reconcile::ManagerOptions{.name = "klutch-manager"});
    composer_ = std::make_unique<Composer>(*manager_, composer_options_);
    provider_ =
        std::make_unique<providers::ObjectProvider>(*manager_, providers::ObjectProviderOptions{});
    core::Status s = composer_->Setup();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = provider_->Setup();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = manager_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();

    // Claims can be created once every definition offers its claim.
    ASSERT_TRUE(Eventually([&] {
      for (const auto& [kind, d] : definitions_) {
        Json xrd = Get(kXrds, "", d.xrd);
        if (!reconcile::IsConditionTrue(xrd, "Established") ||
            !reconcile::IsConditionTrue(xrd, "Offered")) {
          return false;
        }
      }
      return true;
    })) << "the package's definitions did not become Established and Offered";
  }

  // Tests may change these in their fixture's constructor (before SetUp).
  ComposerOptions composer_options_;
  bool own_package_ = false;  // deploy/ instead of the upstream package and provider CRDs

  // Creates a definition or composition of the package and records it; a Function (the one
  // the manager has built in) is applied over the manager's as kubectl apply would.
  void AddPackageObject(const Json& doc) {
    const std::string kind = machinery::Kind(doc);
    if (kind == "CompositeResourceDefinition") {
      Create(kXrds, doc);
      Definition d;
      d.xrd = machinery::Name(doc);
      const std::string group = GetString(doc, {"spec", "group"});
      d.xr = {group, "v1", GetString(doc, {"spec", "names", "plural"})};
      d.claim = {group, "v1", GetString(doc, {"spec", "claimNames", "plural"})};
      d.xr_kind = GetString(doc, {"spec", "names", "kind"});
      d.claim_kind = GetString(doc, {"spec", "claimNames", "kind"});
      definitions_[d.claim_kind] = d;
    } else if (kind == "Composition") {
      Create(kCompositions, doc);
      compositions_.push_back(machinery::Name(doc));
    } else if (kind == "Function") {
      MergePatch(kFunctions, "", machinery::Name(doc), doc);
    } else if (kind == "ProviderConfig") {
      // The a8s compositions' kubernetes-provider, as the fixture made it above.
      MergePatch(kKubernetesProviderConfigs, "", machinery::Name(doc), doc);
    } else {
      ADD_FAILURE() << "unexpected " << kind << " " << machinery::Name(doc) << " in the package";
    }
  }

  void TearDown() override {
    if (manager_) manager_->Stop();
    if (composer_) composer_->Stop();
    if (provider_) provider_->Stop();
  }

  client::RestClient& admin() { return cluster_->admin(); }
  ResourceClient Rc(const GroupVersionResource& gvr, const std::string& ns = "") {
    return ResourceClient(admin(), gvr, ns);
  }
  // The object, or null when it cannot be read.
  Json Get(const GroupVersionResource& gvr, const std::string& ns, const std::string& name) {
    auto r = Rc(gvr, ns).Get(name);
    return r.ok() ? *r : Json();
  }
  bool Exists(const GroupVersionResource& gvr, const std::string& ns, const std::string& name) {
    auto r = Rc(gvr, ns).Get(name);
    return r.ok();
  }
  bool Gone(const GroupVersionResource& gvr, const std::string& ns, const std::string& name) {
    auto r = Rc(gvr, ns).Get(name);
    return !r.ok() && core::IsNotFound(r.status());
  }
  Json Create(const GroupVersionResource& gvr, Json object) {
    auto r = Rc(gvr, machinery::Namespace(object)).Create(object);
    EXPECT_TRUE(r.ok()) << machinery::Kind(object) << " " << machinery::Name(object) << ": "
                        << r.status().ToString();
    return r.ok() ? *r : Json();
  }
  void CreateNamespace(const std::string& name) {
    Create(client::resources::kNamespaces,
           {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  }
  void MergePatch(const GroupVersionResource& gvr, const std::string& ns, const std::string& name,
                  const Json& patch, std::string_view subresource = {}) {
    auto r = Rc(gvr, ns).Patch(name, client::PatchType::kMerge, Dump(patch), {}, subresource);
    EXPECT_TRUE(r.ok()) << gvr.resource << " " << name << ": " << r.status().ToString();
  }
  std::vector<Json> List(const GroupVersionResource& gvr, const std::string& ns = "",
                         const std::string& selector = "") {
    auto r = Rc(gvr, ns).List({.label_selector = selector});
    std::vector<Json> out;
    if (r.ok()) {
      for (const Json& i : (*r)["items"]) out.push_back(i);
    }
    return out;
  }
  std::string ConditionReason(const Json& o, const std::string& type) {
    auto c = reconcile::FindCondition(o, type);
    return c ? c->reason : "";
  }
  std::string ConditionMessage(const Json& o, const std::string& type) {
    auto c = reconcile::FindCondition(o, type);
    return c ? c->message : "";
  }
  bool HasEvent(const std::string& reason, const std::string& involved) {
    for (const Json& e : List(client::resources::kEvents)) {
      if (GetString(e, {"reason"}) == reason &&
          GetString(e, {"involvedObject", "name"}) == involved) {
        return true;
      }
    }
    return false;
  }
  void RemoveFinalizer(const GroupVersionResource& gvr, const std::string& ns,
                       const std::string& name, const std::string& finalizer) {
    ASSERT_TRUE(Eventually([&] {
      auto o = Rc(gvr, ns).Get(name);
      if (!o.ok()) return core::IsNotFound(o.status());
      Json m = *o;
      Json kept = Json::array();
      for (const auto& f : machinery::Finalizers(*o)) {
        if (f != finalizer) kept.push_back(f);
      }
      machinery::MutableMetadata(m)["finalizers"] = kept;
      return Rc(gvr, ns).Update(m).ok();
    }));
  }

  const Definition& Def(const std::string& claim_kind) { return definitions_.at(claim_kind); }

  void ComposeExampleClaims(const std::function<bool(const std::string&)>& include, size_t total);

  // A claim of the package in namespace `ns` (created when missing).
  Json Claim(const std::string& kind, const std::string& ns, const std::string& name,
             const Json& spec) {
    if (!Exists(client::resources::kNamespaces, "", ns)) CreateNamespace(ns);
    return Create(Def(kind).claim, {{"apiVersion", "anynines.com/v1"},
                                    {"kind", kind},
                                    {"metadata", {{"name", name}, {"namespace", ns}}},
                                    {"spec", spec}});
  }
  // The XR a claim is bound to (null until it is).
  Json XrOf(const Definition& d, const std::string& ns, const std::string& claim) {
    std::string xr = GetString(Get(d.claim, ns, claim), {"spec", "resourceRef", "name"});
    return xr.empty() ? Json() : Get(d.xr, "", xr);
  }
  // Waits for claim -> XR -> first composed resource of `gvr`; returns its name ("" on timeout).
  // The first composed resource of claim -> XR when it exists as `gvr`, else "".
  std::string ComposedOf(const Definition& d, const std::string& ns, const std::string& claim,
                         const GroupVersionResource& gvr) {
    Json refs = At(XrOf(d, ns, claim), {"spec", "resourceRefs"});
    std::string composed = refs.is_array() && !refs.empty() ? GetString(refs[0], {"name"}) : "";
    return !composed.empty() && Exists(gvr, "", composed) ? composed : "";
  }
  std::string WaitComposed(const Definition& d, const std::string& ns, const std::string& claim,
                           const GroupVersionResource& gvr) {
    std::string composed;
    bool ok = Eventually([&] { return !(composed = ComposedOf(d, ns, claim, gvr)).empty(); });
    EXPECT_TRUE(ok) << "claim " << ns << "/" << claim
                    << " composed nothing: " << Dump(Get(d.claim, ns, claim));
    return ok ? composed : "";
  }

  // The test's own definition: widgets.test.klutch.io, with compositions of its own.
  void InstallWidgets() {
    Create(kXrds, Yaml(R"(
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xwidgets.test.klutch.io}
spec:
  group: test.klutch.io
  names: {kind: XWidget, plural: xwidgets}
  claimNames: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: string}
              instance: {type: string}
          status:
            type: object
            properties:
              managed: {type: object, x-kubernetes-preserve-unknown-fields: true}
)"));
    ASSERT_TRUE(Eventually([&] {
      Json xrd = Get(kXrds, "", "xwidgets.test.klutch.io");
      return reconcile::IsConditionTrue(xrd, "Established") &&
             reconcile::IsConditionTrue(xrd, "Offered");
    })) << Dump(Get(kXrds, "", "xwidgets.test.klutch.io"));
  }
  // A Pipeline composition for widgets composing one provider-anynines Backup with `patches`.
  void WidgetComposition(const std::string& name, const Json& patches) {
    Json resource = {{"name", "backup"},
                     {"base",
                      {{"apiVersion", "dataservices.anynines.com/v1"},
                       {"kind", "Backup"},
                       {"spec", {{"forProvider", {{"instanceName", "unset"}}}}}}},
                     {"patches", patches}};
    Create(
        kCompositions,
        {{"apiVersion", "apiextensions.crossplane.io/v1"},
         {"kind", "Composition"},
         {"metadata", {{"name", name}}},
         {"spec",
          {{"compositeTypeRef", {{"apiVersion", "test.klutch.io/v1"}, {"kind", "XWidget"}}},
           {"mode", "Pipeline"},
           {"pipeline", Json::array({{{"step", "patch-and-transform"},
                                      {"functionRef", {{"name", "function-patch-and-transform"}}},
                                      {"input",
                                       {{"apiVersion", "pt.fn.crossplane.io/v1beta1"},
                                        {"kind", "Resources"},
                                        {"resources", Json::array({resource})}}}}})}}}});
  }
  Json Widget(const std::string& ns, const std::string& name, const Json& spec) {
    if (!Exists(client::resources::kNamespaces, "", ns)) CreateNamespace(ns);
    return Create(kWidgets, {{"apiVersion", "test.klutch.io/v1"},
                             {"kind", "Widget"},
                             {"metadata", {{"name", name}, {"namespace", ns}}},
                             {"spec", spec}});
  }
  Definition WidgetDef() {
    return {"xwidgets.test.klutch.io", kXWidgets, kWidgets, "XWidget", "Widget"};
  }

  std::unique_ptr<testing::TestCluster> cluster_;
  std::unique_ptr<reconcile::Manager> manager_;
  std::unique_ptr<Composer> composer_;
  std::unique_ptr<providers::ObjectProvider> provider_;
  std::map<std::string, Definition> definitions_;  // by claim kind
  std::vector<std::string> compositions_;
};

// ---------------------------------------------------------------------------------------------
// 1. Definitions and revisions.

TEST_F(ComposeEngineTest, PackageDefinitionsBecomeTypesAndCompositionsGetRevisions) {
  for (const auto& [kind, d] : definitions_) {
    SCOPED_TRACE(d.xrd);
    Json xrd = Get(kXrds, "", d.xrd);
    EXPECT_TRUE(reconcile::IsConditionTrue(xrd, "Established")) << Dump(xrd);
    EXPECT_TRUE(reconcile::IsConditionTrue(xrd, "Offered")) << Dump(xrd);

    Json xr_crd = Get(kCrds, "", d.xr.resource + "." + d.xr.group);
    ASSERT_FALSE(xr_crd.is_null()) << "no XR CRD for " << d.xrd;
    EXPECT_EQ(GetString(xr_crd, {"spec", "scope"}), "Cluster");
    EXPECT_EQ(GetString(xr_crd, {"spec", "names", "kind"}), d.xr_kind);
    auto xr_categories =
        machinery::Strings(machinery::Find(xr_crd, {"spec", "names", "categories"}));
    EXPECT_NE(std::find(xr_categories.begin(), xr_categories.end(), "composite"),
              xr_categories.end());
    EXPECT_TRUE(reconcile::IsConditionTrue(xr_crd, "Established"));

    Json claim_crd = Get(kCrds, "", d.claim.resource + "." + d.claim.group);
    ASSERT_FALSE(claim_crd.is_null()) << "no claim CRD for " << d.xrd;
    EXPECT_EQ(GetString(claim_crd, {"spec", "scope"}), "Namespaced");
    EXPECT_EQ(GetString(claim_crd, {"spec", "names", "kind"}), d.claim_kind);
    auto claim_categories =
        machinery::Strings(machinery::Find(claim_crd, {"spec", "names", "categories"}));
    EXPECT_NE(std::find(claim_categories.begin(), claim_categories.end(), "claim"),
              claim_categories.end());
  }

  // One revision per composition, numbered 1.
  std::map<std::string, std::string> first;  // composition -> revision name
  ASSERT_TRUE(Eventually([&] {
    first.clear();
    for (const Json& rev : List(kCompositionRevisions)) {
      first[GetString(rev, {"metadata", "labels", "crossplane.io/composition-name"})] =
          machinery::Name(rev);
    }
    return first.size() >= compositions_.size();
  })) << first.size()
      << " revisions";
  for (const std::string& c : compositions_) {
    SCOPED_TRACE(c);
    auto revs = List(kCompositionRevisions, "", "crossplane.io/composition-name=" + c);
    ASSERT_EQ(revs.size(), 1u);
    EXPECT_EQ(At(revs[0], {"spec", "revision"}), Json(1));
    EXPECT_EQ(At(revs[0], {"spec", "compositeTypeRef"}),
              At(Get(kCompositions, "", c), {"spec", "compositeTypeRef"}));
  }

  // Two claims on a9s-mariadb: one following updates (Automatic, the default), one pinned.
  const Definition& d = Def("MariadbInstance");
  Json spec = Yaml(
      "{service: a9s-mariadb106, plan: mariadb-single-nano, compositionRef: {name: a9s-mariadb}}");
  Claim("MariadbInstance", "revisions", "follows", spec);
  spec["compositionUpdatePolicy"] = "Manual";
  Claim("MariadbInstance", "revisions", "pinned", spec);
  std::string follows = WaitComposed(d, "revisions", "follows", kServiceInstances);
  std::string pinned = WaitComposed(d, "revisions", "pinned", kServiceInstances);
  ASSERT_FALSE(follows.empty());
  ASSERT_FALSE(pinned.empty());
  for (const char* claim : {"follows", "pinned"}) {
    EXPECT_TRUE(Eventually([&] {
      return GetString(XrOf(d, "revisions", claim), {"spec", "compositionRevisionRef", "name"}) ==
             first["a9s-mariadb"];
    })) << Dump(XrOf(d, "revisions", claim));
  }

  // Editing the spec gives revision 2; the Automatic XR moves to it and recomposes.
  Json edited = Get(kCompositions, "", "a9s-mariadb");
  Json& base = edited["spec"]["pipeline"][0]["input"]["resources"][0]["base"];
  base["spec"]["forProvider"]["spaceGuid"] = "00000000-0000-4000-8000-000000000002";
  auto updated = Rc(kCompositions).Update(edited);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  std::string second;
  ASSERT_TRUE(Eventually([&] {
    for (const Json& rev :
         List(kCompositionRevisions, "", "crossplane.io/composition-name=a9s-mariadb")) {
      if (At(rev, {"spec", "revision"}) == Json(2)) second = machinery::Name(rev);
    }
    return !second.empty();
  }));
  EXPECT_NE(second, first["a9s-mariadb"]);
  EXPECT_EQ(List(kCompositionRevisions, "", "crossplane.io/composition-name=a9s-mariadb").size(),
            2u);
  EXPECT_TRUE(Eventually([&] {
    return GetString(XrOf(d, "revisions", "follows"), {"spec", "compositionRevisionRef", "name"}) ==
               second &&
           GetString(Get(kServiceInstances, "", follows), {"spec", "forProvider", "spaceGuid"}) ==
               "00000000-0000-4000-8000-000000000002";
  })) << Dump(XrOf(d, "revisions", "follows"));
  EXPECT_TRUE(Eventually([&] {
    return GetString(Get(d.claim, "revisions", "follows"),
                     {"spec", "compositionRevisionRef", "name"}) == second;
  })) << Dump(Get(d.claim, "revisions", "follows"));
  // The Manual one stays where it was.
  EXPECT_EQ(GetString(XrOf(d, "revisions", "pinned"), {"spec", "compositionRevisionRef", "name"}),
            first["a9s-mariadb"]);
  EXPECT_EQ(GetString(Get(kServiceInstances, "", pinned), {"spec", "forProvider", "spaceGuid"}),
            "1bf71cf3-9017-4846-bffc-b9b31872bfaf");
}

// ---------------------------------------------------------------------------------------------
// 2. Every example claim of the package.

// Examples their own definition refuses, with the reason (checked: any other refusal fails).
const std::map<std::string, std::string>& ExpectedRefusals() {
  // keyvalue-single-small-ssl is a single plan, and the example sets parameters the
  // KeyvalueInstance definition allows only on clustered (-replica-) plans (§2.2).
  static const auto* refusals =
      new std::map<std::string, std::string>{{"a9s/keyvalue/serviceinstance-claim-parameters.yaml",
                                              "is only supported for clustered plans"}};
  return *refusals;
}

// Creates every example claim (path below examples/) that `include` accepts, each in a namespace
// of its own, and checks it is composed as §5 says and reports status; `total` examples in all,
// the expected refusals among them.
void ComposeEngineTest::ComposeExampleClaims(const std::function<bool(const std::string&)>& include,
                                             size_t total) {
  struct Case {
    std::string example;  // path under examples/
    Json claim;
    Expected expected;
    std::string composed;  // name, once known
  };
  std::vector<Case> cases;
  std::set<std::string> refused;
  for (const fs::path& f : FilesUnder(kPackage / "examples")) {
    const std::string example = fs::relative(f, kPackage / "examples").string();
    if (!include(example)) continue;
    for (Json claim : Documents(f)) {
      SCOPED_TRACE(example);
      // Each example in a namespace of its own: several share a name.
      std::string ns = "ex-" + example.substr(0, example.size() - 5);
      std::replace(ns.begin(), ns.end(), '/', '-');
      CreateNamespace(ns);
      claim["metadata"]["namespace"] = ns;
      const std::string kind = machinery::Kind(claim);
      ASSERT_TRUE(definitions_.count(kind)) << "no definition for " << kind;
      auto created = Rc(Def(kind).claim, ns).Create(claim);
      auto refusal = ExpectedRefusals().find(example);
      if (!created.ok()) {
        if (refusal != ExpectedRefusals().end() && core::IsInvalid(created.status()) &&
            created.status().message().find(refusal->second) != std::string::npos) {
          refused.insert(example);
          continue;
        }
        ADD_FAILURE() << "example " << example << " was refused: " << created.status().ToString();
        continue;
      }
      EXPECT_EQ(refusal, ExpectedRefusals().end())
          << "example " << example << " was expected to be refused (" << refusal->second << ")";
      cases.push_back({example, *created, ExpectedFor(*created), ""});
    }
  }
  for (const auto& [example, reason] : ExpectedRefusals()) {
    EXPECT_EQ(refused.count(example), include(example) ? 1u : 0u) << example;
  }
  ASSERT_EQ(cases.size() + refused.size(), total);

  // Each phase waits for every case at once (bounded however many fail), then checks each.
  auto wait_all = [&](const std::function<bool(Case&)>& done) {
    Eventually([&] {
      return std::all_of(cases.begin(), cases.end(),
                         [&](Case& c) { return c.composed.empty() || done(c); });
    });
  };

  // Composed as §5 says.
  for (Case& c : cases) c.composed = "?";
  wait_all([&](Case& c) {
    return !ComposedOf(Def(machinery::Kind(c.claim)), machinery::Namespace(c.claim),
                       machinery::Name(c.claim), c.expected.composed)
                .empty();
  });
  for (Case& c : cases) {
    SCOPED_TRACE(c.example);
    const Definition& d = Def(machinery::Kind(c.claim));
    const std::string ns = machinery::Namespace(c.claim);
    const std::string name = machinery::Name(c.claim);
    c.composed = ComposedOf(d, ns, name, c.expected.composed);
    if (c.composed.empty()) {
      ADD_FAILURE() << "example " << c.example
                    << " composed nothing: " << Dump(Get(d.claim, ns, name));
      continue;
    }
    Json claim = Get(d.claim, ns, name);
    Json xr = XrOf(d, ns, name);
    EXPECT_EQ(At(claim, {"spec", "resourceRef"}), Json({{"apiVersion", "anynines.com/v1"},
                                                        {"kind", d.xr_kind},
                                                        {"name", machinery::Name(xr)}}));
    EXPECT_EQ(At(xr, {"spec", "claimRef"}), Json({{"apiVersion", "anynines.com/v1"},
                                                  {"kind", d.claim_kind},
                                                  {"name", name},
                                                  {"namespace", ns}}));
    EXPECT_EQ(GetString(xr, {"metadata", "labels", "crossplane.io/claim-name"}), name);
    EXPECT_EQ(GetString(xr, {"metadata", "labels", "crossplane.io/claim-namespace"}), ns);
    EXPECT_EQ(GetString(xr, {"spec", "compositionRef", "name"}),
              GetString(c.claim, {"spec", "compositionRef", "name"}));

    Json composed = Get(c.expected.composed, "", c.composed);
    EXPECT_EQ(GetString(composed, {"metadata", "labels", "crossplane.io/claim-name"}), name);
    EXPECT_EQ(GetString(composed, {"metadata", "labels", "crossplane.io/claim-namespace"}), ns);
    EXPECT_EQ(GetString(composed, {"metadata", "labels", "crossplane.io/composite"}),
              machinery::Name(xr));
    Json owners = At(composed, {"metadata", "ownerReferences"});
    ASSERT_TRUE(owners.is_array() && owners.size() == 1) << Dump(composed);
    EXPECT_EQ(owners[0]["uid"], At(xr, {"metadata", "uid"}));
    EXPECT_EQ(owners[0]["kind"], d.xr_kind);
    EXPECT_EQ(owners[0]["controller"], true);
    for (const auto& [path, want] : c.expected.fields) {
      EXPECT_EQ(At(composed, path), want) << PathText(path) << " of " << Dump(composed);
    }
  }

  // Readiness before any status: a managed resource nobody reported on is not ready, so
  // neither are its XR and claim; an Object is ready once its provider created the object.
  auto settled = [&](Case& c) {
    const std::string ns = machinery::Namespace(c.claim);
    const std::string name = machinery::Name(c.claim);
    if (c.expected.wrapped) {
      return Exists(c.expected.wrapped_gvr, ns, name) &&
             reconcile::IsConditionTrue(Get(kObjects, "", c.composed), "Ready");
    }
    return reconcile::IsConditionTrue(Get(Def(machinery::Kind(c.claim)).claim, ns, name), "Synced");
  };
  wait_all(settled);
  for (Case& c : cases) {
    if (c.composed.empty()) continue;
    SCOPED_TRACE(c.example);
    const Definition& d = Def(machinery::Kind(c.claim));
    const std::string ns = machinery::Namespace(c.claim);
    const std::string name = machinery::Name(c.claim);
    if (c.expected.wrapped) {
      EXPECT_TRUE(settled(c)) << Dump(Get(kObjects, "", c.composed));
      Json wrapped = Get(c.expected.wrapped_gvr, ns, name);
      Json manifest = At(Get(kObjects, "", c.composed), {"spec", "forProvider", "manifest"});
      EXPECT_EQ(At(wrapped, {"spec"}), At(manifest, {"spec"})) << Dump(wrapped);
    } else {
      EXPECT_TRUE(settled(c)) << Dump(Get(d.claim, ns, name));
      EXPECT_EQ(reconcile::ConditionStatus(Get(d.claim, ns, name), "Ready"), "False");
      EXPECT_EQ(reconcile::ConditionStatus(XrOf(d, ns, name), "Ready"), "False");
    }
  }

  // The owning controller reports; status.managed reaches the XR and the claim, Ready follows.
  for (Case& c : cases) {
    if (c.composed.empty()) continue;
    const std::string ns = machinery::Namespace(c.claim);
    const std::string name = machinery::Name(c.claim);
    if (c.expected.wrapped) {
      MergePatch(c.expected.wrapped_gvr, ns, name, {{"status", c.expected.status}}, "status");
    } else {
      MergePatch(c.expected.composed, "", c.composed, {{"status", c.expected.status}}, "status");
    }
  }
  auto reported = [&](Case& c) {
    Json claim = Get(Def(machinery::Kind(c.claim)).claim, machinery::Namespace(c.claim),
                     machinery::Name(c.claim));
    return At(claim, {"status", "managed"}) == c.expected.managed &&
           reconcile::IsConditionTrue(claim, "Ready") &&
           reconcile::IsConditionTrue(claim, "Synced");
  };
  wait_all(reported);
  for (Case& c : cases) {
    if (c.composed.empty()) continue;
    SCOPED_TRACE(c.example);
    const Definition& d = Def(machinery::Kind(c.claim));
    const std::string ns = machinery::Namespace(c.claim);
    const std::string name = machinery::Name(c.claim);
    EXPECT_TRUE(reported(c)) << "want status.managed " << Dump(c.expected.managed) << "\nclaim "
                             << Dump(Get(d.claim, ns, name)) << "\ncomposed "
                             << Dump(Get(c.expected.composed, "", c.composed));
    Json xr = XrOf(d, ns, name);
    EXPECT_EQ(At(xr, {"status", "managed"}), c.expected.managed);
    EXPECT_TRUE(reconcile::IsConditionTrue(xr, "Ready")) << Dump(xr);
  }
}

TEST_F(ComposeEngineTest, EveryExampleClaimIsComposedAsSpecifiedAndReportsStatus) {
  ComposeExampleClaims([](const std::string&) { return true; }, 46);  // a8s: 6, a9s: 8 x 5
}

// The same with this repository's own package (deploy/package, deploy/provider-anynines/crds):
// every upstream a9s example composes as with upstream's package.
class ComposeOwnPackageTest : public ComposeEngineTest {
 protected:
  ComposeOwnPackageTest() { own_package_ = true; }
};

TEST_F(ComposeOwnPackageTest, A9sExampleClaimsAreComposedAsWithTheUpstreamPackage) {
  EXPECT_EQ(At(Get(kFunctions, "", "function-patch-and-transform"), {"spec", "package"}),
            "xpkg.upbound.io/crossplane-contrib/function-patch-and-transform:v0.9.2");
  ComposeExampleClaims([](const std::string& example) { return example.starts_with("a9s/"); },
                       40);  // 8 services x 5
}

// ---------------------------------------------------------------------------------------------
// 3. Connection details.

TEST_F(ComposeEngineTest, ConnectionDetailsArePublishedToTheClaimsSecret) {
  InstallWidgets();
  Create(kCompositions, Yaml(R"(
apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata: {name: widget-connection}
spec:
  compositeTypeRef: {apiVersion: test.klutch.io/v1, kind: XWidget}
  mode: Pipeline
  pipeline:
  - step: patch-and-transform
    functionRef: {name: function-patch-and-transform}
    input:
      apiVersion: pt.fn.crossplane.io/v1beta1
      kind: Resources
      resources:
      - name: binding
        base:
          apiVersion: dataservices.anynines.com/v1
          kind: ServiceBinding
          spec:
            forProvider: {acceptsIncomplete: true, instanceName: unset}
        patches:
        - fromFieldPath: spec.instance
          toFieldPath: spec.forProvider.instanceName
        - fromFieldPath: metadata.labels[crossplane.io/claim-namespace]
          toFieldPath: spec.writeConnectionSecretToRef.namespace
        - fromFieldPath: metadata.labels[crossplane.io/claim-name]
          toFieldPath: spec.writeConnectionSecretToRef.name
          transforms:
          - type: string
            string: {type: Format, fmt: "%s-binding"}
        connectionDetails:
        - {name: kind, type: FromValue, value: widget}
        - {name: instance, type: FromFieldPath, fromFieldPath: spec.forProvider.instanceName}
        - {name: password, type: FromConnectionSecretKey, fromConnectionSecretKey: password}
)"));
  Widget("conn", "w", Yaml(R"({instance: pg-1, compositionRef: {name: widget-connection},
                               writeConnectionSecretToRef: {name: w-connection}})"));
  const Definition d = WidgetDef();
  std::string binding = WaitComposed(d, "conn", "w", kMrServiceBindings);
  ASSERT_FALSE(binding.empty());
  Json mr = Get(kMrServiceBindings, "", binding);
  EXPECT_EQ(At(mr, {"spec", "writeConnectionSecretToRef"}),
            Json({{"name", "w-binding"}, {"namespace", "conn"}}));

  // As provider-anynines does: the connection Secret first, then the MR's Ready status.
  Create(
      client::resources::kSecrets,
      {{"apiVersion", "v1"},
       {"kind", "Secret"},
       {"metadata",
        {{"name", "w-binding"},
         {"namespace", "conn"},
         {"ownerReferences", Json::array({{{"apiVersion", "dataservices.anynines.com/v1"},
                                           {"kind", "ServiceBinding"},
                                           {"name", binding},
                                           {"uid", At(mr, {"metadata", "uid"})},
                                           {"controller", true}}})}}},
       {"type", "connection.crossplane.io/v1alpha1"},
       {"data", {{"password", core::Base64Encode("s3cret")}, {"host", core::Base64Encode("h")}}}});
  MergePatch(
      kMrServiceBindings, "", binding,
      {{"status", {{"atProvider", {{"state", "Created"}}}, {"conditions", ReadyConditions()}}}},
      "status");

  Json secret;
  ASSERT_TRUE(Eventually([&] {
    secret = Get(client::resources::kSecrets, "conn", "w-connection");
    return !secret.is_null() && At(secret, {"data"}).size() == 3;
  })) << Dump(secret)
      << "\n"
      << Dump(Get(kWidgets, "conn", "w")) << "\n"
      << Dump(XrOf(d, "conn", "w"));
  EXPECT_EQ(GetString(secret, {"type"}), "connection.crossplane.io/v1alpha1");
  EXPECT_EQ(At(secret, {"data"}), Json({{"kind", core::Base64Encode("widget")},
                                        {"instance", core::Base64Encode("pg-1")},
                                        {"password", core::Base64Encode("s3cret")}}));
  EXPECT_TRUE(Eventually([&] {
    Json claim = Get(kWidgets, "conn", "w");
    return !GetString(claim, {"status", "connectionDetails", "lastPublishedTime"}).empty() &&
           reconcile::IsConditionTrue(claim, "Ready");
  })) << Dump(Get(kWidgets, "conn", "w"));
}

// ---------------------------------------------------------------------------------------------
// 4. Deletion and drift.

TEST_F(ComposeEngineTest, ForegroundDeletionKeepsTheClaimUntilComposedResourcesAreGone) {
  const Definition& d = Def("PostgresqlInstance");
  Claim("PostgresqlInstance", "fg", "a9s",
        Yaml("{service: a9s-postgresql15, plan: postgresql-single-nano, compositionRef: {name: "
             "a9s-postgresql}}"));
  Claim("PostgresqlInstance", "fg", "a8s",
        Yaml("{service: a9s-postgresql14, plan: postgresql-single-nano, compositionRef: {name: "
             "a8s-postgresql}}"));
  std::string mr = WaitComposed(d, "fg", "a9s", kServiceInstances);
  std::string object = WaitComposed(d, "fg", "a8s", kObjects);
  ASSERT_FALSE(mr.empty());
  ASSERT_FALSE(object.empty());
  ASSERT_TRUE(Eventually([&] { return Exists(kPostgresqls, "fg", "a8s"); }));
  // provider-anynines holds a managed resource with its finalizer until the broker deleted.
  MergePatch(kServiceInstances, "", mr, {{"metadata", {{"finalizers", {kHoldFinalizer}}}}});
  const std::string xr = GetString(XrOf(d, "fg", "a9s"), {"metadata", "name"});
  const std::string a8s_xr = GetString(XrOf(d, "fg", "a8s"), {"metadata", "name"});

  ASSERT_TRUE(Rc(d.claim, "fg").Delete("a9s").ok());
  EXPECT_TRUE(Eventually([&] {
    return machinery::IsBeingDeleted(Get(kServiceInstances, "", mr)) &&
           machinery::IsBeingDeleted(Get(d.xr, "", xr));
  })) << Dump(Get(d.xr, "", xr));
  Json claim = Get(d.claim, "fg", "a9s");
  EXPECT_TRUE(machinery::IsBeingDeleted(claim)) << Dump(claim);
  EXPECT_TRUE(machinery::HasFinalizer(claim, kClaimFinalizer)) << Dump(claim);
  std::this_thread::sleep_for(1s);  // the claim waits, however long it takes
  EXPECT_TRUE(Exists(d.claim, "fg", "a9s"));
  EXPECT_TRUE(Exists(d.xr, "", xr));
  // What the deletion waits for, as the provider says it on the composed resource, reaches
  // the XR and the claim (Ready=False, reason Deleting).
  const std::string waiting = "the instance is still used by ServiceBinding \"b\"";
  MergePatch(kServiceInstances, "", mr,
             {{"status",
               {{"conditions", Json::array({{{"type", "Ready"},
                                             {"status", "False"},
                                             {"reason", "InUse"},
                                             {"message", waiting},
                                             {"lastTransitionTime", "2026-01-01T00:00:00Z"}}})}}}},
             "status");
  EXPECT_TRUE(Eventually([&] {
    auto c = reconcile::FindCondition(Get(d.claim, "fg", "a9s"), "Ready");
    return c && c->status == "False" && c->reason == "Deleting" && c->message == waiting;
  })) << Dump(Get(d.claim, "fg", "a9s"))
      << Dump(Get(d.xr, "", xr));
  auto xr_ready = reconcile::FindCondition(Get(d.xr, "", xr), "Ready");
  ASSERT_TRUE(xr_ready);
  EXPECT_EQ(xr_ready->reason, "Deleting");
  EXPECT_EQ(xr_ready->message, waiting);

  RemoveFinalizer(kServiceInstances, "", mr, kHoldFinalizer);
  EXPECT_TRUE(Eventually([&] {
    return Gone(kServiceInstances, "", mr) && Gone(d.xr, "", xr) && Gone(d.claim, "fg", "a9s");
  })) << Dump(Get(d.claim, "fg", "a9s"));

  // a8s: the Object provider deletes the wrapped object, then the Object, XR and claim go.
  ASSERT_TRUE(Rc(d.claim, "fg").Delete("a8s").ok());
  EXPECT_TRUE(Eventually([&] {
    return Gone(kPostgresqls, "fg", "a8s") && Gone(kObjects, "", object) &&
           Gone(d.xr, "", a8s_xr) && Gone(d.claim, "fg", "a8s");
  })) << Dump(Get(d.claim, "fg", "a8s"))
      << "\n"
      << Dump(Get(kObjects, "", object));
}

// Issue #23: why a composed resource is not ready reaches the XR and the claim, and an error
// (not progress) makes the reason Unavailable.
TEST_F(ComposeEngineTest, AComposedResourcesReasonReachesTheClaim) {
  const Definition& d = Def("PostgresqlInstance");
  Claim("PostgresqlInstance", "why", "pg",
        Yaml("{service: a9s-postgresql15, plan: postgresql-single-nano, compositionRef: {name: "
             "a9s-postgresql}}"));
  std::string mr = WaitComposed(d, "why", "pg", kServiceInstances);
  ASSERT_FALSE(mr.empty());
  auto set_conditions = [&](Json conditions) {
    MergePatch(kServiceInstances, "", mr, {{"status", {{"conditions", conditions}}}}, "status");
  };
  auto claim_ready = [&] { return reconcile::FindCondition(Get(d.claim, "why", "pg"), "Ready"); };
  set_conditions(Json::array({{{"type", "Ready"},
                               {"status", "False"},
                               {"reason", "Creating"},
                               {"message", "the broker is provisioning the instance"},
                               {"lastTransitionTime", "2026-01-01T00:00:00Z"}}}));
  EXPECT_TRUE(Eventually([&] {
    auto c = claim_ready();
    return c && c->reason == "Creating" &&
           c->message.ends_with(": the broker is provisioning the instance");
  })) << Dump(Get(d.claim, "why", "pg"));
  set_conditions(Json::array({{{"type", "Ready"},
                               {"status", "False"},
                               {"reason", "Creating"},
                               {"message", "the broker is provisioning the instance"},
                               {"lastTransitionTime", "2026-01-01T00:00:00Z"}},
                              {{"type", "Synced"},
                               {"status", "False"},
                               {"reason", "ReconcileError"},
                               {"message", "Instance limit reached."},
                               {"lastTransitionTime", "2026-01-01T00:00:00Z"}}}));
  EXPECT_TRUE(Eventually([&] {
    auto c = claim_ready();
    return c && c->status == "False" && c->reason == "Unavailable" &&
           c->message.starts_with("Unready resources: ") &&
           c->message.ends_with(": Instance limit reached.");
  })) << Dump(Get(d.claim, "why", "pg"));
}

// As Crossplane does: the claim's annotations reach its XR (provider-anynines reads
// klutch.anynines.com/delete-in-use there), Kubernetes' own do not.
TEST_F(ComposeEngineTest, TheClaimsAnnotationsReachItsCompositeResource) {
  const Definition& d = Def("PostgresqlInstance");
  Claim("PostgresqlInstance", "ann", "pg",
        Yaml("{service: a9s-postgresql15, plan: postgresql-single-nano, "
             "compositionRef: {name: a9s-postgresql}}"));
  ASSERT_FALSE(WaitComposed(d, "ann", "pg", kServiceInstances).empty());
  MergePatch(d.claim, "ann", "pg",
             {{"metadata",
               {{"annotations",
                 {{"klutch.anynines.com/delete-in-use", "true"},
                  {"kubectl.kubernetes.io/last-applied-configuration", "{}"},
                  {"example.k8s.io/x", "y"}}}}}});
  EXPECT_TRUE(Eventually([&] {
    return machinery::Annotation(XrOf(d, "ann", "pg"), "klutch.anynines.com/delete-in-use") ==
           "true";
  })) << Dump(XrOf(d, "ann", "pg"));
  Json xr = XrOf(d, "ann", "pg");
  EXPECT_EQ(machinery::Annotation(xr, "kubectl.kubernetes.io/last-applied-configuration"), "");
  EXPECT_EQ(machinery::Annotation(xr, "example.k8s.io/x"), "");
  // Removed from the claim, removed from the XR: a change of mind must not leave the force on.
  MergePatch(d.claim, "ann", "pg",
             {{"metadata", {{"annotations", {{"klutch.anynines.com/delete-in-use", nullptr}}}}}});
  EXPECT_TRUE(Eventually([&] {
    Json now = XrOf(d, "ann", "pg");
    return !now.is_null() &&
           !machinery::Find(now, {"metadata", "annotations", "klutch.anynines.com/delete-in-use"});
  })) << Dump(XrOf(d, "ann", "pg"));
}

TEST_F(ComposeEngineTest, BackgroundDeletionReleasesTheClaimAtOnce) {
  const Definition& d = Def("ServiceBinding");
  Claim("ServiceBinding", "bg", "sb",
        Yaml("{instanceRef: pg, serviceInstanceType: postgresql, compositionRef: {name: "
             "a9s-servicebinding}}"));
  std::string mr = WaitComposed(d, "bg", "sb", kMrServiceBindings);
  ASSERT_FALSE(mr.empty());
  MergePatch(kMrServiceBindings, "", mr, {{"metadata", {{"finalizers", {kHoldFinalizer}}}}});
  const std::string xr = GetString(XrOf(d, "bg", "sb"), {"metadata", "name"});
  ASSERT_TRUE(Eventually(
      [&] { return machinery::HasFinalizer(Get(d.claim, "bg", "sb"), kClaimFinalizer); }));

  ASSERT_TRUE(Rc(d.claim, "bg").Delete("sb").ok());
  // The claim goes while its composed resource still exists.
  EXPECT_TRUE(Eventually([&] { return Gone(d.claim, "bg", "sb"); }))
      << Dump(Get(d.claim, "bg", "sb"));
  EXPECT_TRUE(Exists(kMrServiceBindings, "", mr));
  // The garbage collector takes the XR and then the composed resource.
  EXPECT_TRUE(Eventually([&] {
    return Gone(d.xr, "", xr) && machinery::IsBeingDeleted(Get(kMrServiceBindings, "", mr));
  })) << Dump(Get(d.xr, "", xr));
  RemoveFinalizer(kMrServiceBindings, "", mr, kHoldFinalizer);
  EXPECT_TRUE(Eventually([&] { return Gone(kMrServiceBindings, "", mr); }));
}

TEST_F(ComposeEngineTest, ComposedResourceDriftIsRepaired) {
  const Definition& d = Def("PostgresqlInstance");
  Claim("PostgresqlInstance", "drift", "pg",
        Yaml("{service: a9s-postgresql15, plan: postgresql-single-nano, compositionRef: {name: "
             "a9s-postgresql}}"));
  std::string mr = WaitComposed(d, "drift", "pg", kServiceInstances);
  ASSERT_FALSE(mr.empty());
  const std::string uid = GetString(Get(kServiceInstances, "", mr), {"metadata", "uid"});

  // Deleted: composed again, same name.
  ASSERT_TRUE(Rc(kServiceInstances).Delete(mr).ok());
  EXPECT_TRUE(Eventually([&] {
    Json again = Get(kServiceInstances, "", mr);
    return !again.is_null() && GetString(again, {"metadata", "uid"}) != uid;
  }));
  EXPECT_EQ(GetString(Get(kServiceInstances, "", mr), {"spec", "forProvider", "planName"}),
            "postgresql-single-nano");

  // A patched field edited by someone else: reverted.
  MergePatch(kServiceInstances, "", mr,
             {{"spec", {{"forProvider", {{"planName", "postgresql-single-big"}}}}}});
  EXPECT_TRUE(Eventually([&] {
    return GetString(Get(kServiceInstances, "", mr), {"spec", "forProvider", "planName"}) ==
           "postgresql-single-nano";
  })) << Dump(Get(kServiceInstances, "", mr));
  // The claim's own edit goes through.
  MergePatch(d.claim, "drift", "pg", {{"spec", {{"plan", "postgresql-single-small"}}}});
  EXPECT_TRUE(Eventually([&] {
    return GetString(Get(kServiceInstances, "", mr), {"spec", "forProvider", "planName"}) ==
           "postgresql-single-small";
  })) << Dump(Get(kServiceInstances, "", mr));
}

// ---------------------------------------------------------------------------------------------
// 5. Bad input: a condition saying what to fix, and nothing else.

TEST_F(ComposeEngineTest, ClaimNamingAMissingCompositionSaysSoAndCreatesNothing) {
  InstallWidgets();
  Widget("missing", "w", Yaml("{instance: x, compositionRef: {name: no-such-composition}}"));
  Json claim;
  EXPECT_TRUE(Eventually([&] {
    claim = Get(kWidgets, "missing", "w");
    return reconcile::IsConditionFalse(claim, "Synced");
  })) << Dump(claim);
  EXPECT_NE(ConditionMessage(claim, "Synced").find("no-such-composition"), std::string::npos)
      << Dump(claim);
  EXPECT_TRUE(At(claim, {"spec", "resourceRef"}).is_null()) << Dump(claim);
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(List(kXWidgets).empty());
  EXPECT_TRUE(List(kMrBackups).empty());

  // Doing what the message says: the claim gets its composite.
  WidgetComposition("no-such-composition", Yaml(R"([
    {fromFieldPath: spec.instance, toFieldPath: spec.forProvider.instanceName}])"));
  EXPECT_FALSE(WaitComposed(WidgetDef(), "missing", "w", kMrBackups).empty());
  EXPECT_TRUE(Eventually([&] {
    return reconcile::IsConditionTrue(Get(kWidgets, "missing", "w"), "Synced");
  })) << Dump(Get(kWidgets, "missing", "w"));
}

TEST_F(ComposeEngineTest, FailingPatchesAreReportedOnTheCompositeAndComposeNothing) {
  InstallWidgets();
  WidgetComposition("widget-bad-path", Yaml(R"([
    {fromFieldPath: spec.instance, toFieldPath: spec.forProvider.instanceName},
    {fromFieldPath: spec.size, toFieldPath: "spec["}])"));
  WidgetComposition("widget-bad-map", Yaml(R"([
    {fromFieldPath: spec.size, toFieldPath: spec.forProvider.instanceName,
     transforms: [{type: map, map: {small: s, big: b}}]}])"));
  Widget("bad", "path",
         Yaml("{instance: x, size: small, compositionRef: {name: widget-bad-path}}"));
  Widget("bad", "map", Yaml("{instance: x, size: huge, compositionRef: {name: widget-bad-map}}"));
  const Definition d = WidgetDef();
  for (const char* name : {"path", "map"}) {
    SCOPED_TRACE(name);
    Json xr;
    EXPECT_TRUE(Eventually([&] {
      xr = XrOf(d, "bad", name);
      return reconcile::IsConditionFalse(xr, "Synced");
    })) << Dump(Get(kWidgets, "bad", name));
    const std::string message = ConditionMessage(xr, "Synced");
    EXPECT_NE(message.find("patches["), std::string::npos) << message;
    if (std::string(name) == "path") {
      EXPECT_NE(message.find("spec["), std::string::npos) << message;
    } else {
      EXPECT_NE(message.find("huge"), std::string::npos) << message;
    }
    EXPECT_TRUE(List(kMrBackups, "", "crossplane.io/composite=" + machinery::Name(xr)).empty());
    // The claim is all its author sees: the XR's error is its error (issue #23).
    EXPECT_TRUE(Eventually([&] {
      return ConditionMessage(Get(kWidgets, "bad", name), "Synced") == message;
    })) << Dump(Get(kWidgets, "bad", name));
  }
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(List(kMrBackups).empty());

  // Fixing the composition (a new revision) composes the resource.
  Json fixed = Get(kCompositions, "", "widget-bad-map");
  fixed["spec"]["pipeline"][0]["input"]["resources"][0]["patches"][0]["transforms"][0]["map"]
       ["huge"] = "h";
  ASSERT_TRUE(Rc(kCompositions).Update(fixed).ok());
  std::string mr = WaitComposed(d, "bad", "map", kMrBackups);
  EXPECT_EQ(GetString(Get(kMrBackups, "", mr), {"spec", "forProvider", "instanceName"}), "h");
  EXPECT_TRUE(Eventually([&] {
    return reconcile::IsConditionTrue(XrOf(d, "bad", "map"), "Synced");
  })) << Dump(XrOf(d, "bad", "map"));
}

TEST_F(ComposeEngineTest, DefinitionConflictingWithAForeignCrdIsNotEstablished) {
  Json foreign = WrappedCrd("test.klutch.io", "XClash", "xclashes");
  foreign["spec"]["scope"] = "Cluster";
  foreign["spec"]["versions"][0]["name"] = "v1";
  ASSERT_TRUE(reconcile::InstallCrd(admin(), foreign, 30s).ok());
  Create(kXrds, Yaml(R"(
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xclashes.test.klutch.io}
spec:
  group: test.klutch.io
  names: {kind: XClash, plural: xclashes}
  claimNames: {kind: Clash, plural: clashes}
  versions:
  - name: v1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema: {type: object}
)"));
  Json xrd;
  EXPECT_TRUE(Eventually([&] {
    xrd = Get(kXrds, "", "xclashes.test.klutch.io");
    return reconcile::IsConditionFalse(xrd, "Established");
  })) << Dump(xrd);
  EXPECT_EQ(ConditionReason(xrd, "Established"), "ConflictingCustomResourceDefinition");
  EXPECT_NE(ConditionMessage(xrd, "Established").find("xclashes.test.klutch.io"), std::string::npos)
      << Dump(xrd);
  // The foreign CRD is left as it was.
  Json crd = Get(kCrds, "", "xclashes.test.klutch.io");
  EXPECT_TRUE(At(crd, {"metadata", "ownerReferences"}).is_null()) << Dump(crd);
  EXPECT_EQ(At(crd, {"spec", "versions"})[0]["schema"], foreign["spec"]["versions"][0]["schema"]);
  EXPECT_TRUE(Gone(kCrds, "", "clashes.test.klutch.io"));

  // Doing what the message says: the definition takes the name.
  ASSERT_TRUE(Rc(kCrds).Delete("xclashes.test.klutch.io").ok());
  EXPECT_TRUE(Eventually([&] {
    xrd = Get(kXrds, "", "xclashes.test.klutch.io");
    return reconcile::IsConditionTrue(xrd, "Established") &&
           reconcile::IsConditionTrue(xrd, "Offered");
  })) << Dump(xrd);
}

TEST_F(ComposeEngineTest, DefinitionDeletionWaitsForItsClaims) {
  InstallWidgets();
  WidgetComposition("widget", Yaml(R"([
    {fromFieldPath: spec.instance, toFieldPath: spec.forProvider.instanceName}])"));
  Widget("xrd-deletion", "w", Yaml("{instance: x, compositionRef: {name: widget}}"));
  const Definition d = WidgetDef();
  std::string mr = WaitComposed(d, "xrd-deletion", "w", kMrBackups);
  ASSERT_FALSE(mr.empty());

  ASSERT_TRUE(Rc(kXrds).Delete("xwidgets.test.klutch.io").ok());
  Json xrd;
  EXPECT_TRUE(Eventually([&] {
    xrd = Get(kXrds, "", "xwidgets.test.klutch.io");
    return ConditionReason(xrd, "Established") == "DeletionBlocked" &&
           HasEvent("DeletionBlocked", "xwidgets.test.klutch.io");
  })) << Dump(xrd);
  EXPECT_TRUE(machinery::IsBeingDeleted(xrd));
  EXPECT_NE(ConditionMessage(xrd, "Established").find("delete them first"), std::string::npos);
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(Exists(kXrds, "", "xwidgets.test.klutch.io"));
  EXPECT_TRUE(Exists(kWidgets, "xrd-deletion", "w"));

  ASSERT_TRUE(Rc(kWidgets, "xrd-deletion").Delete("w").ok());
  EXPECT_TRUE(Eventually([&] {
    return Gone(kXrds, "", "xwidgets.test.klutch.io") &&
           Gone(kCrds, "", "xwidgets.test.klutch.io") && Gone(kCrds, "", "widgets.test.klutch.io");
  })) << Dump(Get(kXrds, "", "xwidgets.test.klutch.io"));
  EXPECT_TRUE(Eventually([&] { return Gone(kMrBackups, "", mr); }));
}

// ---------------------------------------------------------------------------------------------
// 6. Paused claims.

TEST_F(ComposeEngineTest, PausedClaimIsNotReconciled) {
  const Definition& d = Def("PostgresqlInstance");
  Claim("PostgresqlInstance", "paused", "pg",
        Yaml("{service: a9s-postgresql15, plan: postgresql-single-nano, compositionRef: {name: "
             "a9s-postgresql}}"));
  std::string mr = WaitComposed(d, "paused", "pg", kServiceInstances);
  ASSERT_FALSE(mr.empty());
  ASSERT_TRUE(Eventually(
      [&] { return reconcile::IsConditionTrue(Get(d.claim, "paused", "pg"), "Synced"); }));
  MergePatch(d.claim, "paused", "pg",
             {{"metadata", {{"annotations", {{"crossplane.io/paused", "true"}}}}},
              {"spec", {{"plan", "postgresql-single-small"}}}});
  Json claim;
  EXPECT_TRUE(Eventually([&] {
    claim = Get(d.claim, "paused", "pg");
    return ConditionReason(claim, "Synced") == "ReconcilePaused";
  })) << Dump(claim);
  EXPECT_EQ(reconcile::ConditionStatus(claim, "Synced"), "False");
  Json xr = XrOf(d, "paused", "pg");
  std::this_thread::sleep_for(2s);
  Json xr_later = XrOf(d, "paused", "pg");
  EXPECT_EQ(machinery::ResourceVersion(xr_later), machinery::ResourceVersion(xr));
  EXPECT_EQ(GetString(xr_later, {"spec", "plan"}), "postgresql-single-nano");
  EXPECT_EQ(GetString(Get(kServiceInstances, "", mr), {"spec", "forProvider", "planName"}),
            "postgresql-single-nano");

  // Unpaused: the edit goes through.
  MergePatch(d.claim, "paused", "pg",
             {{"metadata", {{"annotations", {{"crossplane.io/paused", nullptr}}}}}});
  EXPECT_TRUE(Eventually([&] {
    return GetString(Get(kServiceInstances, "", mr), {"spec", "forProvider", "planName"}) ==
               "postgresql-single-small" &&
           reconcile::IsConditionTrue(Get(d.claim, "paused", "pg"), "Synced");
  })) << Dump(Get(d.claim, "paused", "pg"));
}

// ---------------------------------------------------------------------------------------------
// 7. Quiet when nothing changes.

TEST_F(ComposeEngineTest, NothingIsWrittenWhileNothingChanges) {
  const Definition& d = Def("PostgresqlInstance");
  Claim("PostgresqlInstance", "quiet", "a9s",
        Yaml("{service: a9s-postgresql15, plan: postgresql-single-nano, compositionRef: {name: "
             "a9s-postgresql}}"));
  Claim("PostgresqlInstance", "quiet", "a8s",
        Yaml("{service: a9s-postgresql14, plan: postgresql-single-nano, compositionRef: {name: "
             "a8s-postgresql}}"));
  std::string mr = WaitComposed(d, "quiet", "a9s", kServiceInstances);
  std::string object = WaitComposed(d, "quiet", "a8s", kObjects);
  ASSERT_FALSE(mr.empty());
  ASSERT_FALSE(object.empty());
  MergePatch(
      kServiceInstances, "", mr,
      {{"status", {{"atProvider", {{"state", "provisioned"}}}, {"conditions", ReadyConditions()}}}},
      "status");
  ASSERT_TRUE(Eventually([&] { return Exists(kPostgresqls, "quiet", "a8s"); }));
  MergePatch(kPostgresqls, "quiet", "a8s",
             {{"status", {{"clusterStatus", "Running"}, {"readyReplicas", 1}}}}, "status");
  ASSERT_TRUE(Eventually([&] {
    Json a9s = Get(d.claim, "quiet", "a9s");
    Json a8s = Get(d.claim, "quiet", "a8s");
    return reconcile::IsConditionTrue(a9s, "Ready") && reconcile::IsConditionTrue(a8s, "Ready") &&
           GetString(a9s, {"status", "managed", "state"}) == "provisioned" &&
           GetString(a8s, {"status", "managed", "clusterStatus"}) == "Running";
  }));

  auto versions = [&] {
    return std::vector<std::string>{
        machinery::ResourceVersion(Get(d.claim, "quiet", "a9s")),
        machinery::ResourceVersion(XrOf(d, "quiet", "a9s")),
        machinery::ResourceVersion(Get(kServiceInstances, "", mr)),
        machinery::ResourceVersion(Get(d.claim, "quiet", "a8s")),
        machinery::ResourceVersion(XrOf(d, "quiet", "a8s")),
        machinery::ResourceVersion(Get(kObjects, "", object)),
        machinery::ResourceVersion(Get(kPostgresqls, "quiet", "a8s")),
    };
  };
  const auto before = versions();
  std::this_thread::sleep_for(2500ms);
  const auto after = versions();
  EXPECT_EQ(after, before) << "claim, XR, managed resource (a9s); claim, XR, Object, Postgresql "
                              "(a8s)";
}

// ---------------------------------------------------------------------------------------------
// Two controllers fighting over a field: the breaker holds the XR back without losing events.

class ComposeEngineBreakerTest : public ComposeEngineTest {
 protected:
  ComposeEngineBreakerTest() {
    composer_options_.breaker_writes = 5;
    composer_options_.breaker_window = std::chrono::seconds(10);
    composer_options_.breaker_cooldown = std::chrono::seconds(3);
  }
};

TEST_F(ComposeEngineBreakerTest, FightOverAFieldTripsTheBreakerAndNoEventIsLost) {
  const Definition& d = Def("PostgresqlInstance");
  Claim("PostgresqlInstance", "fight", "pg",
        Yaml("{service: a9s-postgresql15, plan: postgresql-single-nano, compositionRef: {name: "
             "a9s-postgresql}}"));
  std::string mr = WaitComposed(d, "fight", "pg", kServiceInstances);
  ASSERT_FALSE(mr.empty());

  // Another "controller" sets planName to big whenever it is not; count how often the
  // manager puts nano back.
  std::atomic<bool> stop{false};
  std::atomic<int> reverts{0};
  std::thread fighter([&] {
    while (!stop) {
      std::string plan =
          GetString(Get(kServiceInstances, "", mr), {"spec", "forProvider", "planName"});
      if (plan != "postgresql-single-big") {
        if (plan == "postgresql-single-nano") ++reverts;
        MergePatch(kServiceInstances, "", mr,
                   {{"spec", {{"forProvider", {{"planName", "postgresql-single-big"}}}}}});
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  bool tripped = Eventually(
      [&] {
        Json xr = XrOf(d, "fight", "pg");
        auto synced = reconcile::FindCondition(xr, "Synced");
        return synced && synced->status == "False" && synced->reason == "CircuitBreakerOpen" &&
               synced->message.find("holding back writes") != std::string::npos;
      },
      std::chrono::seconds(30));
  const int at_trip = reverts.load();
  // While the breaker is open (3 s), the manager does not write.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int during = reverts.load() - at_trip;
  stop = true;
  fighter.join();
  ASSERT_TRUE(tripped) << Dump(XrOf(d, "fight", "pg"));
  EXPECT_LE(at_trip, composer_options_.breaker_writes + 1);
  EXPECT_EQ(during, 0);
  // The fight is over: after the cooldown the XR's queued key runs and the field is repaired;
  // the XR is Synced again.
  EXPECT_TRUE(Eventually(
      [&] {
        return GetString(Get(kServiceInstances, "", mr), {"spec", "forProvider", "planName"}) ==
                   "postgresql-single-nano" &&
               reconcile::IsConditionTrue(XrOf(d, "fight", "pg"), "Synced");
      },
      std::chrono::seconds(30)))
      << Dump(XrOf(d, "fight", "pg"));
}

// Removing a parameter from the claim removes it all the way down: from the XR, from the
// composed Object's manifest (desired state recomputed from the base) and from the wrapped
// Postgresql (the Object provider notices the manifest changed although the live object still
// "covers" the smaller one).
TEST_F(ComposeEngineTest, RemovingAParameterRemovesItDownToTheWrappedObject) {
  const Definition& d = Def("PostgresqlInstance");
  Claim("PostgresqlInstance", "params", "pg",
        Yaml("{service: a9s-postgresql13, plan: postgresql-single-small, compositionRef: {name: "
             "a8s-postgresql}, parameters: {maxConnections: 120, logStatement: ddl}}"));
  ASSERT_FALSE(WaitComposed(d, "params", "pg", kObjects).empty());
  ASSERT_TRUE(Eventually([&] {
    return At(Get(kPostgresqls, "params", "pg"), {"spec", "parameters", "maxConnections"}) == 120;
  })) << Dump(Get(kPostgresqls, "params", "pg"));

  auto removed = Rc(d.claim, "params")
                     .Patch("pg", client::PatchType::kJsonPatch,
                            R"([{"op":"remove","path":"/spec/parameters/maxConnections"}])");
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_TRUE(Eventually([&] {
    Json pg = Get(kPostgresqls, "params", "pg");
    return At(pg, {"spec", "parameters", "logStatement"}) == "ddl" &&
           At(pg, {"spec", "parameters", "maxConnections"}).is_null();
  })) << Dump(Get(kPostgresqls, "params", "pg"));
  EXPECT_TRUE(At(XrOf(d, "params", "pg"), {"spec", "parameters", "maxConnections"}).is_null());
}

}  // namespace
}  // namespace klutch::compose
