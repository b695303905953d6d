#include "broker/osb_api.h"

#include <fmt/format.h>

#include <chrono>

#include "broker/http_responses.h"
#include "core/strings.h"

namespace klutch::broker {
namespace {

using SteadyClock = std::chrono::steady_clock;

http::Response InstanceNotFound(std::string_view id) {
  return ErrorResponse(404, "InstanceNotFound", fmt::format("instance {} does not exist", id));
}

http::Response Operation(const std::string& key) { return JsonResponse(202, {{"operation", key}}); }

// The OSB answer to an outcome no route answers in its own way: 400 for what the request
// asks wrongly, 409 for other attributes, 422 ConcurrencyError while an operation runs, 503
// while shutting down, 500 when the broker failed.
http::Response OsbFailure(const RegistryResult& result) {
  switch (result.outcome) {
    case Outcome::kConflict:
      return ErrorResponse(409, "", result.message);
    case Outcome::kBusy:
      return ErrorResponse(422, "ConcurrencyError", result.message);
    case Outcome::kInvalid:
      return ErrorResponse(400, "", result.message);
    case Outcome::kShuttingDown:
      return ErrorResponse(503, "", result.message);
    default:
      return ErrorResponse(500, "", result.message);
  }
}

double SecondsSince(SteadyClock::time_point started) {
  return std::chrono::duration<double>(SteadyClock::now() - started).count();
}

}  // namespace

http::RouteHandler OsbApi::Route(Handler fn) {
  return [this, fn](http::Request& r, const http::PathParams& p) -> http::Response {
    std::string base(p.Get("base"));
    if (IsBackupManagerBase(base)) return NotServedHere(r);
    if (auto e = CheckPathIds(p)) return ErrorResponse(*e);
    return (this->*fn)(r, p, base);
  };
}

void OsbApi::AddRoutes(http::Router& router) {
  const std::string instance = "/{base}/v2/service_instances/{instance}";
  const std::string binding = instance + "/service_bindings/{binding}";
  router.Get("/{base}/v2/catalog", Route(&OsbApi::Catalog));
  router.Put(instance, Route(&OsbApi::Provision));
  router.Patch(instance, Route(&OsbApi::Update));
  router.Delete(instance, Route(&OsbApi::Deprovision));
  router.Get(instance, Route(&OsbApi::GetInstance));
  router.Get(instance + "/last_operation", Route(&OsbApi::LastOperation));
  router.Put(binding, Route(&OsbApi::Bind));
  router.Get(binding, Route(&OsbApi::GetBinding));
  router.Delete(binding, Route(&OsbApi::Unbind));
  router.Get(binding + "/last_operation", Route(&OsbApi::BindingLastOperation));
  router.Get("/{base}/osb_ext/v1/healthy", Route(&OsbApi::Healthy));
  // The instance list answers under both kinds of base path.
  router.Get("/{base}/instances", [this](http::Request&, const http::PathParams& p) {
    std::string base(p.Get("base"));
    return ListInstances(IsBackupManagerBase(base) ? BackupManagerType(base) : base);
  });
  router.Get("/{base}/instances/{instance}", Route(&OsbApi::InstanceDocument));
}

http::Response OsbApi::Catalog(http::Request&, const http::PathParams&, const std::string& type) {
  return JsonResponse(200, CatalogJson(type));
}

http::Response OsbApi::Healthy(http::Request&, const http::PathParams&, const std::string&) {
  return JsonResponse(200, {{"message", "healthy"}});
}

http::Response OsbApi::Provision(http::Request& r, const http::PathParams& p,
                                 const std::string& type) {
  std::string id(p.Get("instance"));
  if (auto e = CheckId("instance_id", id)) return ErrorResponse(*e);
  if (auto e = RequireAsync(r.Query("accepts_incomplete"))) return ErrorResponse(*e);
  ProvisionRequest req;
  if (auto e = ParseProvision(r.body, &req)) return ErrorResponse(*e);
  RegistryResult result = registry_.Provision(type, id, req);
  if (result.outcome == Outcome::kAccepted) return Operation(result.operation);
  if (result.outcome == Outcome::kAlreadyDone) return JsonResponse(200, Json::object());
  return OsbFailure(result);
}

http::Response OsbApi::Update(http::Request& r, const http::PathParams& p,
                              const std::string& type) {
  std::string id(p.Get("instance"));
  if (auto e = CheckId("instance_id", id)) return ErrorResponse(*e);
  if (auto e = RequireAsync(r.Query("accepts_incomplete"))) return ErrorResponse(*e);
  UpdateRequest req;
  if (auto e = ParseUpdate(r.body, &req)) return ErrorResponse(*e);
  RegistryResult result = registry_.Update(type, id, req);
  if (result.outcome == Outcome::kAccepted) return Operation(result.operation);
  if (result.outcome == Outcome::kAlreadyDone) return JsonResponse(200, Json::object());
  if (result.outcome == Outcome::kNoInstance) return InstanceNotFound(id);
  return OsbFailure(result);
}

http::Response OsbApi::Deprovision(http::Request& r, const http::PathParams& p,
                                   const std::string& type) {
  std::string id(p.Get("instance"));
  if (auto e = CheckId("instance_id", id)) return ErrorResponse(*e);
  if (!r.Query("service_id") || !r.Query("plan_id")) {
    return ErrorResponse(400, "", "the query parameters service_id and plan_id are required");
  }
  if (auto e = RequireAsync(r.Query("accepts_incomplete"))) return ErrorResponse(*e);
  RegistryResult result = registry_.Deprovision(type, id, *r.Query("service_id"));
  if (result.outcome == Outcome::kAccepted) return Operation(result.operation);
  if (result.outcome == Outcome::kGone) return JsonResponse(410, Json::object());
  return OsbFailure(result);
}

http::Response OsbApi::GetInstance(http::Request&, const http::PathParams& p,
                                   const std::string& type) {
  std::string id(p.Get("instance"));
  auto view = registry_.Get(type, id);
  if (!view) return InstanceNotFound(id);
  const InstanceRecord& rec = view->record;
  // OSB: 404 while the provision is in progress, 422 ConcurrencyError while an update is.
  if (rec.state == kStateDeploying && rec.operation == "provision") {
    return ErrorResponse(404, "NotFound",
                         fmt::format("instance {} is being provisioned; fetch it when the "
                                     "provision has finished",
                                     id));
  }
  if (rec.state == kStateDeploying && rec.operation == "update") {
    return ErrorResponse(422, "ConcurrencyError",
                         fmt::format("instance {} is being updated; fetch it when the update "
                                     "has finished",
                                     id));
  }
  return JsonResponse(200, {{"service_id", rec.service_id},
                            {"plan_id", rec.plan_id},
                            {"parameters", rec.parameters},
                            {"dashboard_url", ""}});
}

http::Response OsbApi::LastOperation(http::Request& r, const http::PathParams& p,
                                     const std::string& type) {
  std::string id(p.Get("instance"));
  auto view = registry_.Get(type, id);
  if (!view) {
    return JsonResponse(410, {{"state", "succeeded"}, {"description", "the instance is gone"}});
  }
  const InstanceRecord& rec = view->record;
  auto key = r.Query("operation");
  if (key && !key->empty() && *key != rec.operation_key) {
    return ErrorResponse(400, "",
                         fmt::format("operation {} is not the last operation of instance {} "
                                     "(that is {})",
                                     core::GoQuote(*key), id, core::GoQuote(rec.operation_key)));
  }
  Json body = {{"state", rec.operation_state.empty() ? "succeeded" : rec.operation_state}};
  std::string description = rec.operation_description;
  if (description.empty()) description = fmt::format("{} {}", rec.operation, rec.operation_state);
  body["description"] = description;
  return JsonResponse(200, body);
}

Json OsbApi::InstanceDoc(const InstanceView& view) const {
  const InstanceRecord& rec = view.record;
  Json creds = Json::array();
  for (const auto& [bid, b] : rec.bindings) {
    creds.push_back({{"id", bid}, {"instance_id", rec.number}, {"guid_at_tenant", bid}});
  }
  Json vm = Json::array();
  for (size_t i = 0; i < rec.ports.size(); ++i) {
    vm.push_back({{"node", i}, {"host", registry_.options().engine.host}, {"port", rec.ports[i]}});
  }
  const Service* service = FindService(rec.service_id);
  return {{"id", rec.number},
          // Klutch's addition: what runs here when the service's name promises another version.
          {"served_by", service != nullptr ? service->served_by : ""},
          {"plan_guid", rec.plan_id},
          {"service_guid", rec.service_id},
          {"context",
           {{"organization_guid", rec.organization_guid},
            {"space_guid", rec.space_guid},
            {"parameters", rec.parameters}}},
          {"dashboard_url", ""},
          {"deployment_name", fmt::format("klutch-{}", rec.number)},
          {"state", view.reported_state},
          {"message", view.message},
          {"guid_at_tenant", rec.id},
          {"tenant_id", rec.organization_guid},
          {"provisioned_at", rec.provisioned_at.empty() ? Json() : Json(rec.provisioned_at)},
          {"deleted_at", nullptr},
          {"created_at", rec.created_at},
          {"updated_at", rec.updated_at},
          {"credentials", creds},
          {"vm_details", vm}};
}

http::Response OsbApi::InstanceDocument(http::Request&, const http::PathParams& p,
                                        const std::string& type) {
  std::string id(p.Get("instance"));
  auto view = registry_.Get(type, id);
  if (!view) return InstanceNotFound(id);
  return JsonResponse(200, InstanceDoc(*view));
}

http::Response OsbApi::ListInstances(const std::string& type) {
  Json resources = Json::array();
  for (const auto& view : registry_.List(type)) resources.push_back(InstanceDoc(view));
  return JsonResponse(200, {{"total_results", resources.size()},
                            {"total_pages", 1},
                            {"current_page", 1},
                            {"prev_url", nullptr},
                            {"next_url", nullptr},
                            {"resources", resources}});
}

http::Response OsbApi::Bind(http::Request& r, const http::PathParams& p, const std::string& type) {
  auto started = SteadyClock::now();
  std::string id(p.Get("instance"));
  std::string binding_id(p.Get("binding"));
  if (auto e = CheckId("instance_id", id)) return ErrorResponse(*e);
  if (auto e = CheckId("binding_id", binding_id)) return ErrorResponse(*e);
  BindRequest req;
  if (auto e = ParseBind(r.body, &req)) return ErrorResponse(*e);
  RegistryResult result = registry_.Bind(type, id, binding_id, req);
  switch (result.outcome) {
    case Outcome::kDone:
      metrics_.ObserveBind("bind", SecondsSince(started));
      return JsonResponse(201, {{"credentials", result.credentials}});
    case Outcome::kAlreadyDone:
      return JsonResponse(200, {{"credentials", result.credentials}});
    case Outcome::kNoInstance:
      return InstanceNotFound(id);
    default:
      return OsbFailure(result);
  }
}

http::Response OsbApi::GetBinding(http::Request&, const http::PathParams& p,
                                  const std::string& type) {
  std::string id(p.Get("instance"));
  std::string binding_id(p.Get("binding"));
  auto view = registry_.Get(type, id);
  if (!view) return InstanceNotFound(id);
  auto it = view->record.bindings.find(binding_id);
  if (it == view->record.bindings.end()) {
    return ErrorResponse(404, "NotFound", fmt::format("binding {} does not exist", binding_id));
  }
  return JsonResponse(200, {{"credentials", it->second.credentials}});
}

http::Response OsbApi::BindingLastOperation(http::Request&, const http::PathParams& p,
                                            const std::string& type) {
  auto view = registry_.Get(type, p.Get("instance"));
  if (!view || !view->record.bindings.contains(std::string(p.Get("binding")))) {
    return JsonResponse(410, Json::object());
  }
  return JsonResponse(200, {{"state", "succeeded"}, {"description", "bindings are synchronous"}});
}

http::Response OsbApi::Unbind(http::Request& r, const http::PathParams& p,
                              const std::string& type) {
  auto started = SteadyClock::now();
  std::string id(p.Get("instance"));
  std::string binding_id(p.Get("binding"));
  if (!r.Query("service_id") || !r.Query("plan_id")) {
    return ErrorResponse(400, "", "the query parameters service_id and plan_id are required");
  }
  RegistryResult result = registry_.Unbind(type, id, binding_id);
  if (result.outcome == Outcome::kGone) return JsonResponse(410, Json::object());
  if (result.outcome != Outcome::kDone) return OsbFailure(result);
  metrics_.ObserveBind("unbind", SecondsSince(started));
  return JsonResponse(200, Json::object());
}

}  // namespace klutch::broker
