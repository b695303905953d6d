// klutch-bench-bind: the sandbox (`klutch up --app-clusters 2`, issue #14) as a process tree,
// measured against floors taken in the same run on the same machine:
//   - `klutch up` until App Cluster 1 serves postgresqlinstances.anynines.com (ready for
//     claims), against one bare `klutch apiserver` on a fresh data directory until /readyz
//     answers; target < 10 s
//   - a PostgresqlInstance + ServiceBinding created in App Cluster 1 until the binding's
//     `<binding>-creds` Secret exists there, p50 of 10 runs, against `initdb` + `postgres`
//     accepting connections; target 2x floor + 1 s
//   - `kubectl bind --headless` for App Cluster 2, the login approved as the user through
//     glewlwyd's API, until the bound CRD is Established there: in total and after the
//     approval (the user's own pace is not ours); target < 2 s for the whole flow
//   - the backend's bind itself: the /device/token call that answers with the BindingResponse
//     (the consumer is provisioned then), against GET /export on a fresh connection
//   - the memory every Klutch process takes with both App Clusters bound (Pss, so that the
//     binary's shared pages count once; the VmRSS sum is printed too); target < 250 MiB
// Prints ratios and verdicts; asserts nothing about time. `--quick` (the slow test tier): one
// run of each; it fails only if an operation fails.
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/dynamic.h"
#include "client/rest_client.h"
#include "core/process.h"
#include "core/random.h"
#include "core/status.h"
#include "core/strings.h"
#include "http/url.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"
#include "test/bench/bench_util.h"
#include "test/support/oidc_provider.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;
using std::chrono::seconds;

const fs::path kBin = KLUTCH_BIN_DIR;
const client::GroupVersionResource kPostgresqlInstances{"anynines.com", "v1",
                                                        "postgresqlinstances"};
const client::GroupVersionResource kServiceBindings{"anynines.com", "v1", "servicebindings"};
// The APIs the sandbox's backend offers; each headless login binds one.
const std::vector<std::string> kOfferedApis = {"postgresqlinstances",
                                               "servicebindings",
                                               "keyvalueinstances",
                                               "backups",
                                               "restores",
                                               "mariadbinstances",
                                               "mongodbinstances",
                                               "searchinstances",
                                               "logme2instances",
                                               "messaginginstances",
                                               "prometheusinstances"};

// The progress lines `klutch up` prints, in order: where its start-up time goes.
constexpr const char* kUpSteps[] = {"API servers up",
                                    "identity provider up",
                                    "Klutch package, provider-anynines and ProviderConfigs applied",
                                    "bind backend up",
                                    "binding App Cluster 1",
                                    "App Cluster 1 bound"};

double Since(BenchClock::time_point start) { return Seconds(start, BenchClock::now()); }

bool ConditionTrue(const core::Result<Json>& object, const std::string& type) {
  return object.ok() && reconcile::IsConditionTrue(*object, type);
}

