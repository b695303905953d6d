#include "broker/osb.h"

#include <fmt/format.h>

#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::broker {
namespace {

OsbError Bad(std::string description) { return OsbError{400, "", std::move(description)}; }

std::optional<OsbError> ParseObject(std::string_view body, Json* out) {
  if (core::Trim(body).empty()) return Bad("the request body is empty; send a JSON object");
  auto json = machinery::ParseJson(body);
  if (!json.ok()) return Bad("the request body is not valid JSON: " + json.status().message());
  if (!json->is_object()) return Bad("the request body must be a JSON object");
  *out = std::move(*json);
  return std::nullopt;
}

// A string field: required ones must be present and non-empty.
std::optional<OsbError> StringField(const Json& body, std::string_view key, bool required,
                                    std::string* out) {
  const Json* v = machinery::Find(body, {key});
  if (v == nullptr || v->is_null()) {
    if (required) return Bad(fmt::format("{} is required", key));
    return std::nullopt;
  }
  const auto* s = v->get_ptr<const std::string*>();
  if (s == nullptr) return Bad(fmt::format("{} must be a string", key));
  if (required && s->empty()) return Bad(fmt::format("{} must not be empty", key));
  *out = *s;
  return std::nullopt;
}

std::optional<OsbError> ObjectField(const Json& body, std::string_view key, Json* out) {
  const Json* v = machinery::Find(body, {key});
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_object()) return Bad(fmt::format("{} must be a JSON object", key));
  *out = *v;
  return std::nullopt;
}

}  // namespace

Json ErrorBody(const OsbError& error) {
  Json body = {{"description", error.description}};
  if (!error.error.empty())
    body["error"] = error.error;
  else
    body["error"] = error.status == 401   ? "Unauthorized"
                    : error.status == 404 ? "NotFound"
                    : error.status == 409 ? "Conflict"
                    : error.status == 410 ? "Gone"
                    : error.status == 412 ? "PreconditionFailed"
                    : error.status == 422 ? "UnprocessableEntity"
                                          : "BadRequest";
  return body;
}

std::optional<OsbError> CheckApiVersion(std::string_view header) {
  auto fail = [&] {
    return OsbError{412, "PreconditionFailed",
                    fmt::format("X-Broker-API-Version {} is not supported: this broker speaks "
                                "versions 2.11 to 2.17",
                                core::GoQuote(header))};
  };
  header = core::Trim(header);
  if (header.empty()) {
    return OsbError{412, "PreconditionFailed",
                    "the X-Broker-API-Version header is missing; send 2.14 (2.11 to 2.17 work)"};
  }
  auto dot = header.find('.');
  if (dot == std::string_view::npos) return fail();
  auto major = core::ParseInt64(header.substr(0, dot));
  auto minor = core::ParseInt64(header.substr(dot + 1));
  if (!major || !minor || *major != 2 || *minor < 11 || *minor > 17) return fail();
  return std::nullopt;
}

std::optional<OsbError> CheckId(std::string_view what, std::string_view id) {
  if (id.empty() || id.size() > 255) {
    return Bad(fmt::format("{} must have 1 to 255 characters", what));
  }
  // "." and ".." (also sent percent-encoded) name no resource: as path segments they mean
  // "this" and "the parent", and a file or URL built from them would leave its directory.
  if (id == "." || id == "..") {
    return Bad(
        fmt::format("{} {} is not an ID: \".\" and \"..\" are refused", what, core::GoQuote(id)));
  }
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) {
      return Bad(fmt::format("{} {} may only hold letters, digits, '-', '_' and '.'", what,
                             core::GoQuote(id)));
    }
  }
  return std::nullopt;
}

std::optional<OsbError> RequireAsync(std::optional<std::string_view> accepts_incomplete) {
  if (accepts_incomplete && *accepts_incomplete == "true") return std::nullopt;
  return OsbError{422, "AsyncRequired",
                  "this broker provisions, updates and deletes instances asynchronously; send "
                  "accepts_incomplete=true"};
}

std::optional<OsbError> ParseProvision(std::string_view body, ProvisionRequest* out) {
  Json json;
  if (auto e = ParseObject(body, &json)) return e;
  if (auto e = StringField(json, "service_id", true, &out->service_id)) return e;
  if (auto e = StringField(json, "plan_id", true, &out->plan_id)) return e;
  // Required non-empty strings since OSB 2.11 (deprecated in favour of context, still
  // required through 2.17).
  if (auto e = StringField(json, "organization_guid", true, &out->organization_guid)) return e;
  if (auto e = StringField(json, "space_guid", true, &out->space_guid)) return e;
  if (auto e = ObjectField(json, "parameters", &out->parameters)) return e;
  if (auto e = ObjectField(json, "context", &out->context)) return e;
  return std::nullopt;
}

std::optional<OsbError> ParseUpdate(std::string_view body, UpdateRequest* out) {
  Json json;
  if (auto e = ParseObject(body, &json)) return e;
  if (auto e = StringField(json, "service_id", true, &out->service_id)) return e;
  std::string plan;
  if (auto e = StringField(json, "plan_id", false, &plan)) return e;
  if (!plan.empty()) out->plan_id = plan;
  if (const Json* p = machinery::Find(json, {"parameters"}); p != nullptr && !p->is_null()) {
    if (!p->is_object()) return Bad("parameters must be a JSON object");
    out->parameters = *p;
  }
  if (auto e = ObjectField(json, "context", &out->context)) return e;
  if (const Json* prev = machinery::Find(json, {"previous_values"});
      prev != nullptr && !prev->is_null() && !prev->is_object()) {
    return Bad("previous_values must be a JSON object");
  }
  return std::nullopt;
}

std::optional<OsbError> ParseBind(std::string_view body, BindRequest* out) {
  Json json;
  if (auto e = ParseObject(body, &json)) return e;
  if (auto e = StringField(json, "service_id", true, &out->service_id)) return e;
  if (auto e = StringField(json, "plan_id", true, &out->plan_id)) return e;
  if (auto e = ObjectField(json, "parameters", &out->parameters)) return e;
  if (auto e = ObjectField(json, "context", &out->context)) return e;
  if (const Json* r = machinery::Find(json, {"bind_resource"});
      r != nullptr && !r->is_null() && !r->is_object()) {
    return Bad("bind_resource must be a JSON object");
  }
  return std::nullopt;
}

}  // namespace klutch::broker
