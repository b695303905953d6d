#include "sandbox/konnector_runner.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <thread>

#include "client/dynamic.h"
#include "client/informer.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/log.h"
#include "core/strings.h"
#include "core/sync.h"
#include "machinery/object.h"
#include "serving/kubeconfig.h"

namespace klutch::sandbox {
namespace {

using machinery::Json;
namespace resources = client::resources;
namespace fs = std::filesystem;

constexpr char kContainer[] = "konnector";

// The konnector container of a Deployment's pod template, or nullptr.
const Json* KonnectorContainer(const Json& deployment) {
  const Json* containers = machinery::Find(deployment, {"spec", "template", "spec", "containers"});
  if (containers == nullptr || !containers->is_array()) return nullptr;
  for (const Json& c : *containers) {
    if (machinery::GetString(c, {"name"}) == kContainer) return &c;
  }
  return nullptr;
}

// Expands $(VAR) from `env` as the kubelet does ($$ escapes a dollar; unknown names stay).
std::string Expand(const std::string& text, const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '(') {
      size_t close = text.find(')', i + 2);
      if (close != std::string::npos) {
        auto it = env.find(text.substr(i + 2, close - i - 2));
        if (it != env.end()) {
          out += it->second;
          i = close;
          continue;
        }
      }
    }
    out += text[i];
  }
  return out;
}

bool IsFlag(std::string_view arg, std::string_view flag) {
  return arg == flag || arg.starts_with(std::string(flag) + "=");
}

}  // namespace

class KonnectorRunner::Impl {
 public:
  Impl(client::RestClient& admin, ProcessSet& processes, KonnectorRunnerOptions options)
      : admin_(admin),
        processes_(processes),
        options_(std::move(options)),
        informer_(admin, resources::kDeployments, {}) {}

  ~Impl() { Stop(); }

  void Start() {
    std::error_code ec;
    fs::create_directories(options_.dir, ec);
    fs::permissions(options_.dir, fs::perms::owner_all, ec);
    informer_.AddEventHandler({
        .on_add = [this](const client::ObjectPtr& o) { Enqueue(*o); },
        .on_update = [this](const client::ObjectPtr&, const client::ObjectPtr& o) { Enqueue(*o); },
        .on_delete = [this](const client::ObjectPtr& o) { Enqueue(*o); },
    });
    {
      core::MutexLock lock(mu_);
      stopping_ = false;
    }
    worker_ = std::thread([this] { Work(); });
    informer_.Start();
    informer_.WaitForSync(std::chrono::seconds(30));
  }

