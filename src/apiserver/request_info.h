// RequestInfo: what a request does, in the terms authorization and audit use (verb, API
// group, resource, subresource, namespace, name; or the path of a non-resource request),
// derived from the method, path and query the way kube-apiserver's request-info factory does.
// Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"

namespace klutch::apiserver {

struct RequestInfo {
  bool resource_request = false;
  std::string verb;  // get list watch create update patch delete deletecollection; or the
                     // lowercase HTTP method for non-resource requests
  std::string api_group, api_version, ns, resource, subresource, name;
  std::string path;
};

RequestInfo ParseRequestInfo(const http::Request& request);

// A boolean query parameter as Kubernetes converts it: absent is false, "0" and "false" (any
// case) are false, every other value (also "") is true. Authorization and the handler must
// read `watch` the same way.
bool QueryBool(std::optional<std::string_view> value);

}  // namespace klutch::apiserver
