// ApiHandler: the HTTP face of the API server. Routes each request from its one RequestInfo
// (resource requests by verb, group, version, namespace, resource, name and subresource;
// everything else through an http::Router: discovery, OpenAPI, health, version, issuer
// discovery), decodes bodies (JSON, YAML, Kubernetes protobuf, patch types), calls
// RestStorage or the WatchManager, and encodes results (JSON objects and lists, Tables,
// Status errors with Kubernetes' codes). Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "apiserver/access.h"
#include "apiserver/openapi.h"
#include "apiserver/request_info.h"
#include "apiserver/rest_storage.h"
#include "apiserver/watch.h"
#include "http/message.h"
#include "http/router.h"
#include "serving/health.h"
#include "serving/metrics.h"

namespace klutch::apiserver {

struct HandlerOptions {
  std::string server_address;  // reported in legacy /api
  std::string version_minor = "32";
  // /healthz, /livez, /readyz with these checks (unset: only "ping").
  const serving::HealthChecks* health = nullptr;
  // /metrics (unset: 404).
  const serving::MetricRegistry* metrics = nullptr;
};

class ApiHandler {
 public:
  ApiHandler(RestStorage& storage, Registry& registry, OpenApi& openapi, WatchManager& watches,
             AccessControl& access, HandlerOptions options);

  // Serves an authenticated and authorized request, described by `info`, on behalf of
  // `caller` (reviews answer for it; writes of RBAC objects are checked against its
  // permissions). `facts` (optional) receives what the request's audit event records beyond
  // `info`.
  http::Response Handle(http::Request& request, const RequestInfo& info, const Caller& caller,
                        AuditFacts* facts = nullptr);

  // Whether a request is a quick point read that may run on an I/O thread (gets of one
  // object, discovery, health); lists, watches and writes go to the worker pool.
  static bool IsQuick(const RequestInfo& info);

  // A Status as an HTTP response (used for transport errors too).
  static http::Response StatusResponse(const core::Status& status);

 private:
  http::Router NonResourceRoutes();
  http::Response HandleResource(http::Request& request, const RequestInfo& info,
                                const Caller& caller, AuditFacts* facts);
  http::Response DiscoveryRoot(http::Request& request, bool legacy);
  http::Response OpenApiV3(http::Request& request, std::string_view path);
  http::Response OpenApiV2(http::Request& request);
  http::Response HandleScale(http::Request& request, const ResourceInfo& r, const std::string& ns,
                             const std::string& name);

  RestStorage& storage_;
  Registry& registry_;
  OpenApi& openapi_;
  WatchManager& watches_;
  AccessControl& access_;
  HandlerOptions options_;
  http::Router router_;  // non-resource paths; last, its routes capture `this`
};

}  // namespace klutch::apiserver