std::string Tail(const std::string& text, size_t bytes = 3000) {
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

// One bare `klutch apiserver` on a fresh data directory until /readyz answers. The sandbox
// cannot be ready before this: each of its API servers does the same on a first start (PKI,
// database, TLS listener), and everything else in it talks to one. What `klutch up` adds on
// top (three of them at once, the IdP, manager, broker, backend, the package, the bind of App
// Cluster 1) is what the ratio shows.
struct ApiServerFloor {
  double seconds = 0;
  long rss_kib = 0;  // right after it is ready
};

core::Result<ApiServerFloor> MeasureApiServerFloor() {
  TempDir dir("klutch-bench-bind-floor");
  auto start = BenchClock::now();
  std::string error;
  auto server = ApiServerProcess::Start(dir.path() / "data", {}, &error);
  if (!server) return core::Internal(error);
  auto rest = AdminClient(server->kubeconfig());
  if (!rest) return core::Internal("cannot use " + server->kubeconfig().string());
  bool ready = Eventually(
      [&] {
        auto r = rest->Do({.path = "/readyz"});
        return r.ok() && r->status == 200;
      },
      seconds(30));
  ApiServerFloor floor{Since(start), RssKiB(server->process().pid())};
  if (!ready) return core::Internal("the bare apiserver never answered /readyz:\n" + server->log());
  return floor;
}

// `klutch up` as a child process, with what it prints parsed. The destructor stops it with
// SIGTERM and waits: it stops the data-service instances first, which takes longer than
// ChildProcess's own destructor waits before SIGKILL (that would orphan them).
class Sandbox {
 public:
  Sandbox() : dir_("klutch-bench-bind") {
    // Others may traverse it: the broker's instances and glewlwyd run as their own users.
    fs::permissions(dir_.path(), fs::perms::others_exec | fs::perms::group_exec,
                    fs::perm_options::add);
  }
  ~Sandbox() { (void)Stop(); }
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Starts `klutch up` and returns once App Cluster 1 serves every Klutch API and the banner
  // is printed, noting when each happened.
  core::Status Start(int app_clusters) {
    auto start = BenchClock::now();
    up_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{(kBin / "klutch").string(), "up", "--state-dir", state().string(),
                                 "--app-clusters", std::to_string(app_clusters)},
        log_path());
    std::map<std::string, double> served;  // resource -> seconds
    std::optional<double> announced;
    Eventually(
        [&] {
          if (!up_->running()) return true;
          // The kubeconfig appears once that API server is ready; an API is served once the
          // konnector of App Cluster 1 has created its CRD.
          if (!app1_ && fs::exists(Kubeconfig("app-1"))) app1_ = AdminClient(Kubeconfig("app-1"));
          for (const std::string& resource : kOfferedApis) {
            if (!app1_ || served.contains(resource)) continue;
            client::ResourceClient rc(*app1_, {"anynines.com", "v1", resource}, "default");
            if (rc.List({.limit = 1}).ok()) served[resource] = Since(start);
          }
          std::string text = log();
          for (const char* step : kUpSteps) {
            if (!steps_.contains(step) && text.find(step) != std::string::npos) {
              steps_[step] = Since(start);
            }
          }
          if (!announced && text.find("(ready in") != std::string::npos) announced = Since(start);
          return served.size() == kOfferedApis.size() && announced;
        },
        seconds(180));
    if (served.size() != kOfferedApis.size() || !announced) {
      return core::Internal("klutch up did not become ready:\n" + Tail(log()));
    }
    served_s_ = served["postgresqlinstances"];
    for (const auto& [resource, t] : served) all_served_s_ = std::max(all_served_s_, t);
    announced_s_ = *announced;
    std::string text = log();
    std::smatch m;
    if (std::regex_search(text, m, std::regex("user (\\S+) password (\\S+)"))) {
      user_ = m[1];
      password_ = m[2];
    }
    if (std::regex_search(text, m, std::regex("backend: (https://\\S+)"))) backend_ = m[1];
    if (std::regex_search(text, m, std::regex("\\(ready in [0-9.]+ s\\)"))) ready_line_ = m[0];
    if (user_.empty() || backend_.empty()) {
      return core::Internal("klutch up printed no user or backend:\n" + Tail(text));
    }
    return core::Status::Ok();
  }

  // SIGTERM, waiting up to 3 minutes; kInternal when it did not stop or exited non-zero.
  core::Status Stop() {
    if (up_ == nullptr) return core::Status::Ok();
    auto stopping = BenchClock::now();
    std::optional<int> code =
        up_->running() ? up_->Signal(SIGTERM, seconds(180)) : up_->exit_code();
    stop_s_ = Since(stopping);
    up_.reset();
    if (!code || *code != 0) {
      return core::Internal(fmt::format("klutch up exited with {}:\n{}",
                                        code ? std::to_string(*code) : "nothing (killed)",
                                        Tail(log())));
    }
    return core::Status::Ok();
  }

  pid_t pid() const { return up_ ? up_->pid() : -1; }
  const fs::path& dir() const { return dir_.path(); }
  fs::path state() const { return dir_.path() / "state"; }
  fs::path log_path() const { return dir_.path() / "up.log"; }
  std::string log() const { return ReadFileOrEmpty(log_path()); }
  fs::path Kubeconfig(const std::string& cluster) const {
    return state() / (cluster + ".kubeconfig");
  }
  fs::path ca_file() const { return state() / "pki" / "ca.crt"; }
  client::RestClient& app1() { return *app1_; }
  const std::string& backend() const { return backend_; }
  const std::string& user() const { return user_; }
  const std::string& password() const { return password_; }
  double served_s() const { return served_s_; }
  double all_served_s() const { return all_served_s_; }
  double announced_s() const { return announced_s_; }
  const std::string& ready_line() const { return ready_line_; }
  double stop_s() const { return stop_s_; }
  // When each of kUpSteps showed up in its output, seconds from the start.
  const std::map<std::string, double>& steps() const { return steps_; }

 private:
  TempDir dir_;
  std::unique_ptr<ChildProcess> up_;
  std::unique_ptr<client::RestClient> app1_;
  std::string user_, password_, backend_, ready_line_;
  std::map<std::string, double> steps_;
  double served_s_ = 0, all_served_s_ = 0, announced_s_ = 0, stop_s_ = 0;
};

