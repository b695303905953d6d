// `klutch operator` as a process against an in-process API server (TestCluster), as the service
// account of deploy/operator with exactly its RBAC, with real PostgreSQL 15 servers: a three-node
// Postgresql fails over under a write load without losing an acknowledged commit and ends with
// exactly one primary; the operator killed mid-provision, while the primary dies, mid-failover,
// mid-backup and mid-restore finishes on restart without a second primary; bad specs are refused
// with nothing kept. Failover times are printed, never asserted.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "client/apply.h"
#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "core/file.h"
#include "core/random.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/json_numbers.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"
#include "serving/kubeconfig.h"
#include "test/support/process.h"
#include "test/support/test_cluster.h"
#include "test/support/wait.h"

namespace klutch::a8s::a8s_operator_test {
namespace {

namespace fs = std::filesystem;
using machinery::Json;
using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::Eventually;

const client::GroupVersionResource kPg{"postgresql.anynines.com", "v1beta3", "postgresqls"};
const client::GroupVersionResource kSb{"servicebindings.anynines.com", "v1beta3",
                                       "servicebindings"};
const client::GroupVersionResource kBackup{"backups.anynines.com", "v1beta3", "backups"};
const client::GroupVersionResource kRestore{"backups.anynines.com", "v1beta3", "restores"};

// Eventually, looking every `interval`: to catch a moment that lasts a few milliseconds.
bool Soon(const std::function<bool()>& probe, std::chrono::seconds deadline,
          std::chrono::milliseconds interval) {
  auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (probe()) return true;
    std::this_thread::sleep_for(interval);
  }
  return probe();
}

// One libpq connection; empty when it could not connect.
struct Conn {
  explicit Conn(const std::string& uri) : c(PQconnectdb(uri.c_str())) {
    if (c != nullptr && PQstatus(c) != CONNECTION_OK) {
      PQfinish(c);
      c = nullptr;
    }
  }
  ~Conn() {
    if (c != nullptr) PQfinish(c);
  }
  // The first column of the first row; nullopt on any error (its SQLSTATE in `sqlstate`).
  std::optional<std::string> One(const std::string& sql, std::string* sqlstate = nullptr) {
    if (c == nullptr) return std::nullopt;
    PGresult* r = PQexec(c, sql.c_str());
    std::optional<std::string> out;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
    if (PQresultStatus(r) == PGRES_COMMAND_OK) out = "";
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (sqlstate != nullptr) *sqlstate = state != nullptr ? state : "";
    PQclear(r);
    return out;
  }
  PGconn* c;
};

class OperatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto cluster = testing::TestCluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = cluster->release();
    // A state directory the postgres account can traverse (the operator runs servers as it).
    state_ = fs::path("/tmp") / ("kop-" + core::RandomSuffix(6));
    fs::create_directories(state_);
    fs::permissions(state_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    logs_ = new testing::TempDir("klutch-a8s-operator-logs");
    // The operator runs as deploy/operator's service account with exactly that RBAC: every
    // test below proves a rule there is enough.
    client::Applier applier(cluster_->admin());
    for (const char* file : {"namespace.yaml", "serviceaccount.yaml", "rbac.yaml"}) {
      const fs::path path = fs::path(KLUTCH_SOURCE_DIR) / "deploy/operator" / file;
      ASSERT_TRUE(applier.ApplyYaml(testing::ReadFileOrEmpty(path), path.string()).ok()) << path;
    }
    Json request = {{"apiVersion", "authentication.k8s.io/v1"},
                    {"kind", "TokenRequest"},
                    {"spec", {{"expirationSeconds", 86400}}}};
    client::Request r;
    r.verb = "POST";
    r.path = client::ResourcePath(client::resources::kServiceAccounts, "a8s-system",
                                  "klutch-operator", "token");
    r.body = machinery::Dump(request);
    auto answer = cluster_->admin().DoJson(r);
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    const fs::path token =
        logs_->Write("token", machinery::GetString(*answer, {"status", "token"}));
    auto admin = client::LoadKubeconfig({.paths = {cluster_->kubeconfig()}});
    ASSERT_TRUE(admin.ok()) << admin.status().ToString();
    serving::KubeconfigSpec kubeconfig;
    kubeconfig.name = "klutch-operator";
    kubeconfig.server = admin->server;
    kubeconfig.ca_pem = admin->ca_pem;
    kubeconfig.token_file = token.string();
    kubeconfig_ = logs_->path() / "operator.kubeconfig";
    ASSERT_TRUE(serving::WriteKubeconfig(kubeconfig_, kubeconfig).ok());
    StartOperator();
    // The operator installs the a8s CRDs at its start.
    const client::GroupVersionResource crds{"apiextensions.k8s.io", "v1",
                                            "customresourcedefinitions"};
    ASSERT_TRUE(Eventually(
        [&] {
          for (const char* name :
               {"postgresqls.postgresql.anynines.com",
                "servicebindings.servicebindings.anynines.com", "backups.backups.anynines.com",
                "restores.backups.anynines.com"}) {
            auto crd = client::ResourceClient(cluster_->admin(), crds).Get(name);
            if (!crd.ok() || !reconcile::IsConditionTrue(*crd, "Established")) return false;
          }
          return true;
        },
        60s))
        << OperatorLogs();
  }

