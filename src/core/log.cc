#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace klutch::core {
namespace {

LogLevel InitialLevel() {
  const char* env = std::getenv("KLUTCH_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  std::string v(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warn") return LogLevel::kWarn;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<LogLevel>& Level() {
  static std::atomic<LogLevel> level{InitialLevel()};
  return level;
}

spdlog::logger& Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("klutch");
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %v");
    l->set_level(spdlog::level::debug);
    return l;
  }();
  return *logger;
}

}  // namespace

void SetLogLevel(LogLevel level) { Level().store(level); }
bool LogEnabled(LogLevel level) { return level >= Level().load(std::memory_order_relaxed); }

void LogLine(LogLevel level, std::string_view component, std::string_view message) {
  spdlog::level::level_enum l = spdlog::level::info;
  switch (level) {
    case LogLevel::kDebug:
      l = spdlog::level::debug;
      break;
    case LogLevel::kInfo:
      l = spdlog::level::info;
      break;
    case LogLevel::kWarn:
      l = spdlog::level::warn;
      break;
    case LogLevel::kError:
      l = spdlog::level::err;
      break;
  }
  Logger().log(l, "{}: {}", component, message);
}

}  // namespace klutch::core
