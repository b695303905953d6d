#include "sandbox/konnector_runner.h"

#include <fmt/format.h>

#include <algorithm>
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
#include "http/url.h"
#include "machinery/object.h"
#include "serving/kubeconfig.h"

namespace klutch::sandbox {
namespace {

using machinery::Json;
namespace resources = client::resources;
namespace fs = std::filesystem;

constexpr char kContainer[] = "konnector";
// At most this many replicas run per Deployment (a typo in spec.replicas must not fork-bomb
// the machine).
constexpr int64_t kMaxReplicas = 5;

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
      for (const auto& [key, r] : running_) {
        names.insert(names.end(), r.processes.begin(), r.processes.end());
      }
      running_.clear();
    }
    for (const auto& name : names) processes_.Stop(name);
  }

  int Running() const {
    core::MutexLock lock(mu_);
    int n = 0;
    for (const auto& [key, r] : running_) n += static_cast<int>(r.processes.size());
    return n;
  }

 private:
  // The replicas of one Deployment: processes[i] is replica i, named ReplicaName(key, i).
  struct Run {
    std::vector<std::string> processes;
    std::string template_hash;
    std::string ns, service_account;
    fs::path dir, token_file;
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
        // The readiness probe's period: with nothing else to do, every Deployment it runs is
        // probed again, so a replica that hangs or died shows as unready within ~10 s.
        if (dirty_.empty()) {
          for (const auto& [key, r] : running_) dirty_.insert(key);
        }
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
        // Deployments whose replicas are not all ready yet are probed again, as the kubelet's
        // readiness probe would be.
        again.insert(unready_.begin(), unready_.end());
        unready_.clear();
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
  std::string ReplicaName(const std::string& key, int64_t replica) const {
    return ProcessName(key) + "-" + std::to_string(replica);
  }

  bool Registered(const std::string& process) const {
    for (const ProcessInfo& p : processes_.List()) {
      if (p.name == process) return true;
    }
    return false;
  }

  // Whether replica `process` answers its /readyz (the kubelet's readiness probe), at the
  // health address its log's last "konnector: health on HOST:PORT" line gives (the port the
  // process chose). The address is kept per pid once a probe succeeded, so that a long log is
  // read again only when the process was restarted or stopped answering. Worker thread only.
  bool ProbeReady(const std::string& process) {
    pid_t pid = -1;
    for (const ProcessInfo& p : processes_.List()) {
      if (p.name == process) pid = p.pid;
    }
    if (pid <= 0) return false;
    auto probe = [](const std::string& address) {
      auto url = http::ParseUrl("http://" + address + "/readyz");
      if (!url.ok()) return false;
      auto r = http::Fetch(*url, {.timeout = std::chrono::seconds(2)});
      return r.ok() && r->status == 200;
    };
    std::string tried;  // a hung replica costs one probe timeout, not two
    auto known = health_.find(process);
    if (known != health_.end() && known->second.first == pid) {
      if (probe(known->second.second)) return true;
      tried = known->second.second;
    }
    health_.erase(process);
    auto log = core::ReadFile(options_.dir / (process + ".log"));
    if (!log.ok()) return false;
    constexpr std::string_view kLine = "konnector: health on ";
    size_t at = log->rfind(kLine);
    if (at == std::string::npos) return false;
    size_t start = at + kLine.size();
    size_t end = log->find_first_of(", \n", start);
    std::string address = log->substr(start, end == std::string::npos ? end : end - start);
    if (address == tried || !probe(address)) return false;
    health_[process] = {pid, address};
    return true;
  }

  core::Status Reconcile(const std::string& key) {
    client::ObjectPtr object = informer_.indexer().Get(key);
    const Json* container = object ? KonnectorContainer(*object) : nullptr;
    const Json* replicas = object ? machinery::Find(*object, {"spec", "replicas"}) : nullptr;
    const int64_t* count = replicas != nullptr ? replicas->get_ptr<const int64_t*>() : nullptr;
    // spec.replicas defaults to 1, as in Kubernetes.
    int64_t want = count == nullptr ? 1 : std::clamp<int64_t>(*count, 0, kMaxReplicas);
    bool wanted = container != nullptr && want > 0 && !machinery::IsBeingDeleted(*object);
    const Json* pod_template = object ? machinery::Find(*object, {"spec", "template"}) : nullptr;
    std::string hash = wanted && pod_template != nullptr ? machinery::JsonHash(*pod_template) : "";
    std::vector<std::string> stop;
    bool prepare = wanted;
    {
      core::MutexLock lock(mu_);
      auto it = running_.find(key);
      if (it != running_.end()) {
        Run& run = it->second;
        if (wanted && run.template_hash == hash) {
          // Scaled down: the highest replicas go.
          while (static_cast<int64_t>(run.processes.size()) > want) {
            stop.push_back(run.processes.back());
            run.processes.pop_back();
          }
          prepare = false;
        } else {
          stop = run.processes;
          running_.erase(it);
        }
      }
    }
    for (const std::string& process : stop) {
      KLUTCH_LOG(kInfo, "sandbox", "stopping {}", process);
      processes_.Stop(process);
    }
    if (!wanted) {
      // Scaled to zero: no replica, as the deployment controller would say.
      bool scaled_to_zero =
          container != nullptr && want == 0 && !machinery::IsBeingDeleted(*object);
      return scaled_to_zero ? ReportStatus(key, *object, 0) : core::Status::Ok();
    }
    if (prepare) KLUTCH_RETURN_IF_ERROR(Prepare(key, *object, hash));
    // Replicas missing (new, scaled up, or ended) are started.
    for (int64_t i = 0; i < want; ++i) {
      std::string process = ReplicaName(key, i);
      bool have;
      {
        core::MutexLock lock(mu_);
        auto it = running_.find(key);  // Prepare made it
        have = it != running_.end() &&
               std::find(it->second.processes.begin(), it->second.processes.end(), process) !=
                   it->second.processes.end();
      }
      // A replica the ProcessSet still holds (running, or waiting out its restart backoff) is
      // left to it, so that a crash-looping konnector keeps its backoff.
      if (have && Registered(process)) continue;
      if (have) processes_.Stop(process);
      KLUTCH_RETURN_IF_ERROR(StartReplica(key, *object, *container, i));
    }
    return ReportStatus(key, *object, want);
  }

  // What the deployment controller and the kubelet would report: each replica a local process
  // (replicas, updatedReplicas), ready and available while its /readyz answers 200. A standby
  // replica (not holding the Lease) is ready once its caches are in, as in a real cluster, so a
  // healthy Deployment reads N/N. Written only on change; a Deployment not fully ready is
  // probed again a second later.
  core::Status ReportStatus(const std::string& key, const Json& deployment, int64_t want) {
    std::vector<std::string> replicas;
    {
      core::MutexLock lock(mu_);
      if (auto it = running_.find(key); it != running_.end()) replicas = it->second.processes;
    }
    int64_t ready = 0;
    for (const std::string& process : replicas) ready += ProbeReady(process) ? 1 : 0;
    if (ready < want) {
      core::MutexLock lock(mu_);
      unready_.insert(key);
    }
    bool available = ready > 0 || want == 0;  // zero of zero is all that is asked for
    Json conditions = Json::array({
        {{"type", "Available"},
         {"status", available ? "True" : "False"},
         {"reason", available ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable"},
         {"message", available ? "klutch up runs this konnector as local processes, one per "
                                 "replica; the holder of the Lease runs the controllers"
                               : "no konnector process answers /readyz yet"}},
        {{"type", "Progressing"},
         {"status", "True"},
         {"reason", ready == want ? "NewReplicaSetAvailable" : "ReplicaSetUpdated"},
         {"message", "klutch up runs the current pod template"}},
    });
    int64_t count = static_cast<int64_t>(replicas.size());
    Json status = {{"observedGeneration", deployment["metadata"].value("generation", 1)},
                   {"replicas", count},
                   {"updatedReplicas", count},
                   {"readyReplicas", ready},
                   {"availableReplicas", ready}};
    const Json* have = machinery::Find(deployment, {"status"});
    auto same = [&](const std::string& field) {
      return have != nullptr && have->contains(field) && (*have)[field] == status[field];
    };
    bool current = true;
    for (const auto& [field, value] : status.items()) current = current && same(field);
    // Kubernetes omits a zero unavailableReplicas.
    Json unavailable = want > ready ? Json(want - ready) : Json();
    current =
        current && (have == nullptr ? unavailable.is_null()
                                    : have->value("unavailableReplicas", Json()) == unavailable);
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
    status["unavailableReplicas"] = unavailable;  // null removes it (merge patch)
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

  // The Deployment's token and kubeconfig, which its replicas share (one service account), and
  // its entry in running_, with no replica yet.
  core::Status Prepare(const std::string& key, const Json& deployment, const std::string& hash) {
    std::string ns = machinery::Namespace(deployment);
    std::string sa =
        machinery::GetString(deployment, {"spec", "template", "spec", "serviceAccountName"});
    if (sa.empty()) sa = "default";
    fs::path dir = options_.dir / ProcessName(key);
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
    core::MutexLock lock(mu_);
    running_[key] =
        Run{.processes = {},
            .template_hash = hash,
            .ns = ns,
            .service_account = sa,
            .dir = dir,
            .token_file = token_file,
            .token_renew_at = std::chrono::steady_clock::now() + options_.token_ttl / 2};
    return core::Status::Ok();
  }

  // Replica `replica` of the Deployment as a local process (after Prepare).
  core::Status StartReplica(const std::string& key, const Json& deployment, const Json& container,
                            int64_t replica) {
    std::string ns = machinery::Namespace(deployment);
    std::string name = machinery::Name(deployment);
    std::string process = ReplicaName(key, replica);
    fs::path dir;
    {
      core::MutexLock lock(mu_);
      auto it = running_.find(key);
      if (it == running_.end()) {
        return core::Internal("konnector Deployment " + key + " was not prepared");
      }
      dir = it->second.dir;
    }
    // The Pod's environment: downward-API names and literal values. Each replica has its own
    // pod name, its identity in the leader election.
    std::map<std::string, std::string> env = {
        {"POD_NAME", fmt::format("{}-sandbox-{}", name, replica)}, {"POD_NAMESPACE", ns}};
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
    std::vector<std::string>& list = running_[key].processes;
    if (std::find(list.begin(), list.end(), process) == list.end()) list.push_back(process);
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
        KLUTCH_LOG(kWarn, "sandbox", "renewing the token of {}: {}", key, st.message());
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
  std::set<std::string> unready_ GUARDED_BY(mu_);
  // process -> (pid, health address) of its last successful probe; the worker thread's own.
  std::map<std::string, std::pair<pid_t, std::string>> health_;
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
