// Data services through the Control Plane alone (issue #13, data-services §8.1): a
// `klutch apiserver` process, `klutch manager` (composition engine and provider-anynines)
// with Klutch's upstream package and provider CRDs applied unchanged, `klutch broker` running
// real PostgreSQL and Redis, the upstream ProviderConfig examples adapted only in their URLs
// and secrets, and the real kubectl, psql and redis-cli. One Control Plane serves the suite;
// the tests run in order (lifecycles, then rotation, then faults).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "core/process.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/control_plane.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;
using namespace std::chrono_literals;

const fs::path kPackage = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/crossplane-api";

struct Suite {
  std::unique_ptr<TempDir> dir;
  std::unique_ptr<DataServicesControlPlane> cp;
  std::string error;
};

Suite* suite = nullptr;

class DataServicesE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite = new Suite();
    suite->dir = std::make_unique<TempDir>("klutch-ds-e2e");
    // Instances run as `postgres`, which must reach the broker's state directory.
    fs::permissions(suite->dir->path(),
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    suite->cp = DataServicesControlPlane::Start(suite->dir->path(), {}, &suite->error);
  }

  static void TearDownTestSuite() {
    delete suite;
    suite = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(fs::exists("/usr/bin/kubectl")) << "/usr/bin/kubectl is required";
    ASSERT_TRUE(suite != nullptr && suite->cp) << (suite ? suite->error : "no suite");
  }

  static CommandResult Kubectl(const std::string& args, std::chrono::seconds timeout = 60s) {
    return suite->cp->Kubectl(args, timeout);
  }
  static std::string ManagerLog() { return suite->cp->ManagerLog(); }
  static std::string BrokerLog() { return suite->cp->BrokerLog(); }
  static const fs::path& BrokerState() { return suite->cp->broker_state(); }
  static void RestartBroker() {
    std::string error;
    ASSERT_TRUE(suite->cp->StartBroker(&error)) << error;
  }

  bool Run(const std::string& args) {
    CommandResult r = Kubectl(args);
    EXPECT_EQ(r.exit_code, 0) << "kubectl " << args << "\n" << r.out << r.err;
    return r.exit_code == 0;
  }
  Json Get(const std::string& what) {
    CommandResult r = Kubectl("get " + what + " -o json");
    if (r.exit_code != 0) return nullptr;
    auto parsed = machinery::ParseJson(r.out);
    return parsed.ok() ? *parsed : Json(nullptr);
  }
  fs::path Write(const std::string& name, const std::string& yaml) {
    return suite->dir->Write(name, yaml);
  }

  // The status of condition `type` of an object ("" when absent).
  std::string Condition(const Json& object, const std::string& type) {
    if (!object.is_object()) return "";
    const Json* conds = machinery::Find(object, {"status", "conditions"});
    if (conds == nullptr || !conds->is_array()) return "";
    for (const auto& c : *conds) {
      if (machinery::GetString(c, {"type"}) == type) return machinery::GetString(c, {"status"});
    }
    return "";
  }

  std::string ReadyTransition(const Json& object) {
    const Json* conds = machinery::Find(object, {"status", "conditions"});
    if (conds == nullptr || !conds->is_array()) return "";
    for (const auto& c : *conds) {
      if (machinery::GetString(c, {"type"}) == "Ready")
        return machinery::GetString(c, {"lastTransitionTime"});
    }
    return "";
  }

  bool WaitReady(const std::string& what, std::chrono::seconds timeout = 180s) {
    CommandResult r = Kubectl("wait " + what + " --for=condition=Ready --timeout=" +
                                  std::to_string(timeout.count()) + "s",
                              timeout + 30s);
    EXPECT_EQ(r.exit_code, 0) << what << " not Ready:\n"
                              << r.out << r.err << Get(what).dump(2) << "\nmanager:\n"
                              << ManagerLog().substr(
                                     ManagerLog().size() > 4000 ? ManagerLog().size() - 4000 : 0);
    return r.exit_code == 0;
  }

  std::map<std::string, std::string> SecretData(const std::string& ns, const std::string& name) {
    std::map<std::string, std::string> out;
    Json s = Get("secret -n " + ns + " " + name);
    if (!s.is_object()) return out;
    for (const auto& [k, v] : s["data"].items()) {
      out[k] = core::Base64Decode(v.get<std::string>()).value_or("");
    }
    return out;
  }

  static std::set<std::string> Keys(const std::map<std::string, std::string>& m) {
    std::set<std::string> out;
    for (const auto& [k, v] : m) out.insert(k);
    return out;
  }

  static core::ProcessResult Psql(const std::string& uri, const std::string& sql) {
    auto r = core::RunProcess({.argv = {"psql", uri, "-v", "ON_ERROR_STOP=1", "-tAc", sql}}, 30s);
    return r.ok() ? *r : core::ProcessResult{};
  }
  static std::string PsqlOk(const std::string& uri, const std::string& sql) {
    auto r = Psql(uri, sql);
    EXPECT_EQ(r.exit_code, 0) << sql << ": " << r.output;
    return std::string(core::Trim(r.output));
  }

  // Broker-side leftovers: instance directories, backup files, server processes.
  static int InstanceDirs() {
    std::error_code ec;
    int n = 0;
    for (auto it = fs::directory_iterator(BrokerState() / "i", ec); !ec && it != fs::end(it); ++it)
      ++n;
    return n;
  }
  static int BackupFiles() {
    std::error_code ec;
    int n = 0;
    for (auto it = fs::recursive_directory_iterator(BrokerState() / "backups", ec);
         !ec && it != fs::end(it); ++it) {
      n += it->is_regular_file() ? 1 : 0;
    }
    return n;
  }
  static std::vector<pid_t> ServerProcesses() {
    std::vector<pid_t> out;
    for (const auto& e : fs::directory_iterator("/proc")) {
      auto pid = core::ParseInt64(e.path().filename().string());
      if (!pid) continue;
      std::string cmd = core::Join(core::ProcessCommandLine(static_cast<pid_t>(*pid)), " ");
      if (cmd.find((BrokerState() / "i").string()) != std::string::npos ||
          (cmd.starts_with("redis-server") && fs::exists(fmt::format("/proc/{}/cwd", *pid)) &&
           fs::read_symlink(fmt::format("/proc/{}/cwd", *pid))
               .string()
               .starts_with(BrokerState().string()))) {
        out.push_back(static_cast<pid_t>(*pid));
      }
    }
    return out;
  }
};

