// Broker: `klutch broker`'s core, an Open Service Broker (API 2.11-2.17 plus the a9s
// extension `GET /instances/{id}`) and an a9s-style backup manager for every service type it
// runs, each under its own base path with its own basic-auth credentials:
//
//   /<type>/v2/...                        OSB (X-Broker-API-Version required)
//   /<type>/instances[/{id}]              a9s instance documents
//   /<type>/osb_ext/v1/healthy            broker health (HEAD/GET)
//   /<type>-backup-manager/...            backup manager (instances/{id}/backups, restores,
//                                         config; v2/healthy)
//   /metrics                              any of the broker's credentials
//   /healthz                              unauthenticated
//
// <type> is `postgresql` or `keyvalue`, matching the ProviderConfig names Klutch's
// compositions use (`postgresql-service-broker` -> http://host:port/postgresql). Instances,
// bindings, backups and restores are real (broker/data_service.h); provision, update, deprovision,
// backup and restore run asynchronously on worker threads, one operation per instance at a
// time; state survives restarts (broker/state.h). Thread-safe.
//
// Inside: the InstanceRegistry (instance_registry.h) decides, the fronts OsbApi (osb_api.h)
// and BackupApi (backup_api.h) translate HTTP to it; this class checks credentials
// (broker_credentials.h) and the OSB version header and routes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/broker_credentials.h"
#include "broker/broker_options.h"
#include "core/status.h"
#include "http/message.h"

namespace klutch::broker {

class Broker {
 public:
  // Loads (or creates) the state directory, its CA and credentials, and resumes every
  // instance: unfinished operations run again, running servers are adopted, stopped ones
  // started. kInternal naming the path when the state directory is unusable.
  static core::Result<std::unique_ptr<Broker>> Open(BrokerOptions options);
  ~Broker();
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Serves one HTTP request (any path above).
  http::Response Serve(http::Request& request);

  // The base paths served ("postgresql", "postgresql-backup-manager", ...).
  std::vector<std::string> Bases() const;
  // The basic-auth credentials of one base path (generated on first start, kept in
  // <state>/credentials.json, mode 0600).
  BasicCredentials Credentials(std::string_view base) const;
  // The broker CA (PEM), which signs the certificates of -ssl instances.
  std::string CaPem() const;

  // Waits for running operations and stops the workers, then stops every instance unless
  // options say to leave them. Idempotent; the destructor calls it.
  void Shutdown();

  class Impl;

 private:
  explicit Broker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::broker
