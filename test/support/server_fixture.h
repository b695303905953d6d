// ServerTest: a gtest fixture running a `klutch apiserver` process in a temp dir, with an
// unthrottled admin RestClient for the test's own reads and writes, and a raw HTTP client
// (`http_`) for tests that check status codes, headers and bodies as sent.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "client/kubeconfig.h"
#include "client/rest_client.h"
#include "test/support/kube_client.h"
#include "test/support/process.h"

namespace klutch::testing {

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(); }

  void StartServer(std::vector<std::string> args = {}) {
    std::string error;
    server_ = ApiServerProcess::Start(dir_.path() / "data", std::move(args), &error);
    ASSERT_TRUE(server_) << error;
    auto config = client::LoadKubeconfig({.paths = {server_->kubeconfig()}});
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
    config_.qps = 0;  // the tests write fast
    auto rest = client::RestClient::New(config_);
    ASSERT_TRUE(rest.ok()) << rest.status().ToString();
    rest_ = std::move(*rest);
    auto creds = ReadKubeconfig(server_->kubeconfig());
    ASSERT_TRUE(creds.ok()) << creds.status().ToString();
    http_ = NewClient(*creds);
  }

  TempDir dir_{"klutch-server-test"};
  std::unique_ptr<ApiServerProcess> server_;
  client::RestConfig config_;
  std::unique_ptr<client::RestClient> rest_;
  std::unique_ptr<http::Client> http_;
};

}  // namespace klutch::testing
