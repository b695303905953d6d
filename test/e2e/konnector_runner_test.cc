// sandbox::KonnectorRunner, the sandbox's stand-in for a kubelet, on a `klutch apiserver`
// process with the konnector kubectl bind installs (deploy/konnector, two replicas): one
// `klutch konnector` process per replica, each its own leader-election identity; the
// Deployment reads 2/2 ready through real kubectl (issue #23: it read 1/2); a hung leader
// reads 1/2 and loses the Lease to the standby, then comes back as a standby (2/2); scaled to
// one, replica 1 stops and replica 0 leads; scaled to zero, it reads 0/0.
#include "sandbox/konnector_runner.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "kubectl_bind/konnector_install.h"
#include "machinery/object.h"
#include "sandbox/processes.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kBin = KLUTCH_BIN_DIR;
const client::GroupVersionResource kLeases{"coordination.k8s.io", "v1", "leases"};

TEST(KonnectorRunner, RunsAProcessPerReplicaAndReportsThemReady) {
  TempDir dir("klutch-konnector-runner");
  std::string error;
  auto server = ApiServerProcess::Start(dir.path() / "data", {}, &error);
  ASSERT_NE(server, nullptr) << error;
  auto config = client::LoadKubeconfig({.paths = {server->kubeconfig()}});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto admin = client::RestClient::New(*config);
  ASSERT_TRUE(admin.ok());
  std::ostringstream progress;
  ASSERT_TRUE(
      kubectl_bind::InstallKonnector(**admin, {.image = "klutch:v0.1.0"}, {.err = &progress}).ok())
      << progress.str();

  sandbox::ProcessSet processes;
  sandbox::KonnectorRunner runner(**admin, processes,
                                  {.cluster_name = "app",
                                   .klutch_binary = (kBin / "klutch").string(),
                                   .dir = dir.path() / "k"});
  runner.Start();
  auto kubectl = [&](const std::string& args) {
    return RunShell("kubectl --kubeconfig " + server->kubeconfig().string() + " " + args,
                    {{"HOME", dir.path().string()}}, dir.path(), 30s);
  };
  auto deployment = [&] {
    return kubectl("get deployment konnector -n klutch-bind --no-headers").out;
  };
  auto logs = [&] {
    std::string text;
    for (const char* r : {"0", "1"}) {
      text += ReadFileOrEmpty(dir.path() / "k" /
                              (std::string("konnector-app-klutch-bind-konnector-") + r + ".log"));
    }
    return text;
  };
  std::string seen;
  ASSERT_TRUE(Eventually(
      [&] {
        seen = deployment();
        return std::regex_search(seen, std::regex("^konnector\\s+2/2\\s+2\\s+2\\s"));
      },
      90s))
      << seen << logs();
  EXPECT_EQ(runner.Running(), 2);

  client::ResourceClient leases(**admin, kLeases, "klutch-bind");
  auto holder = [&] {
    auto lease = leases.Get("klutch-bind");
    return lease.ok() ? machinery::GetString(*lease, {"spec", "holderIdentity"}) : "";
  };
  std::string leader;
  ASSERT_TRUE(Eventually([&] { return !(leader = holder()).empty(); }, 60s));
  ASSERT_TRUE(leader == "konnector-sandbox-0" || leader == "konnector-sandbox-1") << leader;

  // The leader hangs (SIGSTOP): its /readyz stops answering, so the Deployment reads 1/2, and
  // the standby takes the Lease once it expires. Continued, the old leader finds the Lease
  // lost and exits; the ProcessSet starts it again as a standby and the Deployment reads 2/2.
  std::string process = "konnector-app-klutch-bind-konnector-" + leader.substr(leader.size() - 1);
  pid_t pid = -1;
  for (const auto& p : processes.List()) {
    if (p.name == process) pid = p.pid;
  }
  ASSERT_GT(pid, 0) << process;
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  struct Continue {
    pid_t pid;
    ~Continue() { ::kill(pid, SIGCONT); }
  } continue_at_exit{pid};
  EXPECT_TRUE(Eventually(
      [&] {
        seen = deployment();
        return std::regex_search(seen, std::regex("^konnector\\s+1/2\\s+2\\s+1\\s"));
      },
      60s))
      << seen;
  std::string next;
  EXPECT_TRUE(Eventually(
      [&] {
        next = holder();
        return !next.empty() && next != leader;
      },
      90s))
      << "the Lease stayed with " << leader << "\n"
      << logs();
  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  EXPECT_TRUE(Eventually(
      [&] {
        seen = deployment();
        return std::regex_search(seen, std::regex("^konnector\\s+2/2\\s+2\\s+2\\s"));
      },
      90s))
      << seen << logs();

  // Scaled to one: replica 1 stops, replica 0 is left and leads.
  ASSERT_EQ(kubectl("patch deployment konnector -n klutch-bind -p '{\"spec\":{\"replicas\":1}}'")
                .exit_code,
            0);
  EXPECT_TRUE(Eventually(
      [&] {
        seen = deployment();
        return std::regex_search(seen, std::regex("^konnector\\s+1/1\\s+1\\s+1\\s")) &&
               runner.Running() == 1;
      },
      60s))
      << seen;
  EXPECT_TRUE(Eventually([&] { return (next = holder()) == "konnector-sandbox-0"; }, 90s))
      << "the Lease is held by " << next << "\n"
      << logs();
  // Scaled to zero: no process, 0/0 (not the last count).
  ASSERT_EQ(kubectl("patch deployment konnector -n klutch-bind -p '{\"spec\":{\"replicas\":0}}'")
                .exit_code,
            0);
  EXPECT_TRUE(Eventually(
      [&] {
        seen = deployment();
        return std::regex_search(seen, std::regex("^konnector\\s+0/0\\s+0\\s+0\\s")) &&
               runner.Running() == 0;
      },
      60s))
      << seen;
  runner.Stop();
  EXPECT_EQ(runner.Running(), 0);
}

}  // namespace
}  // namespace klutch::testing