TEST_F(DataServicesE2eTest, ProviderConfigsAreHealthy) {
  for (const char* name : {"postgresql-service-broker", "postgresql-backup-manager",
                           "keyvalue-service-broker", "keyvalue-backup-manager"}) {
    EXPECT_TRUE(Eventually(
        [&] {
          Json pc = Get(std::string("providerconfigs.dataservices.anynines.com ") + name);
          return pc.is_object() && pc["status"]["health"]["lastStatus"] == true;
        },
        90s))
        << name << ": "
        << Get(std::string("providerconfigs.dataservices.anynines.com ") + name).dump(2)
        << ManagerLog();
  }
  CommandResult table = Kubectl("get providerconfigs.dataservices.anynines.com");
  EXPECT_NE(table.out.find("HEALTHY"), std::string::npos) << table.out;
}

TEST_F(DataServicesE2eTest, PostgresqlLifecycle) {
  const fs::path ex = kPackage / "examples/a9s/postgresql";
  // Provision: the upstream example claim, unchanged.
  ASSERT_TRUE(Run("apply -f " + (ex / "serviceinstance-claim.yaml").string()));
  const std::string claim = "postgresqlinstance/example-a9s-postgresql -n default";
  ASSERT_TRUE(WaitReady(claim));
  Json c = Get(claim);
  EXPECT_EQ(c["status"]["managed"]["state"], "provisioned") << c.dump(2);

  // Bind: Secret <binding>-creds with exactly the upstream key set.
  ASSERT_TRUE(Run("apply -f " + (ex / "servicebinding-claim.yaml").string()));
  ASSERT_TRUE(Eventually(
      [&] { return !SecretData("default", "example-a9s-postgresql-creds").empty(); }, 120s))
      << Get("servicebinding/example-a9s-postgresql -n default").dump(2) << ManagerLog();
  auto creds = SecretData("default", "example-a9s-postgresql-creds");
  EXPECT_EQ(Keys(creds), (std::set<std::string>{"host", "hosts", "name", "password", "port", "uri",
                                                "username"}));
  std::string uri = creds["uri"];
  PsqlOk(uri,
         "CREATE TABLE orders (id int primary key, item text); "
         "INSERT INTO orders SELECT g, 'item ' || g FROM generate_series(1, 100) g");
  EXPECT_EQ(PsqlOk(uri, "SELECT count(*) FROM orders"), "100");

  // Backup, delete rows, restore: the rows are back.
  ASSERT_TRUE(Run("apply -f " + (ex / "backup-claim.yaml").string()));
  ASSERT_TRUE(WaitReady("backup/example-a9s-postgresql -n default"));
  Json backup = Get("backup/example-a9s-postgresql -n default");
  EXPECT_EQ(backup["status"]["managed"]["status"], "done") << backup.dump(2);
  PsqlOk(uri, "DELETE FROM orders WHERE id > 10");
  EXPECT_EQ(PsqlOk(uri, "SELECT count(*) FROM orders"), "10");
  ASSERT_TRUE(Run("apply -f " + (ex / "restore-claim.yaml").string()));
  ASSERT_TRUE(WaitReady("restore/example-a9s-postgresql -n default"));
  EXPECT_EQ(PsqlOk(uri, "SELECT count(*) FROM orders"), "100");

  // Plan upgrade: Ready=False, then Ready=True with two streaming standbys and the data kept.
  ASSERT_TRUE(Run("patch " + claim +
                  " --type=merge -p '{\"spec\":{\"plan\":\"postgresql-replica-small\"}}'"));
  EXPECT_TRUE(Eventually([&] { return Condition(Get(claim), "Ready") == "False"; }, 60s))
      << Get(claim).dump(2);
  EXPECT_EQ(Condition(Get(claim), "Synced"), "True");
  ASSERT_TRUE(WaitReady(claim, 300s));
  EXPECT_EQ(PsqlOk(uri, "SELECT count(*) FROM orders"), "100");
  EXPECT_TRUE(Eventually(
      [&] {
        return PsqlOk(uri, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") ==
               "2";
      },
      60s));

  // Invalid changes, rejected with upstream's messages and changing nothing.
  CommandResult service = Kubectl(
      "patch " + claim + " --type=merge -p '{\"spec\":{\"service\":\"a9s-postgresql13\"}}'");
  EXPECT_NE(service.exit_code, 0);
  EXPECT_NE(service.err.find("Service is an immutable field"), std::string::npos) << service.err;
  CommandResult smaller = Kubectl(
      "patch " + claim + " --type=merge -p '{\"spec\":{\"plan\":\"postgresql-single-nano\"}}'");
  EXPECT_NE(smaller.exit_code, 0);
  EXPECT_NE(smaller.err.find("Transition from bigger to smaller plan size is not supported."),
            std::string::npos)
      << smaller.err;
  fs::path bionic = Write("bionic.yaml", R"(apiVersion: anynines.com/v1
kind: PostgresqlInstance
metadata:
  name: bionic
  namespace: default
spec:
  service: a9s-postgresql15
  plan: postgresql-single-nano-bionic
  compositionRef:
    name: a9s-postgresql
)");
  CommandResult b = Kubectl("apply -f " + bionic.string());
  EXPECT_NE(b.exit_code, 0);
  EXPECT_NE(b.err.find("Bionic plans are only supported by a9s PostgreSQL 13"), std::string::npos)
      << b.err;
  EXPECT_EQ(Get(claim)["spec"]["plan"], "postgresql-replica-small");

  // Teardown in the suite's order: backup, binding, restore, instance.
  ASSERT_TRUE(Run("delete backup/example-a9s-postgresql -n default --timeout=120s"));
  ASSERT_TRUE(Run("delete servicebinding/example-a9s-postgresql -n default --timeout=120s"));
  EXPECT_TRUE(Eventually(
      [&] { return Get("secret -n default example-a9s-postgresql-creds").is_null(); }, 60s));
  EXPECT_NE(Psql(uri, "SELECT 1").exit_code, 0) << "the unbound password still works";
  ASSERT_TRUE(Run("delete restore/example-a9s-postgresql -n default --timeout=120s"));
  ASSERT_TRUE(Run("delete " + claim + " --timeout=180s"));
  EXPECT_TRUE(Eventually([&] { return InstanceDirs() == 0 && ServerProcesses().empty(); }, 120s))
      << InstanceDirs() << " instance directories, " << ServerProcesses().size() << " processes";
  EXPECT_EQ(BackupFiles(), 0);
  EXPECT_TRUE(Get("serviceinstances.dataservices.anynines.com")["items"].empty());
}

TEST_F(DataServicesE2eTest, UnknownServiceVersionIsExplainedOnTheClaim) {
  fs::path claim = Write("pg13.yaml", R"(apiVersion: anynines.com/v1
kind: PostgresqlInstance
metadata:
  name: pg13
  namespace: default
spec:
  service: a9s-postgresql13
  plan: postgresql-single-nano
  compositionRef:
    name: a9s-postgresql
)");
  ASSERT_TRUE(Run("apply -f " + claim.string()));
  EXPECT_TRUE(Eventually(
      [&] {
        std::string text = Get("postgresqlinstance/pg13 -n default").dump();
        return text.find("a9s-postgresql13") != std::string::npos &&
               text.find("a9s-postgresql15") != std::string::npos &&
               text.find("\"status\":\"False\"") != std::string::npos;
      },
      60s))
      << Get("postgresqlinstance/pg13 -n default").dump(2);
  ASSERT_TRUE(Run("delete -f " + claim.string() + " --timeout=60s"));
  EXPECT_EQ(InstanceDirs(), 0);
}

TEST_F(DataServicesE2eTest, KeyvalueLifecycle) {
  const fs::path ex = kPackage / "examples/a9s/keyvalue";
  ASSERT_TRUE(Run("apply -f " + (ex / "serviceinstance-claim.yaml").string()));
  const std::string claim = "keyvalueinstance/example-a9s-keyvalue -n default";
  ASSERT_TRUE(WaitReady(claim));
  ASSERT_TRUE(Run("apply -f " + (ex / "servicebinding-claim.yaml").string()));
  ASSERT_TRUE(Eventually(
      [&] { return !SecretData("default", "example-a9s-keyvalue-creds").empty(); }, 120s))
      << ManagerLog();
  auto creds = SecretData("default", "example-a9s-keyvalue-creds");
  EXPECT_EQ(Keys(creds),
            (std::set<std::string>{"cacrt", "host", "hosts", "load_balanced_host",
                                   "valkey.password", "valkey.port", "valkey.username"}));
  fs::path ca = Write("kv-ca.crt", creds["cacrt"]);
  auto cli = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"redis-cli",
                                     "--tls",
                                     "--cacert",
                                     ca.string(),
                                     "-h",
                                     creds["host"],
                                     "-p",
                                     creds["valkey.port"],
                                     "--user",
                                     creds["valkey.username"],
                                     "--pass",
                                     creds["valkey.password"],
                                     "--no-auth-warning"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = core::RunProcess({.argv = argv}, 20s);
    return r.ok() ? std::string(core::Trim(r->output)) : r.status().message();
  };
  EXPECT_EQ(cli({"SET", "greeting", "hello"}), "OK");
  EXPECT_EQ(cli({"GET", "greeting"}), "hello");
  ASSERT_TRUE(Run("apply -f " + (ex / "backup-claim.yaml").string()));
  ASSERT_TRUE(WaitReady("backup/example-a9s-keyvalue -n default"));
  EXPECT_EQ(cli({"DEL", "greeting"}), "1");
  ASSERT_TRUE(Run("apply -f " + (ex / "restore-claim.yaml").string()));
  ASSERT_TRUE(WaitReady("restore/example-a9s-keyvalue -n default"));
  EXPECT_EQ(cli({"GET", "greeting"}), "hello");
  // A smaller plan is refused at admission.
  CommandResult smaller = Kubectl(
      "patch " + claim + " --type=merge -p '{\"spec\":{\"plan\":\"keyvalue-single-nano-ssl\"}}'");
  EXPECT_NE(smaller.exit_code, 0);
  // Upgrade in size: data kept. Redis restarts in well under a second, too fast to catch
  // Ready=False by polling; the Ready condition's transition time shows it went False and back.
  std::string before = ReadyTransition(Get(claim));
  std::this_thread::sleep_for(1100ms);  // transition times have one-second resolution
  ASSERT_TRUE(Run("patch " + claim +
                  " --type=merge -p '{\"spec\":{\"plan\":\"keyvalue-single-medium-ssl\"}}'"));
  EXPECT_TRUE(Eventually(
      [&] {
        Json now = Get(claim);
        return Condition(now, "Ready") == "True" && ReadyTransition(now) != before &&
               now["status"]["managed"]["state"] == "provisioned";
      },
      300s))
      << Get(claim).dump(2);
  EXPECT_EQ(cli({"GET", "greeting"}), "hello");
  ASSERT_TRUE(Run("delete backup/example-a9s-keyvalue -n default --timeout=120s"));
  ASSERT_TRUE(Run("delete servicebinding/example-a9s-keyvalue -n default --timeout=120s"));
  EXPECT_TRUE(Eventually(
      [&] { return Get("secret -n default example-a9s-keyvalue-creds").is_null(); }, 60s));
  EXPECT_EQ(cli({"GET", "greeting"}).find("hello"), std::string::npos);
  ASSERT_TRUE(Run("delete restore/example-a9s-keyvalue -n default --timeout=120s"));
  ASSERT_TRUE(Run("delete " + claim + " --timeout=180s"));
  EXPECT_TRUE(Eventually([&] { return InstanceDirs() == 0 && ServerProcesses().empty(); }, 120s));
  EXPECT_EQ(BackupFiles(), 0);
}