  static void TearDownTestSuite() {
    if (operator_ != nullptr) operator_->Signal(SIGTERM, 120s);  // stops the servers
    delete operator_;
    operator_ = nullptr;
    delete cluster_;
    cluster_ = nullptr;
    delete logs_;
    std::error_code ec;
    fs::remove_all(state_, ec);
  }

  static void StartOperator() {
    static int starts = 0;
    operator_ = new ChildProcess(
        {std::string(KLUTCH_BIN_DIR) + "/klutch", "operator", "--kubeconfig", kubeconfig_.string(),
         "--state-dir", state_.string(), "--health-probe-bind-address", "127.0.0.1:0",
         "--status-interval", "1s", "--leader-elect-lease-duration", "2s",
         "--leader-elect-renew-deadline", "1500ms", "--leader-elect-retry-period", "200ms"},
        logs_->path() / fmt::format("operator-{}.log", ++starts));
  }

  // SIGKILL: the servers keep running, as when the operator's pod is killed.
  static void KillOperator() {
    operator_->Signal(SIGKILL, 10s);
    delete operator_;
    operator_ = nullptr;
  }

  static std::string OperatorLogs() {
    std::string out;
    for (const auto& e : fs::directory_iterator(logs_->path())) {
      out += "\n--- " + e.path().filename().string() + ":\n" + testing::ReadFileOrEmpty(e.path());
    }
    return out;
  }

  static void CreateNamespace(const std::string& ns) {
    (void)client::ResourceClient(cluster_->admin(), client::resources::kNamespaces)
        .Create({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  }

  static core::Result<Json> Create(const client::GroupVersionResource& gvr, const std::string& ns,
                                   const std::string& yaml) {
    KLUTCH_ASSIGN_OR_RETURN(Json object, machinery::ParseYaml(yaml));
    return client::ResourceClient(cluster_->admin(), gvr, ns).Create(object);
  }

  static Json Get(const client::GroupVersionResource& gvr, const std::string& ns,
                  const std::string& name) {
    auto got = client::ResourceClient(cluster_->admin(), gvr, ns).Get(name);
    return got.ok() ? *got : Json();
  }

  // A Postgresql and a ServiceBinding for it, both named `name`.
  static void CreateDatabase(const std::string& ns, const std::string& name, int replicas,
                             const std::string& parameters = "{}") {
    CreateNamespace(ns);
    auto pg = Create(kPg, ns,
                     fmt::format("apiVersion: postgresql.anynines.com/v1beta3\nkind: Postgresql\n"
                                 "metadata: {{name: {}}}\nspec: {{version: 15, replicas: {}, "
                                 "parameters: {}}}\n",
                                 name, replicas, parameters));
    ASSERT_TRUE(pg.ok()) << pg.status().ToString() << OperatorLogs();
    auto sb = Create(kSb, ns,
                     fmt::format("apiVersion: servicebindings.anynines.com/v1beta3\n"
                                 "kind: ServiceBinding\nmetadata: {{name: {}}}\nspec:\n  instance: "
                                 "{{apiVersion: postgresql.anynines.com/v1beta3, kind: Postgresql, "
                                 "name: {}}}\n",
                                 name, name));
    ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  }

  // The binding's URI, once its Secret exists.
  static std::string WaitUri(const std::string& ns, const std::string& name) {
    std::string uri;
    Eventually(
        [&] {
          uri = SecretValue(ns, name, "uri");
          return !uri.empty();
        },
        60s);
    return uri;
  }

  static bool Running(const std::string& ns, const std::string& name, int ready) {
    Json pg = Get(kPg, ns, name);
    const Json* r = machinery::Find(pg, {"status", "readyReplicas"});
    return machinery::GetString(pg, {"status", "clusterStatus"}) == "Running" && r != nullptr &&
           machinery::AsInt64(*r) == ready;
  }

  static std::string SecretValue(const std::string& ns, const std::string& binding,
                                 const std::string& key) {
    Json secret = Get(client::resources::kSecrets, ns, binding + "-service-binding");
    auto v = core::Base64Decode(machinery::GetString(secret, {"data", key}));
    return v ? *v : "";
  }

  // The message of the object's Ready condition while its reason is `reason`; "" otherwise.
  static std::string ReadyMessage(const client::GroupVersionResource& gvr, const std::string& ns,
                                  const std::string& name, const std::string& reason) {
    const Json object = Get(gvr, ns, name);
    const Json* conditions = machinery::Find(object, {"status", "conditions"});
    if (conditions == nullptr || !conditions->is_array()) return "";
    for (const Json& c : *conditions) {
      if (c["type"] == "Ready" && c["reason"] == reason)
        return machinery::GetString(c, {"message"});
    }
    return "";
  }

  // The operator's record of a Postgresql (by its UID).
  static Json Record(const std::string& uid) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state_ / "i", ec)) {
      auto j = machinery::ParseJson(testing::ReadFileOrEmpty(e.path() / "instance.json"));
      if (j.ok() && machinery::GetString(*j, {"uid"}) == uid) return *j;
    }
    return Json();
  }

  // Which servers of the instance answer "not in recovery", as the binding's user.
  static std::vector<int> Primaries(const std::string& ns, const std::string& name) {
    Json record = Record(machinery::Uid(Get(kPg, ns, name)));
    std::vector<int> out;
    int node = 0;
    for (const Json& port : record["ports"]) {
      Conn c(
          fmt::format("host=127.0.0.1 port={} user={} password={} dbname=a9s_apps_default_db "
                      "connect_timeout=2",
                      machinery::Dump(port), SecretValue(ns, name, "username"),
                      SecretValue(ns, name, "password")));
      if (c.One("select pg_is_in_recovery()") == "f") out.push_back(node);
      ++node;
    }
    return out;
  }

  // The PID of node `node`'s postmaster.
  static pid_t NodePid(const std::string& ns, const std::string& name, int node) {
    Json record = Record(machinery::Uid(Get(kPg, ns, name)));
    std::string pidfile =
        testing::ReadFileOrEmpty(state_ / "i" / machinery::Dump(record["number"]) /
                                 fmt::format("n{}", node) / "data" / "postmaster.pid");
    return static_cast<pid_t>(
        core::ParseInt64(core::Trim(pidfile.substr(0, pidfile.find('\n')))).value_or(-1));
  }

  static int RecordPrimary(const std::string& ns, const std::string& name) {
    Json record = Record(machinery::Uid(Get(kPg, ns, name)));
    return static_cast<int>(machinery::AsInt64(record["primary"]).value_or(-1));
  }

  static testing::TestCluster* cluster_;
  static fs::path state_;
  static fs::path kubeconfig_;
  static testing::TempDir* logs_;
  static ChildProcess* operator_;
};

