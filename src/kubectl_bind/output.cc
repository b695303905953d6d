#include "kubectl_bind/output.h"

#include <fmt/format.h>

#include <ostream>

#include "core/strings.h"

namespace klutch::kubectl_bind {

void Say(const BindOutput& out, const std::string& line) {
  if (out.err != nullptr) *out.err << line << "\n" << std::flush;
}

core::Status WithHint(const core::Status& st, const std::string& context, const std::string& hint) {
  return core::Status(st.reason(), fmt::format("{}: {}{}", context, st.message(),
                                               hint.empty() ? "" : "\n  " + hint));
}

std::optional<std::array<int64_t, 3>> ParseSemanticVersion(std::string_view v) {
  if (!v.starts_with('v')) return std::nullopt;
  v.remove_prefix(1);
  size_t end = v.find_first_of("-+");
  auto parts = core::Split(v.substr(0, end), '.');
  if (parts.size() != 3) return std::nullopt;
  std::array<int64_t, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    auto n = core::ParseInt64(parts[i]);
    if (!n || *n < 0) return std::nullopt;
    out[i] = *n;
  }
  return out;
}

}  // namespace klutch::kubectl_bind
