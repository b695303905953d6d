// Informers against a real `klutch apiserver` process, through a TCP proxy that can break
// the network: the cache and what the handlers were told converge on the server's final
// state after a server restart, after compaction forces a 410 Gone, and after connections
// are cut mid-watch; per object, handlers never see resourceVersions go backwards.
#include "client/informer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <functional>
#include <map>
#include <thread>

#include "client/kubeconfig.h"
#include "test/support/process.h"
#include "test/support/tcp_proxy.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

using client::Json;
using client::ObjectPtr;

uint16_t PortOf(const std::string& url) {
  return static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
}

int64_t Rv(const Json& o) { return std::stoll(machinery::ResourceVersion(o)); }

// What the handlers were told, per key: the last resourceVersion (or deleted), and whether
// any object's resourceVersions ever went backwards.
class Recorder {
 public:
  client::EventHandler Handler() {
    return {.on_add = [this](const ObjectPtr& o) { Saw(*o, false); },
            .on_update = [this](const ObjectPtr&, const ObjectPtr& o) { Saw(*o, false); },
            .on_delete = [this](const ObjectPtr& o) { Saw(*o, true); }};
  }
  std::map<std::string, int64_t> Live() {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, int64_t> out;
    for (const auto& [k, v] : last_) {
      if (!v.second) out[k] = v.first;
    }
    return out;
  }
  std::vector<std::string> Regressions() {
    std::lock_guard<std::mutex> lock(mu_);
    return regressions_;
  }

 private:
  void Saw(const Json& o, bool deleted) {
    std::lock_guard<std::mutex> lock(mu_);
    std::string key = client::ObjectKey(o);
    int64_t rv = Rv(o);
    auto it = last_.find(key);
    // A re-created object has a new, larger resourceVersion too.
    if (it != last_.end() && rv < it->second.first) {
      regressions_.push_back(fmt::format("{}: {} after {}", key, rv, it->second.first));
    }
    last_[key] = {rv, deleted};
  }
  std::mutex mu_;
  std::map<std::string, std::pair<int64_t, bool>> last_;
  std::vector<std::string> regressions_;
};

class InformerTest : public ::testing::Test {
 protected:
  void StartServer(std::vector<std::string> args = {}) {
    std::string error;
    server_ = ApiServerProcess::Start(dir_.path() / "data", args, &error);
    ASSERT_TRUE(server_) << error;
    auto config = client::LoadKubeconfig({.paths = {server_->kubeconfig()}});
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
    config_.qps = 0;  // unthrottled: the tests write fast
    auto direct = client::RestClient::New(config_);
    ASSERT_TRUE(direct.ok()) << direct.status().ToString();
    direct_ = std::move(*direct);
    if (!proxy_) {
      proxy_ = std::make_unique<TcpProxy>(PortOf(server_->url()));
    } else {
      proxy_->SetUpstream(PortOf(server_->url()));
    }
  }

  void StartInformer(std::chrono::milliseconds idle = std::chrono::minutes(3)) {
    client::RestConfig via_proxy = config_;
    via_proxy.server = "https://127.0.0.1:" + std::to_string(proxy_->port());
    auto rest = client::RestClient::New(via_proxy, {.max_retries = 1});
    ASSERT_TRUE(rest.ok()) << rest.status().ToString();
    informer_rest_ = std::move(*rest);
    informer_ = std::make_unique<client::Informer>(
        *informer_rest_, client::resources::kConfigMaps,
        client::InformerOptions{.ns = "default",
                                .page_size = 7,
                                .min_backoff = std::chrono::milliseconds(50),
                                .max_backoff = std::chrono::milliseconds(500),
                                .watch_idle_timeout = idle,
                                .on_restart = [this](std::string_view what) {
                                  if (what == "relist") ++relists_;
                                }});
    informer_->AddEventHandler(recorder_.Handler());
    informer_->Start();
    ASSERT_TRUE(informer_->WaitForSync(std::chrono::seconds(30)));
  }

  client::ResourceClient ConfigMaps() {
    return client::ResourceClient(*direct_, client::resources::kConfigMaps, "default");
  }