testing::TestCluster* OperatorTest::cluster_ = nullptr;
fs::path OperatorTest::state_;
fs::path OperatorTest::kubeconfig_;
testing::TempDir* OperatorTest::logs_ = nullptr;
ChildProcess* OperatorTest::operator_ = nullptr;

TEST_F(OperatorTest, FailoverUnderAWriteLoadLosesNoAcknowledgedCommit) {
  ASSERT_NO_FATAL_FAILURE(CreateDatabase("failover", "db", 3));
  ASSERT_TRUE(Eventually([&] { return Running("failover", "db", 3); }, 120s)) << OperatorLogs();
  std::string uri;
  ASSERT_TRUE(Eventually(
      [&] {
        uri = SecretValue("failover", "db", "uri");
        return !uri.empty();
      },
      60s));
  ASSERT_NE(uri.find("target_session_attrs=read-write"), std::string::npos) << uri;
  {
    Conn c(uri);
    ASSERT_EQ(c.One("create table w(id bigint primary key)"), "");
    EXPECT_EQ(c.One("show synchronous_standby_names"), "ANY 1 (node1, node2)");
  }
  // A writer through the binding's URI: one row per transaction, each acknowledged id kept;
  // it reconnects whenever a statement fails (and skips an id a cut-off insert committed).
  std::atomic<bool> stop{false};
  std::atomic<int64_t> next{1};
  std::vector<int64_t> acked;
  std::atomic<int64_t> first_after_kill{0};
  std::atomic<bool> killed{false};
  std::thread writer([&] {
    auto conn = std::make_unique<Conn>(uri);
    while (!stop) {
      int64_t id = next;
      std::string sqlstate;
      if (conn->One(fmt::format("insert into w values ({})", id), &sqlstate) == "") {
        acked.push_back(id);
        if (killed && first_after_kill == 0) first_after_kill = id;
        ++next;
      } else if (sqlstate == "23505") {
        // The insert whose answer the failover cut off had committed: never acknowledged,
        // so not counted, and the next id goes on.
        ++next;
      } else {
        std::this_thread::sleep_for(20ms);
        conn = std::make_unique<Conn>(uri);
      }
    }
  });
  std::this_thread::sleep_for(1s);
  const int old_primary = RecordPrimary("failover", "db");
  const pid_t pid = NodePid("failover", "db", old_primary);
  ASSERT_GT(pid, 0);
  // The whole server at once, as when its machine dies: the postmaster and its backends (a
  // backend outlives a killed postmaster for a moment and could still take a commit).
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(
      testing::RunShell(fmt::format("kill -9 {} $(pgrep -P {})", pid, pid), {}, "/", 10s).exit_code,
      0);
  killed = true;
  EXPECT_TRUE(Eventually([&] { return first_after_kill != 0; }, 60s)) << OperatorLogs();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("failover: first write accepted %.2f s after SIGKILL of the primary\n", seconds);
  std::this_thread::sleep_for(1s);
  stop = true;
  writer.join();
  EXPECT_TRUE(Eventually([&] { return Running("failover", "db", 3); }, 120s)) << OperatorLogs();
  EXPECT_NE(RecordPrimary("failover", "db"), old_primary);
  EXPECT_EQ(Primaries("failover", "db").size(), 1u);
  Conn c(uri);
  std::set<int64_t> have;
  PGresult* r = PQexec(c.c, "select id from w");
  ASSERT_EQ(PQresultStatus(r), PGRES_TUPLES_OK);
  for (int i = 0; i < PQntuples(r); ++i) have.insert(*core::ParseInt64(PQgetvalue(r, i, 0)));
  PQclear(r);
  ASSERT_GT(acked.size(), 10u);
  int64_t lost = 0;
  for (int64_t id : acked) lost += have.count(id) == 0;
  EXPECT_EQ(lost, 0) << "of " << acked.size() << " acknowledged commits";
  // The old primary follows the new one: its copy has the rows written since.
  EXPECT_TRUE(Eventually(
      [&] { return Running("failover", "db", 3) && Primaries("failover", "db").size() == 1; },
      60s));

  // And again: the new primary (a process the operator started as a standby and watches as the
  // primary since) dies too; another standby takes over.
  const std::string uid = machinery::Uid(Get(kPg, "failover", "db"));
  ASSERT_TRUE(Eventually([&] { return Record(uid)["rejoining"].empty(); }, 60s));
  const int second = RecordPrimary("failover", "db");
  const pid_t second_pid = NodePid("failover", "db", second);
  ASSERT_EQ(testing::RunShell(fmt::format("kill -9 {} $(pgrep -P {})", second_pid, second_pid), {},
                              "/", 10s)
                .exit_code,
            0);
  EXPECT_TRUE(Eventually(
      [&] {
        Conn again(uri);
        return RecordPrimary("failover", "db") != second &&
               again.One("insert into w values (-1)") == "";
      },
      60s))
      << OperatorLogs();
  EXPECT_TRUE(Eventually(
      [&] { return Running("failover", "db", 3) && Primaries("failover", "db").size() == 1; },
      120s));
}

