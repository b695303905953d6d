#include "test/support/control_plane.h"

#include <fmt/format.h>
#include <signal.h>

#include <cstring>
#include <fstream>

#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path kKubectl = "/usr/bin/kubectl";
const std::string kKlutch = std::string(KLUTCH_BIN_DIR) + "/klutch";
const fs::path kKlutchDir = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch";

// A loopback port nothing listens on (bash's /dev/tcp connect fails there).
int UnusedPort() {
  CommandResult r = RunShell(
      "for p in $(seq 21000 29999 | shuf); do "
      "(echo > /dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; exit 0; }; done",
      {}, "/", 10s);
  return static_cast<int>(core::ParseInt64(core::Trim(r.out)).value_or(0));
}

}  // namespace

std::unique_ptr<DataServicesControlPlane> DataServicesControlPlane::Start(const fs::path& dir,
                                                                          Options options,
                                                                          std::string* error) {
  std::unique_ptr<DataServicesControlPlane> cp(new DataServicesControlPlane());
  cp->dir_ = dir;
  cp->server_ = ApiServerProcess::Start(dir / "data", {}, error);
  if (!cp->server_) return nullptr;
  CommandResult crds =
      cp->Kubectl("apply -f " + (kKlutchDir / "provider-anynines/package/crds").string());
  if (crds.exit_code != 0) {
    *error = "applying the provider CRDs failed: " + crds.err;
    return nullptr;
  }
  cp->broker_port_ = UnusedPort();
  cp->broker_state_ = dir / "broker";
  if (!cp->StartBroker(error)) return nullptr;
  cp->manager_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{kKlutch, "manager", "--kubeconfig",
                               cp->server_->kubeconfig().string(), "--health-probe-bind-address",
                               "127.0.0.1:0", "--metrics-bind-address", "0", "--poll-interval",
                               options.poll_interval},
      dir / "manager.log", std::map<std::string, std::string>{{"HOME", dir.string()}});
  if (!Eventually([&] { return cp->ManagerLog().find("health on") != std::string::npos; })) {
    *error = "the manager did not start:\n" + cp->ManagerLog();
    return nullptr;
  }
  fs::path package = kKlutchDir / "crossplane-api";
  CommandResult apply = cp->Kubectl("apply -R -f " + (package / "api/common").string() + " -f " +
                                    (package / "api/a9s").string());
  if (apply.exit_code != 0) {
    *error = "applying the package failed: " + apply.err;
    return nullptr;
  }
  if (cp->Kubectl("wait xrd --all --for=condition=Offered --timeout=90s", 120s).exit_code != 0) {
    *error = "the XRDs were not offered:\n" + cp->ManagerLog();
    return nullptr;
  }
  for (const char* type : {"postgres", "keyvalue", "mariadb", "prometheus", "messaging"}) {
    fs::path adapted = cp->AdaptProviderConfig(kKlutchDir / "provider-anynines/examples/provider" /
                                               fmt::format("config-{}.yaml", type));
    CommandResult r = cp->Kubectl("apply -f " + adapted.string());
    if (r.exit_code != 0) {
      *error = "applying the ProviderConfigs failed: " + r.out + r.err;
      return nullptr;
    }
  }
  return cp;
}

DataServicesControlPlane::~DataServicesControlPlane() {
  if (manager_) manager_->Signal(SIGTERM, 30s);
  if (broker_) broker_->Signal(SIGTERM, 120s);
}

CommandResult DataServicesControlPlane::Kubectl(const std::string& args,
                                                std::chrono::seconds timeout) const {
  std::map<std::string, std::string> env = {
      {"HOME", dir_.string()}, {"KUBECACHEDIR", (dir_ / "cache").string()}, {"LC_ALL", "C"}};
  return RunShell(
      kKubectl.string() + " --kubeconfig " + server_->kubeconfig().string() + " " + args, env, dir_,
      timeout);
}

void DataServicesControlPlane::KillBroker() {
  if (broker_) broker_->Signal(SIGKILL, 10s);
}

bool DataServicesControlPlane::StartBroker(std::string* error) {
  fs::path log = dir_ / "broker.log";
  const size_t offset = ReadFileOrEmpty(log).size();  // the log is appended to across restarts
  broker_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{kKlutch, "broker", "--listen",
                               fmt::format("127.0.0.1:{}", broker_port_), "--state-dir",
                               broker_state_.string(), "--quota-interval", "2s",
                               "--credentials-secrets-kubeconfig", server_->kubeconfig().string()},
      log);
  bool up = Eventually([&] {
    std::string text = ReadFileOrEmpty(log);
    return text.find("serving on", offset) != std::string::npos || !broker_->running();
  });
  if (!up || !broker_->running()) {
    *error = "the broker did not start:\n" + ReadFileOrEmpty(log);
    return false;
  }
  return true;
}

std::string DataServicesControlPlane::ManagerLog() const {
  return ReadFileOrEmpty(dir_ / "manager.log");
}
std::string DataServicesControlPlane::BrokerLog() const {
  return ReadFileOrEmpty(dir_ / "broker.log");
}

// The example with its URL and credential placeholders filled in, nothing else changed.
fs::path DataServicesControlPlane::AdaptProviderConfig(const fs::path& example) const {
  auto creds = machinery::ParseJson(ReadFileOrEmpty(broker_state_ / "credentials.json"));
  std::string out;
  std::string name;
  bool in_metadata = false;
  const std::string text = ReadFileOrEmpty(example);  // Split's views point into it
  for (std::string_view line : core::Split(text, '\n')) {
    std::string l(line);
    if (l == "metadata:") in_metadata = true;
    if (in_metadata && l.starts_with("  name:")) {
      name = std::string(core::Trim(l.substr(7)));
      in_metadata = false;
    }
    std::string base = name;
    for (const char* suffix : {"-credentials", "-service-broker"}) {
      if (base.ends_with(suffix)) base = base.substr(0, base.size() - std::strlen(suffix));
    }
    if (l.starts_with("  url:")) {
      l = fmt::format("  url: http://127.0.0.1:{}/{}", broker_port_, base);
    } else if ((l.starts_with("  username: $") || l.starts_with("  password: $")) && creds.ok()) {
      std::string key = l.starts_with("  username") ? "username" : "password";
      l = "  " + key + ": " + core::Base64Encode(machinery::GetString(*creds, {base, key}));
    }
    out += l + "\n";
  }
  fs::path path = dir_ / example.filename();
  std::ofstream(path) << out;
  return path;
}

}  // namespace klutch::testing
