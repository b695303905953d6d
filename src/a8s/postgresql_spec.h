// What a Postgresql's spec (postgresql.anynines.com/v1beta3) asks of the PostgreSQL engine: the
// topology, the limits the machine can enforce and the server settings, checked before anything
// starts. Pure functions over JSON; the operator's fuzzer reads specs through them. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "engines/instance.h"
#include "machinery/json.h"

namespace klutch::a8s {

using machinery::Json;

struct PostgresqlSpec {
  int requested_version = 0;  // spec.version
  int replicas = 1;           // 1 or 3
  int64_t volume_bytes = 0;   // spec.volumeSize: the disk quota
  int64_t memory_bytes = 0;   // spec.resources.limits.memory (0: none)
  double cpu = 0;             // spec.resources.limits.cpu (0: none)
  engines::PlanLimits limits;
  // The engine's parameters (engines' PostgreSQL names, e.g. max_connections).
  Json parameters = Json::object();
};

// Reads `spec` (after the API server's defaulting) into what the engine runs. kInvalid with a
// message that names the field (`spec.replicas`, `spec.parameters.maxConnections`) and says what
// to use instead: replicas other than 1 or 3, a version outside 13..16, a volumeSize or memory
// that is no quantity, parameters the server would refuse.
core::Result<PostgresqlSpec> ParsePostgresqlSpec(const Json& spec);

// An engine message about its parameters ("parameter max_connections: ...") in the Postgresql's
// terms ("spec.parameters.maxConnections: ...").
std::string InSpecTerms(std::string_view engine_message);

// Whether moving from `from` to `to` can be done to a running instance; kInvalid naming the
// field otherwise (fewer replicas, a smaller volume, another version).
core::Status CheckSpecChange(const PostgresqlSpec& from, const PostgresqlSpec& to);

}  // namespace klutch::a8s
