// RequestInfo: what a request does (verb, API group and version, resource, subresource,
// namespace, name; or the path of a non-resource request), derived once per request from the
// method, path and query the way kube-apiserver's request-info factory does. Authorization,
// audit and the handler's routing all read this one parse. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"

namespace klutch::apiserver {

struct RequestInfo {
  // /api/<version>/... or /apis/<group>/<version>/... with at least one more segment;
  // shorter paths (discovery) and everything else are non-resource requests.
  bool resource_request = false;
  std::string verb;  // get list watch create update patch delete deletecollection; or the
                     // lowercase HTTP method for non-resource requests
  std::string api_group, api_version, ns, resource, subresource, name;
  std::string path;
  // `name` came from a `metadata.name=` field selector of a list or watch (for authorization
  // by resourceNames), not from the path.
  bool name_from_field_selector = false;
  // The deprecated /watch/ path prefix made this a watch.
  bool watch_path = false;
  // Path segments beyond the subresource: nothing is served there.
  bool extra_segments = false;
};

RequestInfo ParseRequestInfo(const http::Request& request);

// A boolean query parameter as Kubernetes converts it: absent is false, "0" and "false" (any
// case) are false, every other value (also "") is true. Authorization and the handler must
// read `watch` the same way.
bool QueryBool(std::optional<std::string_view> value);

}  // namespace klutch::apiserver
