#include "core/status.h"

#include <cstdio>
#include <cstdlib>

namespace klutch::core {
namespace {

struct ReasonRow {
  Reason reason;
  std::string_view name;
  int code;
};

// One table: wire name and HTTP code per reason, as kube-apiserver maps them.
constexpr ReasonRow kReasons[] = {
    {Reason::kOk, "", 200},
    {Reason::kUnknown, "", 500},
    {Reason::kBadRequest, "BadRequest", 400},
    {Reason::kUnauthorized, "Unauthorized", 401},
    {Reason::kForbidden, "Forbidden", 403},
    {Reason::kNotFound, "NotFound", 404},
    {Reason::kAlreadyExists, "AlreadyExists", 409},
    {Reason::kConflict, "Conflict", 409},
    {Reason::kGone, "Gone", 410},
    {Reason::kExpired, "Expired", 410},
    {Reason::kInvalid, "Invalid", 422},
    {Reason::kServerTimeout, "ServerTimeout", 500},
    {Reason::kTimeout, "Timeout", 504},
    {Reason::kTooManyRequests, "TooManyRequests", 429},
    {Reason::kMethodNotAllowed, "MethodNotAllowed", 405},
    {Reason::kNotAcceptable, "NotAcceptable", 406},
    {Reason::kRequestEntityTooLarge, "RequestEntityTooLarge", 413},
    {Reason::kUnsupportedMediaType, "UnsupportedMediaType", 415},
    {Reason::kInternalError, "InternalError", 500},
    {Reason::kServiceUnavailable, "ServiceUnavailable", 503},
};

const ReasonRow& Row(Reason reason) {
  for (const auto& row : kReasons) {
    if (row.reason == reason) return row;
  }
  return kReasons[1];
}

}  // namespace

std::string_view ReasonName(Reason reason) { return Row(reason).name; }
int HttpCode(Reason reason) { return Row(reason).code; }

Reason ReasonFromName(std::string_view name) {
  if (name.empty()) return Reason::kUnknown;
  for (const auto& row : kReasons) {
    if (row.name == name) return row.reason;
  }
  return Reason::kUnknown;
}

Status& Status::Annotate(std::string_view context) {
  if (!ok()) message_ = std::string(context) + ": " + message_;
  return *this;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string name(ReasonName(reason_));
  if (name.empty()) name = "Unknown";
  return name + ": " + message_;
}

Status BadRequest(std::string message) { return {Reason::kBadRequest, std::move(message)}; }
Status NotFound(std::string message) { return {Reason::kNotFound, std::move(message)}; }
Status AlreadyExists(std::string message) { return {Reason::kAlreadyExists, std::move(message)}; }
Status Conflict(std::string message) { return {Reason::kConflict, std::move(message)}; }
Status Invalid(std::string message) { return {Reason::kInvalid, std::move(message)}; }
Status Forbidden(std::string message) { return {Reason::kForbidden, std::move(message)}; }
Status Internal(std::string message) { return {Reason::kInternalError, std::move(message)}; }
Status Gone(std::string message) { return {Reason::kGone, std::move(message)}; }
Status Unavailable(std::string message) {
  return {Reason::kServiceUnavailable, std::move(message)};
}

void CheckFailed(const char* cond, const char* file, int line) {
  std::fprintf(stderr, "KLUTCH_CHECK failed: %s at %s:%d\n", cond, file, line);
  std::abort();
}

}  // namespace klutch::core
