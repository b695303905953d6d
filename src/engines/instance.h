// What an engine needs to know about one instance of a data service and the account of one
// binding: plain values that the broker's records (broker/state.h) and the operator's records
// extend with what each of them keeps besides. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "machinery/json.h"

namespace klutch::engines {

using machinery::Json;

// What a size and topology mean for the processes of an instance.
struct PlanLimits {
  std::string size;  // nano, small, medium, big
  int size_rank = 0;
  int nodes = 1;  // 1 (single) or 3 (replica: a primary and two standbys)
  // Ports an instance needs when that is not one per node (Messaging: AMQP, management, epmd
  // and Erlang distribution for its two processes); 0: `nodes`.
  int ports = 0;
  int PortCount() const { return ports > 0 ? ports : nodes; }
  bool tls = false;  // -ssl plans: clients must use TLS
  // With tls: TLS is offered but not required (PostgreSQL: hba `host` lines, not `hostssl`).
  bool tls_optional = false;
  int shared_buffers_mb = 0;  // PostgreSQL
  int max_connections = 0;    // PostgreSQL max_connections / Redis maxclients
  int64_t disk_quota_bytes = 0;
  int maxmemory_mb = 0;  // Redis
  // Hard limits per node where the machine enforces them (resource_limits.h); 0: none.
  double cpu = 0;
  int64_t memory_bytes = 0;
  // PostgreSQL with nodes > 1: commits wait until one standby has the WAL on disk.
  bool synchronous_standby = false;
};

struct Instance {
  std::string id;      // who asked for it: the platform's instance_id, the object's UID
  int64_t number = 0;  // the owner's numeric id, also the directory name under instances_dir
  // Engine parameters, under the engine's names (PostgreSQL: max_connections, ...).
  Json parameters = Json::object();
  std::vector<int> ports;  // one per node; node 0 is the primary
  std::string database;
  std::string admin_password;        // never leaves the owner's state
  std::string replication_password;  // PostgreSQL standbys
  // The node that takes writes (0 until a failover promoted another), and former primaries
  // that must become standbys of it before they run again (EngineContext::failover).
  int primary = 0;
  std::vector<int> rejoining;
};

// A binding's login.
struct Account {
  std::string username;
  std::string password;
};

}  // namespace klutch::engines
