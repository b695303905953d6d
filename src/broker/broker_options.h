// BrokerOptions: how `klutch broker` runs (state directory, engines, workers, quota checks,
// backup retention, shutdown). Plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>

#include "engines/data_service.h"

namespace klutch::broker {

struct BrokerOptions {
  std::filesystem::path state_dir;
  // `instances_dir`, `ca_pem` and `ca_key_pem` are filled in by Open.
  engines::EngineContext engine;
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

}  // namespace klutch::broker
