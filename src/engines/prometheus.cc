// The Prometheus engine behind a9s-prometheus: an instance is a `prometheus` (node 0) and its
// `prometheus-alertmanager` (node 1), both from Debian, each on its own loopback port with
// HTTP basic auth from one web config file in the instance directory (both servers read it
// again on every request, so a binding's account works at once and an unbound one stops at
// once). Accounts: `klutch_admin` for the owner (snapshots, reloads, probes) and one per
// binding, all bcrypt-hashed. Neither Grafana nor a graphite exporter is packaged by Debian:
// bindings get empty `grafana_urls` and `graphite_exporters`, never an address that does not
// answer.
#include <crypt.h>
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>
#include <set>
#include <system_error>
#include <thread>

#include "core/file.h"
#include "core/log.h"
#include "core/strings.h"
#include "engines/data_service.h"
#include "http/client.h"
#include "machinery/gofmt.h"

namespace klutch::engines {
namespace prometheus {  // its own names: the engines build as one unit (ADR 0015)
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr int kPrometheusNode = 0;
constexpr int kAlertmanagerNode = 1;
constexpr char kBindingsFile[] = "bindings.json";  // username -> bcrypt hash

core::Result<std::string> Bcrypt(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", 10, nullptr, 0, salt, sizeof(salt)) == nullptr) {
    return core::Internal("bcrypt: no salt");
  }
  crypt_data data{};
  const char* hash = crypt_rn(password.c_str(), salt, &data, sizeof(data));
  if (hash == nullptr || hash[0] == '*') return core::Internal("bcrypt: hashing failed");
  return std::string(hash);
}

// A key of a tenant's scrape config that names a file on this machine, which Prometheus would
// read as the engine's account (and send to a target of the tenant's choosing).
bool NamesAFile(std::string_view key) {
  return key.ends_with("_file") || key.ends_with("_files") || key == "files" ||
         key == "file_sd_configs" || key == "kubeconfig_file";
}

// The first key, at any depth, that names a file; "" when none.
std::string FileKey(const Json& value, const std::string& path) {
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      std::string at = path + "." + key;
      if (NamesAFile(key)) return at;
      if (std::string found = FileKey(item, at); !found.empty()) return found;
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      if (std::string found = FileKey(value[i], fmt::format("{}[{}]", path, i)); !found.empty()) {
        return found;
      }
    }
  }
  return "";
}

core::Status CheckScrapeConfigs(const Json& value) {
  if (!value.is_array() || value.size() > 100) {
    return core::Invalid(fmt::format(
        "parameter scrape_configs: {} is not a list of at most 100 Prometheus scrape configs",
        ShownValue(value)));
  }
  static const std::regex kJobName("^[A-Za-z0-9_.:-]{1,128}$");
  std::set<std::string> jobs;
  for (size_t i = 0; i < value.size(); ++i) {
    const Json& job = value[i];
    const std::string at = fmt::format("scrape_configs[{}]", i);
    const Json* name = job.is_object() && job.contains("job_name") ? &job["job_name"] : nullptr;
    const auto* text = name != nullptr ? name->get_ptr<const std::string*>() : nullptr;
    if (text == nullptr || !std::regex_match(*text, kJobName)) {
      return core::Invalid(fmt::format(
          "parameter {}.job_name: {} is not a job name of 1 to 128 letters, digits and _.:-", at,
          name != nullptr ? ShownValue(*name) : "missing"));
    }
    if (*text == "prometheus" || *text == "alertmanager" || !jobs.insert(*text).second) {
      return core::Invalid(fmt::format(
          "parameter {}.job_name: {} is taken (by the instance's own jobs or an earlier entry)", at,
          core::GoQuote(*text)));
    }
    // Service discovery that would use this machine's own identity (a pod's service account,
    // a cloud's metadata endpoint, a Docker socket) is not the tenant's to use.
    for (const auto& [key, value] : job.items()) {
      if (key.ends_with("_sd_configs") && key != "dns_sd_configs" && key != "http_sd_configs") {
        return core::Invalid(fmt::format(
            "parameter {}.{}: only static_configs, dns_sd_configs and http_sd_configs can "
            "discover targets here",
            at, key));
      }
    }
    if (std::string key = FileKey(job, at); !key.empty()) {
      return core::Invalid(
          fmt::format("parameter {}: files of the server's machine cannot be used; give the values "
                      "themselves (password, credentials, ca, cert, key) instead",
                      key));
    }
  }
  return core::Status::Ok();
}