// The user's part of a device login, as a browser would do it.
core::Status Approve(const Sandbox& s, const std::string& idp, const std::string& code) {
  return ApproveDeviceAt(idp, s.ca_file(), s.user(), s.password(), code, s.dir());
}

// A PostgresqlInstance and its ServiceBinding created in App Cluster 1 (as `kubectl apply`
// creates them: one POST each) until the binding's Secret exists there, polled every 20 ms;
// then both deleted, waiting until the broker has no instance left so runs do not pile up.
core::Result<std::vector<double>> MeasureClaims(Sandbox& s, int runs) {
  client::ResourceClient pgs(s.app1(), kPostgresqlInstances, "default");
  client::ResourceClient sbs(s.app1(), kServiceBindings, "default");
  client::ResourceClient secrets(s.app1(), client::resources::kSecrets, "default");
  const fs::path instances = s.state() / "broker" / "i";
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const std::string name = fmt::format("bench-{}", i);
    Json pg = {{"apiVersion", "anynines.com/v1"},
               {"kind", "PostgresqlInstance"},
               {"metadata", {{"name", name}, {"namespace", "default"}}},
               {"spec",
                {{"service", "a9s-postgresql15"},
                 {"plan", "postgresql-single-nano"},
                 {"compositionRef", {{"name", "a9s-postgresql"}}}}}};
    Json sb = {{"apiVersion", "anynines.com/v1"},
               {"kind", "ServiceBinding"},
               {"metadata", {{"name", name + "-binding"}, {"namespace", "default"}}},
               {"spec",
                {{"instanceRef", name},
                 {"serviceInstanceType", "postgresql"},
                 {"compositionRef", {{"name", "a9s-servicebinding"}}}}}};
    auto start = BenchClock::now();
    for (const auto& [rc, object] : {std::pair{&pgs, &pg}, std::pair{&sbs, &sb}}) {
      auto created = rc->Create(*object);
      if (!created.ok()) {
        return core::Internal(fmt::format("creating {} {} in App Cluster 1: {}",
                                          machinery::Kind(*object), machinery::Name(*object),
                                          created.status().message()));
      }
    }
    if (!Eventually([&] { return secrets.Get(name + "-binding-creds").ok(); }, seconds(300))) {
      auto claim = pgs.Get(name);
      return core::Internal(
          fmt::format("no Secret {}-binding-creds in App Cluster 1; the claim: {}", name,
                      claim.ok() ? machinery::Dump(*claim) : ""));
    }
    times.push_back(Since(start));
    std::cerr << fmt::format("claim {} -> Secret: {:.3f} s\n", name, times.back());
    KLUTCH_RETURN_IF_ERROR(sbs.Delete(name + "-binding").status());
    KLUTCH_RETURN_IF_ERROR(pgs.Delete(name).status());
    bool gone = Eventually(
        [&] {
          std::error_code ec;
          bool no_instances = !fs::exists(instances, ec) || fs::is_empty(instances, ec);
          return no_instances && core::IsNotFound(pgs.Get(name).status()) &&
                 core::IsNotFound(sbs.Get(name + "-binding").status());
        },
        seconds(300));
    if (!gone) return core::Internal("the claims of " + name + " or their instance stayed");
  }
  return times;
}

