// `klutch backend` (see backend.h, src/bind/README.md and docs/bind-backend.md).
#include "cli/backend.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <filesystem>
#include <iostream>

#include "bind/backend_controllers.h"
#include "bind/web/oidc_client.h"
#include "bind/web/sealer.h"
#include "bind/web/web_backend.h"
#include "cli/controller_process.h"
#include "cli/fail.h"
#include "client/dynamic.h"
#include "client/rest_client.h"
#include "core/duration.h"
#include "core/file.h"
#include "core/log.h"
#include "core/random.h"
#include "core/strings.h"
#include "http/certs.h"
#include "http/router.h"
#include "http/server.h"
#include "reconcile/manager.h"
#include "serving/endpoints.h"
#include "serving/shutdown.h"

namespace klutch::cli {
namespace {

constexpr const char* kBackendUserAgentVersion = "v0.1.0";
constexpr int kExitBadFlags = 2;

std::optional<std::string> Canonical(const std::string& value,
                                     std::initializer_list<const char*> allowed) {
  for (const char* a : allowed) {
    if (core::ToLower(value) == core::ToLower(a)) return std::string(a);
  }
  return std::nullopt;
}

// A serving certificate for the listen address when the operator gave none: issued by a CA
// made on the spot, written to a private temporary directory the server reads at start (and
// which is removed right after).
struct EphemeralTls {
  std::filesystem::path dir;
  http::TlsOptions tls;
  ~EphemeralTls() { Remove(); }
  void Remove() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    dir.clear();
  }
};

core::Status MakeEphemeralTls(const std::string& host, EphemeralTls& out) {
  auto ca = http::GenerateCertificateAuthority("klutch-backend-ephemeral-ca",
                                               std::chrono::hours(24 * 365));
  if (!ca.ok()) return ca.status();
  http::CertificateRequest request{.common_name = "klutch-backend",
                                   .dns_names = {"localhost"},
                                   .ip_addresses = {"127.0.0.1"},
                                   .server = true};
  if (!host.empty() && host != "0.0.0.0" && host != "::") {
    if (host.find_first_not_of("0123456789.:abcdefABCDEF") == std::string::npos) {
      if (host != "127.0.0.1") request.ip_addresses.push_back(host);
    } else if (host != "localhost") {
      request.dns_names.push_back(host);
    }
  }
  auto serving = http::IssueCertificate(*ca, request);
  if (!serving.ok()) return serving.status();
  std::string pattern = (std::filesystem::temp_directory_path() / "klutch-backend-tls-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr)
    return core::Internal("cannot create a temporary directory");
  out.dir = pattern;
  out.tls.certificate_file = (out.dir / "tls.crt").string();
  out.tls.key_file = (out.dir / "tls.key").string();
  KLUTCH_RETURN_IF_ERROR(
      core::WriteFileAtomic(out.tls.certificate_file, serving->certificate + ca->certificate));
  return core::WriteFileAtomic(out.tls.key_file, serving->private_key);
}

}  // namespace

void AddBackendFlags(CLI::App* cmd, BackendFlags& f) {
  cmd->add_option("--kubeconfig", f.kubeconfig,
                  "kubeconfig of the Control Plane; default: in-cluster config, else $KUBECONFIG "
                  "or ~/.kube/config");
  cmd->add_option("--namespace-prefix", f.namespace_prefix,
                  "Prefix of the consumers' cluster namespaces (generateName <prefix>-)")
      ->capture_default_str();
  cmd->add_option("--pretty-name", f.pretty_name,
                  "Provider name shown to consumers (BindingProvider, ClusterBinding)")
      ->capture_default_str();
  cmd->add_option("--consumer-scope", f.consumer_scope,
                  "Namespaced or Cluster: how far a consumer's rights reach on the Control Plane")
      ->capture_default_str();
  cmd->add_option("--cluster-scoped-isolation", f.cluster_scoped_isolation,
                  "Prefixed, Namespaced or None: isolation of cluster-scoped exported objects")
      ->capture_default_str();
  cmd->add_option("--external-address", f.external_address,
                  "https URL of the Control Plane API server written into consumers' kubeconfigs "
                  "(default: the address this backend uses)");
  cmd->add_option("--external-ca-file", f.external_ca_file,
                  "CA (PEM) of that address for consumers' kubeconfigs (default: the one this "
                  "backend uses)");
  cmd->add_option("--external-server-name", f.external_server_name,
                  "TLS server name (SNI) consumers' kubeconfigs verify");
  cmd->add_option("--oidc-issuer-client-id", f.oidc_client_id, "OIDC client ID of this backend");
  // Secrets may come from the environment, which other users cannot read (argv they can).
  cmd->add_option("--oidc-issuer-client-secret", f.oidc_client_secret,
                  "OIDC client secret of this backend (or $KLUTCH_OIDC_CLIENT_SECRET)")
      ->envname("KLUTCH_OIDC_CLIENT_SECRET");
  cmd->add_option("--oidc-issuer-url", f.oidc_issuer_url, "OIDC issuer URL (https)");
  cmd->add_option("--oidc-callback-url", f.oidc_callback_url,
                  "This backend's /callback URL as registered at the issuer");
  cmd->add_option(
      "--oidc-authorize-url", f.oidc_authorize_url,
      "The /authorize URL /export advertises (default: https://<request host>/authorize)");
  cmd->add_option("--oidc-ca-file", f.oidc_ca_file,
                  "CA (PEM) of the issuer's TLS certificate (default: system roots)");
  cmd->add_option("--oidc-scopes", f.oidc_scopes, "Scopes requested at the issuer")
      ->capture_default_str();
  cmd->add_option("--cookie-signing-key", f.cookie_signing_key,
                  "base64 of 32 or 64 random bytes: authenticates state, cookies and device "
                  "handles (the same on every replica; or $KLUTCH_COOKIE_SIGNING_KEY)")
      ->envname("KLUTCH_COOKIE_SIGNING_KEY");
  cmd->add_option("--cookie-encryption-key", f.cookie_encryption_key,
                  "base64 of 16, 24 or 32 random bytes: encrypts them (the same on every replica; "
                  "or $KLUTCH_COOKIE_ENCRYPTION_KEY)")
      ->envname("KLUTCH_COOKIE_ENCRYPTION_KEY");
  cmd->add_option("--listen-address", f.listen_address,
                  "host:port to serve HTTPS on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--tls-cert-file", f.tls_cert_file,
                  "Serving certificate chain (PEM); without it and --tls-key-file a self-signed "
                  "certificate is made at start");
  cmd->add_option("--tls-key-file", f.tls_key_file, "Serving key (PEM)");
  cmd->add_flag("--control-plane-mode", f.control_plane_mode,
                "Serve AppClusterBindings; the OIDC pages are off unless OIDC flags are given");
  cmd->add_option("--konnector-image", f.konnector_image,
                  "Image of control-plane-mode konnector Deployments")
      ->capture_default_str();
  cmd->add_option("--consumer-token-ttl", f.token_ttl,
                  "Lifetime of consumers' service-account tokens (Go duration; refreshed at half)")
      ->capture_default_str();
  cmd->add_option("--lease-name", f.lease_name, "Name of the leader-election Lease")
      ->capture_default_str();
  cmd->add_option("--lease-namespace", f.lease_namespace,
                  "Namespace of the Lease (default: $POD_NAMESPACE, else kube-system)");
  cmd->add_option("--kube-api-qps", f.qps, "Requests per second to the API server (0: unlimited)")
      ->capture_default_str();
  cmd->add_option("--kube-api-burst", f.burst, "Burst of requests to the API server")
      ->capture_default_str();
  cmd->add_option("--max-clusters-per-user", f.max_clusters_per_user,
                  "Most clusters one user (OIDC issuer and subject) may bind; a bind of one "
                  "more is refused saying so (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--unconnected-cluster-grace", f.unconnected_cluster_grace,
                  "A consumer's space (cluster namespace, RBAC, token) whose konnector sent no "
                  "heartbeat this long after its last bind is deleted (Go duration; 0: never)")
      ->capture_default_str();
  f.consumer_quota = std::string(bind::kDefaultConsumerQuota);
  cmd->add_option("--consumer-quota", f.consumer_quota,
                  "Object counts of the ResourceQuota kept in every consumer namespace: "
                  "<resource>=<count>,... (claims=N: each exported kind without its own entry; "
                  "\"\": no quota)")
      ->capture_default_str();
  cmd->add_option("--device-authorize-qps", f.device_authorize_qps,
                  "Device logins (/device/authorize) per second and client address (0: "
                  "unlimited)")
      ->capture_default_str();
  cmd->add_option("--device-authorize-burst", f.device_authorize_burst,
                  "Burst of device logins per client address")
      ->capture_default_str();
}

int RunBackend(const BackendFlags& f) {
  serving::BlockShutdownSignals();

  // Flags first: every mistake is reported before anything is contacted.
  auto listen = serving::ParseBindAddress(f.listen_address);
  if (!listen.ok())
    return Fail("klutch backend", "--listen-address " + listen.status().message(), kExitBadFlags);
  if (f.tls_cert_file.empty() != f.tls_key_file.empty()) {
    return Fail("klutch backend",
                "--tls-cert-file and --tls-key-file go together: give both or neither",
                kExitBadFlags);
  }
  auto consumer_scope = Canonical(f.consumer_scope, {"Namespaced", "Cluster"});
  if (!consumer_scope) {
    return Fail(
        "klutch backend",
        "--consumer-scope: must be Namespaced or Cluster, not " + core::GoQuote(f.consumer_scope),
        kExitBadFlags);
  }
  auto isolation = Canonical(f.cluster_scoped_isolation, {"Prefixed", "Namespaced", "None"});
  if (!isolation) {
    return Fail("klutch backend",
                "--cluster-scoped-isolation: must be Prefixed, Namespaced or None, not " +
                    core::GoQuote(f.cluster_scoped_isolation),
                kExitBadFlags);
  }
  if (!f.external_address.empty() && !f.external_address.starts_with("https://")) {
    return Fail("klutch backend", "--external-address: must start with https://", kExitBadFlags);
  }
  bind::ProvisionOptions provision{.namespace_prefix = f.namespace_prefix,
                                   .pretty_name = f.pretty_name,
                                   .external_address = f.external_address,
                                   .external_server_name = f.external_server_name};
  if (!f.external_ca_file.empty()) {
    auto ca = core::ReadFile(f.external_ca_file);
    if (!ca.ok())
      return Fail("klutch backend", "--external-ca-file: " + ca.status().message(), kExitBadFlags);
    provision.external_ca_pem = *ca;
  }
  auto ttl = core::ParseGoDuration(f.token_ttl);
  if (!ttl.ok() || ttl->seconds < 600) {
    return Fail("klutch backend",
                "--consumer-token-ttl: must be a Go duration of at least 10m, such as 24h",
                kExitBadFlags);
  }
  provision.token_ttl = std::chrono::seconds(ttl->seconds);
  if (f.namespace_prefix.empty())
    return Fail("klutch backend", "--namespace-prefix: must not be empty", kExitBadFlags);
  if (f.max_clusters_per_user < 0) {
    return Fail("klutch backend", "--max-clusters-per-user: must be 0 (no limit) or more",
                kExitBadFlags);
  }
  provision.max_clusters_per_user = f.max_clusters_per_user;
  auto grace = core::ParseGoDuration(f.unconnected_cluster_grace);
  if (!grace.ok() || grace->seconds < 0 || (grace->seconds == 0 && grace->nanos != 0)) {
    return Fail("klutch backend",
                "--unconnected-cluster-grace: must be a Go duration such as 1h, or 0 (never)",
                kExitBadFlags);
  }
  const std::chrono::seconds unconnected_grace(grace->seconds);
  auto quota = bind::ParseConsumerQuota(f.consumer_quota);
  if (!quota.ok())
    return Fail("klutch backend", "--consumer-quota: " + quota.status().message(), kExitBadFlags);
  if (f.device_authorize_qps < 0 || f.device_authorize_burst < 1) {
    return Fail("klutch backend",
                "--device-authorize-qps must be 0 (unlimited) or more and "
                "--device-authorize-burst at least 1",
                kExitBadFlags);
  }

  const bool any_oidc_flag = !f.oidc_issuer_url.empty() || !f.oidc_client_id.empty() ||
                             !f.oidc_client_secret.empty() || !f.oidc_callback_url.empty();
  const bool web = !f.control_plane_mode || any_oidc_flag;
  std::unique_ptr<bind::OidcClient> idp;
  std::optional<bind::Sealer> sealer;
  if (web) {
    auto s = bind::Sealer::FromBase64(f.cookie_signing_key, f.cookie_encryption_key);
    if (!s.ok()) return Fail("klutch backend", s.status().message(), kExitBadFlags);
    sealer = std::move(*s);
    auto client = bind::OidcClient::New({.issuer_url = f.oidc_issuer_url,
                                         .client_id = f.oidc_client_id,
                                         .client_secret = f.oidc_client_secret,
                                         .redirect_url = f.oidc_callback_url,
                                         .ca_file = f.oidc_ca_file,
                                         .scopes = f.oidc_scopes});
    if (!client.ok()) return Fail("klutch backend", client.status().message(), kExitBadFlags);
    idp = std::move(*client);
  }

  auto config = ControllerClusterConfig(f.kubeconfig);
  if (!config.ok()) return Fail("klutch backend", config.status().message());
  config->qps = f.qps;
  config->burst = f.burst;
  config->user_agent = "klutch-backend/" + std::string(kBackendUserAgentVersion);
  auto rest = client::RestClient::New(*config);
  if (!rest.ok()) return Fail("klutch backend", rest.status().message());
  if (auto s = bind::InstallProviderCrds(**rest, f.control_plane_mode, std::chrono::minutes(2));
      !s.ok()) {
    return Fail("klutch backend", "installing the bind CRDs: " + s.message());
  }

  const char* pod_name = ::getenv("POD_NAME");
  const char* pod_namespace = ::getenv("POD_NAMESPACE");
  const std::string identity =
      pod_name && *pod_name ? pod_name : "backend-" + core::RandomSuffix(8);
  const std::string lease_namespace = !f.lease_namespace.empty()        ? f.lease_namespace
                                      : pod_namespace && *pod_namespace ? pod_namespace
                                                                        : "kube-system";
  // The lease namespace must exist before the election can take the lease.
  {
    client::ResourceClient namespaces(**rest, client::resources::kNamespaces);
    if (!namespaces.Get(lease_namespace).ok()) {
      (void)namespaces.Create(machinery::Json{
          {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", lease_namespace}}}});
    }
  }
  std::atomic<bool> lost{false};
  reconcile::Manager manager(
      **rest,
      {.name = "klutch-backend",
       .leader_election = reconcile::LeaderElectionOptions{.lease_namespace = lease_namespace,
                                                           .lease_name = f.lease_name,
                                                           .identity = identity},
       .on_lost_leadership = [&lost] {
         std::cerr << "klutch backend: lost the lease; stopping\n";
         lost = true;
         ::kill(::getpid(), SIGTERM);
       }});
  (*rest)->SetRequestObserver([&manager](std::string_view verb, int code, double s) {
    manager.metrics().OnRequest(verb, code, s);
  });
  bind::BackendControllers controllers(manager, {.consumer_scope = *consumer_scope,
                                                 .cluster_scoped_isolation = *isolation,
                                                 .control_plane_mode = f.control_plane_mode,
                                                 .provision = provision,
                                                 .konnector_image = f.konnector_image,
                                                 .unconnected_cluster_grace = unconnected_grace,
                                                 .consumer_quota = *quota,
                                                 .instance = identity});
  if (auto s = controllers.Setup(); !s.ok()) return Fail("klutch backend", s.message());

  http::Router router;
  manager.health().AddRoutes(router);
  serving::AddMetricsRoute(router, manager.metric_registry());
  std::unique_ptr<bind::WebBackend> backend;
  if (web) {
    if (auto s = idp->Discover(); !s.ok()) {
      // The issuer may come up after us; requests retry discovery.
      KLUTCH_LOG(kWarn, "backend", "OIDC issuer {}: {}", f.oidc_issuer_url, s.message());
    }
    backend = std::make_unique<bind::WebBackend>(
        **rest, *idp, *sealer,
        bind::WebOptions{.pretty_name = f.pretty_name,
                         .consumer_scope = *consumer_scope,
                         .authorize_url = f.oidc_authorize_url,
                         .provision = provision,
                         .device_authorize_qps = f.device_authorize_qps,
                         .device_authorize_burst = f.device_authorize_burst,
                         .unconnected_cluster_grace = unconnected_grace,
                         .metrics = &manager.metric_registry()});
    backend->AddRoutes(router);
  }

  EphemeralTls ephemeral;
  http::TlsOptions tls{.certificate_file = f.tls_cert_file, .key_file = f.tls_key_file};
  if (f.tls_cert_file.empty()) {
    if (auto s = MakeEphemeralTls(listen->first, ephemeral); !s.ok()) {
      return Fail("klutch backend", "making a self-signed serving certificate: " + s.message());
    }
    tls = ephemeral.tls;
    std::cerr << "klutch backend: no --tls-cert-file: serving with a self-signed certificate\n";
  }
  auto server = http::Server::Start(
      http::ServerOptions{
          .address = listen->first, .port = listen->second, .threads = 16, .tls = tls},
      router.AsHandler());
  if (!server.ok()) return Fail("klutch backend", "--listen-address: " + server.status().message());
  ephemeral.Remove();  // the server has read the files

  std::string host = listen->first == "0.0.0.0" ? "127.0.0.1" : listen->first;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  std::cout << "klutch backend: serving on https://" << host << ":" << (*server)->port()
            << std::endl;
  if (auto s = manager.Start(); !s.ok()) {
    (*server)->Stop();
    return Fail("klutch backend", "starting the controllers: " + s.message());
  }
  serving::WaitForShutdownSignal();
  manager.health().SetShuttingDown();
  (*server)->Drain(std::chrono::seconds(10));
  (*server)->Stop();
  manager.Stop();
  controllers.Stop();
  return lost ? 1 : 0;
}

}  // namespace klutch::cli
