// The broker over HTTP with real instances: PostgreSQL 15, Redis 7, MariaDB 10.11, Prometheus
// 2.42 and RabbitMQ 3.10 from Debian, psql, redis-cli, mariadb, curl and amqp-tools as the
// clients. Runs as root on
// CI, so instances run as the `postgres` account.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "broker/broker.h"
#include "core/file.h"
#include "core/process.h"
#include "core/random.h"
#include "core/strings.h"
#include "http/client.h"
#include "http/server.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/served_broker.h"
#include "test/support/wait.h"

namespace klutch::broker {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kPgService[] = "klutch-a9s-postgresql15";
constexpr char kKvService[] = "klutch-a9s-keyvalue8";
constexpr char kMariadbService[] = "klutch-a9s-mariadb106";
constexpr char kPrometheusService[] = "klutch-a9s-prometheus";
constexpr char kMessagingService[] = "klutch-a9s-messaging4";

class BrokerHarness {
 public:
  explicit BrokerHarness(fs::path dir, bool stop_on_shutdown = true,
                         const std::function<void(BrokerOptions&)>& tweak = {})
      : dir_(dir), served_(Options(std::move(dir), stop_on_shutdown, tweak), 8) {}

  http::ClientResponse Call(std::string_view base, std::string_view method, std::string_view target,
                            std::string body = {}, bool auth = true, bool version = true) {
    std::optional<BasicCredentials> credentials;
    if (auth) credentials = broker().Credentials(base);
    return served_.Request(std::string(method), fmt::format("/{}{}", base, target), credentials,
                           version ? "2.14" : "", std::move(body));
  }

  static Json Body(const http::ClientResponse& r) {
    auto j = machinery::ParseJson(r.body);
    return j.ok() ? *j : Json();
  }

  // Provisions and waits for the operation; returns the final last_operation state.
  std::string Provision(std::string_view base, const std::string& id, const std::string& service,
                        const std::string& plan, Json parameters = Json::object()) {
    Json body = {{"service_id", service},
                 {"plan_id", plan},
                 {"organization_guid", "org"},
                 {"space_guid", "space"},
                 {"parameters", parameters}};
    auto r = Call(base, "PUT", "/v2/service_instances/" + id + "?accepts_incomplete=true",
                  machinery::Dump(body));
    EXPECT_EQ(r.status, 202) << r.body;
    return WaitOperation(base, id, machinery::GetString(Body(r), {"operation"}));
  }

  std::string WaitOperation(std::string_view base, const std::string& id, const std::string& op) {
    std::string state;
    testing::Eventually(
        [&] {
          auto r =
              Call(base, "GET", "/v2/service_instances/" + id + "/last_operation?operation=" + op);
          if (r.status == 410) {
            state = "gone";
            return true;
          }
          state = machinery::GetString(Body(r), {"state"});
          if (state == "failed") ADD_FAILURE() << r.body;
          return state != "in progress";
        },
        seconds(180));
    if (state == "in progress") {
      // Tell why: the server logs of every node.
      for (auto it = fs::recursive_directory_iterator(dir_); it != fs::end(it); ++it) {
        if (it->path().extension() == ".log") {
          auto text = core::ReadFile(it->path());
          ADD_FAILURE() << it->path() << ":\n"
                        << (text.ok() ? text->substr(text->size() > 3000 ? text->size() - 3000 : 0)
                                      : "");
        }
      }
    }
    return state;
  }

  Json Bind(std::string_view base, const std::string& id, const std::string& binding,
            const std::string& service, const std::string& plan) {
    auto r = Call(
        base, "PUT",
        "/v2/service_instances/" + id + "/service_bindings/" + binding + "?accepts_incomplete=true",
        machinery::Dump(Json{{"service_id", service}, {"plan_id", plan}}));
    EXPECT_EQ(r.status, 201) << r.body;
    return Body(r)["credentials"];
  }

  std::string BackupStatus(std::string_view type, const std::string& id, int64_t backup) {
    auto r = Call(std::string(type) + "-backup-manager", "GET",
                  fmt::format("/instances/{}/backups/{}", id, backup), {}, true, false);
    return machinery::GetString(Body(r), {"status"});
  }
  std::string RestoreStatus(std::string_view type, const std::string& id, int64_t restore) {
    auto r = Call(std::string(type) + "-backup-manager", "GET",
                  fmt::format("/instances/{}/restores/{}", id, restore), {}, true, false);
    return machinery::GetString(Body(r), {"status"});
  }

  Broker& broker() { return served_.broker(); }

 private:
  static BrokerOptions Options(fs::path dir, bool stop_on_shutdown,
                               const std::function<void(BrokerOptions&)>& tweak) {
    BrokerOptions options;
    options.state_dir = std::move(dir);
    options.quota_interval = milliseconds(500);
    options.stop_instances_on_shutdown = stop_on_shutdown;
    if (tweak) tweak(options);
    return options;
  }

  fs::path dir_;
  ServedBroker served_;
};

core::ProcessResult Psql(const std::string& uri, const std::string& sql) {
  auto r =
      core::RunProcess({.argv = {"psql", uri, "-v", "ON_ERROR_STOP=1", "-tAc", sql}}, seconds(30));
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : core::ProcessResult{};
}

std::string PsqlOk(const std::string& uri, const std::string& sql) {
  auto r = Psql(uri, sql);
  EXPECT_EQ(r.exit_code, 0) << sql << ": " << r.output;
  return std::string(core::Trim(r.output));
}

std::vector<pid_t> ProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    auto pid = core::ParseInt64(e.path().filename().string());
    if (!pid) continue;
    std::string cmd = core::Join(core::ProcessCommandLine(static_cast<pid_t>(*pid)), " ");
    if (cmd.find(needle) != std::string::npos) out.push_back(static_cast<pid_t>(*pid));
  }
  return out;
}

