#include "sandbox/sandbox.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <ostream>
#include <set>
#include <thread>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/export_request.h"
#include "apis/klutch/ids.h"
#include "apis/klutch/register.h"
#include "apis/manifests.h"
#include "bind/provision.h"
#include "client/apply.h"
#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/net.h"
#include "core/process.h"
#include "core/random.h"
#include "core/strings.h"
#include "http/certs.h"
#include "http/url.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"
#include "sandbox/identity_provider.h"
#include "sandbox/konnector_runner.h"
#include "sandbox/processes.h"

namespace klutch::sandbox {
namespace {

namespace fs = std::filesystem;
using machinery::Json;
namespace resources = client::resources;

constexpr char kStateFile[] = "sandbox.json";
constexpr char kLockFile[] = "up.lock";
constexpr char kControlPlane[] = "control-plane";
constexpr char kTemplateNamespace[] = "crossplane-system";
// The Klutch APIs the backend offers: (resource, permission claims on Secrets/ConfigMaps).
struct OfferedApi {
  const char* resource;
  bool claims_credentials;
};
constexpr OfferedApi kOffered[] = {{"postgresqlinstances", false},
                                   {"keyvalueinstances", false},
                                   {"servicebindings", true},
                                   {"backups", false},
                                   {"restores", false},
                                   {"mariadbinstances", false},
                                   {"messaginginstances", false},
                                   {"prometheusinstances", false},
                                   // Offered as upstream offers them; klutch broker does not run
                                   // them (Debian has none): their claims say no broker is set up
                                   // for them.
                                   {"mongodbinstances", false},
                                   {"searchinstances", false},
                                   {"logme2instances", false}};
// The API group of the offered APIs (Klutch's claim APIs).
constexpr char kOfferedGroup[] = "anynines.com";

// The permission claims of an offered API that hands out credentials: the Secrets and
// ConfigMaps the provider owns.
Json CredentialClaims() {
  Json claims = Json::array();
  for (const char* r : {"secrets", "configmaps"}) {
    claims.push_back(
        {{"group", ""}, {"resource", r}, {"version", "v1"}, {"selector", {{"owner", "Provider"}}}});
  }
  return claims;
}

std::string AppName(int i) { return fmt::format("app-{}", i); }

fs::path SelfDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

core::Result<std::unique_ptr<client::RestClient>> ClientFor(const fs::path& kubeconfig) {
  client::KubeconfigOptions options;
  options.paths = {kubeconfig};
  KLUTCH_ASSIGN_OR_RETURN(client::RestConfig config, client::LoadKubeconfig(options));
  config.user_agent = "klutch-up";
  config.qps = 0;
  return client::RestClient::New(config);
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t pos = text.find(from); pos != std::string::npos;
       pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

}  // namespace

class Sandbox::Impl {
 public:
  explicit Impl(SandboxOptions options) : options_(std::move(options)) {}
  ~Impl() { Stop(); }

  // Retries `fn` (e.g. applying objects whose kind is about to be served) until it succeeds,
  // `timeout` passes (its last error) or the start is cancelled.
  core::Status Retry(std::chrono::seconds timeout, const std::function<core::Status()>& fn) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      core::Status st = fn();
      if (st.ok() || std::chrono::steady_clock::now() >= deadline) return st;
      KLUTCH_RETURN_IF_ERROR(Pause(std::chrono::milliseconds(250)));
    }
  }

