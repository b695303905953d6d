// UserInfo: who a request is from, as authenticators find it and authorizers read it
// (Kubernetes' user.Info: name, uid, groups, extra). Plain value; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace klutch::auth {

// Well-known names Kubernetes gives users and groups.
inline constexpr char kAnonymousUser[] = "system:anonymous";
inline constexpr char kUnauthenticatedGroup[] = "system:unauthenticated";
inline constexpr char kAuthenticatedGroup[] = "system:authenticated";
inline constexpr char kMastersGroup[] = "system:masters";
inline constexpr char kServiceAccountPrefix[] = "system:serviceaccount:";
inline constexpr char kServiceAccountsGroup[] = "system:serviceaccounts";

struct UserInfo {
  std::string name;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;

  bool InGroup(std::string_view group) const {
    for (const auto& g : groups) {
      if (g == group) return true;
    }
    return false;
  }
};

}  // namespace klutch::auth