  void Create(const std::string& name) {
    Json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", name}}},
               {"data", {{"v", "0"}}}};
    auto r = ConfigMaps().Create(cm);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  void Update(const std::string& name, const std::string& value) {
    auto r =
        ConfigMaps().Patch(name, client::PatchType::kMerge, Json{{"data", {{"v", value}}}}.dump());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  void Delete(const std::string& name) {
    auto r = ConfigMaps().Delete(name);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  std::map<std::string, int64_t> ServerState() {
    auto list = ConfigMaps().ListAll();
    std::map<std::string, int64_t> out;
    if (!list.ok()) return out;
    for (const auto& item : (*list)["items"]) {
      out["default/" + machinery::Name(item)] = Rv(item);
    }
    return out;
  }
  std::map<std::string, int64_t> CacheState() {
    std::map<std::string, int64_t> out;
    for (const auto& o : informer_->indexer().List()) out[client::ObjectKey(*o)] = Rv(*o);
    return out;
  }
  // The cache and the handlers' view both equal the server's state.
  void ExpectConverged() {
    std::map<std::string, int64_t> want;
    bool ok = Eventually([&] {
      want = ServerState();
      return !want.empty() && CacheState() == want && recorder_.Live() == want;
    });
    EXPECT_TRUE(ok) << "server has " << want.size() << " objects, cache " << CacheState().size()
                    << ", handlers " << recorder_.Live().size();
    EXPECT_TRUE(recorder_.Regressions().empty()) << recorder_.Regressions().front();
  }

  TempDir dir_{"klutch-informer"};
  std::unique_ptr<ApiServerProcess> server_;
  std::unique_ptr<TcpProxy> proxy_;
  client::RestConfig config_;
  std::unique_ptr<client::RestClient> direct_;
  std::unique_ptr<client::RestClient> informer_rest_;
  Recorder recorder_;
  std::atomic<int> relists_{0};
  std::unique_ptr<client::Informer> informer_;
};

TEST_F(InformerTest, ConvergesAfterTheServerRestartsMidWatch) {
  StartServer();
  for (int i = 0; i < 30; ++i) Create("cm-" + std::to_string(i));
  StartInformer();
  EXPECT_EQ(informer_->indexer().Size(), ServerState().size());
  for (int i = 0; i < 10; ++i) Update("cm-" + std::to_string(i), "a");

  ASSERT_TRUE(server_->process().Signal(SIGTERM, std::chrono::seconds(10)));
  StartServer();  // same data, a new port behind the same proxy address
  for (int i = 10; i < 20; ++i) Update("cm-" + std::to_string(i), "b");
  for (int i = 20; i < 25; ++i) Delete("cm-" + std::to_string(i));
  for (int i = 30; i < 35; ++i) Create("cm-" + std::to_string(i));
  ExpectConverged();
  EXPECT_EQ(CacheState().count("default/cm-20"), 0u);
  EXPECT_EQ(CacheState().count("default/cm-34"), 1u);
}

TEST_F(InformerTest, RelistsWhenCompactionExpiresItsResourceVersion) {
  StartServer({"--compaction-interval", "1"});
  for (int i = 0; i < 10; ++i) Create("cm-" + std::to_string(i));
  StartInformer();
  // The watch is live once a change made now reaches the cache (a connection still being set
  // up when the proxy cuts would otherwise survive the cut).
  Update("cm-9", "live");
  ExpectConverged();
  // Take the informer off the network, change things, and wait until the history it would
  // resume from is compacted away.
  proxy_->SetRefusing(true);
  proxy_->CutAll();
  std::string old_rv = informer_->LastResourceVersion();
  for (int i = 0; i < 5; ++i) Delete("cm-" + std::to_string(i));
  for (int i = 5; i < 10; ++i) Update("cm-" + std::to_string(i), "x");
  for (int i = 10; i < 15; ++i) Create("cm-" + std::to_string(i));
  ASSERT_TRUE(Eventually([&] {
    // A watch from the informer's resourceVersion is answered with 410 once compacted.
    client::StreamCanceller c;
    auto w = ConfigMaps().Watch(
        {.resource_version = old_rv}, [](const client::WatchEvent&) { return false; }, &c);
    return w.ok() && w->gone;
  }));
  proxy_->SetRefusing(false);
  ExpectConverged();
  EXPECT_GE(relists_.load(), 1);
  EXPECT_EQ(CacheState().count("default/cm-0"), 0u);
}

TEST_F(InformerTest, ConvergesAfterConnectionsAreCutWhileWritesContinue) {
  StartServer();
  for (int i = 0; i < 20; ++i) Create("cm-" + std::to_string(i));
  StartInformer();
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int round = 0; round < 40; ++round) {
      std::string name = "cm-" + std::to_string(round % 20);
      Update(name, std::to_string(round));
      if (round % 7 == 0) {
        Delete(name);
        Create(name);
      }
    }
    done = true;
  });
  int cuts = 0;
  // At least one cut, even when a loaded machine lets the writer finish before this thread
  // first runs.
  do {
    proxy_->CutAll();
    ++cuts;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (!done);
  writer.join();
  ExpectConverged();
  EXPECT_GT(cuts, 0);
  EXPECT_GT(proxy_->accepted(), 1);  // the informer reconnected
}

TEST_F(InformerTest, NoticesAWatchThatWentSilentAndResumes) {
  StartServer();
  for (int i = 0; i < 5; ++i) Create("cm-" + std::to_string(i));
  StartInformer(std::chrono::milliseconds(700));
  // The watch is live once a change made now reaches the cache.
  Update("cm-0", "before-freeze");
  ExpectConverged();
  int before = proxy_->accepted();
  // The network swallows everything on the open connections; nobody closes them.
  proxy_->FreezeAll();
  for (int i = 0; i < 5; ++i) Update("cm-" + std::to_string(i), "after-freeze");
  for (int i = 5; i < 8; ++i) Create("cm-" + std::to_string(i));
  ExpectConverged();
  EXPECT_GT(proxy_->accepted(), before);  // it gave up on the silent watch and reconnected
}

}  // namespace
}  // namespace klutch::testing
