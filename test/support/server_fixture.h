// ServerTest: a gtest fixture running a `klutch apiserver` process in a temp dir, with an
// unthrottled admin RestClient for the test's own reads and writes.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "client/kubeconfig.h"
#include "client/rest_client.h"
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
  }

  TempDir dir_{"klutch-server-test"};
  std::unique_ptr<ApiServerProcess> server_;
  client::RestConfig config_;
  std::unique_ptr<client::RestClient> rest_;
};

}  // namespace klutch::testing
