// OsbApi: the Open Service Broker front of every service type: /<type>/v2/catalog, service
// instances and bindings with their last_operation, /<type>/osb_ext/v1/healthy, and the a9s
// instance documents (/<type>/instances[/{id}]). Each handler parses the request (osb.h),
// calls the InstanceRegistry and maps its outcome to the status code and body OSB 2.11-2.17
// ask for; nothing is decided here. Authentication and the API version header are checked
// before (broker.h). Thread-safe.
#pragma once

#include <string>

#include "broker/broker_metrics.h"
#include "broker/instance_registry.h"
#include "http/router.h"

namespace klutch::broker {

class OsbApi {
 public:
  OsbApi(InstanceRegistry& registry, BrokerMetrics& metrics)
      : registry_(registry), metrics_(metrics) {}

  // Adds the routes; `this` must outlive the router.
  void AddRoutes(http::Router& router);

 private:
  using Handler = http::Response (OsbApi::*)(http::Request&, const http::PathParams&,
                                             const std::string& type);
  http::RouteHandler Route(Handler handler);

  http::Response Catalog(http::Request&, const http::PathParams&, const std::string& type);
  http::Response Healthy(http::Request&, const http::PathParams&, const std::string& type);
  http::Response Provision(http::Request& r, const http::PathParams& p, const std::string& type);
  http::Response Update(http::Request& r, const http::PathParams& p, const std::string& type);
  http::Response Deprovision(http::Request& r, const http::PathParams& p, const std::string& type);
  http::Response GetInstance(http::Request&, const http::PathParams& p, const std::string& type);
  http::Response LastOperation(http::Request& r, const http::PathParams& p,
                               const std::string& type);
  http::Response InstanceDocument(http::Request&, const http::PathParams& p,
                                  const std::string& type);
  http::Response ListInstances(const std::string& type);
  http::Response Bind(http::Request& r, const http::PathParams& p, const std::string& type);
  http::Response GetBinding(http::Request&, const http::PathParams& p, const std::string& type);
  http::Response BindingLastOperation(http::Request&, const http::PathParams& p,
                                      const std::string& type);
  http::Response Unbind(http::Request& r, const http::PathParams& p, const std::string& type);
  // The a9s document of one instance.
  Json InstanceDoc(const InstanceView& view) const;

  InstanceRegistry& registry_;
  BrokerMetrics& metrics_;
};

}  // namespace klutch::broker
