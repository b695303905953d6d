// The Open Service Broker API as the broker reads it: request headers and bodies parsed and
// checked before anything changes, with the error each failure gets (status code, the OSB
// `error` code where the spec names one, and a `description` saying what to fix). Pure
// functions over untrusted input (fuzzed by fuzz_broker_osb); thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "machinery/json.h"

namespace klutch::broker {

using machinery::Json;

struct OsbError {
  int status = 400;
  std::string error;  // OSB error code (AsyncRequired, ConcurrencyError, ...) or ""
  std::string description;
};

// The body of an error response: {"error": ..., "description": ...}.
Json ErrorBody(const OsbError& error);

// X-Broker-API-Version: this broker speaks 2.11 to 2.17. Missing or other -> 412.
std::optional<OsbError> CheckApiVersion(std::string_view header);
// Instance and binding IDs: 1-255 characters of [A-Za-z0-9._-], neither "." nor "..".
// Otherwise 400.
std::optional<OsbError> CheckId(std::string_view what, std::string_view id);
// accepts_incomplete=true is required for operations that run asynchronously (422
// AsyncRequired otherwise).
std::optional<OsbError> RequireAsync(std::optional<std::string_view> accepts_incomplete);

struct ProvisionRequest {
  std::string service_id;
  std::string plan_id;
  std::string organization_guid;
  std::string space_guid;
  Json parameters = Json::object();
  Json context = Json::object();
};

struct UpdateRequest {
  std::string service_id;
  std::optional<std::string> plan_id;
  std::optional<Json> parameters;  // absent: unchanged; keys with null are reset
  Json context = Json::object();
};

struct BindRequest {
  std::string service_id;
  std::string plan_id;
  Json parameters = Json::object();
  Json context = Json::object();
};

// Parse a request body: malformed JSON, a missing or mistyped field -> 400 naming it.
// A provision needs non-empty service_id, plan_id, organization_guid and space_guid; an
// update a service_id; a bind service_id and plan_id.
std::optional<OsbError> ParseProvision(std::string_view body, ProvisionRequest* out);
std::optional<OsbError> ParseUpdate(std::string_view body, UpdateRequest* out);
std::optional<OsbError> ParseBind(std::string_view body, BindRequest* out);

}  // namespace klutch::broker
