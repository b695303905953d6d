// TestCluster: a real API server inside the test binary, for fast controller and client tests.
//
// It is the ApiServer library (registry, REST semantics, validation, CEL, watch, access control,
// and by default the built-in controllers) on the memory store, reached through the same
// src/client interfaces as a remote server but over client::NewInProcessTransport: requests go
// through the server's own handler (authentication, RBAC, audit, routing) without sockets or
// TLS. A FakeClock given in the options drives the built-in controllers' queues and the
// server's timestamps, so tests advance time instead of sleeping. It also listens on an HTTPS
// loopback port, so real processes (kubectl) can join the same cluster through kubeconfig().
// Keys and certificates are generated once per test process and shared by its clusters.
// Thread-safe as the server and clients are.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apiserver/server.h"
#include "client/rest_client.h"
#include "core/clock.h"
#include "core/status.h"
#include "test/support/process.h"

namespace klutch::controllers {
class BuiltinControllers;
}

namespace klutch::testing {

struct TestClusterOptions {
  // Time for the server's timestamps and the built-in controllers (nullptr: real time). Must
  // outlive the cluster.
  const core::Clock* clock = nullptr;
  // Run namespace lifecycle, defaults, CRD status, GC, aggregation and token controllers.
  bool builtin_controllers = true;
  // Authentication and authorization settings (token files, anonymous, audit log ...).
  apiserver::AccessOptions access;
};

class TestCluster {
 public:
  static core::Result<std::unique_ptr<TestCluster>> Start(TestClusterOptions options = {});
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  // An unthrottled client as the cluster administrator (group system:masters).
  client::RestClient& admin() { return *admin_; }
  // A new unthrottled client presenting `user` and `groups` as its verified client
  // certificate; RBAC decides what it may do.
  std::unique_ptr<client::RestClient> ClientFor(const std::string& user,
                                                std::vector<std::string> groups = {},
                                                client::RestClientOptions options = {});
  // A new unthrottled client sending `token` as its bearer token.
  std::unique_ptr<client::RestClient> ClientWithToken(const std::string& token,
                                                      client::RestClientOptions options = {});

  apiserver::ApiServer& server() { return *server_; }
  // An admin kubeconfig for the HTTPS listener (kubectl and other processes).
  std::string kubeconfig() const { return server_->admin_kubeconfig_path(); }
  // Stops the built-in controllers (idempotent); the server keeps serving.
  void StopControllers();

 private:
  TestCluster();
  std::unique_ptr<client::RestClient> NewClient(std::optional<http::ClientCertificate> identity,
                                                const std::string& token,
                                                client::RestClientOptions options);

  TempDir dir_{"klutch-test-cluster"};
  std::unique_ptr<apiserver::ApiServer> server_;
  std::unique_ptr<client::RestClient> admin_;
  std::unique_ptr<controllers::BuiltinControllers> controllers_;
};

}  // namespace klutch::testing
