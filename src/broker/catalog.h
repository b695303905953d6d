// The services and plans `klutch broker` offers: what really runs here (PostgreSQL 15,
// Redis 7, MariaDB 10.11, Prometheus 2.42 and RabbitMQ 3.10 from Debian), under the service and
// plan names Klutch's XRDs allow, each plan's size mapped to real server limits. Pure data plus the
// plan-change rules; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engines/instance.h"
#include "machinery/json.h"

namespace klutch::engines {
class DataService;     // engines/data_service.h
struct EngineContext;  // engines/data_service.h
}  // namespace klutch::engines

namespace klutch::broker {

using machinery::Json;

enum class Engine { kPostgresql, kRedis, kMariadb, kPrometheus, kRabbitmq };

// Makes the engine that runs a service's instances (NewPostgresService, ... in
// engines/data_service.h).
using EngineFactory =
    std::unique_ptr<engines::DataService> (*)(const engines::EngineContext& context);
using engines::PlanLimits;

struct Plan {
  std::string id;
  std::string name;
  std::string description;
  PlanLimits limits;
};

struct Service {
  std::string id;
  std::string name;  // a9s-postgresql15, a9s-keyvalue8, a9s-mariadb106
  // What serves the name here when it promises another version ("MariaDB 10.11 serves
  // a9s-mariadb106, ..."): shown on the instance and its claim; "" when the name is exact.
  std::string served_by;
  std::string type;  // the data-service type of Klutch's ProviderConfig names: postgresql, keyvalue
  std::string description;
  Engine engine = Engine::kPostgresql;
  EngineFactory new_engine = nullptr;  // one engine per Engine value serves all its services
  std::vector<Plan> plans;
};

// Every service this broker runs.
const std::vector<Service>& Services();
// The services of one type ("postgresql", "keyvalue"); "" = all of them.
std::vector<const Service*> ServicesOfType(std::string_view type);
const Service* FindService(std::string_view id);
const Plan* FindPlan(const Service& service, std::string_view id);
// Whether `type` names a service type this broker runs.
bool KnownType(std::string_view type);

// The OSB catalog document (GET /v2/catalog) for the services of `type` ("" = all).
Json CatalogJson(std::string_view type);

// The rules of a plan update (data-services §3.3, as the broker enforces them): sizes never
// shrink; PostgreSQL and MariaDB may go from single to replica (cluster), never back;
// KeyValue keeps its topology; the TLS flag never changes; a Prometheus plan never changes.
// kInvalid with the reason otherwise.
core::Status CheckPlanChange(const Service& service, const Plan& from, const Plan& to);

}  // namespace klutch::broker
