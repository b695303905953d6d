// The API server as a process: restarts keep every object and continue resourceVersions,
// watches resume across a restart, and a kill -9 during a stream of writes loses none of
// the writes that were acknowledged.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/kube_client.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

using machinery::Json;

std::string ConfigMap(const std::string& name, const std::string& value) {
  return Json{{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", {{"name", name}}},
              {"data", {{"v", value}}}}
      .dump();
}

int64_t Rv(const Json& obj) { return std::stoll(machinery::ResourceVersion(obj)); }

class Durability : public ::testing::Test {
 protected:
  std::unique_ptr<ApiServerProcess> Start() {
    std::string error;
    auto s = ApiServerProcess::Start(dir_.path() / "data", {}, &error);
    EXPECT_TRUE(s) << error;
    return s;
  }
  ServerCredentials Creds() {
    auto c = ReadKubeconfig(dir_.path() / "data/admin.kubeconfig");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return *c;
  }
  TempDir dir_{"klutch-durability"};
};

TEST_F(Durability, RestartKeepsObjectsAndContinuesResourceVersions) {
  int64_t last_rv = 0;
  {
    auto server = Start();
    ASSERT_TRUE(server);
    auto client = NewClient(Creds());
    for (int i = 0; i < 20; ++i) {
      auto r = Call(*client, "POST", "/api/v1/namespaces/default/configmaps",
                    ConfigMap("cm-" + std::to_string(i), "x"));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->status, 201) << r->body;
      last_rv = Rv(Json::parse(r->body));
    }
    ASSERT_TRUE(server->process().Signal(SIGTERM, std::chrono::seconds(10)));
  }
  auto server = Start();
  ASSERT_TRUE(server);
  auto client = NewClient(Creds());
  auto list = Call(*client, "GET", "/api/v1/namespaces/default/configmaps?labelSelector=");
  ASSERT_TRUE(list.ok());
  Json items = Json::parse(list->body)["items"];
  std::set<std::string> names;
  for (const auto& i : items) names.insert(machinery::Name(i));
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(names.count("cm-" + std::to_string(i))) << i;
  auto created =
      Call(*client, "POST", "/api/v1/namespaces/default/configmaps", ConfigMap("after", "y"));
  ASSERT_TRUE(created.ok());
  ASSERT_EQ(created->status, 201);
  EXPECT_GT(Rv(Json::parse(created->body)), last_rv);
}

TEST_F(Durability, WatchResumesFromAResourceVersionSeenBeforeTheRestart) {
  int64_t seen = 0;
  {
    auto server = Start();
    ASSERT_TRUE(server);
    auto client = NewClient(Creds());
    // The namespace-defaults controller writes default/kube-root-ca.crt on its own schedule
    // after the server is ready: once it is there, the only ConfigMap writes in `default`
    // are the test's, before and after the restart (the controller leaves an existing one
    // alone).
    ASSERT_TRUE(Eventually([&] {
      auto got = Call(*client, "GET", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt");
      return got.ok() && got->status == 200;
    }));
    auto r = Call(*client, "POST", "/api/v1/namespaces/default/configmaps", ConfigMap("a", "1"));
    ASSERT_TRUE(r.ok() && r->status == 201);
    seen = Rv(Json::parse(r->body));
    r = Call(*client, "POST", "/api/v1/namespaces/default/configmaps", ConfigMap("b", "1"));
    ASSERT_TRUE(r.ok() && r->status == 201);
    ASSERT_TRUE(server->process().Signal(SIGKILL, std::chrono::seconds(10)));
  }
  auto server = Start();
  ASSERT_TRUE(server);
  auto client = NewClient(Creds());
  auto r = Call(*client, "POST", "/api/v1/namespaces/default/configmaps", ConfigMap("c", "1"));
  ASSERT_TRUE(r.ok() && r->status == 201);
  std::string body;
  auto watch =
      Call(*client, "GET",
           "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1&resourceVersion=" +
               std::to_string(seen));
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  std::vector<std::string> events;
  for (auto line : core::SplitNonEmpty(watch->body, '\n')) {
    Json ev = Json::parse(line);
    events.push_back(ev["type"].get<std::string>() + " " + machinery::Name(ev["object"]));
  }
  // b (before the crash) and c (after the restart), nothing synthetic.
  EXPECT_EQ(events, (std::vector<std::string>{"ADDED b", "ADDED c"}));
}

TEST_F(Durability, KillNineLosesNoAcknowledgedWrite) {
  auto server = Start();
  ASSERT_TRUE(server);
  const ServerCredentials creds = Creds();
  std::mutex mu;
  std::set<std::string> acknowledged;
  std::atomic<bool> stop{false};
  std::atomic<int> attempts{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      auto client = NewClient(creds);
      for (int i = 0; !stop; ++i) {
        std::string name = "w" + std::to_string(t) + "-" + std::to_string(i);
        ++attempts;
        auto r =
            Call(*client, "POST", "/api/v1/namespaces/default/configmaps", ConfigMap(name, "v"));
        if (!r.ok()) break;  // the server is gone
        if (r->status == 201) {
          std::lock_guard<std::mutex> lock(mu);
          acknowledged.insert(name);
        }
      }
    });
  }
  // Let a stream of writes build up, then kill the server in the middle of it.
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (acknowledged.size() >= 300) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(server->process().Signal(SIGKILL, std::chrono::seconds(10)));
  stop = true;
  for (auto& w : writers) w.join();
  server.reset();

  auto restarted = Start();
  ASSERT_TRUE(restarted);
  auto client = NewClient(Creds());
  auto list = Call(*client, "GET", "/api/v1/namespaces/default/configmaps");
  ASSERT_TRUE(list.ok());
  std::set<std::string> stored;
  const Json parsed = Json::parse(list->body);
  for (const auto& i : parsed["items"]) stored.insert(machinery::Name(i));
  std::vector<std::string> lost;
  for (const auto& name : acknowledged) {
    if (!stored.count(name)) lost.push_back(name);
  }
  EXPECT_TRUE(lost.empty()) << lost.size() << " of " << acknowledged.size()
                            << " acknowledged writes lost, e.g. " << lost.front() << "; "
                            << stored.size() << " stored; list status " << list->status << ": "
                            << list->body.substr(0, 300);
  EXPECT_GE(acknowledged.size(), 300u);
  // Writes in flight at the kill may or may not have landed; none may appear twice or
  // out of thin air.
  EXPECT_LE(stored.size(), static_cast<size_t>(attempts.load()) + 1);
}

}  // namespace
}  // namespace klutch::testing
