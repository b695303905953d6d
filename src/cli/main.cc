#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "apiserver/server.h"
#include "cli/commands.h"
#include "controllers/builtin_controllers.h"
#include "core/log.h"

namespace klutch::cli {
namespace {

// Blocks until SIGINT or SIGTERM.
void WaitForSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  int sig = 0;
  sigwait(&set, &sig);
}

void BlockSignals() {
  // Block in the main thread before any thread starts so every thread inherits the mask and
  // sigwait() receives the signal.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

int RunApiServer(const apiserver::ApiServerOptions& options, bool sandbox_banner) {
  BlockSignals();
  auto server = apiserver::ApiServer::Start(options);
  if (!server.ok()) {
    std::cerr << "klutch apiserver: " << server.status().message() << "\n";
    return 1;
  }
  auto controllers = controllers::StartBuiltinControllers(**server);
  if (!controllers.ok()) {
    std::cerr << "klutch apiserver: starting controllers: " << controllers.status().message()
              << "\n";
    return 1;
  }
  if (sandbox_banner) {
    std::cout << "\nklutch: API server ready at " << (*server)->url() << "\n"
              << "  export KUBECONFIG=" << (*server)->admin_kubeconfig_path() << "\n"
              << "  kubectl get namespaces\n"
              << "Press Ctrl-C to stop.\n"
              << std::flush;
  } else {
    std::cout << "ready: " << (*server)->url() << " kubeconfig "
              << (*server)->admin_kubeconfig_path() << "\n"
              << std::flush;
  }
  WaitForSignal();
  KLUTCH_LOG(kInfo, "apiserver", "shutting down");
  (*controllers)->Stop();
  (*server)->Stop();
  return 0;
}

void AddApiServerFlags(CLI::App* cmd, apiserver::ApiServerOptions& o) {
  cmd->add_option("--data-dir", o.data_dir, "Directory for state, PKI and admin.kubeconfig")
      ->required();
  cmd->add_option("--listen", o.listen, "Address to serve HTTPS on (host:port, port 0 = any)")
      ->capture_default_str();
  cmd->add_option("--storage", o.storage, "Storage backend")
      ->check(CLI::IsMember({"sqlite", "memory"}))
      ->capture_default_str();
  cmd->add_option("--tls-cert-file", o.tls_cert_file,
                  "Serving certificate (PEM); generated if unset");
  cmd->add_option("--tls-private-key-file", o.tls_key_file, "Serving key (PEM)");
  cmd->add_option("--client-ca-file", o.client_ca_file, "CA for client certificates (PEM)");
  cmd->add_option("--threads", o.threads, "Request threads")->capture_default_str();
  cmd->add_option_function<int>(
         "--compaction-interval", [&o](int seconds) { o.history = std::chrono::seconds(seconds); },
         "Seconds of change history kept for watches and continue tokens (default 300)")
      ->check(CLI::Range(1, 86400));
  cmd->add_option("--report-minor-version", o.version_minor,
                  "Minor version reported by /version (selects the kubectl dispatcher's client)")
      ->capture_default_str();
}

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app{"klutch: self-service data services for Kubernetes"};
  app.require_subcommand(1);
  apiserver::ApiServerOptions api;
  auto* apiserver_cmd = app.add_subcommand("apiserver", "Run the Kubernetes-compatible API server");
  AddApiServerFlags(apiserver_cmd, api);

  apiserver::ApiServerOptions up;
  up.data_dir = ".data";
  auto* up_cmd = app.add_subcommand("up", "Run the local sandbox (for now: the API server)");
  up_cmd->add_option("--data-dir", up.data_dir, "Directory for all sandbox state")
      ->capture_default_str();
  up_cmd->add_option("--listen", up.listen, "API server address")->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  if (apiserver_cmd->parsed()) return RunApiServer(api, false);
  if (up_cmd->parsed()) {
    up.data_dir = (std::filesystem::absolute(up.data_dir) / "apiserver").string();
    return RunApiServer(up, true);
  }
  return 1;
}

}  // namespace klutch::cli
