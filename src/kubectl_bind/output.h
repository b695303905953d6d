// What every step of kubectl bind shares: where its progress lines go and how it asks the user
// (`BindOutput`), errors that say what to do next (`WithHint`), and this CLI's version.
// Thread-compatible (one command at a time).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace klutch::kubectl_bind {

// The version this CLI reports and installs the konnector at.
inline constexpr char kCliVersion[] = "v0.1.0";

// Where progress lines go (stderr in the command) and how questions are asked.
struct BindOutput {
  std::ostream* err = nullptr;  // progress and warnings; nullptr = silent
  // Reads one answer line for a prompt; nullopt at end of input.
  std::function<std::optional<std::string>(const std::string& prompt)> ask;
};

// Writes `line` and a newline to out.err, if any.
void Say(const BindOutput& out, const std::string& line);

// `st` with `context` before its message and, when not empty, `hint` on an indented line of its
// own; the reason is kept.
core::Status WithHint(const core::Status& st, const std::string& context, const std::string& hint);

// "v1.2.3" (optionally with -pre / +build suffixes) -> {1,2,3}; nullopt otherwise.
std::optional<std::array<int64_t, 3>> ParseSemanticVersion(std::string_view v);

}  // namespace klutch::kubectl_bind