// `kubectl bind --headless --api <api>.anynines.com` for App Cluster 2, from its start until
// the CRD is Established there, with the points in between (seconds from the start).
struct CliBind {
  std::string api;
  double prompt = 0;       // the code is printed
  double approved = 0;     // the user's approval went through
  double logged_in = 0;    // its poll of /device/token got the BindingResponse
  double created = 0;      // "Created APIServiceBinding"
  double established = 0;  // the CRD is Established in App Cluster 2
  double exited = 0;
};

core::Result<CliBind> BindHeadless(const Sandbox& s, client::RestClient& app2,
                                   const std::string& resource) {
  CliBind t{.api = resource + ".anynines.com"};
  fs::path log = s.dir() / ("bind-" + resource + ".log");
  client::ResourceClient crds(app2, client::resources::kCustomResourceDefinitions);
  auto start = BenchClock::now();
  ChildProcess bind({(kBin / "kubectl-bind").string(), s.backend() + "/export", "--headless",
                     "--api", t.api, "--kubeconfig", s.Kubeconfig("app-2").string(),
                     "--backend-ca-file", s.ca_file().string(), "--accept-permission-claims"},
                    log, {{"PATH", kBin.string() + ":/usr/bin:/bin"}, {"HOME", s.dir().string()}});
  Eventually(
      [&] {
        return ReadFileOrEmpty(log).find("Waiting for the login") != std::string::npos ||
               !bind.running();
      },
      seconds(60));
  t.prompt = Since(start);
  std::string out = ReadFileOrEmpty(log);
  std::smatch code, idp;
  if (!std::regex_search(out, code, std::regex("enter the code ([A-Z0-9-]+)")) ||
      !std::regex_search(out, idp, std::regex("(https://127\\.0\\.0\\.1:\\d+)/api/oidc"))) {
    return core::Internal("kubectl bind printed no code:\n" + out);
  }
  KLUTCH_RETURN_IF_ERROR(Approve(s, idp[1], code[1]));
  t.approved = Since(start);
  bool done = Eventually(
      [&] {
        std::string text = ReadFileOrEmpty(log);
        if (t.logged_in == 0 && text.find("Logged in to") != std::string::npos) {
          t.logged_in = Since(start);
        }
        if (t.created == 0 && text.find("Created APIServiceBinding") != std::string::npos) {
          t.created = Since(start);
        }
        if (t.established == 0 && ConditionTrue(crds.Get(t.api), "Established")) {
          t.established = Since(start);
        }
        if (t.exited == 0 && !bind.running()) t.exited = Since(start);
        return t.established > 0 && t.exited > 0;
      },
      seconds(180));
  if (!done || bind.exit_code().value_or(-1) != 0) {
    return core::Internal(fmt::format("kubectl bind {} did not finish (exit {}):\n{}", t.api,
                                      bind.exit_code().value_or(-1), ReadFileOrEmpty(log)));
  }
  return t;
}

// The backend's bind as kubectl bind --headless drives it: POST /device/authorize, one
// /device/token poll before the user approves (answered authorization_pending: the handle, the
// catalog and glewlwyd's token endpoint, no provisioning), the approval, the /device/token call
// that answers with the BindingResponse. Each request on a fresh TLS connection, as the CLI
// makes them; seconds of both /device/token calls. A poll after the approval that comes
// before glewlwyd has taken it is retried and not timed.
struct BackendBindTimes {
  double pending = 0;
  double bound = 0;
};

