// BrokerCredentials: the basic-auth credentials of each base path the broker serves (the
// service types and their backup managers), generated on first start and kept in
// <state>/credentials.json (mode 0600), and the check of a request's Authorization header
// against them (constant time). Immutable once loaded; thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "broker/state_dir.h"
#include "core/status.h"
#include "http/message.h"

namespace klutch::broker {

struct BasicCredentials {
  std::string username;
  std::string password;
};

class BrokerCredentials {
 public:
  // Reads credentials.json and adds what a base path misses. kInternal when it cannot be
  // written.
  static core::Result<BrokerCredentials> LoadOrCreate(const StateDir& state);

  // The base paths ("postgresql", "postgresql-backup-manager", ...).
  std::vector<std::string> Bases() const;
  bool Has(std::string_view base) const { return by_base_.contains(std::string(base)); }
  // Empty for an unknown base path.
  BasicCredentials Get(std::string_view base) const;
  // Whether the request carries the credentials of `base`.
  bool Authorized(const http::Request& request, std::string_view base) const;
  // Whether it carries those of any base path.
  bool AuthorizedForAny(const http::Request& request) const;

 private:
  std::map<std::string, BasicCredentials> by_base_;
};

}  // namespace klutch::broker
