// `klutch backend` as a process (build/bin/klutch): flag errors exit 2 naming the flag; with
// an API server (the TestCluster's HTTPS listener) and a real issuer (glewlwyd) it prints its
// serving line and answers /export, /authorize, /healthz and /readyz over HTTPS.
#include <gtest/gtest.h>

#include <csignal>
#include <regex>
#include <thread>

#include "core/strings.h"
#include "http/client.h"
#include "machinery/json.h"
#include "test/support/bind_web.h"
#include "test/support/oidc_provider.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::bind {
namespace {

const std::string kKlutch = std::string(KLUTCH_BIN_DIR) + "/klutch";

std::string Keys() {
  return " --cookie-signing-key " + core::Base64Encode(std::string(32, 's')) +
         " --cookie-encryption-key " + core::Base64Encode(std::string(32, 'e'));
}

TEST(BackendProcess, InvalidFlagsExitTwoNamingTheFlag) {
  klutch::testing::TempDir dir("klutch-backend-flags");
  const std::string oidc =
      " --oidc-issuer-url https://127.0.0.1:1/x --oidc-issuer-client-id a "
      "--oidc-issuer-client-secret b --oidc-callback-url https://127.0.0.1/callback";
  struct Case {
    std::string args, flag;
  };
  for (const Case& c : std::vector<Case>{
           {"--consumer-scope sideways" + oidc + Keys(), "--consumer-scope"},
           {"--cluster-scoped-isolation total" + oidc + Keys(), "--cluster-scoped-isolation"},
           {"--tls-cert-file x.pem" + oidc + Keys(), "--tls-key-file"},
           {"--listen-address nowhere" + oidc + Keys(), "--listen-address"},
           {"--external-address http://cp:6443" + oidc + Keys(), "--external-address"},
           {oidc, "--cookie-signing-key is required"},
           {oidc + " --cookie-signing-key c2hvcnQ= --cookie-encryption-key c2hvcnQ=",
            "--cookie-signing-key"},
           {Keys(), "--oidc-issuer-url is required"},
           {"--oidc-issuer-url http://idp" + Keys(), "--oidc-issuer-url"},
           {"--max-clusters-per-user=-1" + oidc + Keys(), "--max-clusters-per-user"},
           {"--unconnected-cluster-grace soon" + oidc + Keys(), "--unconnected-cluster-grace"},
           {"--consumer-quota secrets=lots" + oidc + Keys(), "--consumer-quota"},
           {"--device-authorize-qps=-1" + oidc + Keys(), "--device-authorize-qps"},
       }) {
    auto r = klutch::testing::RunShell(kKlutch + " backend " + c.args, {}, dir.path(),
                                       std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.flag), std::string::npos) << c.args << "\n" << r.err;
  }
}

TEST(BackendProcess, ServesTheBindSurfaceOverHttps) {
  klutch::testing::TempDir dir("klutch-backend-process");
  std::string error;
  auto provider = klutch::testing::OidcProvider::Start(dir.path() / "oidc", &error);
  ASSERT_NE(provider, nullptr) << error;
  auto cluster = klutch::testing::TestCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  ASSERT_TRUE(testing::SetUpControlPlane((*cluster)->admin()).ok());

  const auto log = dir.path() / "backend.log";
  klutch::testing::ChildProcess backend({kKlutch,
                                         "backend",
                                         "--kubeconfig",
                                         (*cluster)->kubeconfig(),
                                         "--listen-address",
                                         "127.0.0.1:0",
                                         "--oidc-issuer-url",
                                         provider->issuer(),
                                         "--oidc-ca-file",
                                         provider->ca_file(),
                                         "--oidc-issuer-client-id",
                                         provider->client_id(),
                                         "--oidc-issuer-client-secret",
                                         provider->client_secret(),
                                         "--oidc-callback-url",
                                         provider->redirect_uri(),
                                         "--cookie-signing-key",
                                         core::Base64Encode(std::string(32, 's')),
                                         "--cookie-encryption-key",
                                         core::Base64Encode(std::string(32, 'e')),
                                         "--lease-namespace",
                                         "default"},
                                        log);
  std::smatch m;
  const std::regex serving("klutch backend: serving on https://127\\.0\\.0\\.1:([0-9]+)");
  std::string text;
  ASSERT_TRUE(klutch::testing::Eventually(
      [&] {
        text = klutch::testing::ReadFileOrEmpty(log);
        return std::regex_search(text, m, serving) || !backend.running();
      },
      std::chrono::seconds(60)));
  ASSERT_TRUE(std::regex_search(text, m, serving)) << text;
  const auto port = static_cast<uint16_t>(std::stoi(m[1].str()));

  // A self-signed certificate made at start (no --tls-cert-file).
  http::Client client(
      {.host = "127.0.0.1", .port = port, .tls = true, .insecure_skip_verify = true});
  http::Headers host;
  host.Add("Host", "127.0.0.1:" + std::to_string(port));
  auto exported = client.Do("GET", "/export", host);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  ASSERT_EQ(exported->status, 200) << exported->body;
  auto j = machinery::ParseJson(exported->body);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["apiVersion"], "v1alpha1");
  EXPECT_EQ((*j)["authenticationMethods"][0]["oauth2CodeGrant"]["authenticatedURL"],
            "https://127.0.0.1:" + std::to_string(port) + "/authorize");
  EXPECT_EQ((*j)["authenticationMethods"][1]["method"], "OAuth2DeviceGrant");

  auto authorize = client.Do("GET", "/authorize?p=40000&s=abc123&c=def456", host);
  ASSERT_TRUE(authorize.ok());
  EXPECT_EQ(authorize->status, 302);
  EXPECT_TRUE(std::string(authorize->headers.Get("Location")).starts_with(provider->issuer()));
  EXPECT_NE(authorize->headers.Get("Set-Cookie").find("klutch-bind-login-abc123="),
            std::string::npos);

  EXPECT_TRUE(klutch::testing::Eventually([&] {
    auto ready = client.Do("GET", "/readyz");
    return ready.ok() && ready->status == 200;
  }));
  auto metrics = client.Do("GET", "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->status, 200);

  auto status = backend.Signal(SIGTERM, std::chrono::seconds(20));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << klutch::testing::ReadFileOrEmpty(log);
}

}  // namespace
}  // namespace klutch::bind