TEST(BrokerInstancesTest, PostgresqlLifecycle) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir);
    const std::string id = core::NewUuid() + "-1764000000";
    ASSERT_EQ(h.Provision("postgresql", id, kPgService, "klutch-postgresql-single-nano",
                          {{"statement_timeout", 3000},
                           {"max_connections", 40},
                           {"log_error_verbosity", "VERBOSE"}}),
              "succeeded");
    auto doc =
        BrokerHarness::Body(h.Call("postgresql", "GET", "/instances/" + id, {}, true, false));
    EXPECT_EQ(doc["state"], "provisioned");
    EXPECT_EQ(doc["guid_at_tenant"], id);
    EXPECT_EQ(doc["plan_guid"], "klutch-postgresql-single-nano");
    auto osb = BrokerHarness::Body(h.Call("postgresql", "GET", "/v2/service_instances/" + id));
    EXPECT_EQ(osb["parameters"]["statement_timeout"], 3000);

    Json c1 = h.Bind("postgresql", id, "binding-1", kPgService, "klutch-postgresql-single-nano");
    std::set<std::string> keys;
    for (const auto& [k, v] : c1.items()) keys.insert(k);
    EXPECT_EQ(keys, (std::set<std::string>{"host", "hosts", "name", "password", "port", "uri",
                                           "username"}));
    std::string uri1 = c1["uri"].get<std::string>();
    EXPECT_EQ(PsqlOk(uri1, "SHOW statement_timeout"), "3s");
    EXPECT_EQ(PsqlOk(uri1, "SHOW max_connections"), "40");
    EXPECT_EQ(PsqlOk(uri1, "SHOW shared_buffers"), "32MB");
    PsqlOk(uri1,
           "CREATE TABLE items (id int primary key, name text); "
           "INSERT INTO items VALUES (1,'a'),(2,'b'),(3,'c')");
    // The admin password never leaves the broker: no credentials are a superuser.
    EXPECT_EQ(PsqlOk(uri1, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"), "f");

    Json c2 = h.Bind("postgresql", id, "binding-2", kPgService, "klutch-postgresql-single-nano");
    std::string uri2 = c2["uri"].get<std::string>();
    EXPECT_EQ(PsqlOk(uri2, "SELECT count(*) FROM items"), "3");
    // The same bind again answers 200 with the same credentials.
    auto again = h.Call(
        "postgresql", "PUT",
        "/v2/service_instances/" + id + "/service_bindings/binding-2?accepts_incomplete=true",
        machinery::Dump(
            Json{{"service_id", kPgService}, {"plan_id", "klutch-postgresql-single-nano"}}));
    EXPECT_EQ(again.status, 200);
    EXPECT_EQ(BrokerHarness::Body(again)["credentials"], c2);

    // Unbind binding-1: its password stops working, its table stays for binding-2.
    auto unbind = h.Call("postgresql", "DELETE",
                         "/v2/service_instances/" + id +
                             "/service_bindings/binding-1?service_id=" + kPgService +
                             "&plan_id=klutch-postgresql-single-nano&accepts_incomplete=true");
    EXPECT_EQ(unbind.status, 200) << unbind.body;
    EXPECT_NE(Psql(uri1, "SELECT 1").exit_code, 0);
    EXPECT_EQ(PsqlOk(uri2, "SELECT string_agg(name, ',' ORDER BY id) FROM items"), "a,b,c");
    EXPECT_EQ(PsqlOk(uri2, "SELECT tableowner FROM pg_tables WHERE tablename = 'items'"),
              c2["name"].get<std::string>() + "_owner");
    PsqlOk(uri2, "INSERT INTO items VALUES (4,'d')");

    // Backup, delete rows, restore: the rows are back.
    auto backup = h.Call("postgresql-backup-manager", "POST", "/instances/" + id + "/backups", {},
                         true, false);
    ASSERT_EQ(backup.status, 201) << backup.body;
    int64_t backup_id = BrokerHarness::Body(backup)["id"].template get<int64_t>();
    ASSERT_TRUE(
        testing::Eventually([&] { return h.BackupStatus("postgresql", id, backup_id) == "done"; }));
    auto backups = BrokerHarness::Body(h.Call("postgresql-backup-manager", "GET",
                                              "/instances/" + id + "/backups", {}, true, false));
    ASSERT_EQ(backups.size(), 1u);
    EXPECT_GT(backups[0]["size"].template get<int64_t>(), 0);
    PsqlOk(uri2, "DELETE FROM items WHERE id > 1");
    EXPECT_EQ(PsqlOk(uri2, "SELECT count(*) FROM items"), "1");
    auto restore =
        h.Call("postgresql-backup-manager", "POST",
               fmt::format("/instances/{}/backups/{}/restore", id, backup_id), {}, true, false);
    ASSERT_EQ(restore.status, 202) << restore.body;
    int64_t restore_id = BrokerHarness::Body(restore)["id"].template get<int64_t>();
    ASSERT_TRUE(testing::Eventually([&] {
      std::string s = h.RestoreStatus("postgresql", id, restore_id);
      EXPECT_NE(s, "failed");
      return s == "done";
    }));
    EXPECT_EQ(PsqlOk(uri2, "SELECT count(*) FROM items"), "4");

    // Plan upgrade to a replica plan: two streaming standbys, data kept.
    auto update =
        h.Call("postgresql", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
               machinery::Dump(Json{{"service_id", kPgService},
                                    {"plan_id", "klutch-postgresql-replica-small"},
                                    {"parameters", {{"statement_timeout", nullptr}}}}));
    ASSERT_EQ(update.status, 202) << update.body;
    EXPECT_EQ(h.WaitOperation("postgresql", id,
                              machinery::GetString(BrokerHarness::Body(update), {"operation"})),
              "succeeded");
    EXPECT_EQ(PsqlOk(uri2, "SELECT count(*) FROM items"), "4");
    EXPECT_EQ(PsqlOk(uri2, "SHOW shared_buffers"), "128MB");
    EXPECT_EQ(PsqlOk(uri2, "SHOW statement_timeout"), "0");
    ASSERT_TRUE(testing::Eventually([&] {
      return PsqlOk(uri2, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") ==
             "2";
    }));
    // A smaller plan is refused and changes nothing.
    auto down =
        h.Call("postgresql", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
               machinery::Dump(Json{{"service_id", kPgService},
                                    {"plan_id", "klutch-postgresql-single-small"}}));
    EXPECT_EQ(down.status, 400);
    EXPECT_NE(down.body.find("going from a replicated to a single"), std::string::npos)
        << down.body;

    // Deprovision: processes and data gone.
    auto number =
        BrokerHarness::Body(h.Call("postgresql", "GET", "/instances/" + id, {}, true, false))["id"]
            .template get<int64_t>();
    fs::path instance_dir = dir / "i" / std::to_string(number);
    ASSERT_TRUE(fs::exists(instance_dir));
    EXPECT_EQ(ProcessesMentioning(instance_dir.string()).size(), 3u);
    auto del = h.Call("postgresql", "DELETE",
                      "/v2/service_instances/" + id + "?service_id=" + kPgService +
                          "&plan_id=x&accepts_incomplete=true");
    ASSERT_EQ(del.status, 202) << del.body;
    EXPECT_EQ(h.WaitOperation("postgresql", id,
                              machinery::GetString(BrokerHarness::Body(del), {"operation"})),
              "gone");
    EXPECT_FALSE(fs::exists(instance_dir));
    EXPECT_FALSE(fs::exists(dir / "backups" / std::to_string(number)));
    EXPECT_TRUE(ProcessesMentioning(instance_dir.string()).empty());
    EXPECT_EQ(h.Call("postgresql", "GET", "/instances/" + id, {}, true, false).status, 404);
    EXPECT_NE(Psql(uri2, "SELECT 1").exit_code, 0);
  }
  fs::remove_all(dir);
}

TEST(BrokerInstancesTest, BadInputIsRefusedAndChangesNothing) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir);
    // Provision bodies as the platform sends them, with the required organization and space.
    auto with_guids = [](Json body) {
      body["organization_guid"] = "org";
      body["space_guid"] = "space";
      return body;
    };
    std::string body = machinery::Dump(
        with_guids({{"service_id", kPgService}, {"plan_id", "klutch-postgresql-single-nano"}}));
    auto path = "/v2/service_instances/i-1?accepts_incomplete=true";
    EXPECT_EQ(h.Call("postgresql", "PUT", path, body, false).status, 401);
    auto wrong = h.Call("postgresql", "GET", "/v2/catalog", {}, false);
    EXPECT_EQ(wrong.status, 401);
    auto nover = h.Call("postgresql", "PUT", path, body, true, false);
    EXPECT_EQ(nover.status, 412);
    EXPECT_EQ(BrokerHarness::Body(nover)["error"], "PreconditionFailed");
    auto malformed = h.Call("postgresql", "PUT", path, "{\"service_id\":");
    EXPECT_EQ(malformed.status, 400);
    EXPECT_EQ(BrokerHarness::Body(malformed)["error"], "BadRequest");
    auto unknown =
        h.Call("postgresql", "PUT", path,
               machinery::Dump(with_guids({{"service_id", "a9s-postgresql13"}, {"plan_id", "x"}})));
    EXPECT_EQ(unknown.status, 400);
    EXPECT_NE(
        BrokerHarness::Body(unknown)["description"].get<std::string>().find("a9s-postgresql15"),
        std::string::npos);
    auto wrong_type = h.Call("keyvalue", "PUT", path, body);
    EXPECT_EQ(wrong_type.status, 400);
    auto badplan =
        h.Call("postgresql", "PUT", path,
               machinery::Dump(with_guids({{"service_id", kPgService}, {"plan_id", "nope"}})));
    EXPECT_EQ(badplan.status, 400);
    EXPECT_NE(badplan.body.find("postgresql-single-nano"), std::string::npos);
    auto badparam = h.Call("postgresql", "PUT", path,
                           machinery::Dump(with_guids({{"service_id", kPgService},
                                                       {"plan_id", "klutch-postgresql-single-nano"},
                                                       {"parameters", {{"archive_timeout", 5}}}})));
    EXPECT_EQ(badparam.status, 400);
    EXPECT_NE(badparam.body.find("archive_timeout"), std::string::npos);
    auto sync = h.Call("postgresql", "PUT", "/v2/service_instances/i-1", body);
    EXPECT_EQ(sync.status, 422);
    EXPECT_EQ(BrokerHarness::Body(sync)["error"], "AsyncRequired");
    auto bind_missing =
        h.Call("postgresql", "PUT", "/v2/service_instances/nope/service_bindings/b", body);
    EXPECT_EQ(bind_missing.status, 404);
    auto gone = h.Call("postgresql", "DELETE",
                       "/v2/service_instances/nope?service_id=s&plan_id=p&accepts_incomplete=true");
    EXPECT_EQ(gone.status, 410);
    // None of that created anything.
    auto list = BrokerHarness::Body(h.Call("postgresql", "GET", "/instances", {}, true, false));
    EXPECT_EQ(list["total_results"], 0);
    EXPECT_TRUE(fs::is_empty(dir / "i"));

    // The same ID with other attributes: 409, and the first instance is unchanged.
    ASSERT_EQ(h.Provision("postgresql", "i-2", kPgService, "klutch-postgresql-single-nano"),
              "succeeded");
    auto conflict =
        h.Call("postgresql", "PUT", "/v2/service_instances/i-2?accepts_incomplete=true",
               machinery::Dump(with_guids(
                   {{"service_id", kPgService}, {"plan_id", "klutch-postgresql-single-small"}})));
    EXPECT_EQ(conflict.status, 409);
    auto same = h.Call("postgresql", "PUT", "/v2/service_instances/i-2?accepts_incomplete=true",
                       machinery::Dump(Json{{"service_id", kPgService},
                                            {"plan_id", "klutch-postgresql-single-nano"},
                                            {"organization_guid", "org"},
                                            {"space_guid", "space"},
                                            {"parameters", Json::object()}}));
    EXPECT_EQ(same.status, 200) << same.body;
    auto doc = BrokerHarness::Body(h.Call("postgresql", "GET", "/instances/i-2", {}, true, false));
    EXPECT_EQ(doc["plan_guid"], "klutch-postgresql-single-nano");
    // Instances of one type are invisible through another type's base path.
    EXPECT_EQ(h.Call("keyvalue", "GET", "/instances/i-2", {}, true, false).status, 404);
    // Backup manager: restore of a missing backup, non-numeric IDs.
    EXPECT_EQ(h.Call("postgresql-backup-manager", "POST", "/instances/i-2/backups/9/restore", {},
                     true, false)
                  .status,
              404);
    EXPECT_EQ(
        h.Call("postgresql-backup-manager", "GET", "/instances/i-2/backups/x", {}, true, false)
            .status,
        400);
    EXPECT_EQ(h.Call("postgresql-backup-manager", "GET", "/v2/healthy", {}, false, false).status,
              401);
    EXPECT_EQ(h.Call("postgresql-backup-manager", "GET", "/v2/healthy", {}, true, false).status,
              200);
    EXPECT_EQ(h.Call("postgresql", "GET", "/osb_ext/v1/healthy", {}, true, false).status, 200);
  }
  fs::remove_all(dir);
}

