// Test support shared by the broker's tests over HTTP (broker_instances_test,
// osb_conformance_test): a Broker served on a loopback port, one request at a time, and a
// state directory the instances' account can reach. Test code only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "broker/broker.h"
#include "core/process.h"
#include "core/random.h"
#include "core/strings.h"
#include "http/client.h"
#include "http/server.h"

namespace klutch::broker {

// A state directory under /tmp the `postgres` account can traverse (a gtest TempDir may not).
inline std::filesystem::path NewStateDir(const std::string& prefix) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path("/tmp") / (prefix + "-" + core::RandomSuffix(6));
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  return dir;
}

// Opens a Broker with `options` (as root its instances run as `postgres`) and serves it on a
// loopback port with `threads` handler threads; stops both on destruction.
class ServedBroker {
 public:
  ServedBroker(BrokerOptions options, int threads) {
    if (::getuid() == 0) {
      auto user = core::LookupUser("postgres");
      EXPECT_TRUE(user.ok()) << "the postgres account (Debian's postgresql-15) is needed as root";
      if (user.ok()) options.engine.user = *user;
    }
    auto b = Broker::Open(options);
    EXPECT_TRUE(b.ok()) << b.status().message();
    broker_ = std::move(*b);
    auto s = http::Server::Start(http::ServerOptions{.threads = threads},
                                 [this](http::Request& r) { return broker_->Serve(r); });
    EXPECT_TRUE(s.ok());
    server_ = std::move(*s);
  }
  ~ServedBroker() {
    server_->Stop();
    broker_->Shutdown();
  }
  ServedBroker(const ServedBroker&) = delete;
  ServedBroker& operator=(const ServedBroker&) = delete;

  Broker& broker() { return *broker_; }
  uint16_t port() const { return server_->port(); }

  // One request: basic auth when `auth` is set, X-Broker-API-Version unless `version` is "".
  http::ClientResponse Request(const std::string& method, const std::string& path,
                               const std::optional<BasicCredentials>& auth,
                               const std::string& version, std::string body) {
    http::Client client({.port = server_->port()});
    http::Headers h;
    if (auth) {
      h.Add("Authorization", "Basic " + core::Base64Encode(auth->username + ":" + auth->password));
    }
    if (!version.empty()) h.Add("X-Broker-API-Version", version);
    if (!body.empty()) h.Add("Content-Type", "application/json");
    auto r = client.Do(method, path, h, std::move(body));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : http::ClientResponse{};
  }

 private:
  std::unique_ptr<Broker> broker_;
  std::unique_ptr<http::Server> server_;
};

}  // namespace klutch::broker
