// The fixture of the konnector's end-to-end tests: two `klutch apiserver` processes (Control
// Plane and App Cluster), the provider set up as the bind backend would (bind_provider.h, its
// kubeconfig routed through a TcpProxy so a test can break or re-point the connection), the
// consumer's binding, and `klutch konnector` as a child process; kubectl helpers for the
// checks. For tests only.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "client/kubeconfig.h"
#include "core/strings.h"
#include "http/client.h"
#include "test/support/bind_provider.h"
#include "test/support/process.h"
#include "test/support/tcp_proxy.h"
#include "test/support/wait.h"

namespace klutch::testing {

using namespace std::chrono_literals;

namespace fs = std::filesystem;
using machinery::Json;

inline const fs::path kKubectl = "/usr/bin/kubectl";
inline const std::string kKlutch = std::string(KLUTCH_BIN_DIR) + "/klutch";
inline constexpr auto kWait = std::chrono::seconds(30);
inline const std::string kExportName = "postgresqlinstances.anynines.com";
inline const std::string kBindNs = "klutch-bind";

inline uint16_t PortOf(const std::string& url) {
  return static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
}

inline std::string Tail(const std::string& text, size_t n = 8000) {
  return text.size() <= n ? text : "...\n" + text.substr(text.size() - n);
}

// A condition of an object as {status, reason}; empty strings when absent.
inline std::pair<std::string, std::string> Condition(const Json& object, const std::string& type) {
  if (const Json* c = machinery::Find(object, {"status"}); c && c->contains("conditions")) {
    for (const auto& cond : (*c)["conditions"]) {
      if (cond.value("type", "") == type) {
        return {cond.value("status", ""), cond.value("reason", "")};
      }
    }
  }
  return {"", ""};
}

class KonnectorE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kKubectl)) << kKubectl << " is required";
    // The two clusters.
    std::string error;
    cp_ = ApiServerProcess::Start(dir_.path() / "cp", {}, &error);
    ASSERT_TRUE(cp_) << error;
    app_ = ApiServerProcess::Start(dir_.path() / "app", {}, &error);
    ASSERT_TRUE(app_) << error;
    cp_rest_ = AdminClient(*cp_);
    ASSERT_TRUE(cp_rest_);

    // The provider, as the bind backend sets it up; the konnector reaches it through a proxy.
    auto installed = bind::InstallBindCrds(*cp_rest_, control_plane_mode_);
    ASSERT_TRUE(installed.ok()) << installed.ToString();
    Json crd = bind::ExampleClaimCrd();
    auto crd_created =
        client::ResourceClient(*cp_rest_, client::resources::kCustomResourceDefinitions)
            .Create(crd);
    ASSERT_TRUE(crd_created.ok()) << crd_created.status().ToString();
    auto established = bind::WaitForCrdEstablished(*cp_rest_, kExportName);
    ASSERT_TRUE(established.ok()) << established.ToString();
    proxy_ = std::make_unique<TcpProxy>(PortOf(cp_->url()));
    auto provider = bind::SetupProvider(
        *cp_rest_, {.server_url = "https://127.0.0.1:" + std::to_string(proxy_->port())});
    ASSERT_TRUE(provider.ok()) << provider.status().ToString();
    provider_ = *provider;
    auto exported = bind::CreateExport(
        *cp_rest_, provider_.cluster_namespace,
        bind::ExportFromCrd(crd, Json::array({bind::PermissionClaim("secrets", "Provider"),
                                              bind::PermissionClaim("secrets", "Consumer")})));
    ASSERT_TRUE(exported.ok()) << exported.status().ToString();
    mapper_ = std::make_unique<bind::NamespaceMapper>(*cp_rest_, provider_.cluster_namespace);
    mapper_->Start();

    if (control_plane_mode_) {
      // Control-plane mode: the binding lives on the Control Plane in the root namespace (the
      // cluster namespace), with a Secret holding the App Cluster's kubeconfig; the konnector
      // runs beside the Control Plane.
      Json app_secret = KubeconfigSecret("app-cluster", ReadFileOrEmpty(app_->kubeconfig()));
      app_secret["metadata"]["namespace"] = provider_.cluster_namespace;
      ASSERT_TRUE(Apply(*cp_, app_secret));
      Json binding = Binding(kExportName, "app-cluster");
      binding["metadata"]["namespace"] = provider_.cluster_namespace;
      binding["spec"]["kubeconfigSecretRef"]["namespace"] = provider_.cluster_namespace;
      ASSERT_TRUE(Apply(*cp_, binding));
      ASSERT_NO_FATAL_FAILURE(StartKonnector());
      return;
    }

    // The konnector in the App Cluster.
    ASSERT_NO_FATAL_FAILURE(StartKonnector());

    // The consumer's part of `kubectl bind`: the kubeconfig Secret and the binding.
    ASSERT_TRUE(Eventually(
        [&] { return CrdEstablished(*app_, "apiservicebindings.klutch.anynines.com"); }, kWait))
        << "the konnector did not install the apiservicebindings CRD in the App Cluster";
    ASSERT_TRUE(Apply(
        *app_, {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kBindNs}}}}));
    ASSERT_TRUE(Apply(*app_, KubeconfigSecret("kubeconfig-provider", provider_.kubeconfig)));
    ASSERT_TRUE(Apply(*app_, Binding(kExportName, "kubeconfig-provider")));
  }

  void TearDown() override {
    if (!HasFailure()) return;
    std::cout << "---- konnector log (" << konnector_log_ << ") ----\n"
              << Tail(ReadFileOrEmpty(konnector_log_)) << "\n";
    if (mapper_) std::cout << "---- namespace mapper last error: " << mapper_->LastError() << "\n";
    if (app_) {
      std::cout << "---- App Cluster bind objects ----\n"
                << Kubectl(*app_, "get apiservicebindings -A -o yaml").out << "\n";
    }
    if (cp_) {
      std::cout << "---- Control Plane bind objects ----\n"
                << Kubectl(*cp_,
                           "get clusterbindings,apiserviceexports,apiservicenamespaces -A "
                           "-o yaml")
                       .out
                << "\n";
    }
  }

  static std::unique_ptr<client::RestClient> AdminClient(const ApiServerProcess& server) {
    auto config = client::LoadKubeconfig({.paths = {server.kubeconfig()}});
    if (!config.ok()) {
      ADD_FAILURE() << config.status().ToString();
      return nullptr;
    }
    config->qps = 0;
    auto rest = client::RestClient::New(*config);
    if (!rest.ok()) {
      ADD_FAILURE() << rest.status().ToString();
      return nullptr;
    }
    return std::move(*rest);
  }

  void StartKonnector() {
    // A log file per start, so a restart's serving line is not the previous one's.
    konnector_log_ = dir_.path() / ("konnector-" + std::to_string(++konnector_starts_) + ".log");
    CommandResult help = RunShell(kKlutch + " konnector --help", {}, dir_.path(), 30s);
    ASSERT_TRUE(help.exit_code == 0 && help.out.find("--heartbeat-interval") != std::string::npos)
        << "`klutch konnector --help` does not describe the konnector; is it built?\n"
        << help.out << help.err;
    std::vector<std::string> args = {kKlutch,
                                     "konnector",
                                     "--lease-namespace",
                                     "kube-system",
                                     "--health-probe-bind-address",
                                     "127.0.0.1:0",
                                     "--metrics-bind-address",
                                     "127.0.0.1:0",
                                     "--heartbeat-interval",
                                     "2s"};
    if (control_plane_mode_) {
      for (const std::string& a :
           {std::string("--kubeconfig"), cp_->kubeconfig().string(),
            std::string("--control-plane-mode"),
            std::string("--app-cluster-kubeconfig-secret-name"), std::string("app-cluster"),
            std::string("--app-cluster-kubeconfig-secret-namespace"), provider_.cluster_namespace,
            std::string("--binding-root-namespace"), provider_.cluster_namespace}) {
        args.push_back(a);
      }
    } else {
      args.push_back("--kubeconfig");
      args.push_back(app_->kubeconfig().string());
    }
    konnector_ = std::make_unique<ChildProcess>(
        args, konnector_log_, std::map<std::string, std::string>{{"HOME", dir_.path().string()}});
    const std::regex serving(
        R"(konnector: health on 127\.0\.0\.1:(\d+), metrics on 127\.0\.0\.1:(\d+))");
    std::smatch m;
    bool up = Eventually(
        [&] {
          std::string log = ReadFileOrEmpty(konnector_log_);
          if (!std::regex_search(log, m, serving)) return !konnector_->running();
          health_port_ = static_cast<uint16_t>(std::stoi(m[1].str()));
          metrics_port_ = static_cast<uint16_t>(std::stoi(m[2].str()));
          return true;
        },
        kWait);
    ASSERT_TRUE(up && health_port_ != 0)
        << "the konnector did not print its serving line (running: " << konnector_->running()
        << "); log:\n"
        << Tail(ReadFileOrEmpty(konnector_log_));
  }

  // --- kubectl ---

  CommandResult Kubectl(const ApiServerProcess& server, const std::string& args) {
    std::map<std::string, std::string> env = {
        {"HOME", dir_.path().string()},
        {"KUBECACHEDIR", (dir_.path() / "kubecache").string()},
        {"LC_ALL", "C"}};
    return RunShell(
        kKubectl.string() + " --kubeconfig " + server.kubeconfig().string() + " " + args, env,
        dir_.path(), 60s);
  }

  // kubectl apply -f of `object` (written as JSON); records a failure and returns false when
  // kubectl fails.
  bool Apply(const ApiServerProcess& server, const Json& object) {
    const std::string file = "manifest-" + std::to_string(++manifests_) + ".json";
    fs::path path = dir_.Write(file, object.dump(2));
    CommandResult r = Kubectl(server, "apply -f " + path.string());
    EXPECT_EQ(r.exit_code, 0) << "kubectl apply of " << object.dump() << "\n" << r.out << r.err;
    return r.exit_code == 0;
  }

  // Runs kubectl and expects success.
  bool Run(const ApiServerProcess& server, const std::string& args) {
    CommandResult r = Kubectl(server, args);
    EXPECT_EQ(r.exit_code, 0) << "kubectl " << args << "\n" << r.out << r.err;
    return r.exit_code == 0;
  }

  // `kubectl get <what> -o json`, or null when kubectl fails (e.g. NotFound).
  Json Get(const ApiServerProcess& server, const std::string& what) {
    CommandResult r = Kubectl(server, "get " + what + " -o json");
    if (r.exit_code != 0) return nullptr;
    auto parsed = machinery::ParseJson(r.out);
    return parsed.ok() ? *parsed : Json(nullptr);
  }

  bool NotFound(const ApiServerProcess& server, const std::string& what) {
    CommandResult r = Kubectl(server, "get " + what);
    return r.exit_code != 0 && r.err.find("NotFound") != std::string::npos;
  }

  bool CrdEstablished(const ApiServerProcess& server, const std::string& name) {
    Json crd = Get(server, "crd " + name);
    return !crd.is_null() && Condition(crd, "Established").first == "True";
  }

  // --- objects ---

  static Json KubeconfigSecret(const std::string& name, const std::string& kubeconfig) {
    return {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", name}, {"namespace", kBindNs}}},
            {"stringData", {{"kubeconfig", kubeconfig}}}};
  }

  static Json Binding(const std::string& name, const std::string& secret) {
    return {{"apiVersion", bind::kBindApiVersion},
            {"kind", "APIServiceBinding"},
            {"metadata", {{"name", name}, {"namespace", kBindNs}}},
            {"spec",
             {{"kubeconfigSecretRef",
               {{"name", secret}, {"namespace", kBindNs}, {"key", "kubeconfig"}}},
              {"permissionClaims", Json::array({{{"group", ""},
                                                 {"resource", "secrets"},
                                                 {"version", "v1"},
                                                 {"selector", {{"owner", "Provider"}}},
                                                 {"state", "Accepted"}},
                                                {{"group", ""},
                                                 {"resource", "secrets"},
                                                 {"version", "v1"},
                                                 {"selector", {{"owner", "Consumer"}}},
                                                 {"state", "Accepted"}}})}}}};
  }

  static Json Claim(const std::string& ns, const std::string& name, const std::string& version) {
    return {{"apiVersion", "anynines.com/v1"},
            {"kind", "PostgresqlInstance"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec", {{"version", version}}}};
  }

  std::string Mapped(const std::string& ns) const { return provider_.cluster_namespace + "-" + ns; }

  // Creates namespace `ns` and claim `name` in the App Cluster and waits for its copy on the
  // Control Plane; returns that copy (null after recording a failure).
  Json CreateBoundClaim(const std::string& ns, const std::string& name,
                        const std::string& version = "14") {
    EXPECT_TRUE(Eventually([&] { return CrdEstablished(*app_, kExportName); }, kWait))
        << "CRD " << kExportName << " not Established in the App Cluster";
    if (Get(*app_, "namespace " + ns).is_null()) Run(*app_, "create namespace " + ns);
    if (!Apply(*app_, Claim(ns, name, version))) return nullptr;
    Json upstream;
    bool ok = Eventually(
        [&] {
          upstream = Get(*cp_, "postgresqlinstances -n " + Mapped(ns) + " " + name);
          return !upstream.is_null();
        },
        kWait);
    EXPECT_TRUE(ok) << "claim " << ns << "/" << name << " did not reach the Control Plane in "
                    << Mapped(ns);
    return ok ? upstream : Json(nullptr);
  }

  std::string UpstreamSpecVersion(const std::string& ns, const std::string& name) {
    Json u = Get(*cp_, "postgresqlinstances -n " + Mapped(ns) + " " + name);
    return u.is_null() ? "<missing>" : machinery::GetString(u, {"spec", "version"});
  }

  TempDir dir_{"klutch-konnector-e2e"};
  std::unique_ptr<ApiServerProcess> cp_, app_;
  std::unique_ptr<client::RestClient> cp_rest_;
  std::unique_ptr<TcpProxy> proxy_;
  bind::ProviderBinding provider_;
  std::unique_ptr<bind::NamespaceMapper> mapper_;
  fs::path konnector_log_;
  std::unique_ptr<ChildProcess> konnector_;
  uint16_t health_port_ = 0, metrics_port_ = 0;
  int manifests_ = 0;
  int konnector_starts_ = 0;
  // Set before SetUp() by a subclass: run the konnector in control-plane mode.
  bool control_plane_mode_ = false;
};

}  // namespace klutch::testing
