// OsbClient: the Open Service Broker API client of provider-anynines (data-services.md §6.1),
// plus the a9s extension `GET /instances/{id}` the ServiceInstance controller observes through.
//
// Every request carries `X-Broker-API-Version: 2.14` and the endpoint's basic auth; a JSON
// body only when there is one. Answers other than the documented successes are ServiceErrors
// (api_client.h) keeping the body's `error` and `description`. Required IDs are checked before
// anything is sent (kInvalid naming the missing field). The catalog is cached for
// `catalog_ttl` (0: never cached).
//
// Thread-safe: any number of threads may call at once.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/sync.h"
#include "providers/anynines/api_client.h"

namespace klutch::providers::anynines {

inline constexpr std::string_view kBrokerApiVersion = "2.14";

struct CatalogPlan {
  std::string id, name;
};
struct CatalogService {
  std::string id, name;
  std::vector<CatalogPlan> plans;
};

// The IDs a service and plan name resolve to.
struct PlanIds {
  std::string service_id, plan_id;
};

// The answer to provision, update, deprovision and bind: done at once, or accepted as an
// asynchronous operation (`operation` is the broker's key for last_operation; may be empty).
struct OsbOperation {
  bool async = false;
  std::string operation;
  std::string dashboard_url;
  Json body;  // the whole answer (bind: `credentials` ...), null when empty
};

struct LastOperation {
  std::string state;  // "in progress", "succeeded", "failed"
  std::string description;
};

struct ProvisionRequest {
  std::string instance_id, service_id, plan_id, organization_guid, space_guid;
  Json parameters;  // null: none sent
  bool accepts_incomplete = true;
};

struct UpdateRequest {
  std::string instance_id, service_id, plan_id;
  Json parameters;                            // null: none sent
  std::string organization_guid, space_guid;  // the context
  std::string previous_plan_id;               // previous_values, when known
  bool accepts_incomplete = true;
};

struct OsbClientOptions {
  std::chrono::milliseconds catalog_ttl{15000};
  const core::Clock* clock = nullptr;  // catalog expiry; nullptr: real time
};

class OsbClient {
 public:
  // See ApiClient::New for the errors.
  static core::Result<std::unique_ptr<OsbClient>> New(ServiceEndpoint endpoint,
                                                      OsbClientOptions options = {});

  // GET /v2/catalog (cached).
  core::Result<std::vector<CatalogService>> Catalog();
  // §3.4: the first service whose name starts with `service_name`, the plan of that service
  // named exactly `plan_name`. UserErrors `no entry for the service name "<s>"` and
  // `no entry for the plan name "<p>"`, each followed by what the catalog offers
  // (` (the broker offers: a, b)`, ` (service <s> offers: x, y)`).
  core::Result<PlanIds> ResolvePlan(std::string_view service_name, std::string_view plan_name);

  // PUT /v2/service_instances/{id}: 200/201 done, 202 async (only with accepts_incomplete).
  core::Result<OsbOperation> Provision(const ProvisionRequest& request);
  // PATCH /v2/service_instances/{id}: 200 done, 202 async.
  core::Result<OsbOperation> Update(const UpdateRequest& request);
  // DELETE /v2/service_instances/{id}: 200 or 410 done, 202 async.
  core::Result<OsbOperation> Deprovision(const std::string& instance_id,
                                         const std::string& service_id, const std::string& plan_id,
                                         bool accepts_incomplete);
  // GET /v2/service_instances/{id}/last_operation?operation=<key>.
  core::Result<LastOperation> GetLastOperation(const std::string& instance_id,
                                               const std::string& operation);
  // GET /instances/{id} (a9s extension): the instance document.
  core::Result<Json> GetA9sInstance(const std::string& instance_id);
  // GET /v2/service_instances/{id} (OSB 2.14 fetch).
  core::Result<Json> GetServiceInstance(const std::string& instance_id);

  // PUT .../service_bindings/{binding_id}: 200/201 done (body has `credentials`), 202 async.
  core::Result<OsbOperation> Bind(const std::string& instance_id, const std::string& binding_id,
                                  const std::string& service_id, const std::string& plan_id,
                                  bool accepts_incomplete);
  // GET .../service_bindings/{binding_id}.
  core::Result<Json> GetBinding(const std::string& instance_id, const std::string& binding_id);
  // DELETE .../service_bindings/{binding_id}: 200 or 410 done, 202 async.
  core::Result<OsbOperation> Unbind(const std::string& instance_id, const std::string& binding_id,
                                    const std::string& service_id, const std::string& plan_id,
                                    bool accepts_incomplete);

  // §4.6: HEAD <path> must answer exactly 200; otherwise UserError
  // `Received unexpected status <code>`, or Unreachable.
  core::Status CheckHealth(const std::string& path);

  const std::string& url() const { return api_->url(); }
  const ServiceEndpoint& endpoint() const { return api_->endpoint(); }

 private:
  OsbClient(std::unique_ptr<ApiClient> api, OsbClientOptions options);
  core::Result<OsbOperation> AsyncAnswer(const ApiResponse& r, bool accepts_incomplete,
                                         std::string_view what);

  std::unique_ptr<ApiClient> api_;
  const OsbClientOptions options_;
  const core::Clock& clock_;
  core::Mutex mu_;
  std::vector<CatalogService> catalog_ GUARDED_BY(mu_);
  core::MonoTime catalog_expires_ GUARDED_BY(mu_);
  bool catalog_cached_ GUARDED_BY(mu_) = false;
};

// "Not found" as the provider understands it: HTTP 404 with `"error": "InstanceNotFound"`.
bool IsInstanceNotFound(const core::Status& status);
// HTTP 404 or 410 of any kind (a binding or an instance that is not there).
bool IsGoneOrNotFound(const core::Status& status);

}  // namespace klutch::providers::anynines
