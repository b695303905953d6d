// A Control Plane for data services made of real processes, as the issue #13 tests and the
// broker benchmark need it: a `klutch apiserver`, Klutch's upstream provider CRDs and Crossplane
// package applied unchanged, `klutch manager` (composition engine and provider-anynines),
// `klutch broker` on a fixed loopback port (kept across restarts), and the upstream
// ProviderConfig examples adapted only in their URLs and credentials. kubectl drives it.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "test/support/process.h"

namespace klutch::testing {

class DataServicesControlPlane {
 public:
  struct Options {
    std::string poll_interval = "1s";  // the manager's --poll-interval
  };
  // Starts everything under `dir` (which the instances' account must be able to traverse).
  // nullptr with `error` set when a step fails.
  static std::unique_ptr<DataServicesControlPlane> Start(const std::filesystem::path& dir,
                                                         Options options, std::string* error);
  ~DataServicesControlPlane();

  // kubectl with the admin kubeconfig, run from `dir`.
  CommandResult Kubectl(const std::string& args,
                        std::chrono::seconds timeout = std::chrono::seconds(60)) const;

  // SIGKILL of the broker (its instances keep running) and a new one on the same port.
  void KillBroker();
  bool StartBroker(std::string* error);

  const std::filesystem::path& broker_state() const { return broker_state_; }
  int broker_port() const { return broker_port_; }
  pid_t broker_pid() const { return broker_ ? broker_->pid() : -1; }
  pid_t manager_pid() const { return manager_ ? manager_->pid() : -1; }
  ApiServerProcess& server() { return *server_; }
  std::string ManagerLog() const;
  std::string BrokerLog() const;

 private:
  DataServicesControlPlane() = default;
  std::filesystem::path AdaptProviderConfig(const std::filesystem::path& example) const;

  std::filesystem::path dir_;
  std::unique_ptr<ApiServerProcess> server_;
  std::unique_ptr<ChildProcess> manager_;
  std::unique_ptr<ChildProcess> broker_;
  std::filesystem::path broker_state_;
  int broker_port_ = 0;
};

}  // namespace klutch::testing