TEST(BrokerInstancesTest, PostgresqlTlsAndDiskQuota) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir, true, [](BrokerOptions& o) { o.max_disk_per_instance = 40 << 20; });
    const std::string id = "pg-tls-" + core::RandomSuffix(6);
    const std::string plan = "klutch-postgresql-single-nano-ssl";
    ASSERT_EQ(h.Provision("postgresql", id, kPgService, plan), "succeeded");
    Json c = h.Bind("postgresql", id, "b", kPgService, plan);
    ASSERT_TRUE(c.contains("cacrt"));
    fs::path ca = dir / "pg-ca.crt";
    ASSERT_TRUE(core::WriteFileAtomic(ca, c["cacrt"].get<std::string>()).ok());
    std::string base =
        fmt::format("host={} port={} dbname={} user={} password={}", c["host"].get<std::string>(),
                    c["port"].get<int>(), c["name"].get<std::string>(),
                    c["username"].get<std::string>(), c["password"].get<std::string>());
    // The server's certificate verifies against the broker CA for the address in the
    // credentials; a connection without TLS is refused.
    std::string verified = base + " sslmode=verify-full sslrootcert=" + ca.string();
    EXPECT_EQ(PsqlOk(verified, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"), "t");
    EXPECT_NE(Psql(base + " sslmode=disable", "SELECT 1").exit_code, 0);

    // Over the quota (40 MiB here), new sessions are read-only and the instance says why;
    // deleting data makes it writable again.
    // Written in batches: once the quota trips, the broker ends the writing session, and
    // later batches are refused as read-only.
    PsqlOk(verified, "CREATE TABLE big (g int, pad text)");
    for (int batch = 0; batch < 40; ++batch) {
      auto r = Psql(
          verified,
          "INSERT INTO big SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 20000) g");
      if (r.exit_code != 0) break;
    }
    ASSERT_TRUE(testing::Eventually(
        [&] {
          auto doc =
              BrokerHarness::Body(h.Call("postgresql", "GET", "/instances/" + id, {}, true, false));
          return doc["message"].get<std::string>().find("disk quota exceeded") != std::string::npos;
        },
        seconds(30)));
    auto refused = Psql(verified, "INSERT INTO big VALUES (0, 'x')");
    EXPECT_NE(refused.exit_code, 0);
    EXPECT_NE(refused.output.find("read-only"), std::string::npos) << refused.output;
    PsqlOk(verified + " options='-c default_transaction_read_only=off'", "TRUNCATE big");
    ASSERT_TRUE(testing::Eventually(
        [&] {
          auto doc =
              BrokerHarness::Body(h.Call("postgresql", "GET", "/instances/" + id, {}, true, false));
          return doc["message"] == "";
        },
        seconds(30)));
    EXPECT_TRUE(testing::Eventually(
        [&] { return Psql(verified, "CREATE TABLE small (x int)").exit_code == 0; }));
  }
  fs::remove_all(dir);
}

TEST(BrokerInstancesTest, KeyvalueLifecycleOverTls) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir, true, [](BrokerOptions& o) { o.max_backups = 2; });
    const std::string id = "kv-" + core::RandomSuffix(6);
    const std::string plan = "klutch-keyvalue-single-nano-ssl";
    ASSERT_EQ(h.Provision("keyvalue", id, kKvService, plan,
                          {{"maxmemory-policy", "allkeys-lru"},
                           {"snapshot", "['save 900 1','save 300 10']"}}),
              "succeeded");
    Json c = h.Bind("keyvalue", id, "b1", kKvService, plan);
    std::set<std::string> keys;
    for (const auto& [k, v] : c.items()) keys.insert(k);
    EXPECT_EQ(keys,
              (std::set<std::string>{"cacrt", "host", "hosts", "load_balanced_host", "valkey"}));
    fs::path ca = dir / "client-ca.crt";
    ASSERT_TRUE(core::WriteFileAtomic(ca, c["cacrt"].get<std::string>()).ok());
    auto cli = [&](const Json& creds, std::vector<std::string> args) {
      std::vector<std::string> argv = {"redis-cli",
                                       "--tls",
                                       "--cacert",
                                       ca.string(),
                                       "-h",
                                       creds["host"].get<std::string>(),
                                       "-p",
                                       std::to_string(creds["valkey"]["port"].get<int>()),
                                       "--user",
                                       creds["valkey"]["username"].get<std::string>(),
                                       "--pass",
                                       creds["valkey"]["password"].get<std::string>(),
                                       "--no-auth-warning"};
      argv.insert(argv.end(), args.begin(), args.end());
      auto r = core::RunProcess({.argv = argv}, seconds(20));
      return r.ok() ? std::string(core::Trim(r->output)) : r.status().message();
    };
    EXPECT_EQ(cli(c, {"SET", "greeting", "hello"}), "OK");
    EXPECT_EQ(cli(c, {"GET", "greeting"}), "hello");
    EXPECT_NE(cli(c, {"CONFIG", "GET", "maxmemory"}).find("NOPERM"), std::string::npos);

    auto backup =
        h.Call("keyvalue-backup-manager", "POST", "/instances/" + id + "/backups", {}, true, false);
    ASSERT_EQ(backup.status, 201);
    int64_t backup_id = BrokerHarness::Body(backup)["id"].template get<int64_t>();
    ASSERT_TRUE(
        testing::Eventually([&] { return h.BackupStatus("keyvalue", id, backup_id) == "done"; }));
    EXPECT_EQ(cli(c, {"DEL", "greeting"}), "1");
    auto restore =
        h.Call("keyvalue-backup-manager", "POST",
               fmt::format("/instances/{}/backups/{}/restore", id, backup_id), {}, true, false);
    ASSERT_EQ(restore.status, 202) << restore.body;
    int64_t restore_id = BrokerHarness::Body(restore)["id"].template get<int64_t>();
    ASSERT_TRUE(
        testing::Eventually([&] { return h.RestoreStatus("keyvalue", id, restore_id) == "done"; }));
    EXPECT_EQ(cli(c, {"GET", "greeting"}), "hello");

    // Retention: with at most two backups kept, a third one deletes the oldest and its file.
    std::vector<int64_t> more;
    for (int i = 0; i < 2; ++i) {
      auto r = h.Call("keyvalue-backup-manager", "POST", "/instances/" + id + "/backups", {}, true,
                      false);
      ASSERT_EQ(r.status, 201);
      more.push_back(BrokerHarness::Body(r)["id"].template get<int64_t>());
      ASSERT_TRUE(testing::Eventually(
          [&] { return h.BackupStatus("keyvalue", id, more.back()) == "done"; }));
    }
    EXPECT_EQ(h.BackupStatus("keyvalue", id, backup_id), "deleted");
    EXPECT_EQ(h.BackupStatus("keyvalue", id, more[0]), "done");
    int files = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir / "backups"))
      files += e.is_regular_file();
    EXPECT_EQ(files, 2);
    auto gone =
        h.Call("keyvalue-backup-manager", "POST",
               fmt::format("/instances/{}/backups/{}/restore", id, backup_id), {}, true, false);
    EXPECT_EQ(gone.status, 422) << gone.body;

    auto unbind =
        h.Call("keyvalue", "DELETE",
               "/v2/service_instances/" + id + "/service_bindings/b1?service_id=s&plan_id=p");
    EXPECT_EQ(unbind.status, 200);
    EXPECT_EQ(cli(c, {"GET", "greeting"}).find("hello"), std::string::npos);
    auto del = h.Call("keyvalue", "DELETE",
                      "/v2/service_instances/" + id + "?service_id=" + kKvService +
                          "&plan_id=p&accepts_incomplete=true");
    ASSERT_EQ(del.status, 202);
    EXPECT_EQ(h.WaitOperation("keyvalue", id,
                              machinery::GetString(BrokerHarness::Body(del), {"operation"})),
              "gone");
  }
  fs::remove_all(dir);
}

// redis-cli over TLS with a binding's credentials; its trimmed output.
std::string RedisCli(const fs::path& ca, const Json& creds, std::vector<std::string> args) {
  std::vector<std::string> argv = {"redis-cli",
                                   "--tls",
                                   "--cacert",
                                   ca.string(),
                                   "-h",
                                   creds["host"].get<std::string>(),
                                   "-p",
                                   std::to_string(creds["valkey"]["port"].get<int>()),
                                   "--user",
                                   creds["valkey"]["username"].get<std::string>(),
                                   "--pass",
                                   creds["valkey"]["password"].get<std::string>(),
                                   "--no-auth-warning"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = core::RunProcess({.argv = argv}, seconds(20));
  return r.ok() ? std::string(core::Trim(r->output)) : r.status().message();
}

// One field of an INFO section ("maxmemory" of INFO memory).
std::string InfoField(const std::string& info, const std::string& field) {
  for (auto line : core::Split(info, '\n')) {
    line = core::Trim(line);
    if (line.starts_with(field + ":")) return std::string(line.substr(field.size() + 1));
  }
  return "<no " + field + " in INFO>";
}

// Plan limits hold for KeyValue as max_connections does for PostgreSQL: maxmemory and
// maxclients above the plan (or `0`, no limit) run with the plan's; `dynamic`, the value the
// KeyValue XRD documents for "let a9s decide", is the plan's maxmemory.
TEST(BrokerInstancesTest, KeyvaluePlanLimitsHoldAndDynamicMaxmemoryIsThePlans) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir);
    const std::string plan = "klutch-keyvalue-single-nano-ssl";  // 64 MB, 100 clients
    const std::string unlimited = "kv-unlimited-" + core::RandomSuffix(4);
    ASSERT_EQ(h.Provision("keyvalue", unlimited, kKvService, plan,
                          {{"maxmemory", "0"}, {"maxclients", 100000}}),
              "succeeded");
    Json c = h.Bind("keyvalue", unlimited, "b", kKvService, plan);
    fs::path ca = dir / "ca.crt";
    ASSERT_TRUE(core::WriteFileAtomic(ca, c["cacrt"].get<std::string>()).ok());
    EXPECT_EQ(InfoField(RedisCli(ca, c, {"INFO", "memory"}), "maxmemory"),
              std::to_string(64 << 20));
    EXPECT_EQ(InfoField(RedisCli(ca, c, {"INFO", "clients"}), "maxclients"), "100");

    const std::string dynamic = "kv-dynamic-" + core::RandomSuffix(4);
    ASSERT_EQ(h.Provision("keyvalue", dynamic, kKvService, plan,
                          {{"maxmemory", "dynamic"}, {"maxclients", 50}}),
              "succeeded");
    Json d = h.Bind("keyvalue", dynamic, "b", kKvService, plan);
    EXPECT_EQ(InfoField(RedisCli(ca, d, {"INFO", "memory"}), "maxmemory"),
              std::to_string(64 << 20));
    EXPECT_EQ(InfoField(RedisCli(ca, d, {"INFO", "clients"}), "maxclients"), "50");
    // Below the plan, the tenant's value holds; the instance keeps what it was asked for.
    auto update = h.Call(
        "keyvalue", "PATCH", "/v2/service_instances/" + dynamic + "?accepts_incomplete=true",
        machinery::Dump(Json{{"service_id", kKvService}, {"parameters", {{"maxmemory", "10mb"}}}}));
    ASSERT_EQ(update.status, 202) << update.body;
    EXPECT_EQ(h.WaitOperation("keyvalue", dynamic,
                              machinery::GetString(BrokerHarness::Body(update), {"operation"})),
              "succeeded");
    EXPECT_EQ(InfoField(RedisCli(ca, d, {"INFO", "memory"}), "maxmemory"),
              std::to_string(10 << 20));
  }
  fs::remove_all(dir);
}

