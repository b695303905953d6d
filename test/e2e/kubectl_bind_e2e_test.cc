// `kubectl bind` end to end against the sandbox (`klutch up --app-clusters 2`, App Cluster 2
// unbound), the first hour of a user (issue #23):
//  - `--headless --api A --api B` without a terminal and without --accept-permission-claims:
//    one error lists every permission claim of every API and the flag that answers them, and
//    nothing is bound, neither in App Cluster 2 nor on the Control Plane (it used to bind A,
//    then fail on B's claim).
//  - The same with --accept-permission-claims: the login line names the sandbox's user by the
//    name glewlwyd's ID token gives (its email; not the subject, not an issuer URL), the
//    cluster namespace on the Control Plane is annotated with the kubeconfig context's name
//    (kubectl bind sends it as n), and the table printed after binding shows each binding with
//    its provider and Ready True. A --cluster-name the backend would refuse is refused first.
//  - The konnector Deployments of both App Clusters read 2/2: one `klutch konnector` process
//    per replica, one of them holding the Lease.
// The tests share one sandbox and run in order.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <regex>
#include <string>

#include "core/file.h"
#include "core/random.h"
#include "core/strings.h"
#include "test/e2e/sandbox_fixture.h"
#include "test/support/oidc_provider.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kBin = KLUTCH_BIN_DIR;

std::string Read(const fs::path& p) { return ReadText(p); }

class KubectlBindE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("klutch-kubectl-bind-e2e");
    state_ = dir_->path() / "state";
    SandboxBanner banner;
    start_error_ = StartSandbox(kBin, state_, 2, dir_->path() / "up.log", &up_, &banner);
    user_ = banner.user;
    password_ = banner.password;
    backend_ = banner.backend;
  }

  static void TearDownTestSuite() {
    if (up_ != nullptr && up_->running()) up_->Signal(SIGTERM, 120s);
    delete up_;
    up_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(start_error_.empty()) << start_error_;
    ASSERT_FALSE(backend_.empty()) << Read(dir_->path() / "up.log");
    ASSERT_FALSE(user_.empty()) << Read(dir_->path() / "up.log");
  }

  static CommandResult Kubectl(const std::string& cluster, const std::string& args) {
    return RunShell(
        "kubectl --kubeconfig " + (state_ / (cluster + ".kubeconfig")).string() + " " + args,
        {{"HOME", dir_->path().string()}, {"PATH", kBin.string() + ":/usr/bin:/bin"}}, dir_->path(),
        60s);
  }

  // `kubectl bind --headless` for App Cluster 2 with `flags`, stdin /dev/null (no terminal),
  // the device login approved as the sandbox's user. Returns its exit code; its output goes
  // to `*out`.
  static int BindHeadless(const std::vector<std::string>& flags, std::string* out,
                          const fs::path& kubeconfig = state_ / "app-2.kubeconfig") {
    fs::path log = dir_->path() / ("bind-" + core::RandomSuffix(6) + ".log");
    std::vector<std::string> argv = {"/usr/bin/kubectl",
                                     "bind",
                                     backend_ + "/export",
                                     "--kubeconfig",
                                     kubeconfig.string(),
                                     "--backend-ca-file",
                                     (state_ / "pki" / "ca.crt").string(),
                                     "--headless"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    ChildProcess bind(
        argv, log, {{"PATH", kBin.string() + ":/usr/bin:/bin"}, {"HOME", dir_->path().string()}});
    Eventually(
        [&] {
          return Read(log).find("Waiting for the login") != std::string::npos || !bind.running();
        },
        60s);
    *out = Read(log);
    std::smatch m;
    if (!std::regex_search(*out, m, std::regex("enter the code ([A-Z0-9-]+)"))) return -1;
    std::string code = m[1];
    if (!std::regex_search(*out, m, std::regex("(https://127\\.0\\.0\\.1:\\d+)/api/oidc"))) {
      return -1;
    }
    core::Status approved =
        ApproveDeviceAt(m[1], state_ / "pki" / "ca.crt", user_, password_, code, dir_->path());
    if (!approved.ok()) {
      *out += "\n(approving the login: " + approved.ToString() + ")";
      return -1;
    }
    bool ended = Eventually([&] { return !bind.running(); }, 180s);
    *out = Read(log);
    return ended ? bind.exit_code().value_or(-1) : -1;
  }

  static TempDir* dir_;
  static fs::path state_;
  static ChildProcess* up_;
  static std::string start_error_, user_, password_, backend_;
};