TEST_F(DataServicesE2eTest, CredentialRotationKeepsReReadingClientsWorking) {
  const std::string pc = "providerconfigs.dataservices.anynines.com/postgresql-service-broker";
  ASSERT_TRUE(Run("annotate " + pc +
                  " klutch.anynines.com/max-credential-age=4s "
                  "klutch.anynines.com/credential-grace-period=3s --overwrite"));
  fs::path claims = Write("rotation.yaml", R"(apiVersion: anynines.com/v1
kind: PostgresqlInstance
metadata:
  name: rotation
  namespace: default
spec:
  service: a9s-postgresql15
  plan: postgresql-single-nano
  compositionRef:
    name: a9s-postgresql
---
apiVersion: anynines.com/v1
kind: ServiceBinding
metadata:
  name: rotation-sb
  namespace: default
spec:
  instanceRef: rotation
  serviceInstanceType: postgresql
  compositionRef:
    name: a9s-servicebinding
)");
  ASSERT_TRUE(Run("apply -f " + claims.string()));
  ASSERT_TRUE(WaitReady("postgresqlinstance/rotation -n default"));
  ASSERT_TRUE(Eventually([&] { return !SecretData("default", "rotation-sb-creds").empty(); }, 120s))
      << ManagerLog();
  std::string first = SecretData("default", "rotation-sb-creds")["uri"];
  PsqlOk(first, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)");
  // A client that re-reads the Secret before each use never sees broken credentials.
  std::set<std::string> users;
  int uses = 0;
  int failures = 0;
  std::string last_error;
  auto until = std::chrono::steady_clock::now() + 120s;
  while (users.size() < 4 && std::chrono::steady_clock::now() < until) {
    auto creds = SecretData("default", "rotation-sb-creds");
    if (creds.empty()) continue;
    users.insert(creds["username"]);
    auto r = Psql(creds["uri"], "SELECT count(*) FROM kept");
    ++uses;
    if (r.exit_code != 0 || core::Trim(r.output) != "1") {
      ++failures;
      last_error = r.output;
    }
  }
  EXPECT_GE(users.size(), 4u) << "fewer than three rotations in 120 s\n" << ManagerLog();
  EXPECT_EQ(failures, 0) << failures << " of " << uses << " uses failed; last: " << last_error;
  // Every superseded role is gone once the grace period has passed.
  EXPECT_TRUE(Eventually(
      [&] {
        auto creds = SecretData("default", "rotation-sb-creds");
        return !creds.empty() &&
               PsqlOk(creds["uri"],
                      "SELECT count(*) FROM pg_roles WHERE rolname ~ '^b[a-z0-9]{12}$'") == "1";
      },
      30s));
  EXPECT_NE(Psql(first, "SELECT 1").exit_code, 0) << "the first password still works";
  ASSERT_TRUE(Run("annotate " + pc +
                  " klutch.anynines.com/max-credential-age- "
                  "klutch.anynines.com/credential-grace-period-"));
  ASSERT_TRUE(Run("delete -f " + claims.string() + " --timeout=180s"));
  EXPECT_TRUE(Eventually([&] { return InstanceDirs() == 0 && ServerProcesses().empty(); }, 120s));
}