core::Result<BackendBindTimes> BackendBind(const Sandbox& s, const std::string& ca_pem,
                                           const std::string& session, const std::string& cluster,
                                           const std::string& resource) {
  KLUTCH_ASSIGN_OR_RETURN(
      http::ClientResponse started,
      http::PostForm(s.backend() + "/device/authorize", ca_pem, {{"s", session}, {"c", cluster}}));
  auto answer = machinery::ParseJson(started.body);
  if (started.status != 200 || !answer.ok()) {
    return core::Internal(fmt::format("/device/authorize: {} {}", started.status, started.body));
  }
  std::string uri = machinery::GetString(*answer, {"verification_uri"});
  std::smatch idp;
  if (!std::regex_search(uri, idp, std::regex("^(https://[^/]+)/api/oidc"))) {
    return core::Internal("/device/authorize: unexpected verification_uri " + uri);
  }
  // One /device/token call: seconds and the OAuth error it answered ("" for a
  // BindingResponse).
  auto poll = [&]() -> core::Result<std::pair<double, std::string>> {
    auto start = BenchClock::now();
    KLUTCH_ASSIGN_OR_RETURN(
        http::ClientResponse polled,
        http::PostForm(s.backend() + "/device/token", ca_pem,
                       {{"device_handle", machinery::GetString(*answer, {"device_handle"})},
                        {"group", "anynines.com"},
                        {"resource", resource}}));
    double took = Since(start);
    auto body = machinery::ParseJson(polled.body);
    if (polled.status == 200 && body.ok() && machinery::Kind(*body) == "BindingResponse") {
      return std::pair{took, std::string()};
    }
    std::string error = body.ok() ? machinery::GetString(*body, {"error"}) : "";
    if (error != "authorization_pending" && error != "slow_down") {
      return core::Internal(fmt::format("/device/token: {} {}", polled.status, polled.body));
    }
    return std::pair{took, error};
  };
  BackendBindTimes t;
  KLUTCH_ASSIGN_OR_RETURN(auto pending, poll());
  if (pending.second != "authorization_pending") {
    return core::Internal("/device/token before the approval answered " + pending.second);
  }
  t.pending = pending.first;
  KLUTCH_RETURN_IF_ERROR(Approve(s, idp[1], machinery::GetString(*answer, {"user_code"})));
  // glewlwyd answers slow_down to polls closer than its interval (RFC 8628 §3.5); the first
  // poll after the approval normally gets the token regardless.
  const auto interval = seconds(std::max<int64_t>(1, (*answer).value("interval", 5)));
  for (int attempt = 0; attempt < 20; ++attempt) {
    KLUTCH_ASSIGN_OR_RETURN(auto polled, poll());
    if (polled.second.empty()) {
      t.bound = polled.first;
      return t;
    }
    if (polled.second == "slow_down") {
      std::this_thread::sleep_for(interval);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return core::Internal("/device/token never answered with a BindingResponse");
}

// GET /export on a fresh TLS connection: the transport and routing every backend call pays.
core::Result<double> ExportCall(const Sandbox& s, const std::string& ca_pem) {
  KLUTCH_ASSIGN_OR_RETURN(http::Url url, http::ParseUrl(s.backend() + "/export"));
  auto start = BenchClock::now();
  KLUTCH_ASSIGN_OR_RETURN(http::ClientResponse r, http::Fetch(url, {.ca_pem = ca_pem}));
  if (r.status != 200) return core::Internal(fmt::format("GET /export: {}", r.status));
  return Since(start);
}

// The processes below `root` (itself included), from /proc.
struct ProcessMemory {
  pid_t pid = 0;
  std::string program;  // the executable's file name
  std::string what;     // for Klutch processes: the command and what it serves
  long rss_kib = 0;     // VmRSS: shared pages (the klutch binary's) count in every process
  long anon_kib = 0;    // RssAnon: the process's own heap and stacks
  long pss_kib = 0;     // Pss: shared pages divided among the processes mapping them
};

// Field `name` ("Pss:") of a /proc/<pid>/<file> in kB; 0 when absent.
long ProcKiB(pid_t pid, const std::string& file, const std::string& name) {
  std::istringstream in(ReadFileOrEmpty(fmt::format("/proc/{}/{}", pid, file)));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(name)) return std::stol(line.substr(name.size()));
  }
  return 0;
}