// The operator SIGKILLed while it builds a three-node cluster: the next one finishes it.
TEST_F(OperatorTest, KilledMidProvisionTheNextOperatorFinishes) {
  ASSERT_NO_FATAL_FAILURE(CreateDatabase("midprov", "db", 3));
  // Once its first server runs, before the standbys do.
  ASSERT_TRUE(Soon(
      [&] {
        return NodePid("midprov", "db", 0) > 0 &&
               !fs::exists(
                   state_ / "i" /
                   machinery::Dump(Record(machinery::Uid(Get(kPg, "midprov", "db")))["number"]) /
                   "n2" / "data" / ".klutch-initialized");
      },
      60s, 5ms));
  KillOperator();
  StartOperator();
  EXPECT_TRUE(Eventually([&] { return Running("midprov", "db", 3); }, 120s)) << OperatorLogs();
  ASSERT_FALSE(WaitUri("midprov", "db").empty());
  EXPECT_EQ(Primaries("midprov", "db"), std::vector<int>{0});
  Conn c(WaitUri("midprov", "db"));
  EXPECT_EQ(c.One("select 1"), "1");
}

// The primary dies while no operator runs: the next one restarts it in place (no standby was
// promoted), never a second primary.
TEST_F(OperatorTest, APrimaryThatDiedWithoutAnOperatorIsRestartedNotDoubled) {
  ASSERT_NO_FATAL_FAILURE(CreateDatabase("nooperator", "db", 3));
  ASSERT_TRUE(Eventually([&] { return Running("nooperator", "db", 3); }, 120s));
  {
    Conn c(WaitUri("nooperator", "db"));
    ASSERT_EQ(c.One("create table t(x int); insert into t values (1)"), "");
  }
  KillOperator();
  ASSERT_EQ(::kill(NodePid("nooperator", "db", 0), SIGKILL), 0);
  std::this_thread::sleep_for(500ms);
  StartOperator();
  // (The status said Running before the kill: what counts is what the servers answer.)
  EXPECT_TRUE(Eventually(
      [&] {
        Conn c(SecretValue("nooperator", "db", "uri"));
        return c.One("select count(*) from t") == "1" && Running("nooperator", "db", 3);
      },
      120s))
      << OperatorLogs();
  EXPECT_EQ(Primaries("nooperator", "db"), std::vector<int>{0});
}

