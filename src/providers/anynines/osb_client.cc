#include "providers/anynines/osb_client.h"

#include <fmt/format.h>

#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::providers::anynines {
namespace {

using machinery::Find;
using machinery::GetString;

core::Status Require(std::initializer_list<std::pair<std::string_view, const std::string*>> ids,
                     std::string_view what) {
  for (const auto& [name, value] : ids) {
    if (value->empty()) return core::Invalid(fmt::format("{}: {} is required", what, name));
  }
  return core::Status::Ok();
}

std::string InstancePath(const std::string& id) {
  return "/v2/service_instances/" + PathSegment(id);
}

std::string BindingPath(const std::string& instance_id, const std::string& binding_id) {
  return InstancePath(instance_id) + "/service_bindings/" + PathSegment(binding_id);
}

std::string Query(std::initializer_list<std::pair<std::string_view, std::string_view>> params) {
  std::string q;
  for (const auto& [k, v] : params) {
    q += q.empty() ? "?" : "&";
    q += std::string(k) + "=" + core::PercentEncode(v);
  }
  return q;
}

}  // namespace

OsbClient::OsbClient(std::unique_ptr<ApiClient> api, OsbClientOptions options)
    : api_(std::move(api)),
      options_(options),
      clock_(options_.clock ? *options_.clock : core::RealClock::Get()) {}

core::Result<std::unique_ptr<OsbClient>> OsbClient::New(ServiceEndpoint endpoint,
                                                        OsbClientOptions options) {
  http::Headers headers;
  headers.Set("X-Broker-API-Version", std::string(kBrokerApiVersion));
  KLUTCH_ASSIGN_OR_RETURN(
      auto api, ApiClient::New(std::move(endpoint), "service broker", std::move(headers)));
  return std::unique_ptr<OsbClient>(new OsbClient(std::move(api), options));
}

core::Result<std::vector<CatalogService>> OsbClient::Catalog() {
  if (options_.catalog_ttl.count() > 0) {
    core::MutexLock lock(mu_);
    if (catalog_cached_ && clock_.MonotonicNow() < catalog_expires_) return catalog_;
  }
  KLUTCH_ASSIGN_OR_RETURN(ApiResponse r, api_->Do("GET", "/v2/catalog", nullptr, false));
  const Json* services = Find(r.json, {"services"});
  if (!services || !services->is_array()) {
    return core::Internal(fmt::format("GET {}/v2/catalog: answer has no services list", url()));
  }
  std::vector<CatalogService> out;
  for (const Json& s : *services) {
    CatalogService service{GetString(s, {"id"}), GetString(s, {"name"}), {}};
    const Json* plans = Find(s, {"plans"});
    if (plans && plans->is_array()) {
      for (const Json& p : *plans) {
        service.plans.push_back({GetString(p, {"id"}), GetString(p, {"name"})});
      }
    }
    out.push_back(std::move(service));
  }
  if (options_.catalog_ttl.count() > 0) {
    core::MutexLock lock(mu_);
    catalog_ = out;
    catalog_cached_ = true;
    catalog_expires_ = clock_.MonotonicNow() + options_.catalog_ttl;
  }
  return out;
}

core::Result<PlanIds> OsbClient::ResolvePlan(std::string_view service_name,
                                             std::string_view plan_name) {
  KLUTCH_ASSIGN_OR_RETURN(std::vector<CatalogService> catalog, Catalog());
  std::vector<std::string> services;
  for (const CatalogService& s : catalog) {
    services.push_back(s.name);
    // Catalog names of real a9s brokers carry a deployment suffix, hence the prefix match.
    if (!s.name.starts_with(service_name)) continue;
    std::vector<std::string> plans;
    for (const CatalogPlan& p : s.plans) {
      if (p.name == plan_name) return PlanIds{s.id, p.id};
      plans.push_back(p.name);
    }
    // Upstream's words, then what the broker does offer.
    return UserError(fmt::format("no entry for the plan name \"{}\" (service {} offers: {})",
                                 plan_name, s.name, core::Join(plans, ", ")));
  }
  return UserError(fmt::format("no entry for the service name \"{}\" (the broker offers: {})",
                               service_name, core::Join(services, ", ")));
}

