#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "apiserver/server.h"
#include "cli/backend.h"
#include "cli/broker.h"
#include "cli/commands.h"
#include "cli/konnector.h"
#include "cli/manager.h"
#include "cli/operator.h"
#include "cli/up.h"
#include "controllers/builtin_controllers.h"
#include "core/duration.h"
#include "core/log.h"
#include "core/strings.h"
#include "serving/shutdown.h"

namespace klutch::cli {
namespace {

int RunApiServer(const apiserver::ApiServerOptions& options) {
  serving::BlockShutdownSignals();
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
  std::cout << "ready: " << (*server)->url() << " kubeconfig " << (*server)->admin_kubeconfig_path()
            << "\n"
            << std::flush;
  serving::WaitForShutdownSignal();
  (*controllers)->Stop();
  (*server)->Stop();
  return 0;
}

std::chrono::seconds ParseDurationFlag(const std::string& v) {
  core::Result<core::GoDuration> d = core::ParseGoDuration(v);
  return std::chrono::seconds(d.ok() ? d->seconds : 0);
}

CLI::Validator DurationValidator() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        core::Result<core::GoDuration> d = core::ParseGoDuration(v);
        if (!d.ok() || d->seconds <= 0) return "must be a positive Go duration such as 10m or 24h";
        return "";
      },
      "DURATION");
}

void AddApiServerFlags(CLI::App* cmd, apiserver::ApiServerOptions& o, std::string& oidc_issuer,
                       auth::OidcOptions& oidc) {
  using apiserver::AccessOptions;
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
  cmd->add_option("--tls-san", o.tls_sans,
                  "Extra DNS name or IP address for the generated serving certificate "
                  "(repeatable)");
  cmd->add_option("--threads", o.threads, "Request threads")->capture_default_str();
  cmd->add_option_function<int>(
         "--compaction-interval", [&o](int seconds) { o.history = std::chrono::seconds(seconds); },
         "Seconds of change history kept for watches and continue tokens (default 300)")
      ->check(CLI::Range(1, 86400));
  cmd->add_option_function<std::string>(
         "--shutdown-delay-duration",
         [&o](const std::string& v) { o.shutdown_delay = ParseDurationFlag(v); },
         "After SIGTERM, keep serving with /readyz failing for this long before new "
         "connections are refused, as kube-apiserver's flag (default 0s); in-flight requests "
         "then get up to 60s")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            core::Result<core::GoDuration> d = core::ParseGoDuration(v);
            if (!d.ok() || d->seconds < 0) return "must be a Go duration such as 0s or 30s";
            return "";
          },
          "DURATION"));
  cmd->add_option("--report-minor-version", o.version_minor,
                  "Minor version reported by /version (selects the kubectl dispatcher's client)")
      ->capture_default_str();

  // Authentication and authorization (kube-apiserver's flag names).
  AccessOptions& a = o.access;
  cmd->add_flag("--anonymous-auth", a.anonymous,
                "Serve requests without credentials as system:anonymous (default: refuse them, "
                "except for health and version)");
  cmd->add_option("--token-auth-file", a.token_auth_file,
                  "Static bearer tokens: CSV lines token,user,uid[,\"group1,group2\"]");
  cmd->add_option("--service-account-issuer", a.service_account_issuer,
                  "Issuer (iss) of service-account tokens")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
      "--api-audiences",
      [&a](const std::string& v) {
        a.api_audiences.clear();
        for (auto part : core::SplitNonEmpty(v, ',')) a.api_audiences.emplace_back(part);
      },
      "Audiences tokens must name, comma-separated (default: the service-account issuer)");
  cmd->add_option("--service-account-signing-key-file", a.service_account_signing_key_file,
                  "PEM RSA key signing service-account tokens (default: generated pki/sa.key)");
  cmd->add_option("--service-account-key-file", a.service_account_key_files,
                  "More PEM public keys whose service-account tokens are accepted (repeatable)");
  cmd->add_option_function<std::string>(
         "--service-account-max-token-expiration",
         [&a](const std::string& v) { a.service_account_max_expiration = ParseDurationFlag(v); },
         "Longest lifetime of a requested token (Go duration, default 48h)")
      ->check(DurationValidator());
  cmd->add_option_function<std::string>(
         "--service-account-min-token-expiration",
         [&a](const std::string& v) { a.service_account_min_expiration = ParseDurationFlag(v); },
         "Shortest lifetime a TokenRequest may ask for (Go duration, default 10m; lower it "
         "only in tests: kube-apiserver fixes it at 10m)")
      ->check(DurationValidator());
  cmd->add_option("--audit-log-path", a.audit_log_path,
                  "Append one JSON line (audit.k8s.io/v1 Event, level Metadata) per request");

  cmd->add_option("--oidc-issuer-url", oidc_issuer,
                  "Accept ID tokens of this OpenID Connect issuer (https)");
  cmd->add_option("--oidc-client-id", oidc.client_id, "Audience ID tokens must name");
  cmd->add_option("--oidc-username-claim", oidc.username_claim, "Claim holding the user name")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
      "--oidc-username-prefix", [&oidc](const std::string& v) { oidc.username_prefix = v; },
      "Prefix of user names (default: issuer URL + '#' unless the claim is email; '-' = none)");
  cmd->add_option("--oidc-groups-claim", oidc.groups_claim, "Claim holding the user's groups");
  cmd->add_option("--oidc-groups-prefix", oidc.groups_prefix, "Prefix of group names");
  cmd->add_option("--oidc-ca-file", oidc.ca_file, "CA of the issuer's TLS certificate (PEM)");
  cmd->add_option_function<std::vector<std::string>>(
         "--oidc-required-claim",
         [&oidc](const std::vector<std::string>& v) {
           for (const auto& kv : v) {
             auto eq = kv.find('=');
             oidc.required_claims.emplace_back(kv.substr(0, eq),
                                               eq == std::string::npos ? "" : kv.substr(eq + 1));
           }
         },
         "key=value a token must carry (repeatable)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return v.find('=') == std::string::npos || v.front() == '=' ? "must be key=value" : "";
          },
          "KEY=VALUE"));
  cmd->add_option_function<std::string>(
      "--oidc-signing-algs",
      [&oidc](const std::string& v) {
        oidc.signing_algs.clear();
        for (auto part : core::SplitNonEmpty(v, ',')) oidc.signing_algs.emplace_back(part);
      },
      "Accepted signing algorithms, comma-separated (default RS256)");
}