// A standby promoted by hand is a second primary that clients asking for a writable server may
// reach: it is rebuilt as a standby of the primary, its data kept aside, one primary again.
TEST_F(OperatorTest, ASecondPrimaryIsRebuiltAsAStandbyAndItsDataKept) {
  ASSERT_NO_FATAL_FAILURE(CreateDatabase("rogue", "db", 3));
  ASSERT_TRUE(Eventually([&] { return Running("rogue", "db", 3); }, 120s));
  const std::string uri = WaitUri("rogue", "db");
  ASSERT_EQ(Conn(uri).One("create table t as select 1 as x"), "");
  const Json record = Record(machinery::Uid(Get(kPg, "rogue", "db")));
  ASSERT_EQ(RecordPrimary("rogue", "db"), 0);
  auto admin = [&](int node) {
    return fmt::format(
        "host=127.0.0.1 port={} user=klutch_admin password={} dbname=a9s_apps_default_db",
        machinery::Dump(record["ports"][node]), machinery::GetString(record, {"admin_password"}));
  };
  ASSERT_TRUE(Eventually([&] { return Conn(admin(1)).One("select x from t") == "1"; }, 30s));
  // The operator rebuilds a second primary at once, ending its sessions, pg_promote's too
  // (which sees the promotion up to 100 ms after pg_is_in_recovery() does; under load the
  // operator got in between): promote and write while none runs; the next one finds the rogue
  // on its first pass.
  KillOperator();
  ASSERT_EQ(Conn(admin(1)).One("select pg_promote(true, 60)"), "t");
  std::optional<std::string> rogue_file;
  {
    Conn rogue(admin(1));
    ASSERT_EQ(rogue.One("create table only_on_the_rogue as select 2 as y"), "");
    rogue_file = rogue.One("select pg_relation_filepath('only_on_the_rogue')");
    ASSERT_TRUE(rogue_file.has_value());
  }
  StartOperator();
  EXPECT_TRUE(Eventually(
      [&] {
        return Primaries("rogue", "db") == std::vector<int>{0} && Running("rogue", "db", 3) &&
               Conn(admin(1)).One("select pg_is_in_recovery()") == "t";
      },
      120s))
      << OperatorLogs();
  EXPECT_EQ(Conn(admin(1)).One("select count(*) from pg_tables where tablename = "
                               "'only_on_the_rogue'"),
            "0");
  const fs::path kept = state_ / "i" / machinery::Dump(record["number"]) / "n1" / "diverged";
  EXPECT_TRUE(fs::exists(kept / "PG_VERSION"));
  EXPECT_TRUE(fs::exists(kept / *rogue_file)) << "the rogue's table is not in the set-aside data";
  // Writes reach the primary and its standbys follow it.
  ASSERT_EQ(Conn(uri).One("insert into t values (3)"), "");
  EXPECT_TRUE(Eventually([&] { return Conn(admin(1)).One("select count(*) from t") == "2"; }, 30s));
  EXPECT_TRUE(Eventually([&] { return Conn(admin(2)).One("select count(*) from t") == "2"; }, 30s));
}

// The operator died after saving its choice of a new primary and before promoting it: the
// next one promotes the chosen standby and rejoins the old primary, one primary in the end.
TEST_F(OperatorTest, AnInterruptedFailoverIsFinished) {
  ASSERT_NO_FATAL_FAILURE(CreateDatabase("midfailover", "db", 3));
  ASSERT_TRUE(Eventually([&] { return Running("midfailover", "db", 3); }, 120s));
  ASSERT_FALSE(WaitUri("midfailover", "db").empty());
  const std::string uid = machinery::Uid(Get(kPg, "midfailover", "db"));
  KillOperator();
  ASSERT_EQ(::kill(NodePid("midfailover", "db", 0), SIGKILL), 0);
  Json record = Record(uid);
  record["primary"] = 1;
  record["rejoining"] = Json::array({0});
  record["promotion_pending"] = true;
  ASSERT_TRUE(
      core::WriteFileAtomic(state_ / "i" / machinery::Dump(record["number"]) / "instance.json",
                            machinery::Dump(record))
          .ok());
  StartOperator();
  EXPECT_TRUE(Eventually(
      [&] {
        return Primaries("midfailover", "db") == std::vector<int>{1} &&
               Running("midfailover", "db", 3);
      },
      120s))
      << OperatorLogs();
  Conn c(SecretValue("midfailover", "db", "uri"));
  EXPECT_EQ(c.One("select pg_is_in_recovery()"), "f");
  // The old primary is a standby of the new one now.
  EXPECT_TRUE(Eventually(
      [&] {
        Json record = Record(machinery::Uid(Get(kPg, "midfailover", "db")));
        return record["rejoining"].empty() && record["promotion_pending"] == false;
      },
      60s));
}

