// The example controller as a process (tests only): wiring of EchoReconciler onto the
// framework, with leader election, so tests can run replicas and kill the leader.
//   echo_controller --kubeconfig F --identity ID [--lease-ms N] [--port-file F]
#include <signal.h>

#include <cstring>
#include <fstream>
#include <iostream>

#include "client/kubeconfig.h"
#include "reconcile/manager.h"
#include "test/example/echo_reconciler.h"

using namespace klutch;

int main(int argc, char** argv) {
  std::string kubeconfig, identity, port_file;
  int lease_ms = 3000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--kubeconfig")
      kubeconfig = argv[i + 1];
    else if (flag == "--identity")
      identity = argv[i + 1];
    else if (flag == "--lease-ms")
      lease_ms = std::atoi(argv[i + 1]);
    else if (flag == "--port-file")
      port_file = argv[i + 1];
  }
  auto config = client::LoadKubeconfig({.paths = {kubeconfig}});
  if (!config.ok()) {
    std::cerr << config.status().ToString() << "\n";
    return 2;
  }
  config->user_agent = std::string(example::kControllerName) + "/" + identity;
  auto rest = client::RestClient::New(*config);
  if (!rest.ok()) {
    std::cerr << rest.status().ToString() << "\n";
    return 2;
  }
  // Block the signals we wait for before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  reconcile::LeaderElectionOptions le;
  le.lease_namespace = "default";
  le.lease_name = example::kControllerName;
  le.identity = identity;
  le.lease_duration = std::chrono::milliseconds(lease_ms);
  le.renew_deadline = std::chrono::milliseconds(lease_ms * 2 / 3);
  le.retry_period = std::chrono::milliseconds(std::max(50, lease_ms / 10));
  reconcile::Manager manager(**rest, {.name = "echo-controller",
                                      .health_port = 0,
                                      .leader_election = le,
                                      .on_lost_leadership = [] { ::raise(SIGTERM); }});
  client::Informer& cms = manager.Informer(client::resources::kConfigMaps);
  example::EchoReconciler reconciler(**rest, cms.indexer());
  reconcile::Controller& c = manager.AddController(example::kControllerName, reconciler);
  c.For(cms, example::IsEchoSource);
  c.Owns(cms, "", "ConfigMap");
  if (auto st = manager.Start(); !st.ok()) {
    std::cerr << st.ToString() << "\n";
    return 1;
  }
  if (!port_file.empty()) std::ofstream(port_file) << manager.health_port() << "\n";
  std::cout << "started " << identity << std::endl;
  int sig = 0;
  sigwait(&set, &sig);
  manager.Stop();
  return 0;
}
