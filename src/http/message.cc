#include "http/message.h"

#include <strings.h>

#include "core/strings.h"

namespace klutch::http {
namespace {
bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}
}  // namespace

std::string_view Headers::Get(std::string_view name) const {
  for (const auto& [k, v] : items_) {
    if (IEquals(k, name)) return v;
  }
  return {};
}

bool Headers::Has(std::string_view name) const {
  for (const auto& [k, v] : items_) {
    if (IEquals(k, name)) return true;
  }
  return false;
}

void Headers::Set(std::string name, std::string value) {
  std::erase_if(items_, [&](const auto& kv) { return IEquals(kv.first, name); });
  items_.emplace_back(std::move(name), std::move(value));
}

std::optional<std::string_view> Request::Query(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return std::string_view(v);
  }
  return std::nullopt;
}

void Request::SetTarget(std::string t) {
  target = std::move(t);
  std::string_view view = target;
  auto q = view.find('?');
  std::string_view raw_path = view.substr(0, q);
  auto decoded = core::PercentDecode(raw_path, false);
  path = decoded ? *decoded : std::string(raw_path);
  query.clear();
  if (q != std::string_view::npos) query = ParseQuery(view.substr(q + 1));
}

std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto part : core::SplitNonEmpty(query, '&')) {
    auto eq = part.find('=');
    std::string_view k = part.substr(0, eq);
    std::string_view v = eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    auto dk = core::PercentDecode(k, true);
    auto dv = core::PercentDecode(v, true);
    out.emplace_back(dk ? *dk : std::string(k), dv ? *dv : std::string(v));
  }
  return out;
}

}  // namespace klutch::http
