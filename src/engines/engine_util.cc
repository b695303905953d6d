// Helpers shared by the PostgreSQL and Redis engines (data_service.h).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

#include "core/file.h"
#include "core/random.h"
#include "core/strings.h"
#include "engines/data_service.h"
#include "http/certs.h"
#include "machinery/json.h"

namespace klutch::engines {

namespace fs = std::filesystem;

core::Result<int> DataService::ChooseNewPrimary(const Instance&, const PlanLimits&, bool) {
  return core::Invalid("this data service does not fail over");
}
core::Status DataService::Promote(const Instance&, const PlanLimits&, NodeRunner&) {
  return core::Invalid("this data service does not fail over");
}
core::Status DataService::Rejoin(const Instance&, const PlanLimits&, int, NodeRunner&) {
  return core::Invalid("this data service does not fail over");
}
DataService::StandbyState DataService::InspectStandby(const Instance&, const PlanLimits&, int) {
  return {};
}
core::Result<fs::path> DataService::SetAside(const Instance&, int, NodeRunner&) {
  return core::Invalid("this data service does not fail over");
}

core::Status LimitNodes(const ResourceLimiter& limiter, const DataService& engine,
                        const Instance& in, const PlanLimits& plan) {
  for (int node = 0; node < plan.nodes && node < static_cast<int>(in.ports.size()); ++node) {
    NodeSpec spec = engine.Node(in, plan, node);
    auto text = core::ReadFile(spec.pid_file);
    if (!text.ok()) continue;  // not running
    auto pid = core::ParseInt64(core::Trim(text->substr(0, text->find('\n'))));
    if (!pid || *pid <= 0) continue;
    const std::string group = fmt::format("{}-n{}", in.id, node);
    if (limiter.Contains(group, static_cast<pid_t>(*pid))) continue;
    KLUTCH_RETURN_IF_ERROR(
        limiter.Apply(group, static_cast<pid_t>(*pid), plan.cpu, plan.memory_bytes));
  }
  return core::Status::Ok();
}

void RemoveNodeLimits(const ResourceLimiter& limiter, const Instance& in) {
  for (int node = 0; node < static_cast<int>(in.ports.size()); ++node) {
    limiter.Remove(fmt::format("{}-n{}", in.id, node));
  }
}

core::Status ChownTo(const fs::path& path, const std::optional<core::UserIds>& user) {
  if (!user) return core::Status::Ok();
  auto chown_one = [&](const fs::path& p) -> core::Status {
    if (::lchown(p.c_str(), user->uid, user->gid) != 0) {
      return core::Internal(fmt::format("chown {}: {}", p.string(), std::strerror(errno)));
    }
    return core::Status::Ok();
  };
  KLUTCH_RETURN_IF_ERROR(chown_one(path));
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return core::Status::Ok();
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    KLUTCH_RETURN_IF_ERROR(chown_one(it->path()));
  }
  return core::Status::Ok();
}

int64_t DirectorySize(const fs::path& path) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      auto size = it->file_size(size_ec);
      if (!size_ec) total += static_cast<int64_t>(size);
    }
  }
  return total;
}

core::Status StartAndWait(const EngineContext& context, NodeRunner& runner,
                          const std::string& instance, int node, NodeSpec spec, const fs::path& log,
                          std::string_view what) {
  auto ready = spec.ready;
  KLUTCH_RETURN_IF_ERROR(runner.Start(instance, node, std::move(spec)));
  auto deadline = std::chrono::steady_clock::now() + context.ready_timeout;
  auto log_tail = [&] {
    auto text = core::ReadFile(log);
    std::string tail = text.ok() ? text->substr(text->size() > 600 ? text->size() - 600 : 0) : "";
    return std::string(core::Trim(tail));
  };
  while (!ready()) {
    if (int exits = runner.Exits(instance, node); exits >= 4) {
      return core::Unavailable(
          fmt::format("{} exited {} times while starting: {}", what, exits, log_tail()));
    }
    // A node that is not restarted (a replicated primary) ends its start when it exits.
    if (!runner.Alive(instance, node) && !ready()) {
      return core::Unavailable(fmt::format("{} exited while starting: {}", what, log_tail()));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return core::Unavailable(fmt::format("{} did not start: {}", what, log_tail()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return core::Status::Ok();
}

core::Status RunTool(core::ProcessSpec spec, std::chrono::milliseconds timeout) {
  std::string name = spec.argv.empty() ? "" : fs::path(spec.argv[0]).filename().string();
  KLUTCH_ASSIGN_OR_RETURN(auto result, core::RunProcess(spec, timeout));
  if (result.exit_code != 0) {
    return core::Internal(
        fmt::format("{} failed (exit {}): {}", name, result.exit_code, core::Trim(result.output)));
  }
  return core::Status::Ok();
}

core::Status RunTools(const std::vector<core::ProcessSpec>& stages,
                      std::chrono::milliseconds timeout) {
  KLUTCH_ASSIGN_OR_RETURN(auto result, core::RunPipeline(stages, timeout));
  std::string failed;
  const size_t n = std::min(stages.size(), result.exit_codes.size());
  for (size_t i = 0; i < n; ++i) {
    if (result.exit_codes[i] == 0) continue;
    // A tool that died of SIGPIPE because a later one stopped reading is not the cause.
    const bool later_failed = std::any_of(result.exit_codes.begin() + static_cast<long>(i) + 1,
                                          result.exit_codes.end(), [](int c) { return c != 0; });
    if (result.exit_codes[i] == 128 + SIGPIPE && later_failed) continue;
    std::string name =
        stages[i].argv.empty() ? "" : fs::path(stages[i].argv[0]).filename().string();
    failed += fmt::format("{}{} failed (exit {})", failed.empty() ? "" : ", ", name,
                          result.exit_codes[i]);
  }
  if (result.timed_out) failed += failed.empty() ? "timed out" : ", timed out";
  if (failed.empty()) return core::Status::Ok();
  return core::Internal(fmt::format("{}: {}", failed, core::Trim(result.output)));
}

std::string ShownValue(const Json& value) {
  std::string text = machinery::Dump(value);
  return text.size() > 200 ? text.substr(0, 200) + "..." : text;
}

std::optional<pid_t> FindProcess(std::string_view match) {
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc", ec); !ec && it != fs::end(it); it.increment(ec)) {
    auto pid = core::ParseInt64(it->path().filename().string());
    if (!pid || *pid <= 1 || *pid == ::getpid()) continue;
    std::string cmdline = core::Join(core::ProcessCommandLine(static_cast<pid_t>(*pid)), " ");
    if (cmdline.find(match) != std::string::npos) return static_cast<pid_t>(*pid);
  }
  return std::nullopt;
}

core::Status EnsureServerCertificate(const EngineContext& context, const fs::path& dir) {
  if (fs::exists(dir / "server.crt") && fs::exists(dir / "server.key")) {
    return core::Status::Ok();
  }
  if (context.ca_pem.empty()) return core::Internal("no CA for TLS plans was configured");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return core::Internal(fmt::format("create {}: {}", dir.string(), ec.message()));
  KLUTCH_ASSIGN_OR_RETURN(
      http::Pem pem, http::IssueCertificate(http::Pem{context.ca_pem, context.ca_key_pem},
                                            http::CertificateRequest{.common_name = context.host,
                                                                     .dns_names = {"localhost"},
                                                                     .ip_addresses = {context.host},
                                                                     .server = true}));
  KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "ca.crt", context.ca_pem));
  KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "server.crt", pem.certificate));
  KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "server.key", pem.private_key));
  return ChownTo(dir, context.user);
}

}  // namespace klutch::engines