// Parameters the server refuses are refused before any config is written (400 naming the
// parameter and what is accepted). An update the server refuses anyway (here a cipher list
// whose names only Redis' OpenSSL can judge) fails quickly and puts the previous settings back:
// last_operation says failed and why, the instance stays provisioned, serves its data and
// can be deleted.
TEST(BrokerInstancesTest, AFailedUpdateRollsBackAndTheInstanceStaysUsable) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir, true, [](BrokerOptions& o) { o.recovery_hold = milliseconds(0); });
    const std::string plan = "klutch-keyvalue-single-nano-ssl";
    const std::string id = "kv-rollback-" + core::RandomSuffix(4);
    ASSERT_EQ(h.Provision("keyvalue", id, kKvService, plan, {{"maxmemory-policy", "allkeys-lru"}}),
              "succeeded");
    Json c = h.Bind("keyvalue", id, "b", kKvService, plan);
    fs::path ca = dir / "ca.crt";
    ASSERT_TRUE(core::WriteFileAtomic(ca, c["cacrt"].get<std::string>()).ok());
    EXPECT_EQ(RedisCli(ca, c, {"SET", "kept", "yes"}), "OK");
    auto path = "/v2/service_instances/" + id + "?accepts_incomplete=true";
    auto patch = [&](Json parameters) {
      return h.Call("keyvalue", "PATCH", path,
                    machinery::Dump(Json{{"service_id", kKvService}, {"parameters", parameters}}));
    };
    for (const Json& refused :
         {Json{{"maxmemory-policy", std::string("allkeys-lru\0", 12)}},
          Json{{"maxmemory-policy", "anything"}}, Json{{"maxmemory", "12 parsecs"}}}) {
      auto r = patch(refused);
      EXPECT_EQ(r.status, 400) << refused.dump() << ": " << r.body;
      std::string description = machinery::GetString(BrokerHarness::Body(r), {"description"});
      EXPECT_NE(description.find(refused.begin().key()), std::string::npos) << description;
    }
    auto bad_policy = BrokerHarness::Body(patch({{"maxmemory-policy", "anything"}}));
    EXPECT_NE(machinery::GetString(bad_policy, {"description"}).find("allkeys-lru"),
              std::string::npos);
    // Nothing was written for the refused ones.
    auto number =
        BrokerHarness::Body(h.Call("keyvalue", "GET", "/instances/" + id, {}, true, false))["id"]
            .get<int64_t>();
    auto conf = core::ReadFile(dir / "i" / std::to_string(number) / "n0" / "redis.conf");
    ASSERT_TRUE(conf.ok());
    EXPECT_EQ(conf->find("anything"), std::string::npos);
    EXPECT_EQ(conf->find('\0'), std::string::npos);

    auto update = patch({{"tls-ciphers", "NO-SUCH-CIPHER"}, {"maxmemory-policy", "noeviction"}});
    ASSERT_EQ(update.status, 202) << update.body;
    std::string op = machinery::GetString(BrokerHarness::Body(update), {"operation"});
    Json last;
    ASSERT_TRUE(testing::Eventually(
        [&] {
          last = BrokerHarness::Body(
              h.Call("keyvalue", "GET",
                     "/v2/service_instances/" + id + "/last_operation?operation=" + op));
          return last["state"] != "in progress";
        },
        seconds(120)));
    EXPECT_EQ(last["state"], "failed") << last.dump();
    std::string why = machinery::GetString(last, {"description"});
    EXPECT_NE(why.find("cipher"), std::string::npos) << why;
    EXPECT_NE(why.find("previous plan and parameters"), std::string::npos) << why;

    // The old settings run again: the instance is provisioned, with its old parameters, and
    // serves the data it had.
    EXPECT_TRUE(testing::Eventually([&] {
      return BrokerHarness::Body(h.Call("keyvalue", "GET", "/instances/" + id, {}, true,
                                        false))["state"] == "provisioned";
    }));
    auto osb = BrokerHarness::Body(h.Call("keyvalue", "GET", "/v2/service_instances/" + id));
    EXPECT_EQ(osb["parameters"], (Json{{"maxmemory-policy", "allkeys-lru"}}));
    EXPECT_EQ(RedisCli(ca, c, {"GET", "kept"}), "yes");
    EXPECT_EQ(InfoField(RedisCli(ca, c, {"INFO", "memory"}), "maxmemory_policy"), "allkeys-lru");
    // A later good update works, and DELETE works.
    auto good = patch({{"maxmemory-policy", "volatile-ttl"}});
    ASSERT_EQ(good.status, 202) << good.body;
    EXPECT_EQ(h.WaitOperation("keyvalue", id,
                              machinery::GetString(BrokerHarness::Body(good), {"operation"})),
              "succeeded");
    EXPECT_EQ(InfoField(RedisCli(ca, c, {"INFO", "memory"}), "maxmemory_policy"), "volatile-ttl");
    auto del = h.Call("keyvalue", "DELETE",
                      "/v2/service_instances/" + id + "?service_id=" + kKvService +
                          "&plan_id=" + plan + "&accepts_incomplete=true");
    ASSERT_EQ(del.status, 202) << del.body;
    EXPECT_EQ(h.WaitOperation("keyvalue", id,
                              machinery::GetString(BrokerHarness::Body(del), {"operation"})),
              "gone");
  }
  fs::remove_all(dir);
}

// A record written before parameters were checked may hold a value the server refuses: the
// instance still starts (the value is left out of the config) instead of restart-looping.
TEST(BrokerInstancesTest, AStoredValueTheServerRefusesIsLeftOutAtStart) {
  fs::path dir = NewStateDir("kb");
  const std::string id = "kv-old-" + core::RandomSuffix(4);
  const std::string plan = "klutch-keyvalue-single-nano-ssl";
  fs::path record;
  {
    BrokerHarness h(dir);
    ASSERT_EQ(h.Provision("keyvalue", id, kKvService, plan), "succeeded");
    auto number =
        BrokerHarness::Body(h.Call("keyvalue", "GET", "/instances/" + id, {}, true, false))["id"]
            .get<int64_t>();
    record = dir / "i" / std::to_string(number) / "instance.json";
  }
  auto text = core::ReadFile(record);
  ASSERT_TRUE(text.ok());
  auto json = machinery::ParseJson(*text);
  ASSERT_TRUE(json.ok());
  (*json)["parameters"] = {{"maxmemory-policy", "whatever\nrename-command CONFIG \"\""},
                           {"maxmemory", "dynamic"}};
  ASSERT_TRUE(core::WriteFileAtomic(record, machinery::Dump(*json)).ok());
  {
    BrokerHarness h(dir, true, [](BrokerOptions& o) { o.recovery_hold = milliseconds(0); });
    EXPECT_TRUE(testing::Eventually([&] {
      return BrokerHarness::Body(h.Call("keyvalue", "GET", "/instances/" + id, {}, true,
                                        false))["state"] == "provisioned";
    }));
    Json c = h.Bind("keyvalue", id, "b", kKvService, plan);
    fs::path ca = dir / "ca.crt";
    ASSERT_TRUE(core::WriteFileAtomic(ca, c["cacrt"].get<std::string>()).ok());
    EXPECT_EQ(RedisCli(ca, c, {"PING"}), "PONG");
    EXPECT_EQ(InfoField(RedisCli(ca, c, {"INFO", "memory"}), "maxmemory"),
              std::to_string(64 << 20));
    EXPECT_EQ(InfoField(RedisCli(ca, c, {"INFO", "memory"}), "maxmemory_policy"), "noeviction");
  }
  fs::remove_all(dir);
}

