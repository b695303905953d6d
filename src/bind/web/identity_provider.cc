#include "bind/web/identity_provider.h"

#include <algorithm>

#include "core/strings.h"

namespace klutch::bind {

std::string DisplayNameOf(const IdTokenClaims& claims) {
  for (const std::string* claim : {&claims.preferred_username, &claims.email, &claims.name}) {
    // A claim a terminal cannot print as one short line is passed over.
    const std::string_view name = core::Trim(*claim);
    if (!name.empty() && name.size() <= 256 && std::none_of(name.begin(), name.end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
        })) {
      return std::string(name);
    }
  }
  return claims.subject;
}

}  // namespace klutch::bind
