// Helpers shared by the auth module's sources; not a public API.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace klutch::auth::internal {

// The 401 every authenticator answers a credential it cannot accept with.
inline core::Status Refused(std::string why) {
  return core::Status(core::Reason::kUnauthorized, std::move(why));
}

// SHA-256 of `data` as raw bytes ("" if OpenSSL fails).
std::string Sha256(std::string_view data);

}  // namespace klutch::auth::internal