TempDir* KubectlBindE2eTest::dir_ = nullptr;
fs::path KubectlBindE2eTest::state_;
ChildProcess* KubectlBindE2eTest::up_ = nullptr;
std::string KubectlBindE2eTest::start_error_;
std::string KubectlBindE2eTest::user_;
std::string KubectlBindE2eTest::password_;
std::string KubectlBindE2eTest::backend_;

TEST_F(KubectlBindE2eTest, A_WithoutATerminalEveryClaimIsAskedForBeforeAnythingIsBound) {
  std::string namespaces_before = Kubectl("control-plane", "get namespaces -o name").out;
  std::string out;
  // postgresqlinstances has no claim, servicebindings claims Secrets and ConfigMaps.
  int code = BindHeadless(
      {"--api", "postgresqlinstances.anynines.com", "--api", "servicebindings.anynines.com"}, &out);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("1. servicebindings.anynines.com: The provider wants to create and update "
                     "secrets"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2. servicebindings.anynines.com: The provider wants to create and update "
                     "configmaps"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("nothing was bound"), std::string::npos) << out;
  EXPECT_NE(out.find("--accept-permission-claims"), std::string::npos) << out;

  // Nothing bound: no provider kubeconfig, no konnector, no binding in App Cluster 2, no new
  // consumer namespace on the Control Plane.
  EXPECT_EQ(Kubectl("app-2", "get secrets,deployments -n klutch-bind -o name").out, "");
  CommandResult bindings = Kubectl("app-2", "get apiservicebindings -A -o name");
  EXPECT_EQ(bindings.out, "") << bindings.err;
  EXPECT_EQ(Kubectl("app-2", "get crd -o name").out.find("anynines.com"), std::string::npos);
  EXPECT_EQ(Kubectl("control-plane", "get namespaces -o name").out, namespaces_before);
}

