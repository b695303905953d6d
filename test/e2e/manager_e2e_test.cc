// `klutch manager` end to end: a `klutch apiserver` process, `klutch manager` as a child
// process, and the real kubectl. Klutch's upstream Crossplane package is applied unchanged;
// a claim goes the whole way (XR, composed Object, wrapped object, status back, Ready,
// Foreground deletion) driven only through kubectl.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>

#include "machinery/json.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;
using namespace std::chrono_literals;

const fs::path kKubectl = "/usr/bin/kubectl";
const std::string kKlutch = std::string(KLUTCH_BIN_DIR) + "/klutch";
const fs::path kPackage = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/crossplane-api";

// The a8s operator's kind, as far as the Object provider needs it.
constexpr const char* kPostgresqlCrd = R"({
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "postgresqls.postgresql.anynines.com"},
  "spec": {"group": "postgresql.anynines.com", "scope": "Namespaced",
    "names": {"kind": "Postgresql", "plural": "postgresqls", "listKind": "PostgresqlList"},
    "versions": [{"name": "v1beta3", "served": true, "storage": true,
      "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}})";

constexpr const char* kProviderConfig = R"({
  "apiVersion": "kubernetes.crossplane.io/v1alpha1", "kind": "ProviderConfig",
  "metadata": {"name": "kubernetes-provider"},
  "spec": {"credentials": {"source": "InjectedIdentity"}}})";

class ManagerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kKubectl)) << kKubectl << " is required";
    std::string error;
    server_ = ApiServerProcess::Start(dir_.path() / "data", {}, &error);
    ASSERT_TRUE(server_) << error;
    log_ = dir_.path() / "manager.log";
    manager_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{kKlutch, "manager", "--kubeconfig", server_->kubeconfig().string(),
                                 "--health-probe-bind-address", "127.0.0.1:0",
                                 "--metrics-bind-address", "0", "--poll-interval", "2s"},
        log_, std::map<std::string, std::string>{{"HOME", dir_.path().string()}});
    const std::regex serving(R"(manager: health on 127\.0\.0\.1:(\d+))");
    std::smatch m;
    bool up = Eventually([&] {
      std::string log = ReadFileOrEmpty(log_);
      if (std::regex_search(log, m, serving)) {
        health_port_ = std::stoi(m[1].str());
        return true;
      }
      return !manager_->running();
    });
    ASSERT_TRUE(up && health_port_ != 0) << "the manager did not come up:\n"
                                         << ReadFileOrEmpty(log_);
  }

  CommandResult Kubectl(const std::string& args, std::chrono::seconds timeout = 60s) {
    std::map<std::string, std::string> env = {{"HOME", dir_.path().string()},
                                              {"KUBECACHEDIR", (dir_.path() / "cache").string()},
                                              {"LC_ALL", "C"}};
    return RunShell(
        kKubectl.string() + " --kubeconfig " + server_->kubeconfig().string() + " " + args, env,
        dir_.path(), timeout);
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
  void ApplyPackage() {
    // Recursively, every XRD and Composition file unchanged (crossplane.yaml is package
    // metadata that no cluster serves, real Crossplane included).
    ASSERT_TRUE(Run("apply -R -f " + (kPackage / "api/common").string() + " -f " +
                    (kPackage / "api/a8s").string() + " -f " + (kPackage / "api/a9s").string()));
  }
  std::string ManagerLog() { return ReadFileOrEmpty(log_); }

  TempDir dir_{"klutch-manager-e2e"};
  std::unique_ptr<ApiServerProcess> server_;
  std::unique_ptr<ChildProcess> manager_;
  fs::path log_;
  int health_port_ = 0;
};

TEST_F(ManagerE2eTest, UpstreamPackageIsServedAndExplained) {
  ApplyPackage();
  CommandResult established =
      Kubectl("wait xrd --all --for=condition=Established --timeout=60s", 90s);
  ASSERT_EQ(established.exit_code, 0) << established.out << established.err << ManagerLog();
  CommandResult offered = Kubectl("wait xrd --all --for=condition=Offered --timeout=60s", 90s);
  ASSERT_EQ(offered.exit_code, 0) << offered.out << offered.err;
  Json xrds = Get("compositeresourcedefinitions");
  ASSERT_TRUE(xrds.is_object());
  EXPECT_EQ(xrds["items"].size(), 11u);
  Json comps = Get("compositions");
  EXPECT_EQ(comps["items"].size(), 15u);
  EXPECT_TRUE(Eventually([&] {
    Json revs = Get("compositionrevisions");
    return revs.is_object() && revs["items"].size() == 15u;
  }));

  CommandResult resources = Kubectl("api-resources --api-group=anynines.com -o name");
  ASSERT_EQ(resources.exit_code, 0) << resources.err;
  for (const char* plural :
       {"postgresqlinstances", "keyvalueinstances", "logme2instances", "mariadbinstances",
        "messaginginstances", "mongodbinstances", "prometheusinstances", "searchinstances",
        "servicebindings", "backups", "restores", "xpostgresqlinstances", "xservicebindings"}) {
    EXPECT_NE(resources.out.find(std::string(plural) + ".anynines.com"), std::string::npos)
        << plural << " missing from\n"
        << resources.out;
  }
  CommandResult explain = Kubectl("explain postgresqlinstances.spec");
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  for (const char* field : {"service", "plan", "parameters", "compositionRef",
                            "compositeDeletePolicy", "writeConnectionSecretToRef"}) {
    EXPECT_NE(explain.out.find(field), std::string::npos) << field << "\n" << explain.out;
  }
  // The claim and composite categories.
  EXPECT_EQ(Kubectl("get claim -A").exit_code, 0);
  EXPECT_EQ(Kubectl("get composite").exit_code, 0);
}

