// provider-anynines' controllers on an in-process cluster with the upstream CRDs (read from
// ../shared), against FakeBroker on loopback, in real time with short intervals: provisioning,
// plan and parameter updates, bindings and their Secrets, backups and restores, error
// surfacing, ProviderConfig health and credential rotation.
#include "providers/anynines/controllers.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>

#include "client/dynamic.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "providers/anynines/context.h"
#include "providers/anynines_provider.h"
#include "reconcile/conditions.h"
#include "reconcile/crd_installer.h"
#include "reconcile/manager.h"
#include "test/support/fake_broker.h"
#include "test/support/process.h"
#include "test/support/test_cluster.h"
#include "test/support/wait.h"

namespace klutch::providers::anynines {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using client::ResourceClient;
using machinery::GetString;
using testing::FakeBroker;

const fs::path kCrds =
    fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/provider-anynines/package/crds";
constexpr const char* kNs = "team";
constexpr const char* kBrokerConfig = "postgresql-service-broker";
constexpr const char* kManagerConfig = "postgresql-backup-manager";

Json Yaml(const std::string& text) {
  auto parsed = machinery::ParseYaml(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : Json::object();
}

bool Eventually(const std::function<bool()>& probe) {
  return klutch::testing::Eventually(probe, std::chrono::seconds(30));
}

TEST(ParameterDelta, NullsRemovedKeysSendsChangesAndIgnoresOrderAndEmptiness) {
  Json observed = {
      {"a", 1}, {"b", "x"}, {"list", {1, 2, 3}}, {"empty", Json::array()}, {"gone", true}};
  Json desired = {{"a", 1}, {"b", "y"}, {"list", {3, 1, 2}}, {"new", 5}};
  EXPECT_EQ(ParameterDelta(observed, desired), (Json{{"b", "y"}, {"gone", nullptr}, {"new", 5}}));
  EXPECT_EQ(ParameterDelta(observed, observed), Json::object());
  EXPECT_EQ(ParameterDelta(Json(), Json()), Json::object());
  EXPECT_EQ(ParameterDelta(Json(), Json{{"e", Json::array()}}), Json::object());
  EXPECT_EQ(ParameterDelta(Json{{"n", 100}}, Json{{"n", 100.0}}), Json::object());
  EXPECT_EQ(ParameterDelta(Json{{"l", {1, 2}}}, Json{{"l", {1, 2, 2}}}), (Json{{"l", {1, 2, 2}}}));
}

class AnyninesProviderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(broker_.ok());
    auto cluster = klutch::testing::TestCluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = std::move(*cluster);
    size_t installed = 0;
    for (const auto& entry : fs::directory_iterator(kCrds)) {
      for (const std::string& doc :
           klutch::testing::SplitYamlDocuments(klutch::testing::ReadFileOrEmpty(entry.path()))) {
        if (doc.find("kind:") == std::string::npos) continue;
        core::Status s = reconcile::InstallCrd(admin(), Yaml(doc), 30s);
        ASSERT_TRUE(s.ok()) << entry.path() << ": " << s.ToString();
        ++installed;
      }
    }
    ASSERT_EQ(installed, 7u) << "CRDs under " << kCrds;
    for (const char* ns : {"crossplane-system", kNs}) {
      ASSERT_TRUE(
          Resource(client::resources::kNamespaces)
              .Create({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
              .ok());
    }
    ASSERT_TRUE(Resource(client::resources::kSecrets, "crossplane-system")
                    .Create({{"apiVersion", "v1"},
                             {"kind", "Secret"},
                             {"metadata", {{"name", "broker-credentials"}}},
                             {"data",
                              {{"username", core::Base64Encode(" broker-user\n")},
                               {"password", core::Base64Encode("broker-pass\n")}}}})
                    .ok());
    CreateConfig(kBrokerConfig, "servicebroker", broker_.url());
    CreateConfig(kManagerConfig, "backupmanager", broker_.url());
  }

  void StartProvider() {
    manager_ = std::make_unique<reconcile::Manager>(
        admin(), reconcile::ManagerOptions{.name = "klutch-manager"});
    provider_ = std::make_unique<AnyninesProvider>(*manager_, options_);
    ASSERT_TRUE(provider_->Setup().ok());
    ASSERT_TRUE(manager_->Start().ok());
    ASSERT_TRUE(Eventually([&] { return provider_->running(); }));
  }

  void TearDown() override {
    if (provider_) provider_->Stop();
    if (manager_) manager_->Stop();
  }

  client::RestClient& admin() { return cluster_->admin(); }
  ResourceClient Resource(const client::GroupVersionResource& gvr, const std::string& ns = "") {
    return ResourceClient(admin(), gvr, ns);
  }
  Json Get(const client::GroupVersionResource& gvr, const std::string& name,
           const std::string& ns = "") {
    auto r = Resource(gvr, ns).Get(name);
    return r.ok() ? *r : Json();
  }
  Json Create(const client::GroupVersionResource& gvr, const Json& object) {
    auto r = Resource(gvr, machinery::Namespace(object)).Create(object);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Json();
  }
  void Patch(const client::GroupVersionResource& gvr, const std::string& name, const Json& patch) {
    auto r = Resource(gvr).Patch(name, client::PatchType::kMerge, machinery::Dump(patch));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  void CreateConfig(const std::string& name, const std::string& type, const std::string& url,
                    Json annotations = Json::object()) {
    Json selector = [](const char* key) {
      return Json{
          {"secretRef",
           {{"namespace", "crossplane-system"}, {"name", "broker-credentials"}, {"key", key}}}};
    }("username");
    Json pc = {{"apiVersion", kApiVersion},
               {"kind", "ProviderConfig"},
               {"metadata", {{"name", name}}},
               {"spec",
                {{"url", url},
                 {"serviceType", type},
                 {"providerCredentials",
                  {{"source", "Secret"},
                   {"username", selector},
                   {"password",
                    {{"secretRef",
                      {{"namespace", "crossplane-system"},
                       {"name", "broker-credentials"},
                       {"key", "password"}}}}}}}}}};
    if (!annotations.empty()) pc["metadata"]["annotations"] = annotations;
    Create(kProviderConfigs, pc);
  }

  static Json Labels(const std::string& claim) {
    return {{std::string(kLabelClaimName), claim},
            {std::string(kLabelClaimNamespace), kNs},
            {std::string(kLabelInstanceType), "postgresql"}};
  }

  Json Instance(const std::string& claim, const std::string& plan, Json params = nullptr) {
    Json mr = {{"apiVersion", kApiVersion},
               {"kind", "ServiceInstance"},
               {"metadata", {{"name", claim + "-x7k2p"}, {"labels", Labels(claim)}}},
               {"spec",
                {{"forProvider",
                  {{"acceptsIncomplete", true},
                   {"serviceName", "a9s-postgresql15"},
                   {"planName", plan},
                   {"organizationGuid", "a1d46b5c-b639-4f43-85c7-e9a0e5f01f75"},
                   {"spaceGuid", "1bf71cf3-9017-4846-bffc-b9b31872bfaf"}}},
                 {"providerConfigRef", {{"name", kBrokerConfig}}}}}};
    if (!params.is_null()) mr["spec"]["forProvider"]["parameters"] = params;
    return Create(kServiceInstances, mr);
  }

  Json Binding(const std::string& claim, const std::string& instance_claim,
               const std::string& provider_config = kBrokerConfig) {
    return Create(
        kServiceBindings,
        {{"apiVersion", kApiVersion},
         {"kind", "ServiceBinding"},
         {"metadata", {{"name", claim + "-b4n9q"}, {"labels", Labels(claim)}}},
         {"spec",
          {{"forProvider", {{"acceptsIncomplete", true}, {"instanceName", instance_claim}}},
           {"providerConfigRef", {{"name", provider_config}}},
           {"writeConnectionSecretToRef", {{"namespace", kNs}, {"name", claim + "-creds"}}}}}});
  }

  Json Backup(const std::string& claim, const std::string& instance_claim) {
    return Create(kBackups, {{"apiVersion", kApiVersion},
                             {"kind", "Backup"},
                             {"metadata", {{"name", claim + "-q8w2c"}, {"labels", Labels(claim)}}},
                             {"spec",
                              {{"forProvider", {{"instanceName", instance_claim}}},
                               {"providerConfigRef", {{"name", kManagerConfig}}}}}});
  }

  Json Restore(const std::string& claim, const std::string& backup_claim) {
    return Create(kRestores, {{"apiVersion", kApiVersion},
                              {"kind", "Restore"},
                              {"metadata", {{"name", claim + "-m3z5t"}, {"labels", Labels(claim)}}},
                              {"spec",
                               {{"forProvider", {{"backupName", backup_claim}}},
                                {"providerConfigRef", {{"name", kManagerConfig}}}}}});
  }

  // Waits until the condition `type` of the MR has `status` (and, when given, `reason`).
  bool WaitCondition(const client::GroupVersionResource& gvr, const std::string& name,
                     const std::string& type, const std::string& status,
                     const std::string& reason = "") {
    return Eventually([&] {
      auto c = reconcile::FindCondition(Get(gvr, name), type);
      return c && c->status == status && (reason.empty() || c->reason == reason);
    });
  }
  std::string Message(const client::GroupVersionResource& gvr, const std::string& name,
                      const std::string& type) {
    auto c = reconcile::FindCondition(Get(gvr, name), type);
    return c ? c->message : "";
  }
  bool HasEvent(const std::string& reason, const std::string& message_part = "") {
    auto list = Resource(client::resources::kEvents, "default").List();
    if (!list.ok()) return false;
    for (const Json& e : (*list)["items"]) {
      if (GetString(e, {"reason"}) == reason &&
          GetString(e, {"message"}).find(message_part) != std::string::npos) {
        return true;
      }
    }
    return false;
  }

  // A provisioned instance of claim `claim`.
  void ReadyInstance(const std::string& claim, Json params = nullptr) {
    Instance(claim, "postgresql-single-nano", params);
    ASSERT_TRUE(WaitCondition(kServiceInstances, claim + "-x7k2p", "Ready", "True"))
        << Get(kServiceInstances, claim + "-x7k2p").dump(2);
  }

  std::map<std::string, std::string> SecretData(const std::string& name) {
    std::map<std::string, std::string> out;
    Json s = Get(client::resources::kSecrets, name, kNs);
    const Json* data = machinery::Find(s, {"data"});
    if (!data || !data->is_object()) return out;
    for (auto it = data->begin(); it != data->end(); ++it) {
      out[it.key()] = core::Base64Decode(it.value().get<std::string>()).value_or("");
    }
    return out;
  }

  AnyninesProviderOptions options_{.workers = 2,
                                   .poll_interval = 1000ms,
                                   .fast_poll_min = 10ms,
                                   .fast_poll_max = 200ms,
                                   .failure_backoff_min = 50ms,
                                   .health_interval = 2000ms,
                                   .health_retry_interval = 300ms,
                                   .health_timeout = 2000ms,
                                   .request_timeout = 5000ms};
  FakeBroker broker_;
  std::unique_ptr<klutch::testing::TestCluster> cluster_;
  std::unique_ptr<reconcile::Manager> manager_;
  std::unique_ptr<AnyninesProvider> provider_;
};

TEST_F(AnyninesProviderTest, ProvisionsAsynchronouslyUntilReady) {
  StartProvider();
  Instance("db", "postgresql-single-nano", {{"max_connections", 100}});
  ASSERT_TRUE(WaitCondition(kServiceInstances, "db-x7k2p", "Ready", "True"));
  Json mr = Get(kServiceInstances, "db-x7k2p");
  const std::string id = GetString(mr, {"status", "atProvider", "instanceId"});
  EXPECT_TRUE(std::regex_match(
      id, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-[0-9]+")))
      << id;
  EXPECT_EQ(GetString(mr, {"status", "atProvider", "state"}), "provisioned");
  EXPECT_EQ(GetString(mr, {"status", "atProvider", "planId"}), "plan-nano");
  EXPECT_EQ(GetString(mr, {"status", "atProvider", "serviceId"}), "svc-pg");
  EXPECT_EQ(mr["status"]["atProvider"]["parameters"], (Json{{"max_connections", 100}}));
  EXPECT_FALSE(machinery::Find(mr, {"status", "pendingOperation"}));
  EXPECT_TRUE(reconcile::IsConditionTrue(mr, "Synced"));
  EXPECT_EQ(machinery::Annotation(mr, kAnnotationExternalName), "db-x7k2p");
  EXPECT_TRUE(machinery::HasFinalizer(mr, kManagedFinalizer));
  // The uniqueness probe came first, then one provisioning request.
  auto put = broker_.requests("PUT", "/v2/service_instances/" + id);
  ASSERT_EQ(put.size(), 1u);
  EXPECT_EQ(put[0].query, "accepts_incomplete=true");
  EXPECT_FALSE(broker_.requests("GET", "/instances/" + id).empty());
  auto inst = broker_.instances().at(id);
  EXPECT_EQ(inst.org, "a1d46b5c-b639-4f43-85c7-e9a0e5f01f75");
  EXPECT_TRUE(Eventually([&] { return HasEvent("CreatedExternalResource", id); }));
  // The usage record and the ProviderConfig's bookkeeping.
  Json usage = Get(kProviderConfigUsages, machinery::Uid(mr));
  EXPECT_EQ(GetString(usage, {"providerConfigRef", "name"}), kBrokerConfig);
  EXPECT_EQ(GetString(usage, {"resourceRef", "kind"}), "ServiceInstance");
  ASSERT_TRUE(Eventually([&] {
    Json pc = Get(kProviderConfigs, kBrokerConfig);
    const Json* users = machinery::Find(pc, {"status", "users"});
    return users && *users == 1 && machinery::HasFinalizer(pc, kInUseFinalizer);
  }));
}

TEST_F(AnyninesProviderTest, PlanUpdateGoesNotReadyThenReady) {
  StartProvider();
  ReadyInstance("db");
  broker_.Hold(true);
  Patch(kServiceInstances, "db-x7k2p",
        {{"spec", {{"forProvider", {{"planName", "postgresql-single-small"}}}}}});
  ASSERT_TRUE(WaitCondition(kServiceInstances, "db-x7k2p", "Ready", "False", "Unavailable"));
  ASSERT_TRUE(Eventually([&] {
    return Message(kServiceInstances, "db-x7k2p", "Ready").find("update is running") !=
           std::string::npos;
  }));
  broker_.Hold(false);
  ASSERT_TRUE(WaitCondition(kServiceInstances, "db-x7k2p", "Ready", "True"));
  Json mr = Get(kServiceInstances, "db-x7k2p");
  EXPECT_EQ(GetString(mr, {"status", "atProvider", "planId"}), "plan-small");
  auto patches = broker_.requests("PATCH", "/v2/service_instances/");
  ASSERT_EQ(patches.size(), 1u);
  Json body = machinery::ParseJson(patches[0].body).value();
  EXPECT_EQ(body["plan_id"], "plan-small");
  EXPECT_FALSE(body.contains("parameters"));
}

TEST_F(AnyninesProviderTest, RemovedParameterIsSentAsNull) {
  StartProvider();
  ReadyInstance("db", {{"max_connections", 100}, {"statement_timeout", 30}});
  Patch(kServiceInstances, "db-x7k2p",
        {{"spec",
          {{"forProvider",
            {{"parameters", {{"statement_timeout", nullptr}, {"max_connections", 200}}}}}}}});
  ASSERT_TRUE(
      Eventually([&] { return !broker_.requests("PATCH", "/v2/service_instances/").empty(); }));
  ASSERT_TRUE(WaitCondition(kServiceInstances, "db-x7k2p", "Ready", "True"));
  auto patches = broker_.requests("PATCH", "/v2/service_instances/");
  ASSERT_EQ(patches.size(), 1u);
  Json body = machinery::ParseJson(patches[0].body).value();
  EXPECT_EQ(body["parameters"], (Json{{"max_connections", 200}, {"statement_timeout", nullptr}}));
  EXPECT_EQ(body["plan_id"], "plan-nano");
  ASSERT_TRUE(Eventually([&] {
    return Get(kServiceInstances, "db-x7k2p")["status"]["atProvider"]["parameters"] ==
           Json{{"max_connections", 200}};
  }));
}

TEST_F(AnyninesProviderTest, BindingPublishesSecretAndUnbindDeletesIt) {
  StartProvider();
  ReadyInstance("db");
  Json mr = Binding("db-creds", "db");
  ASSERT_TRUE(WaitCondition(kServiceBindings, "db-creds-b4n9q", "Ready", "True"));
  Json secret = Get(client::resources::kSecrets, "db-creds-creds", kNs);
  EXPECT_EQ(GetString(secret, {"type"}), kConnectionSecretType);
  EXPECT_TRUE(IsControlledBy(secret, machinery::Uid(mr)));
  auto data = SecretData("db-creds-creds");
  std::set<std::string> keys;
  for (const auto& [k, v] : data) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"host", "hosts", "name", "password", "port", "uri",
                                         "username"}));
  EXPECT_EQ(data["port"], "5432");
  EXPECT_EQ(data["hosts"], "[pg.example.internal]");
  // The broker binding's ID is the MR's UID.
  auto bindings = broker_.bindings();
  ASSERT_EQ(bindings.size(), 1u);
  EXPECT_EQ(bindings.begin()->first, machinery::Uid(mr));
  Json got = Get(kServiceBindings, "db-creds-b4n9q");
  EXPECT_EQ(GetString(got, {"status", "atProvider", "state"}), "Created");
  EXPECT_EQ(
      got["status"]["atProvider"]["connectionDetails"],
      Json::array({{{"hostURL", "pg.example.internal"}, {"port", "5432"}, {"label", "SQL"}}}));
  EXPECT_EQ(machinery::Annotation(got, kAnnotationBindingCreated), "true");
  EXPECT_FALSE(GetString(got, {"status", "atProvider", "instanceId"}).empty());

  // A deleted Secret comes back.
  ASSERT_TRUE(Resource(client::resources::kSecrets, kNs).Delete("db-creds-creds").ok());
  ASSERT_TRUE(Eventually([&] { return SecretData("db-creds-creds") == data; }));

  ASSERT_TRUE(Resource(kServiceBindings).Delete("db-creds-b4n9q").ok());
  ASSERT_TRUE(Eventually([&] {
    return !Resource(kServiceBindings).Get("db-creds-b4n9q").ok() &&
           !Resource(client::resources::kSecrets, kNs).Get("db-creds-creds").ok();
  }));
  EXPECT_TRUE(broker_.bindings().empty());
  // At least once: a reconcile queued while the first unbind was in flight may send it again
  // before the finalizer's removal reaches its cache (the broker answers 410 Gone, which the
  // provider takes as done); under load that happened on a fresh machine.
  auto unbinds = broker_.requests("DELETE", "/service_bindings/" + machinery::Uid(mr)).size();
  EXPECT_GE(unbinds, 1u);
  EXPECT_LE(unbinds, 2u);
}

TEST_F(AnyninesProviderTest, BindingWaitsForItsInstance) {
  StartProvider();
  broker_.Hold(true);
  Instance("db", "postgresql-single-nano");
  Binding("db-creds", "db");
  ASSERT_TRUE(WaitCondition(kServiceBindings, "db-creds-b4n9q", "Ready", "False", "Creating"));
  EXPECT_NE(
      Message(kServiceBindings, "db-creds-b4n9q", "Ready").find("waiting for service instance db"),
      std::string::npos);
  broker_.Hold(false);
  ASSERT_TRUE(WaitCondition(kServiceBindings, "db-creds-b4n9q", "Ready", "True"));
  EXPECT_EQ(SecretData("db-creds-creds").size(), 7u);
}

// Issue #23: a binding, backup or restore whose claim names something that is not there, or
// of another serviceInstanceType, says so in the claim's terms, not "does not exist".
TEST_F(AnyninesProviderTest, AMissingOrMismatchedTargetIsNamedInTheClaimsTerms) {
  CreateConfig("keyvalue-service-broker", "servicebroker", broker_.url());
  StartProvider();
  Binding("orphan", "nope");
  ASSERT_TRUE(WaitCondition(kServiceBindings, "orphan-b4n9q", "Synced", "False"));
  EXPECT_EQ(Message(kServiceBindings, "orphan-b4n9q", "Synced"),
            std::string("instance \"nope\" was not found: spec.instanceRef names \"nope\", but "
                        "namespace \"") +
                kNs +
                "\" has no instance of that name; create it, or set spec.instanceRef to the "
                "name of an existing one");
  Restore("again", "no-backup");
  ASSERT_TRUE(WaitCondition(kRestores, "again-m3z5t", "Synced", "False"));
  EXPECT_NE(Message(kRestores, "again-m3z5t", "Synced")
                .find("backup \"no-backup\" was not found: spec.backupRef names"),
            std::string::npos);

  ReadyInstance("db");
  ASSERT_FALSE(Binding("wrong", "db", "keyvalue-service-broker").is_null());
  ASSERT_TRUE(Eventually([&] {
    return Message(kServiceBindings, "wrong-b4n9q", "Synced") ==
           "instance \"db\" has serviceInstanceType \"postgresql\", but this claim's "
           "spec.serviceInstanceType is \"keyvalue\": set it to \"postgresql\"";
  })) << Message(kServiceBindings, "wrong-b4n9q", "Synced");
  EXPECT_TRUE(SecretData("wrong-creds").empty()) << "no credentials from the wrong broker";
}

// Issue #26: a resource whose ProviderConfig does not exist says what is missing and who sets it
// up (its claim has no field to change): a service broker, or a backup manager.
TEST_F(AnyninesProviderTest, AMissingProviderConfigSaysWhichBackendIsNotSetUp) {
  StartProvider();
  Binding("mongo-creds", "mongo", "mongodb-service-broker");
  Create(kBackups,
         {{"apiVersion", kApiVersion},
          {"kind", "Backup"},
          {"metadata", {{"name", "mongo-backup-q8w2c"}, {"labels", Labels("mongo-backup")}}},
          {"spec",
           {{"forProvider", {{"instanceName", "mongo"}}},
            {"providerConfigRef", {{"name", "mongodb-backup-manager"}}}}}});
  ASSERT_TRUE(WaitCondition(kServiceBindings, "mongo-creds-b4n9q", "Synced", "False"));
  EXPECT_EQ(Message(kServiceBindings, "mongo-creds-b4n9q", "Synced"),
            "no service broker is set up for this service on the Control Plane: ProviderConfig "
            "\"mongodb-service-broker\" not found; the platform team creates it, pointing at a "
            "broker that offers the service");
  ASSERT_TRUE(WaitCondition(kBackups, "mongo-backup-q8w2c", "Synced", "False"));
  EXPECT_EQ(Message(kBackups, "mongo-backup-q8w2c", "Synced"),
            "no backup manager is set up for this service on the Control Plane: ProviderConfig "
            "\"mongodb-backup-manager\" not found; the platform team creates it, pointing at the "
            "a9s Backup Manager of the service");
}

// Issue #23: the broker's words on a failed operation stay on the instance for as long as it is
// failed, not only on the pass that saw the operation end.
TEST_F(AnyninesProviderTest, AFailedInstanceKeepsSayingWhyTheBrokerFailedIt) {
  const std::string why = "provision failed: valkey-server refused tls-ciphers \"NO-SUCH\"";
  broker_.FailNextOperation(why);
  StartProvider();
  Instance("db", "postgresql-single-nano");
  ASSERT_TRUE(WaitCondition(kServiceInstances, "db-x7k2p", "Ready", "False", "Unavailable"));
  EXPECT_TRUE(Eventually([&] {
    return GetString(Get(kServiceInstances, "db-x7k2p"), {"status", "atProvider", "state"}) ==
           "failed";
  }));
  EXPECT_TRUE(Eventually([&] { return HasEvent("OperationFailed", why); }));
  // Many passes later (the poll interval is 1 s), the reason is still there.
  std::this_thread::sleep_for(2500ms);
  auto ready = reconcile::FindCondition(Get(kServiceInstances, "db-x7k2p"), "Ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->reason, "Unavailable");
  EXPECT_NE(ready->message.find(why), std::string::npos) << ready->message;
}

TEST_F(AnyninesProviderTest, DeletingAnInstanceDeprovisionsIt) {
  StartProvider();
  ReadyInstance("db");
  std::string id =
      GetString(Get(kServiceInstances, "db-x7k2p"), {"status", "atProvider", "instanceId"});
  ASSERT_TRUE(Resource(kServiceInstances).Delete("db-x7k2p").ok());
  ASSERT_TRUE(Eventually([&] { return !Resource(kServiceInstances).Get("db-x7k2p").ok(); }));
  EXPECT_TRUE(broker_.instances().empty());
  auto del = broker_.requests("DELETE", "/v2/service_instances/" + id);
  ASSERT_EQ(del.size(), 1u);
  EXPECT_EQ(del[0].query, "service_id=svc-pg&plan_id=plan-nano&accepts_incomplete=true");
}

// Deleting an instance claim that a ServiceBinding still used destroyed the database at once
// while the binding stayed Ready with a Secret that no longer worked.
TEST_F(AnyninesProviderTest, AnInstanceInUseIsDeletedOnlyOnceItsBindingsAreGone) {
  StartProvider();
  ReadyInstance("db");
  Binding("db-creds", "db");
  Binding("db-app", "db");
  ASSERT_TRUE(WaitCondition(kServiceBindings, "db-creds-b4n9q", "Ready", "True"));
  ASSERT_TRUE(WaitCondition(kServiceBindings, "db-app-b4n9q", "Ready", "True"));
  std::string id =
      GetString(Get(kServiceInstances, "db-x7k2p"), {"status", "atProvider", "instanceId"});
  // Deprovision requests only (unbinds share the path's prefix).
  auto deprovisions = [&] {
    size_t n = 0;
    for (const auto& r : broker_.requests("DELETE", "/v2/service_instances/" + id)) {
      n += r.path.find("/service_bindings/") == std::string::npos;
    }
    return n;
  };

  ASSERT_TRUE(Resource(kServiceInstances).Delete("db-x7k2p").ok());
  ASSERT_TRUE(WaitCondition(kServiceInstances, "db-x7k2p", "Ready", "False", "InUse"));
  std::string message = Message(kServiceInstances, "db-x7k2p", "Ready");
  EXPECT_NE(message.find("still used by ServiceBinding \"db-app\", \"db-creds\""),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(std::string(kAnnotationDeleteInUse) + "=true"), std::string::npos);
  EXPECT_TRUE(Eventually([&] { return HasEvent("InUse", "db-creds"); }));
  EXPECT_EQ(deprovisions(), 0u);
  EXPECT_EQ(broker_.instances().size(), 1u);

  // One binding gone: still held by the other.
  ASSERT_TRUE(Resource(kServiceBindings).Delete("db-creds-b4n9q").ok());
  ASSERT_TRUE(Eventually([&] { return !Resource(kServiceBindings).Get("db-creds-b4n9q").ok(); }));
  ASSERT_TRUE(Eventually([&] {
    return Message(kServiceInstances, "db-x7k2p", "Ready").find("\"db-creds\"") ==
           std::string::npos;
  }));
  EXPECT_NE(Message(kServiceInstances, "db-x7k2p", "Ready").find("\"db-app\""), std::string::npos);
  EXPECT_EQ(deprovisions(), 0u);

  // The last one gone: the instance goes without anyone asking again.
  ASSERT_TRUE(Resource(kServiceBindings).Delete("db-app-b4n9q").ok());
  ASSERT_TRUE(Eventually([&] { return !Resource(kServiceInstances).Get("db-x7k2p").ok(); }));
  EXPECT_TRUE(broker_.instances().empty());
  EXPECT_EQ(deprovisions(), 1u);
}

TEST_F(AnyninesProviderTest, TheDeleteInUseAnnotationDeletesAnInstanceInUseAndItsBindingSaysSo) {
  StartProvider();
  ReadyInstance("db");
  Binding("db-creds", "db");
  ASSERT_TRUE(WaitCondition(kServiceBindings, "db-creds-b4n9q", "Ready", "True"));
  ASSERT_TRUE(Resource(kServiceInstances).Delete("db-x7k2p").ok());
  ASSERT_TRUE(WaitCondition(kServiceInstances, "db-x7k2p", "Ready", "False", "InUse"));

  Patch(kServiceInstances, "db-x7k2p",
        {{"metadata", {{"annotations", {{std::string(kAnnotationDeleteInUse), "true"}}}}}});
  ASSERT_TRUE(Eventually([&] { return !Resource(kServiceInstances).Get("db-x7k2p").ok(); }));
  EXPECT_TRUE(broker_.instances().empty());
  // A binding whose instance is gone is never Ready.
  ASSERT_TRUE(WaitCondition(kServiceBindings, "db-creds-b4n9q", "Ready", "False", "Unavailable"));
  EXPECT_NE(Message(kServiceBindings, "db-creds-b4n9q", "Ready")
                .find("service instance \"db\" does not exist any more"),
            std::string::npos);
}

TEST_F(AnyninesProviderTest, BackupAndRestoreFollowTheManagersStates) {
  StartProvider();
  ReadyInstance("db");
  Backup("db-backup", "db");
  ASSERT_TRUE(WaitCondition(kBackups, "db-backup-q8w2c", "Ready", "True"));
  Json backup = Get(kBackups, "db-backup-q8w2c");
  EXPECT_EQ(GetString(backup, {"status", "atProvider", "status"}), "done");
  EXPECT_EQ(backup["status"]["atProvider"]["size"], 4096);
  EXPECT_EQ(GetString(backup, {"status", "atProvider", "finished_at"}), "2024-05-01T10:00:01.000Z");
  const std::string backup_id = machinery::Annotation(backup, kAnnotationBackupId);
  ASSERT_FALSE(backup_id.empty());
  EXPECT_EQ(std::to_string(backup["status"]["atProvider"]["id"].get<int64_t>()), backup_id);

  broker_.Hold(true);
  Restore("db-restore", "db-backup");
  ASSERT_TRUE(Eventually([&] {
    return GetString(Get(kRestores, "db-restore-m3z5t"), {"status", "atProvider", "state"}) ==
           "running";
  }));
  EXPECT_TRUE(reconcile::IsConditionFalse(Get(kRestores, "db-restore-m3z5t"), "Ready"));
  // A running restore cannot be deleted; the MR waits.
  ASSERT_TRUE(Resource(kRestores).Delete("db-restore-m3z5t").ok());
  ASSERT_TRUE(WaitCondition(kRestores, "db-restore-m3z5t", "Synced", "False"));
  EXPECT_EQ(Message(kRestores, "db-restore-m3z5t", "Synced"),
            "cannot delete restore that is still running");
  // The backup cannot go while it is being restored either: the manager says why.
  ASSERT_TRUE(Resource(kBackups).Delete("db-backup-q8w2c").ok());
  ASSERT_TRUE(Eventually([&] {
    return Message(kBackups, "db-backup-q8w2c", "Synced") == "The backup is being restored.";
  }));
  broker_.Hold(false);
  ASSERT_TRUE(Eventually([&] {
    return !Resource(kRestores).Get("db-restore-m3z5t").ok() &&
           !Resource(kBackups).Get("db-backup-q8w2c").ok();
  }));
  auto restores = broker_.restores();
  ASSERT_EQ(restores.size(), 1u);
  EXPECT_EQ(restores.begin()->second.status, "done");
  EXPECT_EQ(broker_.backups().begin()->second.status, "deleted");
}

TEST_F(AnyninesProviderTest, RestoreBecomesReadyWhenDone) {
  StartProvider();
  ReadyInstance("db");
  Backup("db-backup", "db");
  Restore("db-restore", "db-backup");
  ASSERT_TRUE(WaitCondition(kRestores, "db-restore-m3z5t", "Ready", "True"));
  Json restore = Get(kRestores, "db-restore-m3z5t");
  EXPECT_EQ(GetString(restore, {"status", "atProvider", "state"}), "done");
  EXPECT_EQ(Message(kRestores, "db-restore-m3z5t", "Ready"), "Restore completed successfully");
  EXPECT_FALSE(machinery::Annotation(restore, kAnnotationRestoreId).empty());
  EXPECT_EQ(restore["status"]["atProvider"]["backupId"],
            Get(kBackups, "db-backup-q8w2c")["status"]["atProvider"]["id"]);
}

TEST_F(AnyninesProviderTest, LostCreateAnswersAreAdoptedNotRepeated) {
  StartProvider();
  ReadyInstance("db");
  // The manager takes the backup (and later the restore) but the answer never arrives.
  broker_.Inject("POST", "/backups", 502, Json::object(), 1, /*served=*/true);
  Backup("db-backup", "db");
  ASSERT_TRUE(WaitCondition(kBackups, "db-backup-q8w2c", "Ready", "True"));
  EXPECT_EQ(broker_.backups().size(), 1u);
  EXPECT_EQ(broker_.requests("POST", "/backups").size(), 1u);
  Json backup = Get(kBackups, "db-backup-q8w2c");
  EXPECT_EQ(machinery::Annotation(backup, kAnnotationBackupId),
            std::to_string(broker_.backups().begin()->first));
  EXPECT_EQ(machinery::Annotation(backup, kAnnotationBackupPending), "");
  EXPECT_TRUE(Eventually([&] { return HasEvent("CreatedExternalResource", "adopted"); }));

  broker_.Inject("POST", "/restore", 502, Json::object(), 1, /*served=*/true);
  Restore("db-restore", "db-backup");
  ASSERT_TRUE(WaitCondition(kRestores, "db-restore-m3z5t", "Ready", "True"));
  EXPECT_EQ(broker_.restores().size(), 1u);
  EXPECT_EQ(broker_.requests("POST", "/restore").size(), 1u);
  // A second backup of the same instance is a new one, not the first adopted twice.
  Backup("db-backup-2", "db");
  ASSERT_TRUE(WaitCondition(kBackups, "db-backup-2-q8w2c", "Ready", "True"));
  EXPECT_EQ(broker_.backups().size(), 2u);
}

TEST_F(AnyninesProviderTest, BrokerDescriptionIsShownAndInternalErrorsAreNot) {
  broker_.Inject("PUT", "/v2/service_instances/", 400,
                 {{"error", "BadRequest"}, {"description", "Instance limit reached."}}, 1000);
  StartProvider();
  Instance("db", "postgresql-single-nano");
  ASSERT_TRUE(WaitCondition(kServiceInstances, "db-x7k2p", "Synced", "False"));
  EXPECT_EQ(Message(kServiceInstances, "db-x7k2p", "Synced"), "Instance limit reached.");
  EXPECT_TRUE(
      Eventually([&] { return HasEvent("CannotCreateExternalResource", "Instance limit"); }));

  Instance("other", "postgresql-single-tiny");
  ASSERT_TRUE(WaitCondition(kServiceInstances, "other-x7k2p", "Synced", "False"));
  EXPECT_TRUE(Message(kServiceInstances, "other-x7k2p", "Synced")
                  .starts_with("no entry for the plan name \"postgresql-single-tiny\" (service "
                               "a9s-postgresql15-ms-1687789907 offers: postgresql-single-nano,"));

  broker_.ClearInjections();
  broker_.Inject("PUT", "/v2/service_instances/", 500, {{"description", "stack trace"}}, 1000);
  Instance("third", "postgresql-single-nano");
  ASSERT_TRUE(Eventually([&] {
    return Message(kServiceInstances, "third-x7k2p", "Synced") == "Internal error in provider";
  }));
}

TEST_F(AnyninesProviderTest, UnreachableBrokerMakesConfigUnhealthyAndSaysWhere) {
  FakeBroker down;
  const std::string url = down.url();
  CreateConfig("down-broker", "servicebroker", url);
  StartProvider();
  ASSERT_TRUE(Eventually([&] {
    Json pc = Get(kProviderConfigs, "down-broker");
    const Json* s = machinery::Find(pc, {"status", "health", "lastStatus"});
    return s && *s == true;
  })) << Get(kProviderConfigs, "down-broker").dump(2);
  EXPECT_EQ(GetString(Get(kProviderConfigs, "down-broker"), {"status", "health", "lastMessage"}),
            "Available");
  down.Stop();
  Json mr = Instance("db", "postgresql-single-nano");
  Patch(kServiceInstances, "db-x7k2p",
        {{"spec", {{"providerConfigRef", {{"name", "down-broker"}}}}}});
  ASSERT_TRUE(WaitCondition(kServiceInstances, "db-x7k2p", "Synced", "False"));
  std::string message = Message(kServiceInstances, "db-x7k2p", "Synced");
  EXPECT_TRUE(message.starts_with("the service broker at " + url + " is unreachable")) << message;
  ASSERT_TRUE(Eventually([&] {
    Json pc = Get(kProviderConfigs, "down-broker");
    const Json* s = machinery::Find(pc, {"status", "health", "lastStatus"});
    return s && *s == false;
  }));
  EXPECT_NE(GetString(Get(kProviderConfigs, "down-broker"), {"status", "health", "lastMessage"})
                .find("unreachable"),
            std::string::npos);
  EXPECT_TRUE(Eventually([&] { return HasEvent("CheckFailure", "Health check failed: "); }));
  EXPECT_TRUE(HasEvent("CheckSuccess", "ProviderConfig is now healthy"));
}

TEST_F(AnyninesProviderTest, BrokerWithoutA9sExtensionIsObservedThroughOsb) {
  FakeBroker plain({.prefix = "/plain", .a9s_extension = false});
  CreateConfig("plain-broker", "servicebroker", plain.url());
  StartProvider();
  Json mr = {{"apiVersion", kApiVersion},
             {"kind", "ServiceInstance"},
             {"metadata", {{"name", "p"}}},
             {"spec",
              {{"forProvider",
                {{"acceptsIncomplete", true},
                 {"serviceName", "a9s-keyvalue8"},
                 {"planName", "keyvalue-single-nano"},
                 {"organizationGuid", "o"},
                 {"spaceGuid", "s"}}},
               {"providerConfigRef", {{"name", "plain-broker"}}}}}};
  Create(kServiceInstances, mr);
  ASSERT_TRUE(WaitCondition(kServiceInstances, "p", "Ready", "True"));
  EXPECT_EQ(plain.instances().size(), 1u);
  EXPECT_EQ(plain.requests("PUT", "/v2/service_instances/").size(), 1u);
  ASSERT_TRUE(Resource(kServiceInstances).Delete("p").ok());
  ASSERT_TRUE(Eventually([&] { return !Resource(kServiceInstances).Get("p").ok(); }));
  EXPECT_TRUE(plain.instances().empty());
}

TEST_F(AnyninesProviderTest, RotatesCredentialsThreeTimesAndUnbindsSupersededOnes) {
  Patch(kProviderConfigs, kBrokerConfig,
        {{"metadata",
          {{"annotations",
            {{std::string(kAnnotationMaxCredentialAge), "700ms"},
             {std::string(kAnnotationCredentialGracePeriod), "300ms"}}}}}});
  StartProvider();
  ReadyInstance("db");
  Json mr = Binding("db-creds", "db");
  const std::string uid = machinery::Uid(mr);
  ASSERT_TRUE(WaitCondition(kServiceBindings, "db-creds-b4n9q", "Ready", "True"));
  const std::string secret_uid =
      machinery::Uid(Get(client::resources::kSecrets, "db-creds-creds", kNs));
  std::set<std::string> passwords;
  int generation = 0;
  ASSERT_TRUE(Eventually([&] {
    auto data = SecretData("db-creds-creds");
    if (data.size() == 7) passwords.insert(data["password"]);
    generation = std::stoi("0" + machinery::Annotation(Get(kServiceBindings, "db-creds-b4n9q"),
                                                       kAnnotationBindingGeneration));
    return generation >= 3;
  })) << "generation "
      << generation;
  // Every Secret seen had the full key set; one Secret object, updated in place.
  EXPECT_EQ(machinery::Uid(Get(client::resources::kSecrets, "db-creds-creds", kNs)), secret_uid);
  Json got = Get(kServiceBindings, "db-creds-b4n9q");
  EXPECT_TRUE(machinery::Annotation(got, kAnnotationBindingId).starts_with(uid + "-r"));
  // With rotation switched off, the Secret settles on the one live binding's credentials.
  Patch(kProviderConfigs, kBrokerConfig,
        {{"metadata", {{"annotations", {{std::string(kAnnotationMaxCredentialAge), nullptr}}}}}});
  ASSERT_TRUE(Eventually([&] {
    auto live = broker_.bindings();
    std::string now =
        machinery::Annotation(Get(kServiceBindings, "db-creds-b4n9q"), kAnnotationBindingId);
    return live.size() == 1 && live.begin()->first == now &&
           SecretData("db-creds-creds")["password"] ==
               machinery::GetString(live.begin()->second.credentials, {"password"});
  }));
  EXPECT_GE(passwords.size(), 3u);
  for (const char* id : {"", "-r1", "-r2"}) {
    int deletes = 0;
    for (const auto& r : broker_.requests("DELETE", "/service_bindings/")) {
      if (r.path.ends_with("/service_bindings/" + uid + id)) ++deletes;
    }
    EXPECT_EQ(deletes, 1) << "binding " << uid << id;
  }
  EXPECT_TRUE(HasEvent("RotatedCredentials"));
  // Deleting the MR unbinds whatever it still holds.
  ASSERT_TRUE(Resource(kServiceBindings).Delete("db-creds-b4n9q").ok());
  ASSERT_TRUE(Eventually([&] { return !Resource(kServiceBindings).Get("db-creds-b4n9q").ok(); }));
  EXPECT_TRUE(broker_.bindings().empty());
}

// MongoDB, Search and LogMe2 do not run here (Debian ships none of them), but the provider
// serves them against any a9s broker that does: a broker with their catalogs and credentials
// (data-services §5.4) gives claims that go Ready and Secrets with exactly upstream's keys.
TEST_F(AnyninesProviderTest, ServicesOutsideDebianWorkAgainstTheirBrokersWithUpstreamsKeys) {
  struct Service {
    std::string type, service, plan;
    std::function<Json(const std::string&, const std::string&)> credentials;
    std::set<std::string> keys;
  };
  const std::vector<Service> services = {
      {"mongodb",
       "a9s-mongodb70",
       "mongodbsspl-single-small",
       [](const std::string& u, const std::string& p) {
         return Json{
             {"default_database", "d1"},
             {"hosts", Json::array({"mongo.example.internal:27017"})},
             {"password", p},
             {"uri", fmt::format("mongodb://{}:{}@mongo.example.internal:27017/d1?ssl=true", u, p)},
             {"username", u}};
       },
       {"default_database", "hosts", "password", "uri", "username"}},
      {"search",
       "a9s-search2",
       "search-single-small-ssl",
       [](const std::string& u, const std::string& p) {
         return Json{{"cacrt", "-----BEGIN CERTIFICATE-----"},
                     {"host", Json::array({"https://search.example.internal:9200"})},
                     {"hosts", Json::array({"search.example.internal"})},
                     {"password", p},
                     {"port", 9200},
                     {"scheme", "https"},
                     {"username", u}};
       },
       {"cacrt", "host", "hosts", "password", "port", "scheme", "username"}},
      {"logme2",
       "a9s-logme2",
       "logme-single-small-ssl",
       [](const std::string& u, const std::string& p) {
         return Json{{"cacrt", "-----BEGIN CERTIFICATE-----"},
                     {"host", "https://logme.example.internal:9200"},
                     {"password", p},
                     {"syslog_drain_url", "syslog-tls://logme.example.internal:6514"},
                     {"username", u}};
       },
       {"cacrt", "host", "password", "syslog_drain_url", "username"}},
  };
  StartProvider();
  std::vector<std::unique_ptr<FakeBroker>> brokers;
  for (const Service& s : services) {
    SCOPED_TRACE(s.type);
    FakeBroker::Options options;
    options.prefix = "/" + s.type;
    options.catalog = {{"services", Json::array({{{"id", "svc-" + s.type},
                                                  {"name", s.service},
                                                  {"bindable", true},
                                                  {"plan_updateable", true},
                                                  {"plans", Json::array({{{"id", "plan-" + s.type},
                                                                          {"name", s.plan},
                                                                          {"free", true}}})}}})}};
    options.credentials = s.credentials;
    brokers.push_back(std::make_unique<FakeBroker>(options));
    ASSERT_TRUE(brokers.back()->ok());
    const std::string config = s.type + "-service-broker";
    CreateConfig(config, "servicebroker", brokers.back()->url());
    const std::string claim = "example-" + s.type;
    Json labels = {{std::string(kLabelClaimName), claim},
                   {std::string(kLabelClaimNamespace), kNs},
                   {std::string(kLabelInstanceType), s.type}};
    Create(kServiceInstances, {{"apiVersion", kApiVersion},
                               {"kind", "ServiceInstance"},
                               {"metadata", {{"name", claim + "-x7k2p"}, {"labels", labels}}},
                               {"spec",
                                {{"forProvider",
                                  {{"acceptsIncomplete", true},
                                   {"serviceName", s.service},
                                   {"planName", s.plan},
                                   {"organizationGuid", "a1d46b5c-b639-4f43-85c7-e9a0e5f01f75"},
                                   {"spaceGuid", "1bf71cf3-9017-4846-bffc-b9b31872bfaf"}}},
                                 {"providerConfigRef", {{"name", config}}}}}});
    ASSERT_TRUE(WaitCondition(kServiceInstances, claim + "-x7k2p", "Ready", "True"))
        << Get(kServiceInstances, claim + "-x7k2p").dump(2);
    labels[std::string(kLabelClaimName)] = claim + "-sb";
    Create(
        kServiceBindings,
        {{"apiVersion", kApiVersion},
         {"kind", "ServiceBinding"},
         {"metadata", {{"name", claim + "-sb-b4n9q"}, {"labels", labels}}},
         {"spec",
          {{"forProvider", {{"acceptsIncomplete", true}, {"instanceName", claim}}},
           {"providerConfigRef", {{"name", config}}},
           {"writeConnectionSecretToRef", {{"namespace", kNs}, {"name", claim + "-sb-creds"}}}}}});
    ASSERT_TRUE(WaitCondition(kServiceBindings, claim + "-sb-b4n9q", "Ready", "True"))
        << Get(kServiceBindings, claim + "-sb-b4n9q").dump(2);
    std::set<std::string> keys;
    for (const auto& [k, v] : SecretData(claim + "-sb-creds")) keys.insert(k);
    EXPECT_EQ(keys, s.keys);
  }
}

}  // namespace
}  // namespace klutch::providers::anynines