// Standbys refuse to run with fewer connections or WAL senders than their primary: lowering
// them restarts the primary first, raising them the standbys first.
TEST(BrokerInstancesTest, PostgresqlReplicaLimitsGoDownAndUp) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir);
    const std::string id = "pg-replica-" + core::RandomSuffix(4);
    const std::string plan = "klutch-postgresql-replica-small";
    ASSERT_EQ(h.Provision("postgresql", id, kPgService, plan,
                          {{"max_connections", 90}, {"max_wal_senders", 12}}),
              "succeeded");
    std::string uri = h.Bind("postgresql", id, "b", kPgService, plan)["uri"].get<std::string>();
    for (const Json& step : {Json{{"max_connections", 40}, {"max_wal_senders", 6}},
                             Json{{"max_connections", 95}, {"max_wal_senders", 14}}}) {
      auto update =
          h.Call("postgresql", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
                 machinery::Dump(Json{{"service_id", kPgService}, {"parameters", step}}));
      ASSERT_EQ(update.status, 202) << update.body;
      EXPECT_EQ(h.WaitOperation("postgresql", id,
                                machinery::GetString(BrokerHarness::Body(update), {"operation"})),
                "succeeded")
          << step.dump();
      EXPECT_EQ(PsqlOk(uri, "SHOW max_connections"),
                std::to_string(step["max_connections"].get<int>()));
      EXPECT_TRUE(testing::Eventually([&] {
        return PsqlOk(uri, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") ==
               "2";
      }));
    }
  }
  fs::remove_all(dir);
}

TEST(BrokerInstancesTest, CrashedServerIsRestartedAndARestartedBrokerAdoptsItsInstances) {
  fs::path dir = NewStateDir("kb");
  const std::string id = "pg-" + core::RandomSuffix(6);
  std::string uri;
  pid_t postmaster = 0;
  {
    BrokerHarness h(dir, /*stop_on_shutdown=*/false);
    ASSERT_EQ(h.Provision("postgresql", id, kPgService, "klutch-postgresql-single-nano"),
              "succeeded");
    uri = h.Bind("postgresql", id, "b", kPgService, "klutch-postgresql-single-nano")["uri"]
              .get<std::string>();
    PsqlOk(uri, "CREATE TABLE t (x int); INSERT INTO t VALUES (42)");
    auto pids = ProcessesMentioning((dir / "i").string());
    ASSERT_FALSE(pids.empty());
    postmaster = *std::min_element(pids.begin(), pids.end());
    ASSERT_EQ(::kill(postmaster, SIGKILL), 0);
    bool saw_failed = false;
    ASSERT_TRUE(testing::Eventually(
        [&] {
          auto doc =
              BrokerHarness::Body(h.Call("postgresql", "GET", "/instances/" + id, {}, true, false));
          if (doc["state"] == "failed") saw_failed = true;
          return saw_failed && doc["state"] == "provisioned";
        },
        seconds(60)));
    EXPECT_EQ(PsqlOk(uri, "SELECT x FROM t"), "42");
    auto now = ProcessesMentioning((dir / "i").string());
    postmaster = *std::min_element(now.begin(), now.end());
  }
  // The broker is gone, the instance still runs; a new broker adopts it.
  EXPECT_EQ(PsqlOk(uri, "SELECT x FROM t"), "42");
  {
    BrokerHarness h(dir);
    ASSERT_TRUE(testing::Eventually([&] {
      auto doc =
          BrokerHarness::Body(h.Call("postgresql", "GET", "/instances/" + id, {}, true, false));
      return doc["state"] == "provisioned";
    }));
    EXPECT_TRUE(core::ProcessExists(postmaster));
    EXPECT_EQ(PsqlOk(uri, "SELECT x FROM t"), "42");
    Json c2 = h.Bind("postgresql", id, "b2", kPgService, "klutch-postgresql-single-nano");
    EXPECT_EQ(PsqlOk(c2["uri"].get<std::string>(), "SELECT x FROM t"), "42");
  }
  // That broker stopped its instances on shutdown.
  EXPECT_TRUE(
      testing::Eventually([&] { return ProcessesMentioning((dir / "i").string()).empty(); }));
  fs::remove_all(dir);
}

// The `mariadb` client as a binding uses it: over TCP, TLS verified against the binding's CA
// unless `tls` is false; the password through the environment. Exit code and trimmed output.
std::pair<int, std::string> Mariadb(const fs::path& ca, const Json& creds, int port,
                                    const std::string& sql, bool tls = true) {
  std::vector<std::string> argv = {"mariadb",    "--no-defaults",
                                   "--batch",    "--skip-column-names",
                                   "--host",     creds["host"].get<std::string>(),
                                   "--port",     std::to_string(port),
                                   "--user",     creds["username"].get<std::string>(),
                                   "--database", creds["name"].get<std::string>(),
                                   "--execute",  sql};
  if (tls) {
    argv.insert(argv.end(), {"--ssl", "--ssl-ca", ca.string(), "--ssl-verify-server-cert"});
  } else {
    argv.push_back("--skip-ssl");
  }
  auto r = core::RunProcess(
      {.argv = argv, .env = {"MYSQL_PWD=" + creds["password"].get<std::string>()}}, seconds(30));
  if (!r.ok()) return {-1, r.status().message()};
  return {r->exit_code, std::string(core::Trim(r->output))};
}

TEST(BrokerInstancesTest, MariadbLifecycleOverTls) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir);
    const std::string id = "mdb-" + core::RandomSuffix(6);
    const std::string plan = "klutch-mariadb-single-nano-ssl";
    ASSERT_EQ(h.Provision("mariadb", id, kMariadbService, plan,
                          {{"binlog_expire_days", 1},
                           {"databases", {"db1", "db2"}},
                           {"grant_performance_schema_permissions", true}}),
              "succeeded");
    // The service's name asks for 10.6; what runs says so.
    auto doc = BrokerHarness::Body(h.Call("mariadb", "GET", "/instances/" + id, {}, true, false));
    EXPECT_NE(machinery::GetString(doc, {"served_by"}).find("MariaDB 10.11"), std::string::npos)
        << doc;

    Json c = h.Bind("mariadb", id, "b1", kMariadbService, plan);
    std::set<std::string> keys;
    for (const auto& [k, v] : c.items()) keys.insert(k);
    EXPECT_EQ(keys, (std::set<std::string>{"cacrt", "host", "hosts", "name", "password", "port",
                                           "uri", "username"}));
    fs::path ca = dir / "client-ca.crt";
    ASSERT_TRUE(core::WriteFileAtomic(ca, c["cacrt"].get<std::string>()).ok());
    const int port = c["port"].get<int>();
    auto sql = [&](const std::string& q) {
      auto [code, out] = Mariadb(ca, c, port, q);
      EXPECT_EQ(code, 0) << q << ": " << out;
      return out;
    };
    sql("CREATE TABLE items (id int primary key, name text); "
        "INSERT INTO items VALUES (1,'a'),(2,'b'),(3,'c')");
    sql("CREATE TABLE db1.notes (id int primary key); INSERT INTO db1.notes VALUES (7)");
    EXPECT_EQ(sql("SELECT CAST(@@expire_logs_days AS UNSIGNED)"), "1");
    EXPECT_EQ(sql("SELECT @@innodb_buffer_pool_size"), std::to_string(32 << 20));
    // performance_schema itself is off (MariaDB's default); the grant is there for when it is on.
    EXPECT_NE(sql("SHOW GRANTS").find("GRANT SELECT ON `performance_schema`.*"), std::string::npos);
    // TLS is required; a binding has no global privileges and no other database.
    EXPECT_NE(Mariadb(ca, c, port, "SELECT 1", false).first, 0);
    EXPECT_NE(Mariadb(ca, c, port, "SELECT count(*) FROM mysql.user").first, 0);
    EXPECT_NE(Mariadb(ca, c, port, "CREATE DATABASE other").first, 0);

    // Backup, change, restore: what the backup holds is back, what came after is gone.
    auto backup =
        h.Call("mariadb-backup-manager", "POST", "/instances/" + id + "/backups", {}, true, false);
    ASSERT_EQ(backup.status, 201) << backup.body;
    int64_t backup_id = BrokerHarness::Body(backup)["id"].template get<int64_t>();
    std::string backup_status;
    ASSERT_TRUE(testing::Eventually([&] {
      backup_status = h.BackupStatus("mariadb", id, backup_id);
      return backup_status == "done" || backup_status == "failed";
    }));
    ASSERT_EQ(backup_status, "done")
        << h.Call("mariadb-backup-manager", "GET",
                  fmt::format("/instances/{}/backups/{}", id, backup_id), {}, true, false)
               .body;
    sql("DELETE FROM items WHERE id > 1; CREATE TABLE later (x int); DELETE FROM db1.notes");
    auto restore =
        h.Call("mariadb-backup-manager", "POST",
               fmt::format("/instances/{}/backups/{}/restore", id, backup_id), {}, true, false);
    ASSERT_EQ(restore.status, 202) << restore.body;
    int64_t restore_id = BrokerHarness::Body(restore)["id"].template get<int64_t>();
    ASSERT_TRUE(testing::Eventually([&] {
      std::string s = h.RestoreStatus("mariadb", id, restore_id);
      EXPECT_NE(s, "failed");
      return s == "done";
    }));
    EXPECT_EQ(sql("SELECT group_concat(name ORDER BY id) FROM items"), "a,b,c");
    EXPECT_EQ(sql("SELECT count(*) FROM db1.notes"), "1");
    EXPECT_EQ(sql("SELECT count(*) FROM information_schema.tables WHERE table_name = 'later'"),
              "0");

    // To a cluster plan: two replicas with the data and the binding, following the primary.
    auto update =
        h.Call("mariadb", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
               machinery::Dump(Json{{"service_id", kMariadbService},
                                    {"plan_id", "klutch-mariadb-cluster-small-ssl"},
                                    {"parameters", {{"binlog_expire_days", nullptr}}}}));
    ASSERT_EQ(update.status, 202) << update.body;
    EXPECT_EQ(h.WaitOperation("mariadb", id,
                              machinery::GetString(BrokerHarness::Body(update), {"operation"})),
              "succeeded");
    // Without the parameter binary logs are kept a week.
    EXPECT_EQ(sql("SELECT CAST(@@expire_logs_days AS UNSIGNED)"), "7");
    EXPECT_EQ(sql("SELECT @@innodb_buffer_pool_size"), std::to_string(128 << 20));
    sql("INSERT INTO items VALUES (4,'d')");
    doc = BrokerHarness::Body(h.Call("mariadb", "GET", "/instances/" + id, {}, true, false));
    ASSERT_EQ(doc["vm_details"].size(), 3u) << doc;
    for (int node = 1; node < 3; ++node) {
      const int replica = doc["vm_details"][node]["port"].get<int>();
      ASSERT_TRUE(testing::Eventually([&] {
        return Mariadb(ca, c, replica, "SELECT count(*) FROM items").second == "4";
      })) << "replica "
          << node;
      EXPECT_NE(Mariadb(ca, c, replica, "INSERT INTO items VALUES (5,'e')").first, 0);
    }
    // Back to a single server is refused and changes nothing.
    auto down =
        h.Call("mariadb", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
               machinery::Dump(Json{{"service_id", kMariadbService},
                                    {"plan_id", "klutch-mariadb-single-small-ssl"}}));
    EXPECT_EQ(down.status, 400) << down.body;

    // Unbind: the account is gone on every node.
    auto unbind =
        h.Call("mariadb", "DELETE",
               "/v2/service_instances/" + id + "/service_bindings/b1?service_id=s&plan_id=p");
    EXPECT_EQ(unbind.status, 200) << unbind.body;
    EXPECT_NE(Mariadb(ca, c, port, "SELECT 1").first, 0);
    EXPECT_NE(Mariadb(ca, c, doc["vm_details"][1]["port"].get<int>(), "SELECT 1").first, 0);

    // Deprovision: no process, no file.
    fs::path instance_dir = dir / "i" / std::to_string(doc["id"].get<int64_t>());
    EXPECT_EQ(ProcessesMentioning(instance_dir.string()).size(), 3u);
    auto del = h.Call("mariadb", "DELETE",
                      "/v2/service_instances/" + id + "?service_id=" + kMariadbService +
                          "&plan_id=p&accepts_incomplete=true");
    ASSERT_EQ(del.status, 202);
    EXPECT_EQ(h.WaitOperation("mariadb", id,
                              machinery::GetString(BrokerHarness::Body(del), {"operation"})),
              "gone");
    EXPECT_FALSE(fs::exists(instance_dir));
    EXPECT_TRUE(ProcessesMentioning(instance_dir.string()).empty());
  }
  fs::remove_all(dir);
}

