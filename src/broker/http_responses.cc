#include "broker/http_responses.h"

#include <fmt/format.h>

#include <cstring>

namespace klutch::broker {

http::Response ErrorResponse(const OsbError& e) { return JsonResponse(e.status, ErrorBody(e)); }

http::Response ErrorResponse(int status, std::string error, std::string description) {
  return ErrorResponse(OsbError{status, std::move(error), std::move(description)});
}

http::Response NotServedHere(const http::Request& r) {
  return ErrorResponse(404, "NotFound",
                       fmt::format("{} {} is not served at this base path", r.method, r.path));
}

bool IsBackupManagerBase(std::string_view base) { return base.ends_with(kBackupManagerSuffix); }

std::string BackupManagerType(std::string_view base) {
  return std::string(base.substr(0, base.size() - std::strlen(kBackupManagerSuffix)));
}

std::optional<OsbError> CheckPathIds(const http::PathParams& p) {
  if (p.Has("instance")) {
    if (auto e = CheckId("instance_id", p.Get("instance"))) return e;
  }
  if (p.Has("binding")) {
    if (auto e = CheckId("binding_id", p.Get("binding"))) return e;
  }
  return std::nullopt;
}

}  // namespace klutch::broker