std::vector<ProcessMemory> ProcessTree(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    auto pid = core::ParseInt64(entry.path().filename().string());
    if (!pid) continue;
    std::string stat = ReadFileOrEmpty(entry.path() / "stat");
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    children[ppid].push_back(static_cast<pid_t>(*pid));
  }
  std::vector<ProcessMemory> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    pid_t pid = todo.back();
    todo.pop_back();
    for (pid_t child : children[pid]) todo.push_back(child);
    std::error_code ec;
    fs::path exe = fs::read_symlink(fmt::format("/proc/{}/exe", pid), ec);
    ProcessMemory p{.pid = pid,
                    .program = exe.filename().string(),
                    .rss_kib = RssKiB(pid),
                    .anon_kib = ProcKiB(pid, "status", "RssAnon:"),
                    .pss_kib = ProcKiB(pid, "smaps_rollup", "Pss:")};
    if (ec || p.rss_kib < 0) continue;  // gone meanwhile
    std::vector<std::string> argv = core::ProcessCommandLine(pid);
    if (p.program == "klutch" && argv.size() > 1) {
      p.what = argv[1];
      for (size_t i = 2; i < argv.size(); ++i) {
        // API servers by their cluster, konnectors by the Deployment they run for.
        if (argv[i] == "--data-dir" && i + 1 < argv.size()) {
          p.what += " " + fs::path(argv[i + 1]).filename().string();
        } else if (argv[i].starts_with("--kubeconfig=")) {
          p.what += " " + fs::path(argv[i].substr(13)).parent_path().filename().string();
        }
      }
    }
    out.push_back(p);
  }
  std::sort(out.begin(), out.end(),
            [](const ProcessMemory& a, const ProcessMemory& b) { return a.pid < b.pid; });
  return out;
}

// Processes other than `self` whose command line names `dir`: what a stopped sandbox left.
std::vector<std::string> Leftovers(const fs::path& dir) {
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    auto pid = core::ParseInt64(entry.path().filename().string());
    if (!pid || *pid == ::getpid()) continue;
    std::string line;
    for (const std::string& arg : core::ProcessCommandLine(static_cast<pid_t>(*pid))) {
      line += arg + " ";
    }
    if (line.find(dir.string()) != std::string::npos) left.push_back(line);
  }
  return left;
}

struct Results {
  std::vector<double> pg_floor, apiserver_floor, claims, export_calls, pending_polls, first_binds,
      repeat_binds;
  long apiserver_floor_rss = 0;
  std::vector<CliBind> cli_binds;
  std::vector<ProcessMemory> processes, processes_later;
};

core::Status Measure(bool quick, Sandbox& s, Results& r) {
  const int claim_runs = quick ? 1 : 10;
  const int backend_binds = quick ? 1 : 5;
  const std::vector<std::string> apis =
      quick ? std::vector<std::string>{kOfferedApis.front()} : kOfferedApis;

  KLUTCH_RETURN_IF_ERROR(s.Start(2));
  std::cerr << fmt::format(
      "klutch up: App Cluster 1 serves postgresqlinstances after {:.3f} s, all Klutch APIs after "
      "{:.3f} s, banner after {:.3f} s; {}\n",
      s.served_s(), s.all_served_s(), s.announced_s(), s.ready_line());

  KLUTCH_ASSIGN_OR_RETURN(r.claims, MeasureClaims(s, claim_runs));

  auto app2 = AdminClient(s.Kubeconfig("app-2"));
  if (!app2) return core::Internal("cannot use " + s.Kubeconfig("app-2").string());
  for (const std::string& api : apis) {
    KLUTCH_ASSIGN_OR_RETURN(CliBind b, BindHeadless(s, *app2, api));
    std::cerr << fmt::format(
        "kubectl bind --headless {}: Established after {:.3f} s ({:.3f} s "
        "after the approval)\n",
        b.api, b.established, b.established - b.approved);
    r.cli_binds.push_back(b);
  }
  // Both App Clusters bound, no data-service instance running: Klutch's own memory.
  r.processes = ProcessTree(s.pid());

  std::string ca_pem = ReadFileOrEmpty(s.ca_file());
  for (int i = 0; i < 10; ++i) {
    KLUTCH_ASSIGN_OR_RETURN(double t, ExportCall(s, ca_pem));
    r.export_calls.push_back(t);
  }
  // A new cluster ID each time: the backend provisions a new consumer (namespace, service
  // account, token, ClusterBinding), as for a cluster's first bind; then a second API for the
  // same cluster, whose consumer exists.
  for (int i = 0; i < backend_binds; ++i) {
    std::string cluster = "bench" + core::RandomSuffix(8);
    KLUTCH_ASSIGN_OR_RETURN(BackendBindTimes first, BackendBind(s, ca_pem, core::RandomSuffix(6),
                                                                cluster, "postgresqlinstances"));
    KLUTCH_ASSIGN_OR_RETURN(BackendBindTimes repeat, BackendBind(s, ca_pem, core::RandomSuffix(6),
                                                                 cluster, "servicebindings"));
    r.pending_polls.insert(r.pending_polls.end(), {first.pending, repeat.pending});
    r.first_binds.push_back(first.bound);
    r.repeat_binds.push_back(repeat.bound);
  }

  // The same after the backend bound that many more times: what binds leave behind.
  r.processes_later = ProcessTree(s.pid());

  KLUTCH_RETURN_IF_ERROR(s.Stop());
  std::vector<std::string> left = Leftovers(s.state());
  if (!left.empty()) {
    return core::Internal("processes outlived klutch up:\n" + core::Join(left, "\n"));
  }
  return core::Status::Ok();
}