TEST(BrokerInstancesTest, MariadbRefusesWhatTheServerWouldAndChangesNothing) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir);
    auto provision = [&](const std::string& id, const std::string& plan, Json parameters) {
      return h.Call("mariadb", "PUT", "/v2/service_instances/" + id + "?accepts_incomplete=true",
                    machinery::Dump(Json{{"service_id", kMariadbService},
                                         {"plan_id", plan},
                                         {"organization_guid", "org"},
                                         {"space_guid", "space"},
                                         {"parameters", parameters}}));
    };
    for (const auto& [parameters, field] : std::vector<std::pair<Json, std::string>>{
             {{{"binlog_expire_days", 100}}, "binlog_expire_days"},
             {{{"binlog_expire_days", "7\ninit-file=/etc/passwd"}}, "binlog_expire_days"},
             {{{"databases", {"db1", "x`; DROP DATABASE mysql; --"}}}, "databases"},
             {{{"databases", {"MySQL"}}}, "databases"},
             {{{"grant_performance_schema_permissions", "yes please"}},
              "grant_performance_schema_permissions"},
             {{{"innodb_buffer_pool_size", "64G"}}, "innodb_buffer_pool_size"}}) {
      auto r = provision("bad", "klutch-mariadb-single-nano", parameters);
      EXPECT_EQ(r.status, 400) << parameters;
      EXPECT_NE(r.body.find(field), std::string::npos) << r.body;
    }
    EXPECT_FALSE(fs::exists(dir / "i" / "1"));
    // a9s-mariadb1011 has TLS plans only, as upstream's XRD says.
    auto r = h.Call("mariadb", "GET", "/v2/catalog");
    for (const Json& s : BrokerHarness::Body(r)["services"]) {
      if (s["name"] != "a9s-mariadb1011") continue;
      for (const Json& p : s["plans"]) {
        EXPECT_TRUE(p["name"].get<std::string>().ends_with("-ssl")) << p["name"];
      }
    }
    // An update the server would refuse leaves the running instance as it was.
    const std::string id = "mdb-" + core::RandomSuffix(6);
    ASSERT_EQ(h.Provision("mariadb", id, kMariadbService, "klutch-mariadb-single-nano",
                          {{"binlog_expire_days", 3}}),
              "succeeded");
    auto bad =
        h.Call("mariadb", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
               machinery::Dump(Json{{"service_id", kMariadbService},
                                    {"parameters", {{"binlog_expire_days", 0}}}}));
    EXPECT_EQ(bad.status, 400) << bad.body;
    Json c = h.Bind("mariadb", id, "b1", kMariadbService, "klutch-mariadb-single-nano");
    auto [code, out] =
        Mariadb({}, c, c["port"].get<int>(), "SELECT CAST(@@expire_logs_days AS UNSIGNED)", false);
    EXPECT_EQ(code, 0) << out;
    EXPECT_EQ(out, "3");

    // `_` is a wildcard in GRANT: a database named mysq_ gives its own database, not `mysql`.
    const std::string wild = "mdb-" + core::RandomSuffix(6);
    ASSERT_EQ(h.Provision("mariadb", wild, kMariadbService, "klutch-mariadb-single-nano",
                          {{"databases", {"mysq_"}}}),
              "succeeded");
    Json w = h.Bind("mariadb", wild, "b1", kMariadbService, "klutch-mariadb-single-nano");
    const int wport = w["port"].get<int>();
    EXPECT_EQ(Mariadb({}, w, wport, "CREATE TABLE mysq_.t (x int); SELECT 1", false).second, "1");
    EXPECT_NE(Mariadb({}, w, wport, "SELECT count(*) FROM mysql.user", false).first, 0);
    EXPECT_NE(Mariadb({}, w, wport, "CREATE TABLE mysql.t (x int)", false).first, 0);
    // A declared database a binding dropped is made again for the next backup.
    EXPECT_EQ(Mariadb({}, w, wport, "DROP DATABASE mysq_; SELECT 1", false).second, "1");
    auto backup = h.Call("mariadb-backup-manager", "POST", "/instances/" + wild + "/backups", {},
                         true, false);
    ASSERT_EQ(backup.status, 201) << backup.body;
    int64_t backup_id = BrokerHarness::Body(backup)["id"].template get<int64_t>();
    std::string status;
    ASSERT_TRUE(testing::Eventually([&] {
      status = h.BackupStatus("mariadb", wild, backup_id);
      return status == "done" || status == "failed";
    }));
    EXPECT_EQ(status, "done") << h.Call("mariadb-backup-manager", "GET",
                                        fmt::format("/instances/{}/backups/{}", wild, backup_id),
                                        {}, true, false)
                                     .body;
  }
  fs::remove_all(dir);
}

// curl as a binding uses a Prometheus or Alertmanager URL: basic auth; status and body.
std::pair<int, std::string> Curl(const std::string& url, const Json& creds,
                                 const std::string& method = "GET") {
  auto r = core::RunProcess({.argv = {"curl", "-s", "-X", method, "-o", "/dev/stdout", "-w",
                                      "\n%{http_code}", "--config", "-", url}},
                            seconds(30),
                            fmt::format("user = \"{}:{}\"\n", creds["username"].get<std::string>(),
                                        creds["password"].get<std::string>()));
  if (!r.ok()) return {-1, r.status().message()};
  std::string out(core::Trim(r->output));
  size_t nl = out.rfind('\n');
  int code = core::ParseInt64(out.substr(nl == std::string::npos ? 0 : nl + 1)).value_or(-1);
  return {code, nl == std::string::npos ? "" : out.substr(0, nl)};
}

