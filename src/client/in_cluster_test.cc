#include "client/in_cluster.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "client/credentials.h"
#include "test/support/process.h"

namespace klutch::client::in_cluster_test {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

// A service account mount in a temp dir and a fake environment.
struct Pod {
  TempDir dir;
  std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                            {"KUBERNETES_SERVICE_PORT", "443"}};
  Pod() {
    dir.Write("token", "sa-token\n");
    dir.Write("ca.crt", "CA-PEM");
    dir.Write("namespace", "team-a\n");
  }
  InClusterOptions Options() const {
    InClusterOptions o;
    o.token_file = dir.path() / "token";
    o.ca_file = dir.path() / "ca.crt";
    o.namespace_file = dir.path() / "namespace";
    auto vars = std::make_shared<std::map<std::string, std::string>>(env);
    o.getenv = [vars](const char* name) -> const char* {
      auto it = vars->find(name);
      return it == vars->end() ? nullptr : it->second.c_str();
    };
    return o;
  }
};

TEST(InClusterConfig, BuildsTheConfigFromEnvironmentAndServiceAccountFiles) {
  Pod pod;
  auto r = InClusterConfig(pod.Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->server, "https://10.96.0.1:443");
  EXPECT_EQ(r->bearer_token, "sa-token");
  EXPECT_EQ(r->bearer_token_file, (pod.dir.path() / "token").string());
  EXPECT_EQ(r->ca_pem, "CA-PEM");
  EXPECT_EQ(r->namespace_, "team-a");
  EXPECT_EQ(r->context_name, "");
  EXPECT_FALSE(r->insecure_skip_tls_verify);
}

TEST(InClusterConfig, HostForms) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"10.96.0.1", "https://10.96.0.1:6443"},
      {"fd00:10:96::1", "https://[fd00:10:96::1]:6443"},
      {"kubernetes.default.svc", "https://kubernetes.default.svc:6443"},
  };
  for (const auto& [host, want] : cases) {
    Pod pod;
    pod.env["KUBERNETES_SERVICE_HOST"] = host;
    pod.env["KUBERNETES_SERVICE_PORT"] = "6443";
    auto r = InClusterConfig(pod.Options());
    ASSERT_TRUE(r.ok()) << host << ": " << r.status().ToString();
    EXPECT_EQ(r->server, want);
  }
}

TEST(InClusterConfig, OutsideAClusterIsNotFound) {
  for (const char* missing : {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}) {
    Pod pod;
    pod.env.erase(missing);
    auto r = InClusterConfig(pod.Options());
    ASSERT_FALSE(r.ok()) << missing;
    EXPECT_EQ(r.status().reason(), core::Reason::kNotFound);
    EXPECT_EQ(r.status().message(),
              "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and "
              "KUBERNETES_SERVICE_PORT must be defined");
  }
  Pod pod;
  pod.env["KUBERNETES_SERVICE_HOST"] = "";
  EXPECT_EQ(InClusterConfig(pod.Options()).status().reason(), core::Reason::kNotFound);
}

TEST(InClusterConfig, BadInputsAreInvalid) {
  {
    Pod pod;
    pod.env["KUBERNETES_SERVICE_PORT"] = "https";
    auto r = InClusterConfig(pod.Options());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().reason(), core::Reason::kInvalid);
    EXPECT_NE(r.status().message().find("KUBERNETES_SERVICE_PORT \"https\" is not a port"),
              std::string::npos);
  }
  {
    Pod pod;
    pod.env["KUBERNETES_SERVICE_HOST"] = "evil/path";
    EXPECT_EQ(InClusterConfig(pod.Options()).status().reason(), core::Reason::kInvalid);
  }
  {
    Pod pod;
    fs::remove(pod.dir.path() / "token");
    auto r = InClusterConfig(pod.Options());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().reason(), core::Reason::kInvalid);
    EXPECT_NE(r.status().message().find((pod.dir.path() / "token").string()), std::string::npos)
        << r.status().message();
  }
}

TEST(InClusterConfig, NamespaceAndCaFallbacks) {
  Pod pod;
  pod.env["POD_NAMESPACE"] = "from-env";
  auto r = InClusterConfig(pod.Options());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->namespace_, "from-env");

  Pod bare;
  fs::remove(bare.dir.path() / "namespace");
  fs::remove(bare.dir.path() / "ca.crt");
  r = InClusterConfig(bare.Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->namespace_, "default");
  EXPECT_EQ(r->ca_pem, "");  // system roots, as client-go does
}

TEST(InClusterConfig, RotatedTokenIsSeenThroughCredentials) {
  Pod pod;
  auto config = InClusterConfig(pod.Options());
  ASSERT_TRUE(config.ok());
  core::FakeClock clock(*core::ParseTime("2030-01-01T00:00:00Z"));
  auto creds = Credentials::For(*config, clock);
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ((*creds)->Current()->bearer_token, "sa-token");
  pod.dir.Write("token.new", "rotated-token");
  fs::rename(pod.dir.path() / "token.new", pod.dir.path() / "token");
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ((*creds)->Current()->bearer_token, "rotated-token");
  // The kubelet swapping files underneath never leaves us without a token.
  fs::remove(pod.dir.path() / "token");
  clock.Advance(std::chrono::seconds(5));
  auto m = (*creds)->Current();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->bearer_token, "rotated-token");
}

}  // namespace
}  // namespace klutch::client::in_cluster_test