void Print(bool quick, const Sandbox& s, const Results& r) {
  std::cout << fmt::format("klutch-bench-bind{}\n", quick ? " (quick)" : "");
  double api_floor = Percentile(r.apiserver_floor, 0.5);
  std::cout << fmt::format(
      "klutch up --app-clusters 2 until App Cluster 1 serves postgresqlinstances.anynines.com: "
      "{:.3f} s (all Klutch APIs after {:.3f} s, banner seen after {:.3f} s, it printed "
      "\"{}\"); floor (one bare klutch apiserver on a fresh data dir until /readyz answers) "
      "p50 {:.3f} s of {}; ratio {:.1f}; target < 10 s: {}\n",
      s.served_s(), s.all_served_s(), s.announced_s(), s.ready_line(), api_floor,
      r.apiserver_floor.size(), s.served_s() / api_floor, Verdict(s.served_s() < 10));

  std::string steps;
  for (const char* step : kUpSteps) {
    auto it = s.steps().find(step);
    if (it != s.steps().end())
      steps += fmt::format("{}{} {:.2f} s", steps.empty() ? "" : "; ", step, it->second);
  }
  std::cout << "  its output lines appeared at: " << steps << "\n";

  double pg_floor = Percentile(r.pg_floor, 0.5);
  double claim50 = Percentile(r.claims, 0.5);
  std::cout << fmt::format(
      "claim PostgresqlInstance + ServiceBinding in App Cluster 1 -> Secret <binding>-creds "
      "there: p50 {:.3f} s, max {:.3f} s ({} runs); floor (initdb + postgres accepting) p50 "
      "{:.3f} s; ratio {:.2f}; target 2x floor + 1 s = {:.3f} s: {}\n",
      claim50, Percentile(r.claims, 1.0), r.claims.size(), pg_floor, claim50 / pg_floor,
      2 * pg_floor + 1, Verdict(claim50 <= 2 * pg_floor + 1));

  std::vector<double> totals, after, poll, cli;
  for (const CliBind& b : r.cli_binds) {
    totals.push_back(b.established);
    after.push_back(b.established - b.approved);
    poll.push_back(b.logged_in - b.approved);
    cli.push_back(b.established - b.logged_in);
    std::cout << fmt::format(
        "  kubectl bind --headless --api {}: code printed {:.3f} s, approved {:.3f} s, logged "
        "in {:.3f} s, APIServiceBinding created {:.3f} s, CRD Established {:.3f} s, exited "
        "{:.3f} s\n",
        b.api, b.prompt, b.approved, b.logged_in, b.created, b.established, b.exited);
  }
  double total50 = Percentile(totals, 0.5);
  std::cout << fmt::format(
      "full headless bind of App Cluster 2 (kubectl bind start, login automated -> CRD "
      "Established): p50 {:.3f} s, max {:.3f} s ({} APIs); after the approval p50 {:.3f} s "
      "(approval -> logged in, the CLI's next /device/token poll: p50 {:.3f} s; logged in -> "
      "Established: p50 {:.3f} s, max {:.3f} s); target < 2 s: {}\n",
      total50, Percentile(totals, 1.0), totals.size(), Percentile(after, 0.5),
      Percentile(poll, 0.5), Percentile(cli, 0.5), Percentile(cli, 1.0), Verdict(total50 < 2));

  double export50 = Percentile(r.export_calls, 0.5);
  double pending50 = Percentile(r.pending_polls, 0.5);
  double first50 = Percentile(r.first_binds, 0.5);
  double repeat50 = Percentile(r.repeat_binds, 0.5);
  std::cout << fmt::format(
      "backend bind (/device/token answering with the BindingResponse, fresh TLS connection): "
      "new cluster p50 {:.1f} ms (max {:.1f} ms), its second API p50 {:.1f} ms ({} each); "
      "baselines: GET /export p50 {:.1f} ms, /device/token answering authorization_pending "
      "(all but the provisioning) p50 {:.1f} ms; ratios to /export {:.1f} / {:.1f}; target "
      "< 2 s: {}\n",
      first50 * 1000, Percentile(r.first_binds, 1.0) * 1000, repeat50 * 1000, r.first_binds.size(),
      export50 * 1000, pending50 * 1000, first50 / export50, repeat50 / export50,
      Verdict(first50 < 2 && repeat50 < 2));

  std::map<pid_t, long> later;
  for (const ProcessMemory& p : r.processes_later) later[p.pid] = p.rss_kib;
  ProcessMemory klutch, other;
  long klutch_later = 0;
  std::cout << fmt::format(
      "processes of klutch up with both App Clusters bound (MiB: VmRSS, RssAnon, Pss; VmRSS "
      "again after the {} backend binds below):\n",
      2 * r.first_binds.size());
  for (const ProcessMemory& p : r.processes) {
    bool counted = p.program == "klutch";
    ProcessMemory& sum = counted ? klutch : other;
    sum.rss_kib += p.rss_kib;
    sum.anon_kib += p.anon_kib;
    sum.pss_kib += p.pss_kib;
    if (counted) klutch_later += later[p.pid];
    std::cout << fmt::format("  {:>7} {:<10} {:>6.1f} {:>6.1f} {:>6.1f} {:>6.1f}  {}\n", p.pid,
                             p.program, p.rss_kib / 1024.0, p.anon_kib / 1024.0, p.pss_kib / 1024.0,
                             later[p.pid] / 1024.0, counted ? p.what : "(not counted)");
  }
  // The memory the processes take together is the sum of their Pss (a page shared by n of
  // them counts 1/n in each): the VmRSS sum counts the klutch binary's and the libraries'
  // pages once per process. Both are printed; the verdict is on the memory taken.
  std::cout << fmt::format(
      "all Klutch processes: resident together (Pss sum) {:.1f} MiB, RssAnon {:.1f} MiB; VmRSS "
      "sum {:.1f} MiB (shared pages counted in each process; after the backend binds {:.1f} "
      "MiB); not counted: glewlwyd and others, VmRSS {:.1f} MiB; baseline one bare idle klutch "
      "apiserver VmRSS {:.1f} MiB; target < 250 MiB: {} (by the VmRSS sum: {})\n",
      klutch.pss_kib / 1024.0, klutch.anon_kib / 1024.0, klutch.rss_kib / 1024.0,
      klutch_later / 1024.0, other.rss_kib / 1024.0, r.apiserver_floor_rss / 1024.0,
      Verdict(klutch.pss_kib < 250 * 1024), Verdict(klutch.rss_kib < 250 * 1024));
  std::cout << fmt::format("klutch up stopped on SIGTERM in {:.1f} s\n", s.stop_s());
}

int Run(bool quick) {
  Results r;
  const int floor_runs = quick ? 1 : 10;
  auto user = InstanceUser();
  for (int i = 0; i < floor_runs; ++i) r.pg_floor.push_back(PostgresFloor(user));
  for (int i = 0; i < (quick ? 1 : 5); ++i) {
    auto floor = MeasureApiServerFloor();
    if (!floor.ok()) {
      std::cerr << floor.status().message() << "\n";
      return 1;
    }
    r.apiserver_floor.push_back(floor->seconds);
    r.apiserver_floor_rss = floor->rss_kib;
  }
  Sandbox s;
  core::Status st = Measure(quick, s, r);
  if (!st.ok()) {
    std::cerr << "klutch-bench-bind: " << st.message() << "\n";
    return 1;
  }
  Print(quick, s, r);
  return 0;
}

}  // namespace
}  // namespace klutch::testing

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  return klutch::testing::Run(quick);
}
