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
// bindings, backups and restores are real (broker/engine.h); provision, update, deprovision,
// backup and restore run asynchronously on worker threads, one operation per instance at a
// time; state survives restarts (broker/state.h). Thread-safe.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/engine.h"
#include "core/status.h"
#include "http/message.h"

namespace klutch::broker {

struct BrokerOptions {
  std::filesystem::path state_dir;
  EngineContext engine;  // `state`, `ca_pem` and `ca_key_pem` are filled in by Open
  int workers = 2;
  // How often instances' disk use is checked against their plan's quota.
  std::chrono::milliseconds quota_interval{30000};
  // Caps every plan's disk quota (bytes; 0 = the plans' own), for sandboxes on small disks.
  int64_t max_disk_per_instance = 0;
  // Retention: per instance, keep at most `max_backups` backups and none older than
  // `retention`, but always the newest `min_backups`.
  int max_backups = 10;
  int min_backups = 1;
  std::chrono::hours retention{24 * 14};
  // After a crashed node answers again, its instance keeps reporting `failed` this long, so
  // that a platform polling now and then sees the outage and a crash loop does not flap.
  std::chrono::milliseconds recovery_hold{3000};
  // On Shutdown, stop every instance (false: leave them running for the next broker).
  bool stop_instances_on_shutdown = true;
};

struct BasicCredentials {
  std::string username;
  std::string password;
};

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