// Runs last: kills servers and the broker.
TEST_F(DataServicesE2eTest, FaultsConverge) {
  auto claim_yaml = [](const std::string& name) {
    return fmt::format(R"(apiVersion: anynines.com/v1
kind: PostgresqlInstance
metadata:
  name: {}
  namespace: default
spec:
  service: a9s-postgresql15
  plan: postgresql-single-nano
  compositionRef:
    name: a9s-postgresql
)",
                       name);
  };
  auto postmasters = [] {
    std::vector<pid_t> out;
    for (pid_t pid : ServerProcesses()) {
      auto argv = core::ProcessCommandLine(pid);
      if (argv.size() == 3 && argv[0].ends_with("/postgres") && argv[1] == "-D") out.push_back(pid);
    }
    return out;
  };
  auto instance_files_mention = [](const std::string& needle) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(BrokerState() / "i", ec); !ec && it != fs::end(it);
         ++it) {
      if (ReadFileOrEmpty(it->path() / "instance.json").find(needle) != std::string::npos)
        return true;
    }
    return false;
  };

  // 1. kill -9 of an instance's postgres: the broker restarts it; Ready=False, then True.
  ASSERT_TRUE(Run("apply -f " + Write("faulty.yaml", claim_yaml("faulty")).string()));
  const std::string faulty = "postgresqlinstance/faulty -n default";
  ASSERT_TRUE(WaitReady(faulty));
  auto pms = postmasters();
  ASSERT_EQ(pms.size(), 1u);
  ASSERT_EQ(::kill(pms[0], SIGKILL), 0);
  EXPECT_TRUE(Eventually([&] { return Condition(Get(faulty), "Ready") == "False"; }, 60s))
      << Get(faulty).dump(2);
  ASSERT_TRUE(WaitReady(faulty));
  EXPECT_EQ(postmasters().size(), 1u);

  // 2. The broker down: the ProviderConfig turns unhealthy and the claim says why.
  suite->cp->KillBroker();
  EXPECT_TRUE(Eventually(
      [&] {
        Json pc = Get("providerconfigs.dataservices.anynines.com postgresql-service-broker");
        return pc.is_object() && pc["status"]["health"]["lastStatus"] == false;
      },
      120s))
      << Get("providerconfigs.dataservices.anynines.com postgresql-service-broker").dump(2);
  EXPECT_TRUE(Eventually(
      [&] {
        std::string text = Get(faulty).dump();
        return text.find(std::to_string(suite->cp->broker_port())) != std::string::npos;
      },
      60s))
      << Get(faulty).dump(2);
  EXPECT_EQ(postmasters().size(), 1u) << "the instance runs on without its broker";

  // 3. kill -9 of the broker during a provision: after a restart it converges, once.
  RestartBroker();
  ASSERT_TRUE(Run("apply -f " + Write("crash.yaml", claim_yaml("crash")).string()));
  // Killed once initdb has begun (the node directory exists), not before anything ran.
  ASSERT_TRUE(Eventually(
      [&] {
        std::error_code ec;
        for (auto it = fs::directory_iterator(BrokerState() / "i", ec); !ec && it != fs::end(it);
             ++it) {
          if (ReadFileOrEmpty(it->path() / "instance.json").find("\"state\":\"deploying\"") !=
                  std::string::npos &&
              fs::exists(it->path() / "n0")) {
            return true;
          }
        }
        return false;
      },
      60s))
      << ManagerLog();
  suite->cp->KillBroker();
  RestartBroker();
  ASSERT_TRUE(WaitReady("postgresqlinstance/crash -n default"));
  ASSERT_TRUE(WaitReady(faulty));
  EXPECT_EQ(InstanceDirs(), 2);
  EXPECT_EQ(postmasters().size(), 2u);

  // 4. kill -9 of the broker during a backup.
  fs::path backup = Write("crash-backup.yaml", R"(apiVersion: anynines.com/v1
kind: Backup
metadata:
  name: crash
  namespace: default
spec:
  instanceRef: crash
  serviceInstanceType: postgresql
  compositionRef:
    name: a9s-backup
)");
  // A session holding a lock for 15 s keeps pg_dump waiting, so that the kill lands while the
  // backup is running (a killed psql would leave its backend holding the lock until then).
  fs::path binding = Write("crash-sb.yaml", R"(apiVersion: anynines.com/v1
kind: ServiceBinding
metadata:
  name: crash-sb
  namespace: default
spec:
  instanceRef: crash
  serviceInstanceType: postgresql
  compositionRef:
    name: a9s-servicebinding
)");
  ASSERT_TRUE(Run("apply -f " + binding.string()));
  ASSERT_TRUE(Eventually([&] { return !SecretData("default", "crash-sb-creds").empty(); }, 120s));
  std::string uri = SecretData("default", "crash-sb-creds")["uri"];
  PsqlOk(uri, "CREATE TABLE locked (x int); INSERT INTO locked VALUES (7)");
  auto locker = core::SpawnProcess(
      {.argv = {
           "psql", uri, "-c",
           "BEGIN; LOCK TABLE locked IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(15); COMMIT;"}});
  ASSERT_TRUE(locker.ok());
  ASSERT_TRUE(Run("apply -f " + backup.string()));
  ASSERT_TRUE(Eventually([&] { return instance_files_mention("\"status\":\"running\""); }, 60s));
  suite->cp->KillBroker();
  RestartBroker();
  core::StopProcess(*locker, 10s);
  ASSERT_TRUE(WaitReady("backup/crash -n default"));
  EXPECT_EQ(BackupFiles(), 1);
  for (pid_t pid : ServerProcesses()) {
    EXPECT_EQ(core::ProcessCommandLine(pid)[0].find("pg_dump"), std::string::npos)
        << "a pg_dump is left";
  }
  ASSERT_TRUE(Run("delete -f " + binding.string() + " --timeout=120s"));
  EXPECT_TRUE(Eventually(
      [&] {
        Json pc = Get("providerconfigs.dataservices.anynines.com postgresql-service-broker");
        return pc.is_object() && pc["status"]["health"]["lastStatus"] == true;
      },
      120s));

  // Everything goes away with the claims.
  ASSERT_TRUE(Run("delete -f " + backup.string() + " --timeout=120s"));
  ASSERT_TRUE(
      Run("delete postgresqlinstance/crash postgresqlinstance/faulty -n default --timeout=180s"));
  EXPECT_TRUE(Eventually([&] { return InstanceDirs() == 0 && ServerProcesses().empty(); }, 120s))
      << InstanceDirs() << " " << ServerProcesses().size() << "\n"
      << BrokerLog();
  EXPECT_EQ(BackupFiles(), 0);
}