// Killed while a Backup and then a Restore run: each finishes after the restart, and the
// restore brings back exactly the backed-up rows.
TEST_F(OperatorTest, KilledMidBackupAndMidRestoreTheNextOperatorFinishes) {
  ASSERT_NO_FATAL_FAILURE(CreateDatabase("midbackup", "db", 1));
  ASSERT_TRUE(Eventually([&] { return Running("midbackup", "db", 1); }, 120s));
  std::string uri;
  ASSERT_TRUE(Eventually(
      [&] {
        uri = SecretValue("midbackup", "db", "uri");
        return !uri.empty();
      },
      60s));
  {
    // Enough data that the dump takes a moment.
    Conn c(uri);
    ASSERT_EQ(c.One("create table big as select g as id, repeat('x', 200) as pad from "
                    "generate_series(1, 300000) g"),
              "");
  }
  auto in_progress = [&](const client::GroupVersionResource& gvr, const std::string& name) {
    Json o = Get(gvr, "midbackup", name);
    const Json* conditions = machinery::Find(o, {"status", "conditions"});
    if (conditions == nullptr || !conditions->is_array()) return false;
    for (const Json& c : *conditions) {
      if (c["type"] == "InProgress" && c["status"] == "True") return true;
    }
    return false;
  };
  auto complete = [&](const client::GroupVersionResource& gvr, const std::string& name) {
    Json o = Get(gvr, "midbackup", name);
    const Json* conditions = machinery::Find(o, {"status", "conditions"});
    if (conditions == nullptr || !conditions->is_array()) return false;
    for (const Json& c : *conditions) {
      if (c["type"] == "Ready" && c["status"] == "True") return true;
    }
    return false;
  };
  ASSERT_TRUE(Create(kBackup, "midbackup",
                     "apiVersion: backups.anynines.com/v1beta3\nkind: Backup\nmetadata: {name: "
                     "b}\nspec:\n  serviceInstance: {apiGroup: postgresql.anynines.com, kind: "
                     "PostgreSQL, name: db}\n")
                  .ok());
  ASSERT_TRUE(Soon([&] { return in_progress(kBackup, "b"); }, 60s, 2ms));
  KillOperator();
  StartOperator();
  ASSERT_TRUE(Eventually([&] { return complete(kBackup, "b"); }, 120s)) << OperatorLogs();
  {
    Conn c(uri);
    ASSERT_EQ(c.One("delete from big where id > 10"), "");
    ASSERT_EQ(c.One("create table later (id int)"), "");
  }
  ASSERT_TRUE(Create(kRestore, "midbackup",
                     "apiVersion: backups.anynines.com/v1beta3\nkind: Restore\nmetadata: {name: "
                     "r}\nspec:\n  backupName: b\n  serviceInstance: {apiGroup: "
                     "postgresql.anynines.com, kind: PostgreSQL, name: db}\n")
                  .ok());
  ASSERT_TRUE(Soon([&] { return in_progress(kRestore, "r"); }, 60s, 2ms));
  KillOperator();
  StartOperator();
  ASSERT_TRUE(Eventually([&] { return complete(kRestore, "r"); }, 120s)) << OperatorLogs();
  EXPECT_TRUE(Eventually(
      [&] {
        Conn c(uri);
        return c.One("select count(*) from big") == "300000";
      },
      30s));
  // Exactly the backup's data: a table made after the backup is gone.
  EXPECT_EQ(Conn(uri).One("select count(*) from pg_tables where tablename = 'later'"), "0");

  // An operator that died while a restore had closed the database to the bindings (and the
  // Restore deleted meanwhile): the database is opened again.
  const Json record = Record(machinery::Uid(Get(kPg, "midbackup", "db")));
  {
    Conn admin(fmt::format("host=127.0.0.1 port={} user=klutch_admin password={} dbname=postgres",
                           machinery::Dump(record["ports"][0]),
                           machinery::GetString(record, {"admin_password"})));
    ASSERT_EQ(admin.One("revoke connect on database a9s_apps_default_db from "
                        "a9s_apps_default_db_owner"),
              "");
  }
  EXPECT_EQ(Conn(uri).c, nullptr) << "the binding still connects to a closed database";
  ASSERT_TRUE(core::WriteFileAtomic(
                  state_ / "i" / machinery::Dump(record["number"]) / "closed-for-restore", "")
                  .ok());
  EXPECT_TRUE(
      Eventually([&] { return Conn(uri).One("select count(*) from big") == "300000"; }, 30s))
      << OperatorLogs();

  // A restore that fails midway changes nothing and leaves the database open: here a table
  // only a superuser could make keeps the restore from dropping the schema.
  {
    Conn admin(fmt::format(
        "host=127.0.0.1 port={} user=klutch_admin password={} dbname=a9s_apps_default_db",
        machinery::Dump(record["ports"][0]), machinery::GetString(record, {"admin_password"})));
    ASSERT_EQ(admin.One("create table public.blocker (id int)"), "");
    ASSERT_EQ(Conn(uri).One("delete from big where id > 5"), "");
  }
  ASSERT_TRUE(Create(kRestore, "midbackup",
                     "apiVersion: backups.anynines.com/v1beta3\nkind: Restore\nmetadata: {name: "
                     "r2}\nspec:\n  backupName: b\n  serviceInstance: {apiGroup: "
                     "postgresql.anynines.com, kind: PostgreSQL, name: db}\n")
                  .ok());
  std::string failed;
  EXPECT_TRUE(Eventually(
      [&] {
        failed = ReadyMessage(kRestore, "midbackup", "r2", "RestoreFailed");
        return !failed.empty();
      },
      60s))
      << machinery::Dump(Get(kRestore, "midbackup", "r2")) << OperatorLogs();
  EXPECT_NE(failed.find("its data is as before"), std::string::npos) << failed;
  EXPECT_NE(failed.find("blocker"), std::string::npos) << failed;
  EXPECT_EQ(Conn(uri).One("select count(*) from big"), "5");
  EXPECT_TRUE(client::ResourceClient(cluster_->admin(), kRestore, "midbackup").Delete("r2").ok());
}

