#include "broker/catalog.h"

#include <fmt/format.h>

#include <algorithm>

#include "engines/data_service.h"

namespace klutch::broker {
namespace {

struct SizeRow {
  const char* name;
  int rank;
  int shared_buffers_mb;
  int max_connections;
  int64_t quota_gib;
  int maxmemory_mb;
  int maxclients;
};

constexpr SizeRow kSizes[] = {
    {"nano", 0, 32, 50, 1, 64, 100},
    {"small", 1, 128, 100, 5, 256, 500},
    {"medium", 2, 256, 150, 10, 512, 1000},
    {"big", 3, 512, 200, 20, 1024, 2000},
};

const SizeRow& Size(std::string_view name) {
  for (const auto& row : kSizes) {
    if (name == row.name) return row;
  }
  return kSizes[0];
}

Plan MakePlan(Engine engine, std::string prefix, std::string_view topology, std::string_view size,
              bool tls) {
  const SizeRow& row = Size(size);
  Plan plan;
  plan.name = fmt::format("{}-{}-{}{}", prefix, topology, size, tls ? "-ssl" : "");
  plan.id = "klutch-" + plan.name;
  plan.limits.size = std::string(size);
  plan.limits.size_rank = row.rank;
  plan.limits.nodes = topology == "single" ? 1 : 3;
  plan.limits.tls = tls;
  plan.limits.disk_quota_bytes = row.quota_gib << 30;
  if (engine == Engine::kPostgresql) {
    plan.limits.shared_buffers_mb = row.shared_buffers_mb;
    plan.limits.max_connections = row.max_connections;
    plan.description =
        fmt::format("PostgreSQL 15, {}; shared_buffers {} MB, max_connections {}, {} GiB disk{}",
                    plan.limits.nodes == 1 ? "one server" : "a primary with two streaming standbys",
                    row.shared_buffers_mb, row.max_connections, row.quota_gib, tls ? ", TLS" : "");
  } else if (engine == Engine::kMariadb) {
    plan.limits.shared_buffers_mb = row.shared_buffers_mb;  // innodb_buffer_pool_size
    plan.limits.max_connections = row.max_connections;
    plan.description = fmt::format(
        "MariaDB 10.11, {}; innodb_buffer_pool_size {} MB, max_connections {}, {} GiB disk{}",
        plan.limits.nodes == 1 ? "one server" : "a primary with two replicas (GTID replication)",
        row.shared_buffers_mb, row.max_connections, row.quota_gib, tls ? ", TLS" : "");
  } else if (engine == Engine::kPrometheus) {
    plan.limits.nodes = 2;  // the Prometheus and its Alertmanager
    plan.description = fmt::format(
        "Prometheus 2.42 with its Alertmanager 0.25, {} GiB of samples kept{}", row.quota_gib,
        prefix == "prometheus"
            ? ""
            : "; Grafana is not packaged by Debian and does not run here (grafana_urls is empty)");
  } else if (engine == Engine::kRabbitmq) {
    plan.limits.nodes = 2;  // the RabbitMQ node and its own epmd
    plan.limits.ports = 4;  // AMQP(S), management, epmd, Erlang distribution
    // vm_memory_high_watermark: an idle node alone takes 100-150 MB; above the mark RabbitMQ
    // blocks every publisher.
    plan.limits.maxmemory_mb = 512 << std::min(row.rank, 2);
    plan.description = fmt::format(
        "RabbitMQ 3.10, one node with the management API; memory high watermark {} MB, {} GiB "
        "disk{}",
        plan.limits.maxmemory_mb, row.quota_gib, tls ? ", AMQPS and HTTPS" : "");
  } else {
    plan.limits.maxmemory_mb = row.maxmemory_mb;
    plan.limits.max_connections = row.maxclients;
    plan.description =
        fmt::format("Redis 7, {}; maxmemory {} MB, maxclients {}, {} GiB disk{}",
                    plan.limits.nodes == 1 ? "one server" : "a primary with two replicas",
                    row.maxmemory_mb, row.maxclients, row.quota_gib, tls ? ", TLS" : "");
  }
  return plan;
}

std::vector<Service> BuildServices() {
  Service pg;
  pg.id = "klutch-a9s-postgresql15";
  pg.name = "a9s-postgresql15";
  pg.type = "postgresql";
  pg.engine = Engine::kPostgresql;
  pg.new_engine = &engines::NewPostgresService;
  pg.description = "PostgreSQL 15 (Debian's postgresql-15) run by klutch broker as local processes";
  for (bool tls : {false, true}) {
    for (auto [topology, size] : {std::pair{"single", "nano"},
                                  {"single", "small"},
                                  {"single", "big"},
                                  {"replica", "small"},
                                  {"replica", "big"}}) {
      pg.plans.push_back(MakePlan(Engine::kPostgresql, "postgresql", topology, size, tls));
    }
  }

  Service kv;
  kv.id = "klutch-a9s-keyvalue8";
  kv.name = "a9s-keyvalue8";
  kv.type = "keyvalue";
  kv.engine = Engine::kRedis;
  kv.new_engine = &engines::NewRedisService;
  kv.description =
      "Key-value store served by Redis 7 (Debian's redis-server), not Valkey 8: the same "
      "protocol and commands; credentials use the a9s KeyValue keys (valkey.*)";
  for (auto [topology, size] : {std::pair{"single", "nano"},
                                {"single", "small"},
                                {"single", "medium"},
                                {"single", "big"},
                                {"replica", "small"},
                                {"replica", "medium"},
                                {"replica", "big"}}) {
    kv.plans.push_back(MakePlan(Engine::kRedis, "keyvalue", topology, size, true));
  }
  // Debian 12 ships MariaDB 10.11 only: both of Klutch's service names run it, and say so.
  Service mariadb106;
  mariadb106.id = "klutch-a9s-mariadb106";
  mariadb106.name = "a9s-mariadb106";
  mariadb106.type = "mariadb";
  mariadb106.engine = Engine::kMariadb;
  mariadb106.new_engine = &engines::NewMariadbService;
  mariadb106.served_by =
      "MariaDB 10.11 (Debian's mariadb-server) serves a9s-mariadb106: this machine has no "
      "MariaDB 10.6; 10.11 reads what 10.6 wrote, its SQL is a superset";
  mariadb106.description = mariadb106.served_by;
  for (bool tls : {false, true}) {
    for (auto [topology, size] : {std::pair{"single", "nano"},
                                  {"single", "small"},
                                  {"single", "big"},
                                  {"cluster", "small"},
                                  {"cluster", "big"}}) {
      mariadb106.plans.push_back(MakePlan(Engine::kMariadb, "mariadb", topology, size, tls));
    }
  }
  Service mariadb1011 = mariadb106;
  mariadb1011.id = "klutch-a9s-mariadb1011";
  mariadb1011.name = "a9s-mariadb1011";
  mariadb1011.served_by = "";
  mariadb1011.description = "MariaDB 10.11 (Debian's mariadb-server); TLS plans only";
  std::erase_if(mariadb1011.plans, [](const Plan& p) { return !p.limits.tls; });
  for (Plan& p : mariadb1011.plans) p.id += "-1011";
  Service prometheus;
  prometheus.id = "klutch-a9s-prometheus";
  prometheus.name = "a9s-prometheus";
  prometheus.type = "prometheus";
  prometheus.engine = Engine::kPrometheus;
  prometheus.new_engine = &engines::NewPrometheusService;
  prometheus.description =
      "Prometheus 2.42 and Alertmanager 0.25 (Debian's prometheus and prometheus-alertmanager) "
      "behind basic auth; neither Grafana nor a graphite exporter is packaged by Debian, so "
      "bindings carry empty grafana_urls and graphite_exporters";
  for (const char* prefix : {"prometheus", "promgraf2", "prometheus2-grafana10"}) {
    for (const char* size : {"small", "big"}) {
      prometheus.plans.push_back(MakePlan(Engine::kPrometheus, prefix, "single", size, false));
    }
  }
  // Debian 12 ships RabbitMQ 3.10 only: every one of Klutch's Messaging names runs it and says
  // so. Cluster plans are not offered: they need three clustered nodes, which this broker
  // does not run (a claim for one is told the plans that are offered).
  std::vector<Service> services = {pg, kv, mariadb106, mariadb1011, prometheus};
  for (const char* version : {"310", "312", "313", "4"}) {
    Service messaging;
    messaging.id = std::string("klutch-a9s-messaging") + version;
    messaging.name = std::string("a9s-messaging") + version;
    messaging.type = "messaging";
    messaging.engine = Engine::kRabbitmq;
    messaging.new_engine = &engines::NewRabbitmqService;
    if (std::string_view(version) != "310") {
      messaging.served_by = fmt::format(
          "RabbitMQ 3.10 (Debian's rabbitmq-server) serves {}: this machine has no RabbitMQ "
          "{}; AMQP 0-9-1 and the management API are the same",
          messaging.name,
          std::string_view(version) == "4" ? "4" : std::string("3.") + (version + 1));
    }
    messaging.description =
        messaging.served_by.empty()
            ? "RabbitMQ 3.10 (Debian's rabbitmq-server) with the management API; single-node "
              "plans only"
            : messaging.served_by + "; single-node plans only";
    for (bool tls : {false, true}) {
      for (const char* size : {"nano", "small", "big"}) {
        Plan plan = MakePlan(Engine::kRabbitmq, "messaging", "single", size, tls);
        if (std::string_view(version) != "4") plan.id += std::string("-") + version;
        messaging.plans.push_back(plan);
      }
    }
    services.push_back(messaging);
  }
  return services;
}

}  // namespace

const std::vector<Service>& Services() {
  static const std::vector<Service> services = BuildServices();
  return services;
}

std::vector<const Service*> ServicesOfType(std::string_view type) {
  std::vector<const Service*> out;
  for (const auto& s : Services()) {
    if (type.empty() || s.type == type) out.push_back(&s);
  }
  return out;
}

const Service* FindService(std::string_view id) {
  for (const auto& s : Services()) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

const Plan* FindPlan(const Service& service, std::string_view id) {
  for (const auto& p : service.plans) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

bool KnownType(std::string_view type) { return !ServicesOfType(type).empty() && !type.empty(); }

Json CatalogJson(std::string_view type) {
  Json services = Json::array();
  for (const Service* s : ServicesOfType(type)) {
    Json plans = Json::array();
    for (const auto& p : s->plans) {
      plans.push_back({{"id", p.id},
                       {"name", p.name},
                       {"description", p.description},
                       {"free", true},
                       {"bindable", true},
                       {"plan_updateable", true},
                       {"metadata",
                        {{"nodes", p.limits.nodes},
                         {"size", p.limits.size},
                         {"tls", p.limits.tls},
                         {"disk_quota_bytes", p.limits.disk_quota_bytes}}}});
    }
    services.push_back({{"id", s->id},
                        {"name", s->name},
                        {"description", s->description},
                        {"bindable", true},
                        {"instances_retrievable", true},
                        {"bindings_retrievable", true},
                        {"plan_updateable", true},
                        {"tags", Json::array({s->type})},
                        {"metadata", s->served_by.empty() ? Json{{"displayName", s->name}}
                                                          : Json{{"displayName", s->name},
                                                                 {"servedBy", s->served_by}}},
                        {"plans", plans}});
  }
  return {{"services", services}};
}

core::Status CheckPlanChange(const Service& service, const Plan& from, const Plan& to) {
  if (from.id == to.id) return core::Status::Ok();
  if (service.engine == Engine::kPrometheus) {
    return core::Invalid(
        fmt::format("plan {} -> {}: Upgrade functionality for Prometheus plans is not supported",
                    from.name, to.name));
  }
  if (to.limits.size_rank < from.limits.size_rank) {
    return core::Invalid(
        fmt::format("plan {} -> {}: Transition from bigger to smaller plan size is not supported.",
                    from.name, to.name));
  }
  if (to.limits.tls != from.limits.tls) {
    return core::Invalid(fmt::format(
        "plan {} -> {}: switching TLS on or off is not supported; create a new instance", from.name,
        to.name));
  }
  if (to.limits.nodes < from.limits.nodes) {
    return core::Invalid(
        fmt::format("plan {} -> {}: going from a replicated to a single instance is not supported",
                    from.name, to.name));
  }
  if (service.engine == Engine::kRedis && to.limits.nodes != from.limits.nodes) {
    return core::Invalid(
        fmt::format("plan {} -> {}: a KeyValue instance keeps its topology (single or replica)",
                    from.name, to.name));
  }
  return core::Status::Ok();
}

}  // namespace klutch::broker