core::Result<OsbOperation> OsbClient::AsyncAnswer(const ApiResponse& r, bool accepts_incomplete,
                                                  std::string_view what) {
  OsbOperation op;
  op.body = r.json;
  if (r.status == 202) {
    if (!accepts_incomplete) {
      return core::Internal(fmt::format(
          "{} at {}: the broker answered 202 Accepted to a request without accepts_incomplete",
          what, url()));
    }
    op.async = true;
  }
  if (r.json.is_object()) {
    op.operation = GetString(r.json, {"operation"});
    op.dashboard_url = GetString(r.json, {"dashboard_url"});
  }
  return op;
}

core::Result<OsbOperation> OsbClient::Provision(const ProvisionRequest& req) {
  KLUTCH_RETURN_IF_ERROR(Require({{"instance_id", &req.instance_id},
                                  {"service_id", &req.service_id},
                                  {"plan_id", &req.plan_id},
                                  {"organization_guid", &req.organization_guid},
                                  {"space_guid", &req.space_guid}},
                                 "provision"));
  Json body = {{"service_id", req.service_id},
               {"plan_id", req.plan_id},
               {"organization_guid", req.organization_guid},
               {"space_guid", req.space_guid},
               {"context",
                {{"platform", "kubernetes"},
                 {"organization_guid", req.organization_guid},
                 {"space_guid", req.space_guid}}}};
  if (!req.parameters.is_null()) body["parameters"] = req.parameters;
  std::string path = InstancePath(req.instance_id);
  if (req.accepts_incomplete) path += Query({{"accepts_incomplete", "true"}});
  KLUTCH_ASSIGN_OR_RETURN(ApiResponse r, api_->Do("PUT", path, body));
  return AsyncAnswer(r, req.accepts_incomplete, "provision");
}

core::Result<OsbOperation> OsbClient::Update(const UpdateRequest& req) {
  KLUTCH_RETURN_IF_ERROR(
      Require({{"instance_id", &req.instance_id}, {"service_id", &req.service_id}}, "update"));
  Json body = {{"service_id", req.service_id}};
  if (!req.plan_id.empty()) body["plan_id"] = req.plan_id;
  if (!req.parameters.is_null()) body["parameters"] = req.parameters;
  body["context"] = {{"platform", "kubernetes"},
                     {"organization_guid", req.organization_guid},
                     {"space_guid", req.space_guid}};
  if (!req.previous_plan_id.empty()) {
    body["previous_values"] = {{"plan_id", req.previous_plan_id}, {"service_id", req.service_id}};
  }
  std::string path = InstancePath(req.instance_id);
  if (req.accepts_incomplete) path += Query({{"accepts_incomplete", "true"}});
  KLUTCH_ASSIGN_OR_RETURN(ApiResponse r, api_->Do("PATCH", path, body));
  return AsyncAnswer(r, req.accepts_incomplete, "update");
}

core::Result<OsbOperation> OsbClient::Deprovision(const std::string& instance_id,
                                                  const std::string& service_id,
                                                  const std::string& plan_id,
                                                  bool accepts_incomplete) {
  KLUTCH_RETURN_IF_ERROR(
      Require({{"instance_id", &instance_id}, {"service_id", &service_id}, {"plan_id", &plan_id}},
              "deprovision"));
  std::string path =
      InstancePath(instance_id) + Query({{"service_id", service_id}, {"plan_id", plan_id}});
  if (accepts_incomplete) path += "&accepts_incomplete=true";
  auto r = api_->Do("DELETE", path);
  if (!r.ok()) {
    if (ServiceErrorStatus(r.status()) == 410) return OsbOperation{};  // already gone
    return r.status();
  }
  return AsyncAnswer(*r, accepts_incomplete, "deprovision");
}

