// ApiHandler: the HTTP face of the API server. Routes requests (discovery, OpenAPI, health,
// version, resource paths), decodes bodies (JSON, YAML, Kubernetes protobuf, patch types),
// calls RestStorage or the WatchManager, and encodes results (JSON objects and lists,
// Tables, Status errors with Kubernetes' codes). Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "apiserver/access.h"
#include "apiserver/openapi.h"
#include "apiserver/rest_storage.h"
#include "apiserver/watch.h"
#include "http/message.h"

namespace klutch::apiserver {

struct HandlerOptions {
  std::string server_address;  // reported in legacy /api
  std::string version_minor = "32";
};

class ApiHandler {
 public:
  ApiHandler(RestStorage& storage, Registry& registry, OpenApi& openapi, WatchManager& watches,
             AccessControl& access, HandlerOptions options);

  // Serves an authenticated and authorized request on behalf of `caller` (reviews answer
  // for it; writes of RBAC objects are checked against its permissions).
  http::Response Handle(http::Request& request, const Caller& caller);

  // Whether a request is a quick point read that may run on an I/O thread (gets of one
  // object, discovery, health); lists, watches and writes go to the worker pool.
  static bool IsQuick(const http::Request& request);

  // A Status as an HTTP response (used for transport errors too).
  static http::Response StatusResponse(const core::Status& status);

 private:
  http::Response HandleResource(http::Request& request, const Caller& caller,
                                const std::vector<std::string>& parts, size_t rest_start,
                                const std::string& group, const std::string& version);
  http::Response Discovery(http::Request& request, const std::vector<std::string>& parts);
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
};

}  // namespace klutch::apiserver