TEST(BrokerInstancesTest, PrometheusLifecycle) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir);
    const std::string id = "prom-" + core::RandomSuffix(6);
    const std::string plan = "klutch-prometheus-single-small";
    // Upstream's parameters example, as the provider sends it.
    ASSERT_EQ(h.Provision("prometheus", id, kPrometheusService, plan,
                          {{"mapping_strict_match", false},
                           {"scrape_configs",
                            {{{"job_name", "example_metrics"},
                              {"scrape_interval", "60s"},
                              {"scrape_timeout", "30s"},
                              {"static_configs", {{{"targets", {"127.0.0.1:9"}}}}}}}}}),
              "succeeded");
    Json c = h.Bind("prometheus", id, "b1", kPrometheusService, plan);
    std::set<std::string> keys;
    for (const auto& [k, v] : c.items()) keys.insert(k);
    EXPECT_EQ(keys, (std::set<std::string>{"alertmanager_urls", "grafana_urls",
                                           "graphite_exporter_port", "graphite_exporters",
                                           "password", "prometheus_urls", "username"}));
    EXPECT_EQ(c["grafana_urls"], Json::array());
    EXPECT_EQ(c["graphite_exporters"], Json::array());
    const std::string prom = c["prometheus_urls"][0].get<std::string>();
    const std::string am = c["alertmanager_urls"][0].get<std::string>();
    // Basic auth on both; the binding's account works at once.
    EXPECT_EQ(Curl(prom + "/-/ready", Json{{"username", "x"}, {"password", "y"}}).first, 401);
    EXPECT_EQ(Curl(prom + "/-/ready", c).first, 200);
    EXPECT_EQ(Curl(am + "/api/v2/status", c).first, 200);
    std::string targets;
    EXPECT_TRUE(testing::Eventually(
        [&] {
          targets = Curl(prom + "/api/v1/targets", c).second;
          return targets.find("example_metrics") != std::string::npos;
        },
        seconds(60)))
        << targets;
    ASSERT_TRUE(testing::Eventually(
        [&] {
          return Curl(prom + "/api/v1/query?query=up%7Bjob%3D%22prometheus%22%7D", c)
                     .second.find("\"value\"") != std::string::npos;
        },
        seconds(60)));

    // Backup (a TSDB snapshot); the series deleted (a binding may: the admin API serves the
    // snapshots); a restore brings them back.
    const std::string series = prom + "/api/v1/query?query=up%7Bjob%3D%22prometheus%22%7D%5B1h%5D";
    auto backup = h.Call("prometheus-backup-manager", "POST", "/instances/" + id + "/backups", {},
                         true, false);
    ASSERT_EQ(backup.status, 201) << backup.body;
    int64_t backup_id = BrokerHarness::Body(backup)["id"].template get<int64_t>();
    ASSERT_TRUE(
        testing::Eventually([&] { return h.BackupStatus("prometheus", id, backup_id) == "done"; }));
    EXPECT_EQ(Curl(prom + "/api/v1/admin/tsdb/delete_series?match%5B%5D=up", c, "POST").first, 204);
    EXPECT_EQ(Curl(series, c).second.find("\"values\""), std::string::npos);
    auto restore =
        h.Call("prometheus-backup-manager", "POST",
               fmt::format("/instances/{}/backups/{}/restore", id, backup_id), {}, true, false);
    ASSERT_EQ(restore.status, 202) << restore.body;
    int64_t restore_id = BrokerHarness::Body(restore)["id"].template get<int64_t>();
    ASSERT_TRUE(testing::Eventually([&] {
      std::string s = h.RestoreStatus("prometheus", id, restore_id);
      EXPECT_NE(s, "failed");
      return s == "done";
    }));
    EXPECT_EQ(Curl(prom + "/-/ready", c).first, 200);
    EXPECT_NE(Curl(series, c).second.find("\"values\""), std::string::npos);

    // A plan change is refused with upstream's words; a scrape config Prometheus refuses and
    // one naming a file of the machine are refused, naming the field; nothing changes.
    auto down =
        h.Call("prometheus", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
               machinery::Dump(Json{{"service_id", kPrometheusService},
                                    {"plan_id", "klutch-prometheus-single-big"}}));
    EXPECT_EQ(down.status, 400);
    EXPECT_NE(down.body.find("Upgrade functionality for Prometheus plans is not supported"),
              std::string::npos)
        << down.body;
    for (const auto& [bad, field] : std::vector<std::pair<Json, std::string>>{
             {{{{"job_name", "x"}, {"scrape_interval", "10s"}, {"scrape_timeout", "20s"}}},
              "scrape timeout greater than scrape interval"},
             {{{{"job_name", "x"}, {"basic_auth", {{"password_file", "/etc/shadow"}}}}},
              "scrape_configs[0].basic_auth.password_file"},
             {{{{"job_name", "prometheus"}}}, "scrape_configs[0].job_name"},
             {{{{"job_name", "k"}, {"kubernetes_sd_configs", {{{"role", "pod"}}}}}},
              "scrape_configs[0].kubernetes_sd_configs"}}) {
      auto r =
          h.Call("prometheus", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
                 machinery::Dump(Json{{"service_id", kPrometheusService},
                                      {"parameters", {{"scrape_configs", bad}}}}));
      EXPECT_EQ(r.status, 400) << bad;
      EXPECT_NE(r.body.find(field), std::string::npos) << r.body;
    }
    EXPECT_NE(Curl(prom + "/api/v1/status/config", c).second.find("example_metrics"),
              std::string::npos);
    // Without the lifecycle API a binding cannot stop the server.
    EXPECT_NE(Curl(prom + "/-/quit", c, "POST").first, 200);
    // A new scrape config is a reload (SIGHUP) of the running server.
    auto update = h.Call(
        "prometheus", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
        machinery::Dump(Json{{"service_id", kPrometheusService},
                             {"parameters",
                              {{"scrape_configs",
                                {{{"job_name", "second"},
                                  {"static_configs", {{{"targets", {"127.0.0.1:9"}}}}}}}}}}}));
    ASSERT_EQ(update.status, 202) << update.body;
    EXPECT_EQ(h.WaitOperation("prometheus", id,
                              machinery::GetString(BrokerHarness::Body(update), {"operation"})),
              "succeeded");
    std::string config = Curl(prom + "/api/v1/status/config", c).second;
    EXPECT_NE(config.find("second"), std::string::npos) << config;
    EXPECT_EQ(config.find("example_metrics"), std::string::npos) << config;

    // Unbind: the account stops at once; deprovision leaves no process and no file.
    auto unbind =
        h.Call("prometheus", "DELETE",
               "/v2/service_instances/" + id + "/service_bindings/b1?service_id=s&plan_id=p");
    EXPECT_EQ(unbind.status, 200) << unbind.body;
    EXPECT_EQ(Curl(prom + "/-/ready", c).first, 401);
    EXPECT_EQ(Curl(am + "/-/ready", c).first, 401);
    auto doc =
        BrokerHarness::Body(h.Call("prometheus", "GET", "/instances/" + id, {}, true, false));
    fs::path instance_dir = dir / "i" / std::to_string(doc["id"].get<int64_t>());
    EXPECT_EQ(ProcessesMentioning(instance_dir.string()).size(), 2u);
    auto del = h.Call("prometheus", "DELETE",
                      "/v2/service_instances/" + id + "?service_id=" + kPrometheusService +
                          "&plan_id=p&accepts_incomplete=true");
    ASSERT_EQ(del.status, 202);
    EXPECT_EQ(h.WaitOperation("prometheus", id,
                              machinery::GetString(BrokerHarness::Body(del), {"operation"})),
              "gone");
    EXPECT_FALSE(fs::exists(instance_dir));
    EXPECT_TRUE(ProcessesMentioning(instance_dir.string()).empty());
  }
  fs::remove_all(dir);
}

// Prometheus and the Alertmanager write no PID file: a restarted broker finds them by their
// command lines and adopts them rather than starting a second pair on the same ports.
TEST(BrokerInstancesTest, PrometheusIsAdoptedByARestartedBroker) {
  fs::path dir = NewStateDir("kb");
  const std::string id = "prom-" + core::RandomSuffix(6);
  std::vector<pid_t> before;
  Json c;
  {
    BrokerHarness h(dir, /*stop_on_shutdown=*/false);
    ASSERT_EQ(h.Provision("prometheus", id, kPrometheusService, "klutch-prometheus-single-small"),
              "succeeded");
    c = h.Bind("prometheus", id, "b", kPrometheusService, "klutch-prometheus-single-small");
    before = ProcessesMentioning((dir / "i").string());
    ASSERT_EQ(before.size(), 2u);
  }
  {
    BrokerHarness h(dir);
    ASSERT_TRUE(testing::Eventually([&] {
      auto doc =
          BrokerHarness::Body(h.Call("prometheus", "GET", "/instances/" + id, {}, true, false));
      return doc["state"] == "provisioned";
    }));
    auto after = ProcessesMentioning((dir / "i").string());
    std::sort(before.begin(), before.end());
    std::sort(after.begin(), after.end());
    EXPECT_EQ(after, before);
    EXPECT_EQ(Curl(c["prometheus_urls"][0].get<std::string>() + "/-/ready", c).first, 200);
  }
  EXPECT_TRUE(
      testing::Eventually([&] { return ProcessesMentioning((dir / "i").string()).empty(); }));
  fs::remove_all(dir);
}

// amqp-tools (Debian's AMQP 0-9-1 command line client) with a binding's credentials over TLS;
// exit code and trimmed output.
std::pair<int, std::string> Amqp(const fs::path& ca, const Json& creds, const std::string& tool,
                                 std::vector<std::string> args) {
  // librabbitmq checks the server's name against the certificate's DNS names only, not its IP
  // addresses: it connects to localhost, which the certificate also names.
  std::string uri = creds["protocols"]["amqp_ssl"]["uri"].get<std::string>();
  if (auto at = uri.find("@127.0.0.1:"); at != std::string::npos) {
    uri.replace(at + 1, 9, "localhost");
  }
  std::vector<std::string> argv = {tool, "--url", uri, "--ssl", "--cacert", ca.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = core::RunProcess({.argv = argv}, seconds(30));
  if (!r.ok()) return {-1, r.status().message()};
  return {r->exit_code, std::string(core::Trim(r->output))};
}

// Whether something listens on `port` and only on loopback (/proc/net/tcp and tcp6).
bool ListensOnLoopbackOnly(int port) {
  const std::string suffix = fmt::format(":{:04X}", port);
  bool loopback = false, elsewhere = false;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    auto text = core::ReadFile(table);
    if (!text.ok()) continue;
    for (auto line : core::Split(*text, '\n')) {
      auto fields = core::SplitNonEmpty(line, ' ');
      // fields: sl local_address rem_address st ...; st 0A is LISTEN
      if (fields.size() < 4 || fields[3] != "0A" || !fields[1].ends_with(suffix)) continue;
      if (fields[1].starts_with("0100007F:") ||
          fields[1].starts_with("00000000000000000000000001000000:")) {  // 127.0.0.1, ::1
        loopback = true;
      } else {
        elsewhere = true;
      }
    }
  }
  return loopback && !elsewhere;
}

