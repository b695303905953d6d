// Process-wide structured-enough logging: one line per event, "level component: message".
//
// A thin front for spdlog so that its headers stay out of the rest of the tree. Thread-safe.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace klutch::core {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// Sets the minimum level printed (default kInfo). Reads KLUTCH_LOG_LEVEL at first use too.
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, std::string_view component, std::string_view message);

template <typename... Args>
void Log(LogLevel level, std::string_view component, fmt::format_string<Args...> f,
         Args&&... args) {
  if (!LogEnabled(level)) return;
  LogLine(level, component, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace klutch::core

#define KLUTCH_LOG(level, component, ...) \
  ::klutch::core::Log(::klutch::core::LogLevel::level, component, __VA_ARGS__)