TEST_F(ManagerE2eTest, ClaimComposesReportsReadyAndDeletesInForeground) {
  ApplyPackage();
  ASSERT_EQ(Kubectl("wait xrd --all --for=condition=Offered --timeout=60s", 90s).exit_code, 0)
      << ManagerLog();
  fs::path crd = dir_.Write("postgresql-crd.json", kPostgresqlCrd);
  fs::path pc = dir_.Write("providerconfig.json", kProviderConfig);
  ASSERT_TRUE(Run("apply -f " + crd.string()));
  ASSERT_EQ(Kubectl("wait crd/postgresqls.postgresql.anynines.com --for=condition=Established "
                    "--timeout=30s")
                .exit_code,
            0);
  ASSERT_TRUE(Run("apply -f " + pc.string()));
  ASSERT_TRUE(Run("apply -f " + (kPackage / "examples/a8s/postgresql-claim.yaml").string()));
  const std::string claim = "postgresqlinstance/example-a8s-postgresql";
  ASSERT_EQ(Kubectl("wait " + claim + " --for=condition=Synced --timeout=60s", 90s).exit_code, 0)
      << ManagerLog();

  // claim -> XR -> Object -> the wrapped Postgresql, with the a8s patches applied.
  Json c = Get(claim);
  std::string xr = c["spec"]["resourceRef"]["name"];
  ASSERT_FALSE(xr.empty());
  Json composite = Get("xpostgresqlinstance/" + xr);
  ASSERT_TRUE(composite.is_object());
  std::string object = composite["spec"]["resourceRefs"][0]["name"];
  ASSERT_TRUE(Eventually([&] { return Get("postgresql/example-a8s-postgresql").is_object(); }))
      << ManagerLog();
  Json pg = Get("postgresql/example-a8s-postgresql");
  EXPECT_EQ(pg["spec"]["version"], 13);
  EXPECT_EQ(pg["spec"]["volumeSize"], "10Gi");
  EXPECT_EQ(pg["spec"]["replicas"], 1);
  EXPECT_EQ(pg["spec"]["expose"], "Internal");
  EXPECT_EQ(pg["spec"]["resources"]["limits"]["memory"], "2Gi");

  // The "operator" reports; the status travels Object -> XR -> claim, and the claim is Ready
  // (the Object's readiness policy is SuccessfulCreate).
  ASSERT_TRUE(
      Run("patch postgresql example-a8s-postgresql --subresource=status --type=merge "
          "-p '{\"status\":{\"clusterStatus\":\"Running\",\"readyReplicas\":1}}'"));
  ASSERT_EQ(Kubectl("wait " + claim + " --for=condition=Ready --timeout=60s", 90s).exit_code, 0)
      << ManagerLog();
  EXPECT_TRUE(Eventually([&] {
    Json now = Get(claim);
    return now.is_object() && now["status"]["managed"]["clusterStatus"] == "Running" &&
           now["status"]["managed"]["readyReplicas"] == 1;
  })) << Get(claim).dump(2);
  CommandResult table = Kubectl("get postgresqlinstances");
  EXPECT_NE(table.out.find("SYNCED"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("CONNECTION-SECRET"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("True"), std::string::npos) << table.out;

  // Foreground: kubectl delete returns once the XR, the Object and the Postgresql are gone.
  CommandResult del = Kubectl("delete " + claim + " --timeout=60s", 90s);
  ASSERT_EQ(del.exit_code, 0) << del.out << del.err << ManagerLog();
  EXPECT_TRUE(Get("xpostgresqlinstance/" + xr).is_null());
  EXPECT_TRUE(Get("objects.kubernetes.crossplane.io/" + object).is_null());
  EXPECT_TRUE(Eventually([&] { return Get("postgresql/example-a8s-postgresql").is_null(); }));
}

TEST_F(ManagerE2eTest, HealthAndGracefulStop) {
  CommandResult ready =
      RunShell("curl -sf http://127.0.0.1:" + std::to_string(health_port_) + "/readyz", {},
               dir_.path(), 10s);
  EXPECT_TRUE(Eventually([&] {
    return RunShell("curl -sf http://127.0.0.1:" + std::to_string(health_port_) + "/readyz", {},
                    dir_.path(), 10s)
               .exit_code == 0;
  })) << ready.out
      << ManagerLog();
  CommandResult metrics =
      RunShell("curl -sf http://127.0.0.1:" + std::to_string(health_port_) + "/metrics", {},
               dir_.path(), 10s);
  EXPECT_NE(metrics.out.find("leader_election_master_status{name=\"klutch-manager\"} 1"),
            std::string::npos)
      << metrics.out;
  EXPECT_NE(metrics.out.find("rest_client_requests_total"), std::string::npos) << metrics.out;
  auto status = manager_->Signal(SIGTERM, 30s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << ManagerLog();
}

}  // namespace
}  // namespace klutch::testing