core::Status CheckParameter(const std::string& key, const Json& value) {
  if (key == "mapping_strict_match") {
    if (!value.is_boolean()) {
      return core::Invalid(fmt::format("parameter mapping_strict_match: {} is not true or false",
                                       ShownValue(value)));
    }
    return core::Status::Ok();
  }
  if (key == "scrape_configs") return CheckScrapeConfigs(value);
  return core::Invalid(fmt::format(
      "unknown parameter {}; Prometheus instances accept mapping_strict_match, scrape_configs",
      core::GoQuote(key)));
}

class PrometheusService final : public DataService {
 public:
  explicit PrometheusService(EngineContext ctx) : ctx_(std::move(ctx)) {}

  NodeSpec Node(const Instance& in, const PlanLimits& plan, int index) const override {
    const fs::path dir = ctx_.InstanceDir(in.number);
    const int port = in.ports[static_cast<size_t>(index)];
    NodeSpec spec;
    if (index == kPrometheusNode) {
      spec.process.argv = {
          ctx_.prometheus.string(), "--config.file=" + (dir / "prometheus.yml").string(),
          "--web.config.file=" + (dir / "web.yml").string(),
          "--storage.tsdb.path=" + (dir / "n0" / "data").string(),
          fmt::format("--storage.tsdb.retention.size={}B", plan.disk_quota_bytes / 10 * 9),
          fmt::format("--web.listen-address={}:{}", ctx_.host, port),
          // Snapshots (backups) need the admin API, which also lets a binding delete its own
          // series; the lifecycle API (/-/quit) stays off: reloads are SIGHUP.
          "--web.enable-admin-api"};
    } else {
      spec.process.argv = {ctx_.alertmanager.string(),
                           "--config.file=" + (dir / "alertmanager.yml").string(),
                           "--web.config.file=" + (dir / "web.yml").string(),
                           "--storage.path=" + (dir / "n1" / "data").string(),
                           fmt::format("--web.listen-address={}:{}", ctx_.host, port),
                           "--cluster.listen-address="};
    }
    spec.process.user = ctx_.user;
    spec.process.output_file = ctx_.NodeDir(in.number, index) / "server.log";
    // Neither writes a PID file: a running one is found by its command line, which names this
    // instance's files.
    spec.find_by_match = true;
    spec.match = spec.process.argv[1];
    const std::string host = ctx_.host;
    const std::string password = in.admin_password;
    spec.ready = [host, port, password] {
      http::Client client(
          {.host = host, .port = static_cast<uint16_t>(port), .timeout = milliseconds(500)});
      http::Headers h;
      h.Add("Authorization",
            "Basic " + core::Base64Encode(std::string(kAdminUser) + ":" + password));
      auto r = client.Do("GET", "/-/ready", h);
      return r.ok() && r->status == 200;
    };
    return spec;
  }

  core::Status ValidateParameters(const Json& parameters) const override {
    if (!parameters.is_object()) return core::Invalid("parameters must be a JSON object");
    for (const auto& [key, value] : parameters.items()) {
      if (value.is_null() && (key == "mapping_strict_match" || key == "scrape_configs")) continue;
      KLUTCH_RETURN_IF_ERROR(CheckParameter(key, value));
    }
    // What promtool refuses, Prometheus would refuse at start or reload.
    if (auto it = parameters.find("scrape_configs"); it != parameters.end() && !it->is_null()) {
      KLUTCH_RETURN_IF_ERROR(CheckWithPromtool(*it));
    }
    return core::Status::Ok();
  }

  core::Status Provision(Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    KLUTCH_RETURN_IF_ERROR(Prepare(in));
    return Start(in, plan, runner);
  }