// MariaDB through the whole Control Plane: claim, binding Secret with upstream's keys, the
// mariadb client over TLS, Backup; then a Restore whose broker is killed while it loads the
// backup: the next broker resumes it from the data as it was before (its safety dump), and it
// ends with the backup's data and the binding unlocked; deleting everything leaves nothing.
TEST_F(DataServicesE2eTest, MariadbRestoreKilledMidwayIsUndoneOnRestart) {
  fs::path claims = Write("mdb.yaml", R"(apiVersion: anynines.com/v1
kind: MariadbInstance
metadata:
  name: mdb
  namespace: default
spec:
  service: a9s-mariadb1011
  plan: mariadb-single-nano-ssl
  parameters:
    databases: [db1]
  compositionRef:
    name: a9s-mariadb
---
apiVersion: anynines.com/v1
kind: ServiceBinding
metadata:
  name: mdb-sb
  namespace: default
spec:
  instanceRef: mdb
  serviceInstanceType: mariadb
  compositionRef:
    name: a9s-servicebinding
)");
  ASSERT_TRUE(Run("apply -f " + claims.string()));
  ASSERT_TRUE(WaitReady("mariadbinstance/mdb -n default"));
  ASSERT_TRUE(Eventually([&] { return !SecretData("default", "mdb-sb-creds").empty(); }, 120s));
  auto creds = SecretData("default", "mdb-sb-creds");
  EXPECT_EQ(Keys(creds), (std::set<std::string>{"cacrt", "host", "hosts", "name", "password",
                                                "port", "uri", "username"}));
  fs::path ca = Write("mdb-ca.crt", creds["cacrt"]);
  auto sql = [&](const std::string& q) {
    auto r =
        core::RunProcess({.argv = {"mariadb", "--no-defaults", "--batch", "--skip-column-names",
                                   "--ssl", "--ssl-ca", ca.string(), "--ssl-verify-server-cert",
                                   "--host", creds["host"], "--port", creds["port"], "--user",
                                   creds["username"], "--database", creds["name"], "--execute", q},
                          .env = {"MYSQL_PWD=" + creds["password"]}},
                         30s);
    return r.ok() && r->exit_code == 0 ? std::string(core::Trim(r->output))
                                       : "error: " + (r.ok() ? r->output : r.status().message());
  };
  ASSERT_EQ(sql("CREATE TABLE items (id INT PRIMARY KEY); INSERT INTO items VALUES (1), (2); "
                "CREATE TABLE db1.notes (id INT PRIMARY KEY); INSERT INTO db1.notes VALUES (7); "
                "SELECT COUNT(*) FROM items"),
            "2");
  fs::path backup = Write("mdb-backup.yaml", R"(apiVersion: anynines.com/v1
kind: Backup
metadata:
  name: mdb-bk
  namespace: default
spec:
  instanceRef: mdb
  serviceInstanceType: mariadb
  compositionRef:
    name: a9s-backup
)");
  ASSERT_TRUE(Run("apply -f " + backup.string()));
  ASSERT_TRUE(WaitReady("backup/mdb-bk -n default"));
  ASSERT_EQ(sql("DELETE FROM items WHERE id = 2; INSERT INTO db1.notes VALUES (8); "
                "SELECT COUNT(*) FROM items"),
            "1");

  // The administrator's READ lock on db1.notes lets the safety dump read it but holds the
  // restore's DROP DATABASE db1 back: the restore stops midway, its own database replaced.
  fs::path instance;
  for (const auto& e : fs::directory_iterator(BrokerState() / "i")) {
    if (fs::exists(e.path() / "n0" / "my.cnf")) instance = e.path();
  }
  ASSERT_FALSE(instance.empty());
  auto locker = core::SpawnProcess(
      {.argv = {"mariadb", "--defaults-file=" + (instance / "n0" / "client.cnf").string(),
                "--execute", "LOCK TABLES db1.notes READ; SELECT SLEEP(60);"}});
  ASSERT_TRUE(locker.ok());
  auto restore = [&](const std::string& name) {
    return Write(name + ".yaml", fmt::format(R"(apiVersion: anynines.com/v1
kind: Restore
metadata:
  name: {}
  namespace: default
spec:
  backupRef: mdb-bk
  serviceInstanceType: mariadb
  compositionRef:
    name: a9s-restore
)",
                                             name));
  };
  ASSERT_TRUE(Run("apply -f " + restore("mdb-rs").string()));
  ASSERT_TRUE(Eventually([&] { return fs::exists(instance / "restore-safety.sql"); }, 120s))
      << BrokerLog();
  suite->cp->KillBroker();
  core::StopProcess(*locker, 10s);
  // The next broker resumes the restore from the data as it was before it: it ends with the
  // backup's data and the binding unlocked.
  RestartBroker();
  ASSERT_TRUE(WaitReady("restore/mdb-rs -n default"));
  EXPECT_EQ(sql("SELECT COUNT(*) FROM items"), "2");
  EXPECT_EQ(sql("SELECT GROUP_CONCAT(id ORDER BY id) FROM db1.notes"), "7");
  EXPECT_FALSE(fs::exists(instance / "restore-safety.sql"));
  EXPECT_FALSE(fs::exists(instance / "locked-for-restore"));

  ASSERT_TRUE(
      Run("delete restore/mdb-rs backup/mdb-bk servicebinding/mdb-sb "
          "mariadbinstance/mdb -n default --timeout=180s"));
  EXPECT_TRUE(Eventually([&] { return !fs::exists(instance) && ServerProcesses().empty(); }, 120s))
      << BrokerLog();
}

}  // namespace
}  // namespace klutch::testing