// A Postgresql waits for its bindings before it goes; deleted together while its server cannot
// start, the binding's login goes with the server instead of waiting for it forever.
TEST_F(OperatorTest, ABindingAndItsBrokenPostgresqlDeletedTogetherBothGo) {
  ASSERT_NO_FATAL_FAILURE(CreateDatabase("broken", "db", 1));
  ASSERT_TRUE(Eventually([&] { return Running("broken", "db", 1); }, 120s));
  ASSERT_FALSE(WaitUri("broken", "db").empty());
  const Json record = Record(machinery::Uid(Get(kPg, "broken", "db")));
  const fs::path instance = state_ / "i" / machinery::Dump(record["number"]);
  {
    // A configuration the server refuses, then the server killed: every restart fails.
    std::ofstream conf(instance / "n0" / "data" / "postgresql.conf", std::ios::app);
    conf << "\nthis is not a setting\n";
  }
  const pid_t pid = NodePid("broken", "db", 0);
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGKILL);
  ASSERT_TRUE(Eventually([&] { return !Running("broken", "db", 1); }, 60s));
  for (const auto& gvr : {kSb, kPg}) {
    ASSERT_TRUE(client::ResourceClient(cluster_->admin(), gvr, "broken").Delete("db").ok());
  }
  EXPECT_TRUE(Eventually(
      [&] { return Get(kSb, "broken", "db").is_null() && Get(kPg, "broken", "db").is_null(); },
      60s))
      << machinery::Dump(Get(kSb, "broken", "db")) << OperatorLogs();
  EXPECT_FALSE(fs::exists(instance));
}