TEST(BrokerInstancesTest, MessagingLifecycleOverTls) {
  fs::path dir = NewStateDir("kb");
  {
    BrokerHarness h(dir);
    const std::string id = "mq-" + core::RandomSuffix(6);
    const std::string plan = "klutch-messaging-single-nano-ssl";
    // Upstream's parameters example, as the provider sends it.
    ASSERT_EQ(
        h.Provision("messaging", id, kMessagingService, plan,
                    {{"consumer_timeout", 1800001},
                     {"tls-protocols", {"tlsv1.2", "tlsv1.3"}},
                     {"tls-ciphers", {"TLS_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"}}}),
        "succeeded");
    auto doc = BrokerHarness::Body(h.Call("messaging", "GET", "/instances/" + id, {}, true, false));
    EXPECT_NE(machinery::GetString(doc, {"served_by"}).find("RabbitMQ 3.10"), std::string::npos)
        << doc;
    Json c = h.Bind("messaging", id, "b1", kMessagingService, plan);
    std::set<std::string> keys;
    for (const auto& [k, v] : c.items()) keys.insert(k);
    EXPECT_EQ(keys, (std::set<std::string>{"http_api_uri", "http_api_uris", "protocols"}));
    keys.clear();
    for (const auto& [k, v] : c["protocols"]["amqp_ssl"].items()) keys.insert(k);
    EXPECT_EQ(keys, (std::set<std::string>{"host", "hosts", "password", "port", "ssl", "uri",
                                           "username"}));
    keys.clear();
    for (const auto& [k, v] : c["protocols"]["management"].items()) keys.insert(k);
    EXPECT_EQ(keys, (std::set<std::string>{"cacrt", "host", "hosts", "password", "path", "port",
                                           "ssl", "uri", "uris", "username"}));
    fs::path ca = dir / "client-ca.crt";
    ASSERT_TRUE(
        core::WriteFileAtomic(ca, c["protocols"]["management"]["cacrt"].get<std::string>()).ok());
    auto amqp = [&](const std::string& tool, std::vector<std::string> args) {
      auto [code, out] = Amqp(ca, c, tool, std::move(args));
      EXPECT_EQ(code, 0) << tool << ": " << out;
      return out;
    };
    amqp("amqp-declare-queue", {"--queue", "orders", "--durable"});
    amqp("amqp-publish", {"--routing-key", "orders", "--persistent", "--body", "first"});
    EXPECT_EQ(amqp("amqp-get", {"--queue", "orders"}), "first");
    // The management API with the binding's own URI.
    auto api = core::RunProcess({.argv = {"curl", "-sf", "--cacert", ca.string(),
                                          c["http_api_uri"].get<std::string>() + "queues"}},
                                seconds(30));
    ASSERT_TRUE(api.ok());
    EXPECT_NE(api->output.find("\"orders\""), std::string::npos) << api->output;

    // Backup (the definitions), the queue deleted, restore: the queue is back; a binding
    // unbound after the backup stays unbound.
    Json gone = h.Bind("messaging", id, "b2", kMessagingService, plan);
    auto backup = h.Call("messaging-backup-manager", "POST", "/instances/" + id + "/backups", {},
                         true, false);
    ASSERT_EQ(backup.status, 201) << backup.body;
    int64_t backup_id = BrokerHarness::Body(backup)["id"].template get<int64_t>();
    ASSERT_TRUE(
        testing::Eventually([&] { return h.BackupStatus("messaging", id, backup_id) == "done"; }));
    amqp("amqp-delete-queue", {"--queue", "orders"});
    ASSERT_EQ(h.Call("messaging", "DELETE",
                     "/v2/service_instances/" + id + "/service_bindings/b2?service_id=s&plan_id=p")
                  .status,
              200);
    EXPECT_NE(Amqp(ca, c, "amqp-get", {"--queue", "orders"}).first, 0);
    auto restore =
        h.Call("messaging-backup-manager", "POST",
               fmt::format("/instances/{}/backups/{}/restore", id, backup_id), {}, true, false);
    ASSERT_EQ(restore.status, 202) << restore.body;
    int64_t restore_id = BrokerHarness::Body(restore)["id"].template get<int64_t>();
    ASSERT_TRUE(testing::Eventually([&] {
      std::string s = h.RestoreStatus("messaging", id, restore_id);
      EXPECT_NE(s, "failed");
      return s == "done";
    }));
    amqp("amqp-publish", {"--routing-key", "orders", "--body", "second"});
    EXPECT_EQ(amqp("amqp-get", {"--queue", "orders"}), "second");
    EXPECT_NE(Amqp(ca, gone, "amqp-declare-queue", {"--queue", "x"}).first, 0)
        << "a restore brought an unbound binding back";
    // Every port of the instance is on loopback only, Erlang distribution's too.
    for (const Json& node : doc["vm_details"]) {
      EXPECT_TRUE(ListensOnLoopbackOnly(node["port"].get<int>())) << node;
    }

    // A parameter RabbitMQ would refuse is refused before anything changes; a good one is a
    // restart with the new configuration, the queue kept.
    auto bad =
        h.Call("messaging", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
               machinery::Dump(Json{{"service_id", kMessagingService},
                                    {"parameters", {{"consumer_timeout", 1000}}}}));
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.body.find("consumer_timeout"), std::string::npos) << bad.body;
    auto update =
        h.Call("messaging", "PATCH", "/v2/service_instances/" + id + "?accepts_incomplete=true",
               machinery::Dump(Json{{"service_id", kMessagingService},
                                    {"parameters", {{"consumer_timeout", 3600000}}}}));
    ASSERT_EQ(update.status, 202) << update.body;
    EXPECT_EQ(h.WaitOperation("messaging", id,
                              machinery::GetString(BrokerHarness::Body(update), {"operation"})),
              "succeeded");
    amqp("amqp-publish", {"--routing-key", "orders", "--body", "third"});
    EXPECT_EQ(amqp("amqp-get", {"--queue", "orders"}), "third");

    // Unbind: the user and its vhost go; deprovision leaves no process and no file.
    auto unbind =
        h.Call("messaging", "DELETE",
               "/v2/service_instances/" + id + "/service_bindings/b1?service_id=s&plan_id=p");
    EXPECT_EQ(unbind.status, 200) << unbind.body;
    EXPECT_NE(Amqp(ca, c, "amqp-get", {"--queue", "orders"}).first, 0);
    fs::path instance_dir = dir / "i" / std::to_string(doc["id"].get<int64_t>());
    EXPECT_GE(ProcessesMentioning(instance_dir.string()).size(), 1u);
    auto del = h.Call("messaging", "DELETE",
                      "/v2/service_instances/" + id + "?service_id=" + kMessagingService +
                          "&plan_id=p&accepts_incomplete=true");
    ASSERT_EQ(del.status, 202);
    EXPECT_EQ(h.WaitOperation("messaging", id,
                              machinery::GetString(BrokerHarness::Body(del), {"operation"})),
              "gone");
    EXPECT_FALSE(fs::exists(instance_dir));
    EXPECT_TRUE(ProcessesMentioning(instance_dir.string()).empty());
    const std::string epmd =
        fmt::format("-port {} -address", doc["vm_details"][2]["port"].get<int>());
    EXPECT_TRUE(ProcessesMentioning(epmd).empty()) << "the instance's epmd is left";
  }
  fs::remove_all(dir);
}

// A broker killed with Messaging instances running: the next one adopts the RabbitMQ node and
// its epmd by their command lines (neither is started twice), and the binding works on.
TEST(BrokerInstancesTest, MessagingIsAdoptedByARestartedBroker) {
  fs::path dir = NewStateDir("kb");
  const std::string id = "mq-" + core::RandomSuffix(6);
  const std::string plan = "klutch-messaging-single-nano-ssl";
  std::vector<pid_t> before;
  Json c;
  {
    BrokerHarness h(dir, /*stop_on_shutdown=*/false);
    ASSERT_EQ(h.Provision("messaging", id, kMessagingService, plan), "succeeded");
    c = h.Bind("messaging", id, "b", kMessagingService, plan);
    before = ProcessesMentioning((dir / "i").string());
    ASSERT_GE(before.size(), 1u);
  }
  fs::path ca = dir / "client-ca.crt";
  ASSERT_TRUE(
      core::WriteFileAtomic(ca, c["protocols"]["management"]["cacrt"].get<std::string>()).ok());
  {
    BrokerHarness h(dir);
    ASSERT_TRUE(testing::Eventually([&] {
      auto doc =
          BrokerHarness::Body(h.Call("messaging", "GET", "/instances/" + id, {}, true, false));
      return doc["state"] == "provisioned";
    }));
    auto after = ProcessesMentioning((dir / "i").string());
    std::sort(before.begin(), before.end());
    std::sort(after.begin(), after.end());
    EXPECT_EQ(after, before);
    EXPECT_EQ(Amqp(ca, c, "amqp-declare-queue", {"--queue", "kept"}).first, 0);
  }
  EXPECT_TRUE(
      testing::Eventually([&] { return ProcessesMentioning((dir / "i").string()).empty(); }));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace klutch::broker