  core::Status Start(const Instance& in, const PlanLimits& plan, NodeRunner& runner) override {
    if (fs::exists(ctx_.InstanceDir(in.number) / "restoring")) {
      // A Prometheus still running on the restored TSDB must not write into the one put back.
      StopStray(Node(in, plan, kPrometheusNode).match);
    }
    KLUTCH_RETURN_IF_ERROR(FinishInterruptedRestore(in));
    ClearSnapshots(in);
    KLUTCH_RETURN_IF_ERROR(WriteConfig(in));
    for (int node : {kAlertmanagerNode, kPrometheusNode}) {
      if (node >= static_cast<int>(in.ports.size())) continue;
      KLUTCH_RETURN_IF_ERROR(StartNode(in, plan, node, runner));
    }
    return core::Status::Ok();
  }

  // The plan never changes (the XRD and the catalog refuse it); parameters are a reload.
  core::Status Update(Instance& in, const PlanLimits& /*from*/, const PlanLimits& to,
                      NodeRunner& runner) override {
    KLUTCH_RETURN_IF_ERROR(WriteConfig(in));
    if (!runner.Alive(in.id, kPrometheusNode)) return Start(in, to, runner);
    return Reload(in, to);
  }

  core::Result<Json> Bind(const Instance& in, const PlanLimits& /*plan*/,
                          const Account& binding) override {
    KLUTCH_ASSIGN_OR_RETURN(Json users, ReadBindings(in));
    KLUTCH_ASSIGN_OR_RETURN(users[binding.username], Bcrypt(binding.password));
    KLUTCH_RETURN_IF_ERROR(WriteBindings(in, users));
    const std::string base = fmt::format("http://{}:", ctx_.host);
    return Json{
        {"alertmanager_urls", Json::array({base + std::to_string(in.ports[kAlertmanagerNode])})},
        // Not packaged by Debian, so not run here: no address rather than one that fails.
        {"grafana_urls", Json::array()},
        {"graphite_exporter_port", 0},
        {"graphite_exporters", Json::array()},
        {"password", binding.password},
        {"prometheus_urls", Json::array({base + std::to_string(in.ports[kPrometheusNode])})},
        {"username", binding.username}};
  }

  core::Status Unbind(const Instance& in, const PlanLimits& /*plan*/,
                      const Account& binding) override {
    KLUTCH_ASSIGN_OR_RETURN(Json users, ReadBindings(in));
    users.erase(binding.username);
    return WriteBindings(in, users);
  }

  // A TSDB snapshot (hard links of the blocks plus the head), as a tar file.
  core::Status Backup(const Instance& in, const PlanLimits& /*plan*/,
                      const fs::path& out) override {
    ClearSnapshots(in);  // an earlier backup's (or a binding's) keeps deleted blocks on disk
    KLUTCH_ASSIGN_OR_RETURN(auto r,
                            Call(in, kPrometheusNode, "POST", "/api/v1/admin/tsdb/snapshot"));
    auto body = machinery::ParseJson(r.body);
    std::string name = body.ok() ? machinery::GetString(*body, {"data", "name"}) : "";
    static const std::regex kName("^[0-9A-Za-z-]+$");
    if (r.status != 200 || !std::regex_match(name, kName)) {
      return core::Internal(fmt::format("Prometheus snapshot: {} {}", r.status, r.body));
    }
    const fs::path snapshot = Data(in) / "snapshots" / name;
    core::Status status = RunTool({.argv = {"tar", "--create", "--file", out.string(),
                                            "--directory", snapshot.string(), "."}},
                                  std::chrono::hours(6));
    std::error_code ec;
    fs::remove_all(snapshot, ec);
    return status;
  }