// The OIDC flags become options only when an issuer is given.
void FinishAccessFlags(apiserver::ApiServerOptions& o, const std::string& oidc_issuer,
                       auth::OidcOptions oidc) {
  if (oidc_issuer.empty()) return;
  oidc.issuer_url = oidc_issuer;
  o.access.oidc = std::move(oidc);
}

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app{"klutch: self-service data services for Kubernetes"};
  app.require_subcommand(1);
  apiserver::ApiServerOptions api;
  std::string oidc_issuer;
  auth::OidcOptions oidc;
  auto* apiserver_cmd = app.add_subcommand("apiserver", "Run the Kubernetes-compatible API server");
  AddApiServerFlags(apiserver_cmd, api, oidc_issuer, oidc);

  KonnectorFlags konnector_flags;
  auto* konnector_cmd = app.add_subcommand(
      "konnector",
      "Run the konnector: bound APIs in the App Cluster, kept in sync with the provider");
  AddKonnectorFlags(konnector_cmd, konnector_flags);
  ManagerFlags manager_flags;
  auto* manager_cmd = app.add_subcommand(
      "manager",
      "Run the Control Plane's controllers: composition engine (claims, composites, XRDs) and "
      "providers");
  AddManagerFlags(manager_cmd, manager_flags);

  OperatorFlags operator_flags;
  auto* operator_cmd = app.add_subcommand(
      "operator",
      "Run the a8s operator: Postgresql, ServiceBinding, Backup and Restore "
      "(postgresql.anynines.com and friends) served by PostgreSQL on this machine");
  AddOperatorFlags(operator_cmd, operator_flags);

  BrokerFlags broker_flags;
  auto* broker_cmd = app.add_subcommand(
      "broker",
      "Run the Open Service Broker and backup manager that serve PostgreSQL and Redis instances "
      "on this machine");
  AddBrokerFlags(broker_cmd, broker_flags);

  BackendFlags backend_flags;
  auto* backend_cmd = app.add_subcommand(
      "backend",
      "Run the bind backend on the Control Plane: OIDC login, catalog and consumer pages, "
      "/bind, and the controllers behind them");
  AddBackendFlags(backend_cmd, backend_flags);

  UpFlags up_flags;
  auto* up_cmd = app.add_subcommand(
      "up",
      "Run the local Klutch sandbox: a Control Plane and App Clusters, identity provider, bind "
      "backend, manager, broker and konnectors, on this machine");
  AddUpFlags(up_cmd, up_flags);

  CLI11_PARSE(app, argc, argv);
  if (apiserver_cmd->parsed()) {
    FinishAccessFlags(api, oidc_issuer, std::move(oidc));
    return RunApiServer(api);
  }
  if (konnector_cmd->parsed()) return RunKonnector(konnector_flags);
  if (manager_cmd->parsed()) return RunManager(manager_flags);
  if (operator_cmd->parsed()) return RunOperator(operator_flags);
  if (broker_cmd->parsed()) return RunBroker(broker_flags);
  if (backend_cmd->parsed()) return RunBackend(backend_flags);
  if (up_cmd->parsed()) return RunUp(up_flags);
  return 1;
}

}  // namespace klutch::cli