  // Sleeps between polls; fails once the start is cancelled (checked every 50 ms).
  core::Status Pause(std::chrono::milliseconds d) {
    auto until = std::chrono::steady_clock::now() + d;
    while (true) {
      if (options_.cancelled && options_.cancelled()) {
        return core::Status(core::Reason::kServiceUnavailable, "start cancelled");
      }
      auto now = std::chrono::steady_clock::now();
      if (now >= until) return core::Status::Ok();
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          until - now, std::chrono::milliseconds(50)));
    }
  }

  core::Status Start() {
    // Traversable (not listable) by others, and so the directories made on the way: the
    // broker's instances and glewlwyd run as their own users below it.
    KLUTCH_RETURN_IF_ERROR(core::CreateTraversableDirectories(options_.state_dir));
    dir_ = fs::absolute(options_.state_dir).lexically_normal();
    if (!dir_.has_filename()) dir_ = dir_.parent_path();
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec,
                    ec);
    KLUTCH_RETURN_IF_ERROR(CheckStateDirReachable());
    KLUTCH_RETURN_IF_ERROR(Lock());
    // Every process's log under logs/, the konnectors' and glewlwyd's (kept beside their
    // credentials and configuration) as links.
    processes_.LinkLogsInto(dir_ / "logs");
    fs::path self = SelfDir();
    klutch_ = options_.klutch_binary.empty() ? (self / "klutch").string() : options_.klutch_binary;
    kubectl_bind_ = options_.kubectl_bind_binary.empty() ? (self / "kubectl-bind").string()
                                                         : options_.kubectl_bind_binary;
    KLUTCH_RETURN_IF_ERROR(LoadState());
    KLUTCH_RETURN_IF_ERROR(EnsurePki());
    // Each step is checked for cancellation too (Pause with no wait).
    for (auto step : {&Impl::StartApiServers, &Impl::StartIdentityProvider, &Impl::StartManager,
                      &Impl::StartBroker, &Impl::StartOperator, &Impl::ApplyPackage,
                      &Impl::StartBackend, &Impl::StartKonnectorRunners, &Impl::BindFirstAppCluster,
                      &Impl::RenewExpiredKonnectorCredentials, &Impl::ReadBindings}) {
      KLUTCH_RETURN_IF_ERROR(Pause(std::chrono::milliseconds(0)));
      KLUTCH_RETURN_IF_ERROR((this->*step)());
    }
    return SaveState();
  }

  void Stop() {
    for (auto& r : runners_) r->Stop();
    runners_.clear();
    processes_.StopAll();
    if (lock_fd_ >= 0) {
      ::close(lock_fd_);
      lock_fd_ = -1;
    }
  }

  const SandboxInfo& info() const { return info_; }

  std::string Banner() const {
    std::string app = info_.app_kubeconfigs.empty() ? "" : info_.app_kubeconfigs[0].string();
    return fmt::format(
        "\nKlutch is up: a Control Plane, {} App Cluster(s), the bind backend, the manager and "
        "the broker.\n"
        "  login (OIDC, glewlwyd): user {} password {}\n"
        "  backend: {}\n"
        "  their CA (import it into your browser as trusted to log in without a warning): {}\n\n"
        "App Cluster 1 is bound to the Klutch APIs. Create a database there:\n"
        "  export KUBECONFIG={}\n"
        "  kubectl apply -f - <<'EOF'\n"
        "apiVersion: anynines.com/v1\nkind: PostgresqlInstance\nmetadata:\n  name: example-pg\n"
        "  namespace: default\nspec:\n  service: a9s-postgresql15\n  plan: postgresql-single-nano\n"
        "  compositionRef:\n    name: a9s-postgresql\n"
        "---\n"
        "apiVersion: anynines.com/v1\nkind: ServiceBinding\nmetadata:\n  name: example-pg-binding\n"
        "  namespace: default\nspec:\n  instanceRef: example-pg\n  serviceInstanceType: "
        "postgresql\n  compositionRef:\n    name: a9s-servicebinding\n"
        "EOF\n"
        "  kubectl wait postgresqlinstance/example-pg --for=condition=Ready --timeout=120s\n"
        "  psql \"$(kubectl get secret example-pg-binding-creds -o "
        "jsonpath='{{.data.uri}}' | base64 -d)\"\n\n"
        "{}"
        "Control Plane: KUBECONFIG={}\n"
        "Logs: {}\nState: {}\nPress Ctrl-C to stop everything.\n",
        info_.app_kubeconfigs.size(), info_.demo_user, info_.demo_password, info_.backend_url,
        info_.ca_file.string(), app, OtherAppClusters(), info_.control_plane_kubeconfig.string(),
        (dir_ / "logs").string(), dir_.string());
  }

  // App Clusters 2..N as they are now: each bound one with its APIs and where to look, and
  // how to bind the first that is not.
  std::string OtherAppClusters() const {
    std::string out;
    std::vector<size_t> unbound;  // indexes into info_.app_kubeconfigs
    for (size_t i = 1; i < info_.app_kubeconfigs.size(); ++i) {
      const Binding& b = i < bindings_.size() ? bindings_[i] : Binding{};
      if (b.apis.empty()) {
        unbound.push_back(i);
        continue;
      }
      out += fmt::format("App Cluster {} is bound ({}). Its bindings:\n  {}\n\n", i + 1,
                         core::Join(std::vector<std::string>(b.apis.begin(), b.apis.end()), ", "),
                         b.see);
    }
    if (unbound.empty()) {
      return info_.app_kubeconfigs.size() > 1 ? out + "Every App Cluster is bound.\n\n" : out;
    }
    out += fmt::format(
        "Bind App Cluster {} yourself (a browser opens the login; the password is above):\n"
        "  PATH={}:$PATH kubectl bind {} --kubeconfig {} --backend-ca-file {}\n"
        "  (add --headless to log in on another device with a code instead)\n",
        unbound[0] + 1, fs::path(kubectl_bind_).parent_path().string(), info_.export_url,
        info_.app_kubeconfigs[unbound[0]].string(), info_.ca_file.string());
    if (unbound.size() > 1) {
      std::vector<std::string> others;
      for (size_t k = 1; k < unbound.size(); ++k) others.push_back(std::to_string(unbound[k] + 1));
      out += fmt::format(
          "  App Clusters {} are not bound either (the same with their kubeconfigs in {})\n",
          core::Join(others, ", "), dir_.string());
    }
    return out + "\n";
  }

  void Kill() { processes_.KillAll(); }

 private:
  void Say(const std::string& line) {
    if (options_.log != nullptr) *options_.log << line << "\n" << std::flush;
  }

  // As root the broker runs the data-service instances as `postgres`, below the state
  // directory: refuse at once, naming the directory in the way, rather than fail each instance.
  core::Status CheckStateDirReachable() {
    if (::geteuid() != 0) return core::Status::Ok();
    auto postgres = core::LookupUser("postgres");
    if (!postgres.ok()) return core::Status::Ok();  // the broker says what it lacks
    auto reachable = core::CheckReachableBy(*postgres, dir_, "runs the data-service instances");
    if (!reachable.ok())
      return core::Status(reachable.reason(), "--state-dir: " + reachable.message());
    return core::Status::Ok();
  }

  core::Status Lock() {
    fs::path path = dir_ / kLockFile;
    lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd_ < 0) return core::Internal("opening " + path.string());
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      auto pid = core::ReadFile(path);
      ::close(lock_fd_);
      lock_fd_ = -1;
      std::string who = pid.ok() ? std::string(core::Trim(*pid)) : "";
      return core::AlreadyExists(fmt::format(
          "klutch up is already running on {}{}; use that one, or stop it first (Ctrl-C in its "
          "terminal{})",
          dir_.string(), who.empty() ? "" : " (PID " + who + ")",
          who.empty() ? "" : ", or kill " + who));
    }
    if (::ftruncate(lock_fd_, 0) == 0) {
      std::string pid = std::to_string(::getpid()) + "\n";
      (void)!::write(lock_fd_, pid.data(), pid.size());
    }
    return core::Status::Ok();
  }

  core::Status LoadState() {
    if (auto text = core::ReadFile(dir_ / kStateFile); text.ok()) {
      auto parsed = machinery::ParseJson(*text);
      if (parsed.ok() && parsed->is_object()) state_ = *parsed;
    }
    if (!state_.is_object()) state_ = Json::object();
    if (!state_.contains("ports") || !state_["ports"].is_object()) state_["ports"] = Json::object();
    auto key = [&](const char* name, size_t bytes) {
      if (machinery::GetString(state_, {name}).empty()) {
        state_[name] = core::Base64Encode(core::RandomBytes(bytes));
      }
    };
    key("cookieSigningKey", 32);
    key("cookieEncryptionKey", 32);
    return SaveState();
  }

  core::Status SaveState() {
    return core::WriteFileAtomic(dir_ / kStateFile, machinery::Dump(state_));
  }

  // The port remembered for `name`, or a free one (remembered from now on).
  core::Result<int> Port(const std::string& name) {
    auto saved = core::ParseInt64(machinery::GetString(state_, {"ports", name}));
    if (saved && *saved > 0) return static_cast<int>(*saved);
    KLUTCH_ASSIGN_OR_RETURN(int port, core::FreeTcpPort("127.0.0.1"));
    state_["ports"][name] = std::to_string(port);
    KLUTCH_RETURN_IF_ERROR(SaveState());
    return port;
  }

  core::Status EnsurePki() {
    fs::path pki = dir_ / "pki";
    std::error_code ec;
    fs::create_directories(pki, ec);
    auto cert = core::ReadFile(pki / "ca.crt");
    auto key = core::ReadFile(pki / "ca.key");
    if (cert.ok() && key.ok()) {
      ca_ = {*cert, *key};
    } else {
      KLUTCH_ASSIGN_OR_RETURN(ca_, http::GenerateCertificateAuthority(
                                       "klutch-sandbox-ca", std::chrono::hours(24 * 3650)));
      KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(pki / "ca.key", ca_.private_key));
      KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(pki / "ca.crt", ca_.certificate,
                                                   fs::perms::owner_read | fs::perms::owner_write |
                                                       fs::perms::group_read |
                                                       fs::perms::others_read));
    }
    info_.ca_file = pki / "ca.crt";
    KLUTCH_ASSIGN_OR_RETURN(
        http::Pem serving, http::IssueCertificate(ca_, {.common_name = "127.0.0.1",
                                                        .dns_names = {"localhost"},
                                                        .ip_addresses = {"127.0.0.1"},
                                                        .server = true,
                                                        .validity = std::chrono::hours(24 * 365)}));
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(pki / "backend.crt", serving.certificate));
    return core::WriteFileAtomic(pki / "backend.key", serving.private_key);
  }

  core::Status StartProcess(const std::string& name, std::vector<std::string> argv,
                            std::chrono::milliseconds grace = std::chrono::seconds(10),
                            std::vector<std::string> env = {}) {
    ProcessOptions p;
    p.name = name;
    p.spec.argv = std::move(argv);
    p.spec.env = std::move(env);
    // glibc's default of a malloc arena per core-multiple of threads keeps freed memory per
    // thread; two arenas keep the many-threaded Klutch processes small (as in containers).
    p.spec.env.push_back("MALLOC_ARENA_MAX=2");
    p.spec.cwd = dir_;
    p.spec.output_file = dir_ / "logs" / (name + ".log");
    p.grace = grace;
    std::error_code ec;
    fs::create_directories(dir_ / "logs", ec);
    return processes_.Start(std::move(p));
  }

  core::Status WaitReady(client::RestClient& rest, const std::string& what,
                         const std::string& process) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    core::Status last = core::Unavailable("not tried");
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = rest.Do({.path = "/readyz"});
      if (r.ok() && r->status == 200) return core::Status::Ok();
      last = r.ok() ? core::Unavailable(fmt::format("/readyz answered {}", r->status)) : r.status();
      if (!processes_.Running(process)) break;
      KLUTCH_RETURN_IF_ERROR(Pause(std::chrono::milliseconds(100)));
    }
    return core::Unavailable(fmt::format("{} did not become ready: {}; see {}", what,
                                         last.message(),
                                         (dir_ / "logs" / (process + ".log")).string()));
  }

  core::Status StartApiServers() {
    std::vector<std::string> names = {kControlPlane};
    for (int i = 1; i <= options_.app_clusters; ++i) names.push_back(AppName(i));
    for (const std::string& name : names) {
      KLUTCH_ASSIGN_OR_RETURN(int port, Port(name));
      std::string process = "apiserver-" + name;
      KLUTCH_RETURN_IF_ERROR(
          StartProcess(process, {klutch_, "apiserver", "--data-dir", (dir_ / name).string(),
                                 "--listen", fmt::format("127.0.0.1:{}", port)}));
    }
    for (const std::string& name : names) {
      fs::path admin = dir_ / name / "admin.kubeconfig";
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!fs::exists(admin) && std::chrono::steady_clock::now() < deadline) {
        KLUTCH_RETURN_IF_ERROR(Pause(std::chrono::milliseconds(50)));
      }
      KLUTCH_ASSIGN_OR_RETURN(auto rest, ClientFor(admin));
      KLUTCH_RETURN_IF_ERROR(WaitReady(*rest, "the " + name + " API server", "apiserver-" + name));
      fs::path link = dir_ / (name + ".kubeconfig");
      std::error_code ec;
      fs::copy_file(admin, link, fs::copy_options::overwrite_existing, ec);
      if (name == kControlPlane) {
        info_.control_plane_kubeconfig = link;
        cp_ = std::move(rest);
      } else {
        info_.app_kubeconfigs.push_back(link);
        apps_.push_back(std::move(rest));
      }
    }
    Say(fmt::format("API servers up: control plane and {} app cluster(s)", apps_.size()));
    return core::Status::Ok();
  }

  core::Status StartIdentityProvider() {
    KLUTCH_ASSIGN_OR_RETURN(int idp_port, Port("identity-provider"));
    KLUTCH_ASSIGN_OR_RETURN(int backend_port, Port("backend"));
    info_.backend_url = fmt::format("https://127.0.0.1:{}", backend_port);
    info_.export_url = info_.backend_url + "/export";
    IdentityProviderOptions o;
    o.dir = dir_ / "identity-provider";
    o.port = static_cast<uint16_t>(idp_port);
    o.ca_certificate_pem = ca_.certificate;
    o.ca_key_pem = ca_.private_key;
    o.redirect_uris = {info_.backend_url + "/callback"};
    KLUTCH_ASSIGN_OR_RETURN(idp_, IdentityProvider::Start(o, processes_));
    info_.oidc_issuer = idp_->issuer();
    info_.demo_user = idp_->user();
    info_.demo_password = idp_->password();
    Say("identity provider up: " + info_.oidc_issuer);
    return core::Status::Ok();
  }

  core::Status StartManager() {
    KLUTCH_RETURN_IF_ERROR(StartProcess(
        "manager", {klutch_, "manager", "--kubeconfig", info_.control_plane_kubeconfig.string(),
                    "--health-probe-bind-address", "127.0.0.1:0", "--metrics-bind-address", "0"}));
    return core::Status::Ok();
  }

  core::Status StartBroker() {
    KLUTCH_ASSIGN_OR_RETURN(int port, Port("broker"));
    broker_url_ = fmt::format("http://127.0.0.1:{}", port);
    // Stopping the broker stops its data-service instances: give it time.
    return StartProcess(
        "broker",
        {klutch_, "broker", "--listen", fmt::format("127.0.0.1:{}", port), "--state-dir",
         (dir_ / "broker").string(), "--credentials-secrets-kubeconfig",
         info_.control_plane_kubeconfig.string()},
        std::chrono::seconds(120));
  }

  // The a8s operator serves what the a8s Compositions' Objects create on the Control Plane;
  // stopping it stops its PostgreSQL servers: give it time.
  core::Status StartOperator() {
    return StartProcess(
        "operator",
        {klutch_, "operator", "--kubeconfig", info_.control_plane_kubeconfig.string(),
         "--state-dir", (dir_ / "operator").string(), "--health-probe-bind-address", "127.0.0.1:0"},
        std::chrono::seconds(120));
  }

  core::Status ApplyPackage() {
    client::Applier applier(*cp_);
    for (const apis::ManifestFile& file : apis::PackageManifests()) {
      KLUTCH_RETURN_IF_ERROR(Retry(std::chrono::seconds(90), [&] {
        return applier.ApplyYaml(file.text, file.name, {.field_manager = "klutch-up"});
      }));
    }
    for (const apis::ManifestFile& file : apis::ProviderConfigTemplates()) {
      std::string text = Replace(file.text, "${KLUTCH_BROKER_URL}", broker_url_);
      KLUTCH_RETURN_IF_ERROR(Retry(std::chrono::seconds(90), [&] {
        return applier.ApplyYaml(text, file.name, {.field_manager = "klutch-up"});
      }));
    }
    Say("Klutch package, provider-anynines and ProviderConfigs applied");
    return core::Status::Ok();
  }

  core::Status StartBackend() {
    KLUTCH_ASSIGN_OR_RETURN(int port, Port("backend"));
    std::string cp_server = cp_->config().server;
    fs::path cp_ca = dir_ / "pki" / "control-plane-ca.crt";
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(cp_ca, cp_->config().ca_pem));
    KLUTCH_RETURN_IF_ERROR(StartProcess(
        "backend",
        {klutch_, "backend", "--kubeconfig", info_.control_plane_kubeconfig.string(),
         "--listen-address", fmt::format("127.0.0.1:{}", port), "--tls-cert-file",
         (dir_ / "pki" / "backend.crt").string(), "--tls-key-file",
         (dir_ / "pki" / "backend.key").string(), "--external-address", cp_server,
         "--external-ca-file", cp_ca.string(), "--pretty-name", "Klutch sandbox",
         "--oidc-issuer-url", idp_->issuer(), "--oidc-issuer-client-id", idp_->client_id(),
         "--oidc-callback-url", info_.backend_url + "/callback", "--oidc-ca-file",
         info_.ca_file.string(), "--oidc-scopes", "openid", "--konnector-image", "klutch:v0.1.0",
         // AppClusterBindings too: an App Cluster can be bound from the Control Plane side,
         // with no agent in it (its konnector runs under the control-plane KonnectorRunner).
         "--control-plane-mode"},
        std::chrono::seconds(10),
        // Secrets through the environment: other users can read a process's argv.
        {"KLUTCH_OIDC_CLIENT_SECRET=" + idp_->client_secret(),
         "KLUTCH_COOKIE_SIGNING_KEY=" + machinery::GetString(state_, {"cookieSigningKey"}),
         "KLUTCH_COOKIE_ENCRYPTION_KEY=" + machinery::GetString(state_, {"cookieEncryptionKey"})}));
    // Templates for the Klutch APIs, in the namespace upstream uses.
    client::Applier applier(*cp_);
    for (const OfferedApi& api : kOffered) {
      Json t = {{"apiVersion", std::string(apis::klutch::kTemplateGroup) + "/" +
                                   std::string(apis::klutch::kVersion)},
                {"kind", "APIServiceExportTemplate"},
                {"metadata", {{"name", api.resource}, {"namespace", kTemplateNamespace}}},
                {"spec",
                 {{"APIServiceSelector", {{"group", kOfferedGroup}, {"resource", api.resource}}}}}};
      if (api.claims_credentials) t["spec"]["permissionClaims"] = CredentialClaims();
      KLUTCH_RETURN_IF_ERROR(Retry(std::chrono::seconds(60), [&] {
        return applier.Apply(t, {.field_manager = "klutch-up"}).status();
      }));
    }
    // Serving: /readyz over TLS with our CA.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto url = http::ParseUrl(info_.backend_url + "/readyz");
      auto r = http::Fetch(*url, {.ca_pem = ca_.certificate, .timeout = std::chrono::seconds(2)});
      if (r.ok() && r->status == 200) {
        Say("bind backend up: " + info_.backend_url);
        return core::Status::Ok();
      }
      if (!processes_.Running("backend")) break;
      KLUTCH_RETURN_IF_ERROR(Pause(std::chrono::milliseconds(100)));
    }
    return core::Unavailable("the bind backend did not become ready; see " +
                             (dir_ / "logs" / "backend.log").string());
  }

  core::Status StartKonnectorRunners() {
    auto start = [&](client::RestClient& rest, const std::string& name) {
      auto runner = std::make_unique<KonnectorRunner>(
          rest, processes_,
          KonnectorRunnerOptions{
              .cluster_name = name, .klutch_binary = klutch_, .dir = dir_ / "konnectors"});
      runner->Start();
      runners_.push_back(std::move(runner));
    };
    start(*cp_, kControlPlane);  // control-plane-mode konnectors of AppClusterBindings
    for (size_t i = 0; i < apps_.size(); ++i) start(*apps_[i], AppName(static_cast<int>(i + 1)));
    return core::Status::Ok();
  }

  // App Cluster 1, bound as a platform operator scripts it, in the sandbox user's name (so the
  // user finds it on the backend's /consumer page): a provider kubeconfig for the identity
  // "<the user's OIDC subject>#<cluster ID>", then `kubectl bind apiservice` with a request
  // naming every Klutch API.
  core::Status BindFirstAppCluster() {
    if (apps_.empty()) return core::Status::Ok();
    client::RestClient& app = *apps_[0];
    auto existing =
        client::ResourceClient(app, apis::klutch::kApiServiceBindings, apis::klutch::kBindNamespace)
            .List();
    if (existing.ok() && !(*existing)["items"].empty()) {
      Say("App Cluster 1 is bound already");
      return AdoptOperatorBinding(app);
    }
    // The cluster's identity, as kubectl bind derives it (so a later `kubectl bind` of the same
    // cluster by the sandbox user reuses the namespace).
    client::ResourceClient ns(app, resources::kNamespaces);
    auto got = ns.Get(apis::klutch::kBindNamespace);
    if (!got.ok()) {
      got = ns.Create({{"apiVersion", "v1"},
                       {"kind", "Namespace"},
                       {"metadata", {{"name", apis::klutch::kBindNamespace}}}});
    }
    if (!got.ok()) return got.status();
    std::string cluster_id = apis::klutch::ClusterIdFromNamespaceUid(machinery::Uid(*got));
    bind::ProvisionOptions provision;
    provision.pretty_name = "Klutch sandbox";
    provision.external_address = cp_->config().server;
    provision.external_ca_pem = cp_->config().ca_pem;
    KLUTCH_ASSIGN_OR_RETURN(
        bind::ConsumerAccess access,
        bind::ProvisionConsumer(*cp_, provision, idp_->subject() + "#" + cluster_id,
                                idp_->issuer()));
    fs::path kubeconfig = dir_ / "app-1-provider.kubeconfig";
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(kubeconfig, access.kubeconfig));
    apis::klutch::ExportRequest request{.name = "klutch-apis"};
    for (const OfferedApi& api : kOffered) {
      request.resources.push_back(
          {.group = kOfferedGroup,
           .resource = api.resource,
           .permission_claims = api.claims_credentials ? CredentialClaims() : Json::array()});
    }
    fs::path request_file = dir_ / "app-1-request.yaml";
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(
        request_file, machinery::ToYaml(apis::klutch::EncodeExportRequest(request))));
    Say("binding App Cluster 1 (kubectl bind apiservice)...");
    auto bound = core::RunProcess(
        {.argv = {kubectl_bind_, "apiservice", "--kubeconfig", info_.app_kubeconfigs[0].string(),
                  "--remote-kubeconfig", kubeconfig.string(), "-f", request_file.string(),
                  "--accept-permission-claims", "--konnector-image", "klutch:v0.1.0", "--timeout",
                  "2m"},
         .cwd = dir_,
         .output_file = dir_ / "logs" / "bind-app-1.log"},
        std::chrono::minutes(3));
    if (!bound.ok() || bound->exit_code != 0) {
      return core::Internal("binding App Cluster 1 failed; see " +
                            (dir_ / "logs" / "bind-app-1.log").string());
    }
    // Ready for claims once the konnector serves every API there (kubectl bind returns when
    // the bindings exist, before their CRDs are established).
    client::ResourceClient crds(app, resources::kCustomResourceDefinitions);
    for (const OfferedApi& api : kOffered) {
      std::string name = std::string(api.resource) + "." + kOfferedGroup;
      KLUTCH_RETURN_IF_ERROR(Retry(std::chrono::seconds(60), [&]() -> core::Status {
        auto crd = crds.Get(name);
        if (!crd.ok()) return crd.status();
        return reconcile::IsConditionTrue(*crd, "Established")
                   ? core::Status::Ok()
                   : core::Unavailable("CustomResourceDefinition " + name +
                                       " is not established in App Cluster 1; see " +
                                       (dir_ / "konnectors").string());
      }));
    }
    Say("App Cluster 1 bound");
    return core::Status::Ok();
  }

  // A state made before App Cluster 1 was bound in the sandbox user's name has its Control
  // Plane namespace under the identity "platform-operator#<cluster ID>". Its claims live there,
  // so that namespace is handed to the user, not replaced: its identity annotation, identity
  // hash label and issuer annotation become the user's (what ProvisionConsumer and the
  // /consumer page look up). Nothing to do when there is no such namespace.
  core::Status AdoptOperatorBinding(client::RestClient& app) {
    auto bind_ns =
        client::ResourceClient(app, resources::kNamespaces).Get(apis::klutch::kBindNamespace);
    if (!bind_ns.ok()) return core::Status::Ok();
    const std::string cluster_id =
        apis::klutch::ClusterIdFromNamespaceUid(machinery::Uid(*bind_ns));
    const std::string operator_identity = "platform-operator#" + cluster_id;
    const std::string identity = idp_->subject() + "#" + cluster_id;
    client::ResourceClient namespaces(*cp_, resources::kNamespaces);
    KLUTCH_ASSIGN_OR_RETURN(Json list, namespaces.ListAll({.skip_managed_fields = true}));
    for (const Json& ns : list["items"]) {
      if (machinery::Annotation(ns, apis::klutch::kIdentityAnnotation) != operator_identity)
        continue;
      Json patch = {{"metadata",
                     {{"labels",
                       {{std::string(apis::klutch::kIdentityHashLabel),
                         apis::klutch::Sha224Base62(identity)}}},
                      {"annotations",
                       {{std::string(apis::klutch::kIdentityAnnotation), identity},
                        {std::string(apis::klutch::kIssuerAnnotation), idp_->issuer()}}}}}};
      KLUTCH_RETURN_IF_ERROR(
          namespaces.Patch(machinery::Name(ns), client::PatchType::kMerge, machinery::Dump(patch))
              .status());
      Say(
          fmt::format("App Cluster 1's Control Plane namespace {} now belongs to user {} (it was "
                      "bound as platform-operator by an earlier start)",
                      machinery::Name(ns), idp_->user()));
    }
    return core::Status::Ok();
  }

  // A konnector reaches the Control Plane with a short-lived token that the backend renews in
  // the ClusterBinding's Secret and the konnector itself copies into its App Cluster. After a
  // stop longer than the token's life it cannot fetch the renewal with the expired token, so
  // the sandbox, administrator of both sides, delivers it: for each App Cluster kubeconfig
  // Secret in klutch-bind that names this Control Plane, once the backend has renewed the
  // token upstream (a bounded wait), a differing copy is replaced. A real cluster's operator
  // re-runs `kubectl bind` instead (ADR 0013).
  core::Status RenewExpiredKonnectorCredentials() {
    for (size_t i = 0; i < apps_.size(); ++i) {
      auto secrets =
          client::ResourceClient(*apps_[i], resources::kSecrets, apis::klutch::kBindNamespace)
              .List();
      if (!secrets.ok()) continue;
      for (const Json& secret : (*secrets)["items"]) {
        auto text = core::Base64Decode(
            machinery::GetString(secret, {"data", apis::klutch::kKubeconfigKey}));
        if (!text) continue;
        auto kubeconfig = client::ParseKubeconfig(*text, "kubeconfig", dir_);
        if (!kubeconfig.ok()) continue;
        auto config = client::ResolveKubeconfig(*kubeconfig);
        if (!config.ok() || config->server != cp_->config().server) continue;
        auto fresh = RenewedUpstream(config->namespace_);
        if (!fresh || *fresh == *text) continue;
        Json patch = {{"data", {{apis::klutch::kKubeconfigKey, core::Base64Encode(*fresh)}}}};
        auto r =
            client::ResourceClient(*apps_[i], resources::kSecrets, apis::klutch::kBindNamespace)
                .Patch(machinery::Name(secret), client::PatchType::kMerge, machinery::Dump(patch));
        if (r.ok()) {
          Say(
              fmt::format("App Cluster {}: its konnector's Control Plane token was out of date (it "
                          "expires while the sandbox is stopped); delivered the renewed one",
                          i + 1));
        }
      }
    }
    return core::Status::Ok();
  }

  // The kubeconfig in the ClusterBinding Secret of Control Plane namespace `ns` once its token
  // is valid for at least another minute (waiting up to 30 s for the backend to renew an
  // expired one); nothing when there is none.
  std::optional<std::string> RenewedUpstream(const std::string& ns) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (true) {
      auto cb = client::ResourceClient(*cp_, apis::klutch::kClusterBindings, ns)
                    .Get(apis::klutch::kClusterBindingName);
      if (!cb.ok()) return std::nullopt;
      std::string name = machinery::GetString(*cb, {"spec", "kubeconfigSecretRef", "name"});
      std::string key = machinery::GetString(*cb, {"spec", "kubeconfigSecretRef", "key"});
      auto secret = client::ResourceClient(*cp_, resources::kSecrets, ns).Get(name);
      if (!secret.ok()) return std::nullopt;
      auto expires = core::ParseTime(
          machinery::Annotation(*secret, std::string(apis::klutch::kTokenExpiresAnnotation)));
      if (expires && *expires > std::chrono::system_clock::now() + std::chrono::minutes(1)) {
        return core::Base64Decode(machinery::GetString(
            *secret, {"data", key.empty() ? std::string(apis::klutch::kKubeconfigKey) : key}));
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      if (!Pause(std::chrono::milliseconds(250)).ok()) return std::nullopt;
    }
  }

  // What each App Cluster is bound to now, for the banner: the APIs of its APIServiceBindings
  // (kubectl bind), and of the AppClusterBindings on the Control Plane whose kubeconfig
  // Secret reaches it (control-plane mode). What cannot be read counts as not bound.
  core::Status ReadBindings() {
    bindings_.assign(apps_.size(), Binding{});
    for (size_t i = 0; i < apps_.size(); ++i) {
      auto list = client::ResourceClient(*apps_[i], apis::klutch::kApiServiceBindings).List();
      if (!list.ok()) continue;
      for (const Json& b : (*list)["items"]) bindings_[i].apis.insert(machinery::Name(b));
      if (!bindings_[i].apis.empty()) {
        bindings_[i].see = fmt::format("kubectl --kubeconfig {} get apiservicebindings -A",
                                       info_.app_kubeconfigs[i].string());
      }
    }
    auto acbs = client::ResourceClient(*cp_, apis::klutch::kAppClusterBindings).List();
    if (!acbs.ok()) return core::Status::Ok();
    for (const Json& acb : (*acbs)["items"]) {
      std::string server = AppClusterBindingServer(acb);
      for (size_t i = 0; i < apps_.size(); ++i) {
        if (server.empty() || server != apps_[i]->config().server) continue;
        const Json* exports = machinery::Find(acb, {"spec", "apiExports"});
        if (exports == nullptr || !exports->is_array()) continue;
        for (const Json& e : *exports) {
          bindings_[i].apis.insert(machinery::GetString(e, {"resource"}) + "." +
                                   machinery::GetString(e, {"group"}));
        }
        bindings_[i].see = fmt::format(
            "kubectl --kubeconfig {} get appclusterbinding {} -n {}  (control-plane mode)",
            info_.control_plane_kubeconfig.string(), machinery::Name(acb),
            machinery::Namespace(acb));
      }
    }
    return core::Status::Ok();
  }

  // The API server address in the kubeconfig Secret an AppClusterBinding names; "" when it
  // cannot be read.
  std::string AppClusterBindingServer(const Json& acb) {
    std::string ns = machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "namespace"});
    std::string name = machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "name"});
    std::string key = machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "key"});
    auto secret = client::ResourceClient(*cp_, resources::kSecrets,
                                         ns.empty() ? machinery::Namespace(acb) : ns)
                      .Get(name);
    if (!secret.ok()) return "";
    auto text = core::Base64Decode(machinery::GetString(
        *secret, {"data", key.empty() ? std::string(apis::klutch::kKubeconfigKey) : key}));
    if (!text) return "";
    auto kubeconfig = client::ParseKubeconfig(*text, "kubeconfig", dir_);
    if (!kubeconfig.ok()) return "";
    auto config = client::ResolveKubeconfig(*kubeconfig);
    return config.ok() ? config->server : "";
  }

  struct Binding {
    std::set<std::string> apis;  // "postgresqlinstances.anynines.com"
    std::string see;             // the command that shows the bindings
  };

  SandboxOptions options_;
  SandboxInfo info_;
  fs::path dir_;
  std::string klutch_, kubectl_bind_;
  int lock_fd_ = -1;
  Json state_;
  http::Pem ca_;
  std::string broker_url_;
  ProcessSet processes_;
  std::unique_ptr<IdentityProvider> idp_;
  std::unique_ptr<client::RestClient> cp_;
  std::vector<std::unique_ptr<client::RestClient>> apps_;
  std::vector<std::unique_ptr<KonnectorRunner>> runners_;
  std::vector<Binding> bindings_;  // per App Cluster, as the last start found them
};

core::Result<std::unique_ptr<Sandbox>> Sandbox::Start(SandboxOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  core::Status st = impl->Start();
  if (!st.ok()) {
    impl->Stop();
    return st;
  }
  return std::unique_ptr<Sandbox>(new Sandbox(std::move(impl)));
}

Sandbox::Sandbox(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Sandbox::~Sandbox() = default;
const SandboxInfo& Sandbox::info() const { return impl_->info(); }
std::string Sandbox::Banner() const { return impl_->Banner(); }
void Sandbox::Kill() { impl_->Kill(); }
void Sandbox::Stop() { impl_->Stop(); }

}  // namespace klutch::sandbox
