#include "broker/broker_credentials.h"

#include <fmt/format.h>

#include "broker/catalog.h"
#include "broker/http_responses.h"
#include "core/file.h"
#include "core/random.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"

namespace klutch::broker {
namespace {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool HasBasicCredentials(const http::Request& request, const BasicCredentials& want) {
  std::string_view header = request.headers.Get("Authorization");
  if (!header.starts_with("Basic ")) return false;
  auto decoded = core::Base64Decode(core::Trim(header.substr(6)));
  if (!decoded) return false;
  auto colon = decoded->find(':');
  if (colon == std::string::npos) return false;
  bool user_ok = ConstantTimeEquals(std::string_view(*decoded).substr(0, colon), want.username);
  bool pass_ok = ConstantTimeEquals(std::string_view(*decoded).substr(colon + 1), want.password);
  return user_ok && pass_ok;
}

}  // namespace

core::Result<BrokerCredentials> BrokerCredentials::LoadOrCreate(const StateDir& state) {
  std::filesystem::path file = state.root() / "credentials.json";
  Json stored = Json::object();
  if (auto text = core::ReadFile(file); text.ok()) {
    auto json = machinery::ParseJson(*text);
    if (json.ok() && json->is_object()) stored = *json;
  }
  BrokerCredentials out;
  bool changed = false;
  for (const Service& s : Services()) {
    for (const std::string& base : {s.type, s.type + kBackupManagerSuffix}) {
      BasicCredentials c{machinery::GetString(stored, {base, "username"}),
                         machinery::GetString(stored, {base, "password"})};
      if (c.username.empty() || c.password.empty()) {
        c = {fmt::format("{}-{}", base, core::RandomSuffix(5)), core::RandomPassword(32)};
        stored[base] = {{"username", c.username}, {"password", c.password}};
        changed = true;
      }
      out.by_base_[base] = c;
    }
  }
  if (changed) KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(file, machinery::Dump(stored)));
  return out;
}

std::vector<std::string> BrokerCredentials::Bases() const {
  std::vector<std::string> out;
  for (const auto& [base, c] : by_base_) out.push_back(base);
  return out;
}

BasicCredentials BrokerCredentials::Get(std::string_view base) const {
  auto it = by_base_.find(std::string(base));
  return it == by_base_.end() ? BasicCredentials{} : it->second;
}

bool BrokerCredentials::Authorized(const http::Request& request, std::string_view base) const {
  auto it = by_base_.find(std::string(base));
  return it != by_base_.end() && HasBasicCredentials(request, it->second);
}

bool BrokerCredentials::AuthorizedForAny(const http::Request& request) const {
  for (const auto& [base, c] : by_base_) {
    if (HasBasicCredentials(request, c)) return true;
  }
  return false;
}

}  // namespace klutch::broker
