// BackupApi: the a9s-style backup manager front of every service type
// (/<type>-backup-manager/...): backups and restores of an instance, its backup settings,
// v2/healthy. Each handler parses the request, calls the InstanceRegistry and maps its
// outcome to the status code and body the a9s Backup Manager answers with; nothing is
// decided here. Authentication is checked before (broker.h). Thread-safe.
#pragma once

#include <string>

#include "broker/instance_registry.h"
#include "http/router.h"

namespace klutch::broker {

class BackupApi {
 public:
  explicit BackupApi(InstanceRegistry& registry) : registry_(registry) {}

  // Adds the routes; `this` must outlive the router.
  void AddRoutes(http::Router& router);

 private:
  // Handlers get the service type the backup manager's base path serves.
  using Handler = http::Response (BackupApi::*)(http::Request&, const http::PathParams&,
                                                const std::string& type);
  http::RouteHandler Route(Handler handler);

  http::Response Healthy(http::Request&, const http::PathParams&, const std::string& type);
  http::Response CreateBackup(http::Request&, const http::PathParams& p, const std::string& type);
  http::Response ListBackups(http::Request&, const http::PathParams& p, const std::string& type);
  http::Response GetBackup(http::Request&, const http::PathParams& p, const std::string& type);
  http::Response DeleteBackup(http::Request&, const http::PathParams& p, const std::string& type);
  http::Response CreateRestore(http::Request&, const http::PathParams& p, const std::string& type);
  http::Response ListRestores(http::Request&, const http::PathParams& p, const std::string& type);
  http::Response GetRestore(http::Request&, const http::PathParams& p, const std::string& type);
  http::Response GetConfig(http::Request&, const http::PathParams& p, const std::string& type);
  http::Response PutConfig(http::Request& r, const http::PathParams& p, const std::string& type);

  InstanceRegistry& registry_;
};

}  // namespace klutch::broker