core::Result<LastOperation> OsbClient::GetLastOperation(const std::string& instance_id,
                                                        const std::string& operation) {
  KLUTCH_RETURN_IF_ERROR(Require({{"instance_id", &instance_id}}, "last_operation"));
  std::string path = InstancePath(instance_id) + "/last_operation";
  if (!operation.empty()) path += Query({{"operation", operation}});
  KLUTCH_ASSIGN_OR_RETURN(ApiResponse r, api_->Do("GET", path, nullptr, false));
  LastOperation out{GetString(r.json, {"state"}), GetString(r.json, {"description"})};
  if (out.state.empty()) {
    return core::Internal(fmt::format("GET {}{}: answer has no state", url(), path));
  }
  return out;
}

core::Result<Json> OsbClient::GetA9sInstance(const std::string& instance_id) {
  KLUTCH_RETURN_IF_ERROR(Require({{"instance_id", &instance_id}}, "get instance"));
  KLUTCH_ASSIGN_OR_RETURN(
      ApiResponse r, api_->Do("GET", "/instances/" + PathSegment(instance_id), nullptr, false));
  return std::move(r.json);
}

core::Result<Json> OsbClient::GetServiceInstance(const std::string& instance_id) {
  KLUTCH_RETURN_IF_ERROR(Require({{"instance_id", &instance_id}}, "get service instance"));
  KLUTCH_ASSIGN_OR_RETURN(ApiResponse r,
                          api_->Do("GET", InstancePath(instance_id), nullptr, false));
  return std::move(r.json);
}

core::Result<OsbOperation> OsbClient::Bind(const std::string& instance_id,
                                           const std::string& binding_id,
                                           const std::string& service_id,
                                           const std::string& plan_id, bool accepts_incomplete) {
  KLUTCH_RETURN_IF_ERROR(Require({{"instance_id", &instance_id},
                                  {"binding_id", &binding_id},
                                  {"service_id", &service_id},
                                  {"plan_id", &plan_id}},
                                 "bind"));
  Json body = {{"service_id", service_id}, {"plan_id", plan_id}};
  std::string path = BindingPath(instance_id, binding_id);
  if (accepts_incomplete) path += Query({{"accepts_incomplete", "true"}});
  KLUTCH_ASSIGN_OR_RETURN(ApiResponse r, api_->Do("PUT", path, body));
  return AsyncAnswer(r, accepts_incomplete, "bind");
}

core::Result<Json> OsbClient::GetBinding(const std::string& instance_id,
                                         const std::string& binding_id) {
  KLUTCH_RETURN_IF_ERROR(
      Require({{"instance_id", &instance_id}, {"binding_id", &binding_id}}, "get binding"));
  KLUTCH_ASSIGN_OR_RETURN(ApiResponse r,
                          api_->Do("GET", BindingPath(instance_id, binding_id), nullptr, false));
  return std::move(r.json);
}

core::Result<OsbOperation> OsbClient::Unbind(const std::string& instance_id,
                                             const std::string& binding_id,
                                             const std::string& service_id,
                                             const std::string& plan_id, bool accepts_incomplete) {
  KLUTCH_RETURN_IF_ERROR(Require({{"instance_id", &instance_id},
                                  {"binding_id", &binding_id},
                                  {"service_id", &service_id},
                                  {"plan_id", &plan_id}},
                                 "unbind"));
  std::string path = BindingPath(instance_id, binding_id) +
                     Query({{"service_id", service_id}, {"plan_id", plan_id}});
  if (accepts_incomplete) path += "&accepts_incomplete=true";
  auto r = api_->Do("DELETE", path);
  if (!r.ok()) {
    if (ServiceErrorStatus(r.status()) == 410) return OsbOperation{};  // already gone
    return r.status();
  }
  return AsyncAnswer(*r, accepts_incomplete, "unbind");
}

core::Status OsbClient::CheckHealth(const std::string& path) {
  KLUTCH_ASSIGN_OR_RETURN(ApiResponse r, api_->Probe("HEAD", path));
  if (r.status != 200) return UserError(fmt::format("Received unexpected status {}", r.status));
  return core::Status::Ok();
}

bool IsInstanceNotFound(const core::Status& status) {
  return ServiceErrorStatus(status) == 404 && ServiceErrorCode(status) == "InstanceNotFound";
}

bool IsGoneOrNotFound(const core::Status& status) {
  int code = ServiceErrorStatus(status);
  return code == 404 || code == 410;
}

}  // namespace klutch::providers::anynines