  void Stop() {
    {
      core::MutexLock lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.SignalAll();
    informer_.Stop();
    if (worker_.joinable()) worker_.join();
    std::vector<std::string> names;
    {
      core::MutexLock lock(mu_);
      for (const auto& [key, r] : running_) names.push_back(r.process);
      running_.clear();
    }
    for (const auto& name : names) processes_.Stop(name);
  }

  int Running() const {
    core::MutexLock lock(mu_);
    return static_cast<int>(running_.size());
  }

 private:
  struct Run {
    std::string process;
    std::string template_hash;
    std::string ns, service_account;
    fs::path token_file;
    std::chrono::steady_clock::time_point token_renew_at;
  };

  void Enqueue(const Json& deployment) {
    {
      core::MutexLock lock(mu_);
      dirty_.insert(machinery::Namespace(deployment) + "/" + machinery::Name(deployment));
    }
    cv_.SignalAll();
  }

  void Work() {
    while (true) {
      std::set<std::string> keys;
      {
        core::MutexLock lock(mu_);
        if (dirty_.empty() && !stopping_) cv_.WaitFor(mu_, std::chrono::seconds(10));
        if (stopping_) return;
        keys.swap(dirty_);
      }
      for (const std::string& key : keys) {
        core::Status st = Reconcile(key);
        if (!st.ok()) {
          KLUTCH_LOG(kWarn, "sandbox", "konnector {} in {}: {} (retrying)", key,
                     options_.cluster_name, st.message());
          core::MutexLock lock(mu_);
          retry_.insert(key);
        }
      }
      RenewTokens();
      std::set<std::string> again;
      {
        core::MutexLock lock(mu_);
        again.swap(retry_);
        dirty_.insert(again.begin(), again.end());
      }
      if (!again.empty()) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }

  std::string ProcessName(const std::string& key) const {
    std::string name = "konnector-" + options_.cluster_name + "-" + key;
    for (char& c : name) {
      if (c == '/') c = '-';
    }
    return name;
  }

  core::Status Reconcile(const std::string& key) {
    client::ObjectPtr object = informer_.indexer().Get(key);
    const Json* container = object ? KonnectorContainer(*object) : nullptr;
    const Json* replicas = object ? machinery::Find(*object, {"spec", "replicas"}) : nullptr;
    const int64_t* count = replicas != nullptr ? replicas->get_ptr<const int64_t*>() : nullptr;
    bool wanted = container != nullptr && !(count != nullptr && *count == 0) &&
                  !machinery::IsBeingDeleted(*object);
    const Json* pod_template = object ? machinery::Find(*object, {"spec", "template"}) : nullptr;
    std::string hash = wanted && pod_template != nullptr ? machinery::JsonHash(*pod_template) : "";
    std::string stop;
    {
      core::MutexLock lock(mu_);
      auto it = running_.find(key);
      if (it != running_.end()) {
        if (wanted && it->second.template_hash == hash && processes_.Running(it->second.process)) {
          return ReportStatus(*object);
        }
        stop = it->second.process;
        running_.erase(it);
      }
    }
    if (!stop.empty()) {
      KLUTCH_LOG(kInfo, "sandbox", "stopping {}", stop);
      processes_.Stop(stop);
    }
    if (!wanted) return core::Status::Ok();
    KLUTCH_RETURN_IF_ERROR(StartKonnector(key, *object, *container, hash));
    return ReportStatus(*object);
  }

  // What the deployment controller and the kubelet would report once the one local process
  // runs, so that `kubectl get deployments` and `kubectl rollout status` show the konnector as
  // available (a dead process is restarted by Reconcile or the ProcessSet, not reported).
  // Written only on change.
  core::Status ReportStatus(const Json& deployment) {
    Json conditions = Json::array({
        {{"type", "Available"},
         {"status", "True"},
         {"reason", "KonnectorRunning"},
         {"message", "klutch up runs this konnector as a local process"}},
        {{"type", "Progressing"},
         {"status", "True"},
         {"reason", "NewReplicaSetAvailable"},
         {"message", "klutch up runs the current pod template"}},
    });
    Json status = {{"observedGeneration", deployment["metadata"].value("generation", 1)},
                   {"replicas", 1},
                   {"updatedReplicas", 1},
                   {"readyReplicas", 1},
                   {"availableReplicas", 1}};
    const Json* have = machinery::Find(deployment, {"status"});
    auto same = [&](const char* field) {
      return have != nullptr && have->contains(field) && (*have)[field] == status[field];
    };
    bool current = true;
    for (const auto& [field, value] : status.items()) current = current && same(field.c_str());
    const Json* have_conditions =
        have != nullptr ? machinery::Find(*have, {"conditions"}) : nullptr;
    for (const Json& c : conditions) {
      bool found = false;
      if (have_conditions != nullptr && have_conditions->is_array()) {
        for (const Json& h : *have_conditions) {
          found =
              found || (h.value("type", "") == c["type"] && h.value("status", "") == c["status"] &&
                        h.value("reason", "") == c["reason"]);
        }
      }
      current = current && found;
    }
    if (current) return core::Status::Ok();
    std::string now = core::FormatTime(std::chrono::system_clock::now());
    for (Json& c : conditions) {
      c["lastUpdateTime"] = now;
      c["lastTransitionTime"] = now;
    }
    status["conditions"] = std::move(conditions);
    client::ResourceClient deployments(admin_, resources::kDeployments,
                                       machinery::Namespace(deployment));
    return deployments
        .Patch(machinery::Name(deployment), client::PatchType::kMerge,
               machinery::Dump(Json{{"status", status}}), {}, "status")
        .status();
  }

  core::Result<std::string> RequestToken(const std::string& ns, const std::string& sa) {
    Json request = {{"apiVersion", "authentication.k8s.io/v1"},
                    {"kind", "TokenRequest"},
                    {"spec", {{"expirationSeconds", options_.token_ttl.count()}}}};
    client::Request r;
    r.verb = "POST";
    r.path = client::ResourcePath(resources::kServiceAccounts, ns, sa, "token");
    r.body = machinery::Dump(request);
    KLUTCH_ASSIGN_OR_RETURN(Json answer, admin_.DoJson(r));
    std::string token = machinery::GetString(answer, {"status", "token"});
    if (token.empty()) return core::Internal("the TokenRequest answer holds no token");
    return token;
  }

  core::Status StartKonnector(const std::string& key, const Json& deployment, const Json& container,
                              const std::string& hash) {
    std::string ns = machinery::Namespace(deployment);
    std::string name = machinery::Name(deployment);
    std::string sa =
        machinery::GetString(deployment, {"spec", "template", "spec", "serviceAccountName"});
    if (sa.empty()) sa = "default";
    std::string process = ProcessName(key);
    fs::path dir = options_.dir / process;
    std::error_code ec;
    fs::create_directories(dir, ec);
    KLUTCH_ASSIGN_OR_RETURN(std::string token, RequestToken(ns, sa));
    fs::path token_file = dir / "token";
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(token_file, token));
    serving::KubeconfigSpec kubeconfig;
    kubeconfig.name = "in-cluster";
    kubeconfig.server = admin_.config().server;
    kubeconfig.ca_pem = admin_.config().ca_pem;
    kubeconfig.token_file = token_file.string();
    kubeconfig.ns = ns;
    KLUTCH_RETURN_IF_ERROR(serving::WriteKubeconfig(dir / "kubeconfig", kubeconfig));

    // The Pod's environment: downward-API names and literal values.
    std::map<std::string, std::string> env = {{"POD_NAME", name + "-sandbox"},
                                              {"POD_NAMESPACE", ns}};
    const Json* env_list = machinery::Find(container, {"env"});
    if (env_list != nullptr && env_list->is_array()) {
      for (const Json& e : *env_list) {
        std::string n = machinery::GetString(e, {"name"});
        if (n.empty() || n == "POD_NAME" || n == "POD_NAMESPACE") continue;
        if (const Json* v = machinery::Find(e, {"value"}); v != nullptr) {
          if (const std::string* text = v->get_ptr<const std::string*>())
            env[n] = Expand(*text, env);
        }
      }
    }
    // Always `klutch konnector` with the kubeconfig made here: a Deployment in a cluster must
    // not make the sandbox run another command or reach another cluster's credentials. Its
    // own probe, metrics and kubeconfig flags (`--flag=value` or `--flag value`) give way.
    std::vector<std::string> argv = {options_.klutch_binary, "konnector"};
    std::vector<std::string> args = machinery::Strings(machinery::Find(container, {"args"}));
    for (size_t i = 0; i < args.size(); ++i) {
      std::string arg = Expand(args[i], env);
      bool replaced = false;
      for (const char* flag :
           {"--health-probe-bind-address", "--metrics-bind-address", "--kubeconfig"}) {
        if (arg == flag) {
          ++i;  // its value is the next argument
          replaced = true;
        } else if (IsFlag(arg, flag)) {
          replaced = true;
        }
      }
      if (!replaced) argv.push_back(arg);
    }
    argv.push_back("--health-probe-bind-address=127.0.0.1:0");
    argv.push_back("--metrics-bind-address=0");
    argv.push_back("--kubeconfig=" + (dir / "kubeconfig").string());
    ProcessOptions p;
    p.name = process;
    p.spec.argv = argv;
    for (const auto& [k, v] : env) p.spec.env.push_back(k + "=" + v);
    p.spec.env.push_back("MALLOC_ARENA_MAX=2");  // as the sandbox's other processes
    p.spec.cwd = dir;
    p.spec.output_file = options_.dir / (process + ".log");
    p.grace = std::chrono::seconds(10);
    KLUTCH_LOG(kInfo, "sandbox", "starting {} for Deployment {} in {}", process, key,
               options_.cluster_name);
    KLUTCH_RETURN_IF_ERROR(processes_.Start(std::move(p)));
    core::MutexLock lock(mu_);
    running_[key] =
        Run{process, hash,       ns,
            sa,      token_file, std::chrono::steady_clock::now() + options_.token_ttl / 2};
    return core::Status::Ok();
  }

  // Renews each konnector's token once half its lifetime has passed.
  void RenewTokens() {
    std::vector<std::pair<std::string, Run>> due;
    auto now = std::chrono::steady_clock::now();
    {
      core::MutexLock lock(mu_);
      for (const auto& [key, r] : running_) {
        if (now >= r.token_renew_at) due.emplace_back(key, r);
      }
    }
    for (const auto& [key, r] : due) {
      auto token = RequestToken(r.ns, r.service_account);
      core::Status st = token.ok() ? core::WriteFileAtomic(r.token_file, *token) : token.status();
      core::MutexLock lock(mu_);
      auto it = running_.find(key);
      if (it == running_.end()) continue;
      it->second.token_renew_at =
          st.ok() ? now + options_.token_ttl / 2 : now + std::chrono::seconds(30);
      if (!st.ok()) {
        KLUTCH_LOG(kWarn, "sandbox", "renewing the token of {}: {}", r.process, st.message());
      }
    }
  }

  client::RestClient& admin_;
  ProcessSet& processes_;
  const KonnectorRunnerOptions options_;
  client::Informer informer_;
  mutable core::Mutex mu_;
  core::CondVar cv_;
  std::set<std::string> dirty_ GUARDED_BY(mu_);
  std::set<std::string> retry_ GUARDED_BY(mu_);
  std::map<std::string, Run> running_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = true;
  std::thread worker_;
};

KonnectorRunner::KonnectorRunner(client::RestClient& admin, ProcessSet& processes,
                                 KonnectorRunnerOptions options)
    : impl_(std::make_unique<Impl>(admin, processes, std::move(options))) {}
KonnectorRunner::~KonnectorRunner() = default;
void KonnectorRunner::Start() { impl_->Start(); }
void KonnectorRunner::Stop() { impl_->Stop(); }
int KonnectorRunner::Running() const { return impl_->Running(); }

}  // namespace klutch::sandbox
