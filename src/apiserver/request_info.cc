#include "apiserver/request_info.h"

#include <vector>

#include "core/strings.h"

namespace klutch::apiserver {

namespace {

// "metadata.name=x" (possibly among other terms) -> "x".
std::string NameFromFieldSelector(std::string_view selector) {
  for (auto term : core::Split(selector, ',')) {
    term = core::Trim(term);
    for (std::string_view op : {"==", "="}) {
      std::string prefix = "metadata.name" + std::string(op);
      if (term.starts_with(prefix)) return std::string(term.substr(prefix.size()));
    }
  }
  return "";
}

}  // namespace

bool QueryBool(std::optional<std::string_view> value) {
  return value && *value != "0" && core::ToLower(*value) != "false";
}

RequestInfo ParseRequestInfo(const http::Request& req) {
  RequestInfo info;
  info.path = req.path;
  info.verb = core::ToLower(req.method);
  std::vector<std::string_view> parts = core::SplitNonEmpty(req.path, '/');
  // /api/<version>/... and /apis/<group>/<version>/...; shorter paths are discovery, which
  // is a non-resource request.
  size_t i = 0;
  if (parts.size() >= 3 && parts[0] == "api") {
    info.api_version = std::string(parts[1]);
    i = 2;
  } else if (parts.size() >= 4 && parts[0] == "apis") {
    info.api_group = std::string(parts[1]);
    info.api_version = std::string(parts[2]);
    i = 3;
  } else {
    info.api_group.clear();
    return info;
  }
  info.resource_request = true;
  const std::string& m = req.method;
  if (m == "POST") {
    info.verb = "create";
  } else if (m == "GET" || m == "HEAD") {
    info.verb = "get";
  } else if (m == "PUT") {
    info.verb = "update";
  } else if (m == "PATCH") {
    info.verb = "patch";
  } else if (m == "DELETE") {
    info.verb = "delete";
  }
  if (parts[i] == "watch" && i + 1 < parts.size()) {  // the deprecated /watch/ prefix
    info.verb = "watch";
    info.watch_path = true;
    ++i;
  }
  std::vector<std::string_view> rest(parts.begin() + static_cast<long>(i), parts.end());
  if (!rest.empty() && rest[0] == "namespaces") {
    if (rest.size() > 1) {
      info.ns = std::string(rest[1]);
      // namespaces/<ns>/<resource>... unless it is a namespace's own subresource.
      if (rest.size() > 2 && rest[2] != "status" && rest[2] != "finalize") {
        rest.erase(rest.begin(), rest.begin() + 2);
      }
    }
  }
  if (!rest.empty()) info.resource = std::string(rest[0]);
  if (rest.size() >= 2) info.name = std::string(rest[1]);
  if (rest.size() >= 3) info.subresource = std::string(rest[2]);
  info.extra_segments = rest.size() > 3;
  if (info.name.empty() && (info.verb == "get" || info.verb == "watch")) {
    if (info.verb == "get") info.verb = QueryBool(req.Query("watch")) ? "watch" : "list";
    if (auto fs = req.Query("fieldSelector")) {
      info.name = NameFromFieldSelector(*fs);
      info.name_from_field_selector = !info.name.empty();
    }
  }
  if (info.name.empty() && info.verb == "delete") info.verb = "deletecollection";
  return info;
}

}  // namespace klutch::apiserver