// A record the restarted operator cannot read: the Postgresql says so, and no second, empty
// instance is made beside the servers that hold its data; repaired, it is adopted.
TEST_F(OperatorTest, AnUnreadableRecordIsReportedNotReplaced) {
  ASSERT_NO_FATAL_FAILURE(CreateDatabase("unreadable", "db", 1));
  ASSERT_TRUE(Eventually([&] { return Running("unreadable", "db", 1); }, 120s));
  const std::string uri = WaitUri("unreadable", "db");
  ASSERT_EQ(Conn(uri).One("create table kept as select 1 as x"), "");
  const Json record = Record(machinery::Uid(Get(kPg, "unreadable", "db")));
  const fs::path file = state_ / "i" / machinery::Dump(record["number"]) / "instance.json";
  const std::string good = testing::ReadFileOrEmpty(file);
  KillOperator();
  Json bad = record;
  bad["ports"][0] = "not a port";
  ASSERT_TRUE(core::WriteFileAtomic(file, machinery::Dump(bad)).ok());
  const size_t instances = std::distance(fs::directory_iterator(state_ / "i"), {});
  StartOperator();
  std::string message;
  EXPECT_TRUE(Eventually(
      [&] {
        message = ReadyMessage(kPg, "unreadable", "db", "RecordUnreadable");
        return !message.empty();
      },
      60s))
      << OperatorLogs();
  EXPECT_NE(message.find(file.string() + ": ports[0]: \"not a port\" is not a TCP port"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("repair the file and restart the operator"), std::string::npos);
  EXPECT_EQ(std::distance(fs::directory_iterator(state_ / "i"), {}), instances);

  KillOperator();
  ASSERT_TRUE(core::WriteFileAtomic(file, good).ok());
  StartOperator();
  EXPECT_TRUE(Eventually(
      [&] { return Running("unreadable", "db", 1) && Conn(uri).One("select x from kept") == "1"; },
      60s))
      << OperatorLogs();
}

// What cannot run is refused on the object, naming the field, and nothing is kept; a change a
// running cluster cannot take leaves it running as it was.
TEST_F(OperatorTest, BadSpecsAreExplainedAndChangeNothing) {
  CreateNamespace("bad");
  auto ready_message = [&](const std::string& name) {
    Json pg = Get(kPg, "bad", name);
    const Json* conditions = machinery::Find(pg, {"status", "conditions"});
    if (conditions == nullptr || !conditions->is_array()) return std::string();
    for (const Json& c : *conditions) {
      if (c["type"] == "Ready" && c["status"] == "False") {
        return machinery::GetString(c, {"reason"}) + ": " + machinery::GetString(c, {"message"});
      }
    }
    return std::string();
  };
  ASSERT_TRUE(Create(kPg, "bad",
                     "apiVersion: postgresql.anynines.com/v1beta3\nkind: Postgresql\nmetadata: "
                     "{name: two}\nspec: {version: 15, replicas: 2}\n")
                  .ok());
  // A cipher list OpenSSL cannot use: PostgreSQL refuses to start with it.
  ASSERT_TRUE(Create(kPg, "bad",
                     "apiVersion: postgresql.anynines.com/v1beta3\nkind: Postgresql\nmetadata: "
                     "{name: ciphers}\nspec: {version: 15, parameters: {sslCiphers: "
                     "'NO-SUCH-CIPHER'}}\n")
                  .ok());
  std::string two, ciphers;
  EXPECT_TRUE(Eventually(
      [&] {
        two = ready_message("two");
        ciphers = ready_message("ciphers");
        return !two.empty() && ciphers.starts_with("ProvisionFailed");
      },
      60s))
      << two << "\n"
      << ciphers << OperatorLogs();
  EXPECT_NE(two.find("InvalidSpec: Postgresql bad/two cannot run: spec.replicas: 2 is not "
                     "offered: use 1 (one server) or 3"),
            std::string::npos)
      << two;
  EXPECT_NE(ciphers.find("nothing was kept"), std::string::npos) << ciphers;
  EXPECT_TRUE(Record(machinery::Uid(Get(kPg, "bad", "two"))).is_null());
  EXPECT_TRUE(Record(machinery::Uid(Get(kPg, "bad", "ciphers"))).is_null());
  EXPECT_EQ(machinery::GetString(Get(kPg, "bad", "two"), {"status", "clusterStatus"}),
            "NotRunning");

  // A running single server asked to shrink its volume: refused, still running.
  ASSERT_TRUE(Create(kPg, "bad",
                     "apiVersion: postgresql.anynines.com/v1beta3\nkind: Postgresql\nmetadata: "
                     "{name: one}\nspec: {version: 15, volumeSize: 2Gi}\n")
                  .ok());
  ASSERT_TRUE(Eventually([&] { return Running("bad", "one", 1); }, 120s));
  ASSERT_TRUE(client::ResourceClient(cluster_->admin(), kPg, "bad")
                  .Patch("one", client::PatchType::kMerge, R"({"spec":{"volumeSize":"1Gi"}})")
                  .ok());
  std::string one;
  EXPECT_TRUE(Eventually(
      [&] {
        one = ready_message("one");
        return one.starts_with("ChangeRefused");
      },
      60s))
      << one;
  EXPECT_NE(one.find("spec.volumeSize: cannot shrink"), std::string::npos) << one;
  EXPECT_EQ(machinery::GetString(Get(kPg, "bad", "one"), {"status", "clusterStatus"}), "Running");

  // Grown to three servers with a setting PostgreSQL refuses: rolled back to the one server
  // as it ran, and nothing of the standbys is kept.
  ASSERT_TRUE(client::ResourceClient(cluster_->admin(), kPg, "bad")
                  .Patch("one", client::PatchType::kMerge,
                         R"({"spec":{"volumeSize":"2Gi","replicas":3,)"
                         R"("parameters":{"sslCiphers":"NO-SUCH-CIPHER"}}})")
                  .ok());
  EXPECT_TRUE(Eventually(
      [&] {
        one = ready_message("one");
        return one.starts_with("ChangeFailed");
      },
      120s))
      << one << OperatorLogs();
  EXPECT_NE(one.find("the previous settings are back"), std::string::npos) << one;
  const Json record = Record(machinery::Uid(Get(kPg, "bad", "one")));
  EXPECT_EQ(record["ports"].size(), 1u);
  const fs::path instance = state_ / "i" / machinery::Dump(record["number"]);
  EXPECT_TRUE(fs::exists(instance / "n0"));
  EXPECT_FALSE(fs::exists(instance / "n1"));
  EXPECT_FALSE(fs::exists(instance / "n2"));
  EXPECT_TRUE(Eventually([&] { return Running("bad", "one", 1); }, 60s));
}

}  // namespace
}  // namespace klutch::a8s::a8s_operator_test