TEST_F(KubectlBindE2eTest, B_BindingNamesTheUserAndTheClusterAndPrintsTheBindingsOnceReady) {
  // App Cluster 2's kubeconfig with a context named as a user would name it.
  const fs::path kubeconfig = dir_->path() / "app-2-renamed.kubeconfig";
  fs::copy_file(state_ / "app-2.kubeconfig", kubeconfig, fs::copy_options::overwrite_existing);
  const std::string context = "team-a-dev";
  std::string old_context(core::Trim(Kubectl("app-2", "config current-context").out));
  CommandResult renamed =
      RunShell("kubectl --kubeconfig " + kubeconfig.string() + " config rename-context " +
                   old_context + " " + context,
               {{"HOME", dir_->path().string()}, {"PATH", "/usr/bin:/bin"}}, dir_->path(), 60s);
  ASSERT_EQ(renamed.exit_code, 0) << renamed.err;

  // A name the backend would refuse is refused before the login, naming the flag.
  CommandResult bad =
      RunShell("kubectl bind " + backend_ + "/export --kubeconfig " + kubeconfig.string() +
                   " --backend-ca-file " + (state_ / "pki" / "ca.crt").string() +
                   " --headless --cluster-name \"$(printf 'a\\tb')\"",
               {{"HOME", dir_->path().string()}, {"PATH", kBin.string() + ":/usr/bin:/bin"}},
               dir_->path(), 60s);
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("--cluster-name holds control characters"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find("To log in"), std::string::npos) << bad.err;

  std::string out;
  int code = BindHeadless({"--api", "postgresqlinstances.anynines.com", "--api",
                           "servicebindings.anynines.com", "--accept-permission-claims"},
                          &out, kubeconfig);
  ASSERT_EQ(code, 0) << out;
  // The sandbox's user (src/sandbox/identity_provider.h) has email <user>@klutch.local, which
  // glewlwyd's ID tokens carry (they have no preferred_username): the name, not the subject.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("Logged in to .* as (\\S+)\\.\\n"))) << out;
  EXPECT_EQ(std::string(m[1]), user_ + "@klutch.local") << out;

  // The cluster namespace (the provider kubeconfig's) is annotated with the context's name.
  std::string secrets =
      Kubectl("app-2",
              "get secrets -n klutch-bind -o jsonpath='{range .items[*]}{.metadata.name} "
              "{.data.kubeconfig}{\"\\n\"}{end}'")
          .out;
  ASSERT_TRUE(std::regex_search(secrets, m, std::regex("(^|\\n)kubeconfig-\\S+ (\\S+)")))
      << secrets;
  auto provider_kubeconfig = core::Base64Decode(std::string(m[2]));
  ASSERT_TRUE(provider_kubeconfig.has_value()) << secrets;
  ASSERT_TRUE(std::regex_search(*provider_kubeconfig, m, std::regex("namespace: \"?([a-z0-9-]+)")))
      << *provider_kubeconfig;
  const std::string cluster_namespace = m[1];
  EXPECT_EQ(
      Kubectl("control-plane",
              "get namespace " + cluster_namespace +
                  " -o jsonpath='{.metadata.annotations.klutch\\.anynines\\.com/cluster-name}'")
          .out,
      context);

  // The table after binding: both bindings, their provider, Ready True, no Pending.
  size_t header = out.find("NAME ");
  ASSERT_NE(header, std::string::npos) << out;
  std::string table = out.substr(header);
  EXPECT_NE(table.find("PROVIDER"), std::string::npos) << table;
  for (const char* api : {"postgresqlinstances.anynines.com", "servicebindings.anynines.com"}) {
    ASSERT_TRUE(
        std::regex_search(table, m, std::regex(std::string(api) + "\\s+(.+?)\\s+(True|False)\\b")))
        << table;
    EXPECT_NE(std::string(m[1]), "<none>") << table;
    EXPECT_EQ(std::string(m[2]), "True") << table;
  }
  EXPECT_EQ(table.find("Pending"), std::string::npos) << table;
}

TEST_F(KubectlBindE2eTest, C_KonnectorDeploymentsAreFullyReady) {
  for (const char* cluster : {"app-1", "app-2"}) {
    std::string seen;
    bool full = Eventually(
        [&] {
          seen = Kubectl(cluster, "get deployment konnector -n klutch-bind --no-headers").out;
          return std::regex_search(seen, std::regex("^konnector\\s+2/2\\s+2\\s+2\\s"));
        },
        60s);
    EXPECT_TRUE(full) << cluster << ": " << seen;
    // One process per replica, each with its own identity; one of them holds the Lease.
    std::string holder =
        Kubectl(cluster,
                "get lease klutch-bind -n klutch-bind -o jsonpath='{.spec.holderIdentity}'")
            .out;
    EXPECT_TRUE(holder == "konnector-sandbox-0" || holder == "konnector-sandbox-1") << holder;
    for (const char* replica : {"0", "1"}) {
      fs::path log =
          state_ / "konnectors" /
          ("konnector-" + std::string(cluster) + "-klutch-bind-konnector-" + replica + ".log");
      EXPECT_NE(Read(log).find("identity konnector-sandbox-" + std::string(replica)),
                std::string::npos)
          << log;
    }
  }
}

}  // namespace
}  // namespace klutch::testing
