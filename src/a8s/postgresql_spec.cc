#include "a8s/postgresql_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "cel/quantity.h"
#include "core/strings.h"
#include "machinery/gofmt.h"
#include "machinery/json_numbers.h"
#include "machinery/object.h"

namespace klutch::a8s {
namespace {

// spec.parameters key -> the engine's parameter (engines/postgres.cc), as a8s maps them.
struct ParameterName {
  std::string_view a8s;
  std::string_view engine;
};
constexpr ParameterName kParameters[] = {
    {"maxConnections", "max_connections"},
    {"tempFileLimitKiloBytes", "temp_file_limit"},
    {"trackIOTiming", "track_io_timing"},
    {"archiveTimeoutSeconds", "archive_timeout"},
    {"statementTimeoutMillis", "statement_timeout"},
    {"walWriterDelayMillis", "wal_writer_delay"},
    {"maxLocksPerTransaction", "max_locks_per_transaction"},
    {"maxReplicationSlots", "max_replication_slots"},
    {"maxWALSenders", "max_wal_senders"},
    {"synchronousCommit", "synchronous_commit"},
    {"sslCiphers", "ssl_ciphers"},
    {"sslMinProtocolVersion", "ssl_min_protocol_version"},
    {"clientMinMessages", "client_min_messages"},
    {"logMinMessages", "pg_log_min_messages"},
    {"logMinErrorStatement", "pg_log_min_error_statement"},
    {"logStatement", "log_statement"},
    {"logErrorVerbosity", "log_error_verbosity"},
};

// PostgreSQL's shared_buffers unit (sharedBuffers counts pages of 8 kB).
constexpr int64_t kPageBytes = 8192;
constexpr int64_t kMiB = 1024 * 1024;

core::Result<int64_t> QuantityBytes(const Json& value, std::string_view field) {
  std::string text;
  if (const auto* s = value.get_ptr<const std::string*>()) {
    text = *s;
  } else if (machinery::AsInt64(value)) {
    text = machinery::Dump(value);
  } else {
    return core::Invalid(
        fmt::format("{}: {} is not a quantity such as 10Gi", field, machinery::GoSprint(value)));
  }
  auto v = cel::QuantityAsDouble(text);
  if (!v || !std::isfinite(*v) || *v <= 0 || *v > 9.0e18) {
    return core::Invalid(
        fmt::format("{}: {} is not a positive quantity such as 10Gi", field, core::GoQuote(text)));
  }
  return static_cast<int64_t>(std::ceil(*v));
}

core::Status ReadResources(const Json& spec, PostgresqlSpec& out) {
  const Json* limits = machinery::Find(spec, {"resources", "limits"});
  if (limits == nullptr || !limits->is_object()) return core::Status::Ok();
  if (const Json* memory = machinery::Find(*limits, {"memory"})) {
    KLUTCH_ASSIGN_OR_RETURN(out.memory_bytes,
                            QuantityBytes(*memory, "spec.resources.limits.memory"));
    if (out.memory_bytes < 64 * kMiB) {
      return core::Invalid(
          "spec.resources.limits.memory: PostgreSQL needs at least 64Mi; use 1Gi or more");
    }
  }
  if (const Json* cpu = machinery::Find(*limits, {"cpu"})) {
    const auto* s = cpu->get_ptr<const std::string*>();
    std::string text = s != nullptr ? *s : machinery::Dump(*cpu);
    auto v = cel::QuantityAsDouble(text);
    if (!v || !std::isfinite(*v) || *v <= 0) {
      return core::Invalid(
          fmt::format("spec.resources.limits.cpu: {} is not a positive quantity such as 2 or 500m",
                      core::GoQuote(text)));
    }
    out.cpu = *v;
  }
  return core::Status::Ok();
}

core::Status ReadParameters(const Json& spec, PostgresqlSpec& out) {
  const Json* params = machinery::Find(spec, {"parameters"});
  if (params == nullptr || params->is_null()) return core::Status::Ok();
  if (!params->is_object()) return core::Invalid("spec.parameters: must be an object");
  for (const auto& item : params->items()) {
    const std::string& key = item.key();
    const Json& value = item.value();
    if (key == "sharedBuffers") continue;  // a limit, below
    auto it = std::find_if(std::begin(kParameters), std::end(kParameters),
                           [&key](const ParameterName& p) { return p.a8s == key; });
    if (it == std::end(kParameters)) {
      std::vector<std::string> known;
      for (const ParameterName& p : kParameters) known.emplace_back(p.a8s);
      known.emplace_back("sharedBuffers");
      return core::Invalid(
          fmt::format("spec.parameters.{}: unknown parameter; a Postgresql takes {}", key,
                      core::Join(known, ", ")));
    }
    out.parameters[std::string(it->engine)] = value;
  }
  return core::Status::Ok();
}

// The limits the engine enforces: connections from maxConnections, shared buffers from
// sharedBuffers within a quarter of the memory limit, the disk quota from volumeSize.
void SetLimits(const Json& spec, PostgresqlSpec& out) {
  engines::PlanLimits& l = out.limits;
  l.nodes = out.replicas;
  l.cpu = out.cpu;
  l.memory_bytes = out.memory_bytes;
  l.disk_quota_bytes = out.volume_bytes;
  l.tls = true;
  l.tls_optional = true;
  // A three-node cluster commits synchronously to one standby unless the user asked for
  // commits that do not wait for standbys.
  const std::string sync = machinery::GetString(spec, {"parameters", "synchronousCommit"});
  l.synchronous_standby = out.replicas > 1 && sync != "off" && sync != "local";
  int64_t connections = 100;
  if (const Json* v = machinery::Find(spec, {"parameters", "maxConnections"})) {
    connections = std::clamp<int64_t>(machinery::AsInt64(*v).value_or(100), 10, 10000);
  }
  l.max_connections = static_cast<int>(connections);
  int64_t buffers = 1024 * kPageBytes;
  if (const Json* v = machinery::Find(spec, {"parameters", "sharedBuffers"})) {
    buffers = std::clamp<int64_t>(machinery::AsInt64(*v).value_or(1024), 16, int64_t{1} << 30) *
              kPageBytes;
  }
  if (out.memory_bytes > 0) buffers = std::min(buffers, out.memory_bytes / 4);
  l.shared_buffers_mb = static_cast<int>(std::max<int64_t>(1, buffers / kMiB));
}

}  // namespace

core::Result<PostgresqlSpec> ParsePostgresqlSpec(const Json& spec) {
  if (!spec.is_object()) return core::Invalid("spec: must be an object");
  PostgresqlSpec out;
  const Json* version = machinery::Find(spec, {"version"});
  std::optional<int64_t> v = version ? machinery::AsInt64(*version) : std::nullopt;
  if (!v || *v < 13 || *v > 16) {
    return core::Invalid(
        fmt::format("spec.version: {} is not a PostgreSQL major version from 13 "
                    "to 16",
                    version ? machinery::GoSprint(*version) : "<none>"));
  }
  out.requested_version = static_cast<int>(*v);
  const Json* replicas = machinery::Find(spec, {"replicas"});
  int64_t r = replicas == nullptr ? 1 : machinery::AsInt64(*replicas).value_or(-1);
  if (r != 1 && r != 3) {
    return core::Invalid(fmt::format(
        "spec.replicas: {} is not offered: use 1 (one server) or 3 (a primary and two streaming "
        "standbys)",
        replicas ? machinery::GoSprint(*replicas) : "<none>"));
  }
  out.replicas = static_cast<int>(r);
  const Json* volume = machinery::Find(spec, {"volumeSize"});
  KLUTCH_ASSIGN_OR_RETURN(out.volume_bytes,
                          QuantityBytes(volume ? *volume : Json("1Gi"), "spec.volumeSize"));
  KLUTCH_RETURN_IF_ERROR(ReadResources(spec, out));
  KLUTCH_RETURN_IF_ERROR(ReadParameters(spec, out));
  SetLimits(spec, out);
  return out;
}

std::string InSpecTerms(std::string_view engine_message) {
  std::string out(engine_message);
  for (const ParameterName& p : kParameters) {
    const std::string from = fmt::format("parameter {}", p.engine);
    if (out.starts_with(from + ":") || out.starts_with(from + " ")) {
      out.replace(0, from.size(), fmt::format("spec.parameters.{}", p.a8s));
      break;
    }
  }
  return out;
}

core::Status CheckSpecChange(const PostgresqlSpec& from, const PostgresqlSpec& to) {
  if (to.requested_version != from.requested_version) {
    return core::Invalid(fmt::format(
        "spec.version: cannot change from {} to {}; create a new Postgresql and restore a backup "
        "into it",
        from.requested_version, to.requested_version));
  }
  if (to.replicas < from.replicas) {
    return core::Invalid(fmt::format(
        "spec.replicas: cannot go from {} to {}; a cluster only grows (set it back to {})",
        from.replicas, to.replicas, from.replicas));
  }
  if (to.volume_bytes < from.volume_bytes) {
    return core::Invalid(
        "spec.volumeSize: cannot shrink; set it back to the previous size or larger");
  }
  return core::Status::Ok();
}

}  // namespace klutch::a8s
