// What the broker's HTTP fronts (osb_api.h, backup_api.h, broker.h) share: JSON answers,
// OSB error bodies, the base-path rules (`<type>` vs `<type>-backup-manager`) and the path
// ID checks. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "broker/osb.h"
#include "http/message.h"
#include "http/router.h"
#include "serving/json_response.h"

namespace klutch::broker {

inline constexpr char kBackupManagerSuffix[] = "-backup-manager";

// `body` as application/json with `status` (serving's, as every server answers JSON).
using serving::JsonResponse;
// An OSB error: {"error": ..., "description": ...} with its status.
http::Response ErrorResponse(const OsbError& error);
http::Response ErrorResponse(int status, std::string error, std::string description);
// 404 for a route that exists under the other kind of base path.
http::Response NotServedHere(const http::Request& request);
// Whether `base` is a backup manager's base path, and the service type it serves.
bool IsBackupManagerBase(std::string_view base);
std::string BackupManagerType(std::string_view base);
// The instance and binding IDs of a route, checked on every route that has them (the router
// has percent-decoded them, so "%2e%2E" arrives as "..").
std::optional<OsbError> CheckPathIds(const http::PathParams& params);

}  // namespace klutch::broker