  // The snapshot replaces the TSDB: Prometheus stops, the old data waits beside the new until
  // Prometheus answers with the new, and comes back if it does not (also after a crash
  // midway: Start finishes the undo).
  core::Status Restore(const Instance& in, const PlanLimits& plan, const fs::path& file,
                       NodeRunner& runner) override {
    const fs::path data = Data(in);
    const fs::path old = data.string() + ".before-restore";
    const fs::path marker = ctx_.InstanceDir(in.number) / "restoring";
    KLUTCH_RETURN_IF_ERROR(FinishInterruptedRestore(in));
    std::error_code ec;
    fs::create_directories(data.string() + ".incoming", ec);
    const fs::path incoming = data.string() + ".incoming";
    core::Status status =
        RunTool({.argv = {"tar", "--extract", "--file", file.string(), "--directory",
                          incoming.string(), "--no-same-owner", "--no-same-permissions"}},
                std::chrono::hours(6));
    if (status.ok()) status = ChownTo(incoming, ctx_.user);
    if (!status.ok()) {
      fs::remove_all(incoming, ec);
      return status;
    }
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(marker, ""));
    runner.Stop(in.id, kPrometheusNode);
    fs::rename(data, old, ec);
    if (!ec) fs::rename(incoming, data, ec);
    if (ec) {
      status = core::Internal(fmt::format("replace the TSDB: {}", ec.message()));
    } else {
      status = StartNode(in, plan, kPrometheusNode, runner);
    }
    if (!status.ok()) {
      runner.Stop(in.id, kPrometheusNode);
      if (auto undone = FinishInterruptedRestore(in); !undone.ok()) {
        return core::Internal(fmt::format("{}; {}", status.message(), undone.message()));
      }
      (void)StartNode(in, plan, kPrometheusNode, runner);
      return status;
    }
    fs::remove(marker, ec);  // first: a crash while the old TSDB goes must not bring it back
    fs::remove_all(old, ec);
    return core::Status::Ok();
  }

  std::string EnforceQuota(const Instance& in, const PlanLimits& plan) override {
    // Prometheus keeps itself under 90 % of the quota (retention by size); this reports the
    // rare case it could not.
    int64_t used = DirectorySize(Data(in));
    if (used <= plan.disk_quota_bytes) return "";
    return fmt::format(
        "disk quota exceeded: {} MiB of samples kept of {} MiB; the oldest blocks go first",
        used >> 20, plan.disk_quota_bytes >> 20);
  }

 private:
  fs::path Data(const Instance& in) const { return ctx_.NodeDir(in.number, 0) / "data"; }

  core::Result<http::ClientResponse> Call(const Instance& in, int node, std::string_view method,
                                          std::string_view target) const {
    http::Client client({.host = ctx_.host,
                         .port = static_cast<uint16_t>(in.ports[static_cast<size_t>(node)]),
                         .timeout = milliseconds(60000)});
    http::Headers h;
    h.Add("Authorization",
          "Basic " + core::Base64Encode(std::string(kAdminUser) + ":" + in.admin_password));
    return client.Do(method, target, h);
  }

  void ClearSnapshots(const Instance& in) const {
    std::error_code ec;
    fs::remove_all(Data(in) / "snapshots", ec);
  }

  // Stops a process of `match` that no runner watches (left by a killed broker), and waits
  // for it to end.
  static void StopStray(const std::string& match) {
    auto pid = FindProcess(match);
    if (!pid) return;
    (void)core::StopProcess(*pid, std::chrono::seconds(30));
  }

  // A file both servers read while it changes: written aside, made theirs, then renamed in,
  // so that no request finds it unreadable.
  core::Status WriteOwned(const fs::path& path, const std::string& text) const {
    const fs::path aside = path.string() + ".new";
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(aside, text));
    std::error_code ec;
    fs::permissions(aside, fs::perms::owner_read | fs::perms::owner_write, ec);
    KLUTCH_RETURN_IF_ERROR(ChownTo(aside, ctx_.user));
    fs::rename(aside, path, ec);
    if (ec) return core::Internal(fmt::format("replace {}: {}", path.string(), ec.message()));
    return core::Status::Ok();
  }

  // A metric of Prometheus's own /metrics ("" when absent).
  std::string Metric(const Instance& in, std::string_view name) const {
    auto r = Call(in, kPrometheusNode, "GET", "/metrics");
    if (!r.ok() || r->status != 200) return "";
    for (auto line : core::Split(r->body, '\n')) {
      if (line.starts_with(name) && line.size() > name.size() && line[name.size()] == ' ') {
        return std::string(core::Trim(line.substr(name.size() + 1)));
      }
    }
    return "";
  }

  // SIGHUP, then Prometheus's own account of the reload: a newer success timestamp, or
  // prometheus_config_last_reload_successful 0.
  core::Status Reload(const Instance& in, const PlanLimits& plan) const {
    const NodeSpec spec = Node(in, plan, kPrometheusNode);
    auto pid = FindProcess(spec.match);
    if (!pid) return core::Unavailable("Prometheus is not running");
    const std::string before =
        Metric(in, "prometheus_config_last_reload_success_timestamp_seconds");
    if (before.empty()) return core::Unavailable("Prometheus does not answer on /metrics");
    // A failure already on record (an earlier reload) says nothing about this one.
    const bool failed_before = Metric(in, "prometheus_config_last_reload_successful") == "0";
    if (::kill(*pid, SIGHUP) != 0) {
      return core::Internal(fmt::format("signal Prometheus: {}", std::strerror(errno)));
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(20));
      std::string now = Metric(in, "prometheus_config_last_reload_success_timestamp_seconds");
      if (!now.empty() && now != before) return core::Status::Ok();
      if (!failed_before && Metric(in, "prometheus_config_last_reload_successful") == "0") {
        return core::Invalid(
            "Prometheus refused the new configuration (see its server.log); the previous one "
            "stays");
      }
    }
    return core::Unavailable("Prometheus did not reload its configuration within 30 s");
  }

  core::Status CheckWithPromtool(const Json& scrape_configs) const {
    Json config = {{"global", {{"scrape_interval", "15s"}}}, {"scrape_configs", scrape_configs}};
    auto r = core::RunProcess(
        {.argv = {ctx_.promtool.string(), "check", "config", "--syntax-only", "/dev/stdin"}},
        std::chrono::seconds(30), machinery::Dump(config));
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) {
      std::string why(core::Trim(r->output));
      if (auto at = why.find("/dev/stdin: "); at != std::string::npos) why = why.substr(at + 12);
      return core::Invalid(
          fmt::format("parameter scrape_configs: Prometheus refuses it: {}", core::Trim(why)));
    }
    return core::Status::Ok();
  }

  core::Status Prepare(const Instance& in) const {
    for (int node : {kPrometheusNode, kAlertmanagerNode}) {
      std::error_code ec;
      fs::create_directories(ctx_.NodeDir(in.number, node) / "data", ec);
      if (ec) return core::Internal(fmt::format("create the node directory: {}", ec.message()));
    }
    std::error_code ec;
    fs::permissions(ctx_.InstanceDir(in.number),
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
    if (!fs::exists(ctx_.InstanceDir(in.number) / kBindingsFile)) {
      KLUTCH_RETURN_IF_ERROR(WriteBindings(in, Json::object()));
    }
    return ChownTo(ctx_.InstanceDir(in.number), ctx_.user);
  }

  core::Result<Json> ReadBindings(const Instance& in) const {
    auto text = core::ReadFile(ctx_.InstanceDir(in.number) / kBindingsFile);
    if (!text.ok()) return Json::object();
    auto users = machinery::ParseJson(*text);
    if (!users.ok() || !users->is_object()) {
      return core::Internal("the instance's bindings file is unreadable");
    }
    return *users;
  }

  // The bindings' hashes and the web config both servers read: the administrator and every
  // binding. JSON is YAML; every value is a bcrypt hash, every key a name the broker made.
  core::Status WriteBindings(const Instance& in, const Json& users) const {
    const fs::path dir = ctx_.InstanceDir(in.number);
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / kBindingsFile, machinery::Dump(users)));
    Json accounts = users;
    const fs::path admin_hash = dir / "admin.hash";
    auto hash = core::ReadFile(admin_hash);
    if (!hash.ok()) {
      KLUTCH_ASSIGN_OR_RETURN(std::string made, Bcrypt(in.admin_password));
      KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(admin_hash, made));
      hash = made;
    }
    accounts[kAdminUser] = *hash;
    KLUTCH_RETURN_IF_ERROR(
        WriteOwned(dir / "web.yml", machinery::Dump(Json{{"basic_auth_users", accounts}})));
    for (const char* name : {kBindingsFile, "admin.hash"}) {
      fs::permissions(dir / name, fs::perms::owner_read | fs::perms::owner_write);
      KLUTCH_RETURN_IF_ERROR(ChownTo(dir / name, ctx_.user));
    }
    return core::Status::Ok();
  }

  core::Status WriteConfig(const Instance& in) const {
    const fs::path dir = ctx_.InstanceDir(in.number);
    const Json admin = {{"username", kAdminUser}, {"password", in.admin_password}};
    Json scrape = Json::array(
        {{{"job_name", "prometheus"},
          {"basic_auth", admin},
          {"static_configs",
           Json::array({{{"targets", Json::array({fmt::format("{}:{}", ctx_.host,
                                                              in.ports[kPrometheusNode])})}}})}},
         {{"job_name", "alertmanager"},
          {"basic_auth", admin},
          {"static_configs",
           Json::array({{{"targets", Json::array({fmt::format(
                                         "{}:{}", ctx_.host, in.ports[kAlertmanagerNode])})}}})}}});
    if (auto it = in.parameters.find("scrape_configs");
        it != in.parameters.end() && CheckScrapeConfigs(*it).ok()) {
      for (const Json& job : *it) scrape.push_back(job);
    }
    Json config = {
        {"global", {{"scrape_interval", "15s"}, {"evaluation_interval", "15s"}}},
        {"alerting",
         {{"alertmanagers",
           Json::array({{{"basic_auth", admin},
                         {"static_configs",
                          Json::array({{{"targets", Json::array({fmt::format(
                                                        "{}:{}", ctx_.host,
                                                        in.ports[kAlertmanagerNode])})}}})}}})}}},
        {"scrape_configs", scrape}};
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "prometheus.yml", machinery::Dump(config)));
    KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(
        dir / "alertmanager.yml",
        machinery::Dump(Json{{"route", {{"receiver", "none"}}},
                             {"receivers", Json::array({{{"name", "none"}}})}})));
    for (const char* name : {"prometheus.yml", "alertmanager.yml"}) {
      fs::permissions(dir / name, fs::perms::owner_read | fs::perms::owner_write);
      KLUTCH_RETURN_IF_ERROR(ChownTo(dir / name, ctx_.user));
    }
    return core::Status::Ok();
  }

  // Puts the TSDB from before a restore back when one was cut off midway.
  core::Status FinishInterruptedRestore(const Instance& in) const {
    const fs::path marker = ctx_.InstanceDir(in.number) / "restoring";
    const fs::path data = Data(in);
    const fs::path old = data.string() + ".before-restore";
    std::error_code ec;
    fs::remove_all(data.string() + ".incoming", ec);
    if (!fs::exists(marker)) {
      fs::remove_all(old, ec);  // a finished restore's, cut off while it was removed
      return core::Status::Ok();
    }
    if (fs::exists(old)) {
      fs::remove_all(data, ec);
      fs::rename(old, data, ec);
      if (ec) {
        return core::Internal(
            fmt::format("putting back the TSDB from before an interrupted "
                        "restore failed: {}",
                        ec.message()));
      }
    }
    fs::remove(marker, ec);
    return core::Status::Ok();
  }

  core::Status StartNode(const Instance& in, const PlanLimits& plan, int node,
                         NodeRunner& runner) const {
    return StartAndWait(ctx_, runner, in.id, node, Node(in, plan, node),
                        ctx_.NodeDir(in.number, node) / "server.log",
                        node == kPrometheusNode ? "Prometheus" : "Alertmanager");
  }

  EngineContext ctx_;
};

}  // namespace
}  // namespace prometheus

std::unique_ptr<DataService> NewPrometheusService(const EngineContext& context) {
  return std::make_unique<prometheus::PrometheusService>(context);
}

}  // namespace klutch::engines
