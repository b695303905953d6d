#include "apis/klutch/export_request.h"

#include <fmt/format.h>

#include "apis/klutch/register.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::apis::klutch {

using machinery::Json;

ExportRequest ExportRequestFor(const std::string& group, const std::string& resource,
                               const Json& permission_claims) {
  ExportRequestResource item{.group = group, .resource = resource};
  if (permission_claims.is_array()) item.permission_claims = permission_claims;
  return ExportRequest{.name = resource + "." + group, .resources = {std::move(item)}};
}

Json EncodeExportRequest(const ExportRequest& request) {
  Json resources = Json::array();
  for (const ExportRequestResource& r : request.resources) {
    Json entry = {{"group", r.group}, {"resource", r.resource}};
    if (r.permission_claims.is_array() && !r.permission_claims.empty()) {
      entry["permissionClaims"] = r.permission_claims;
    }
    resources.push_back(std::move(entry));
  }
  Json doc = {{"kind", kApiServiceExportRequestKind},
              {"apiVersion", kApiVersion},
              {"metadata", Json::object()},
              {"spec", {{"resources", std::move(resources)}}},
              {"status", Json::object()}};
  if (!request.name.empty()) doc["metadata"]["name"] = request.name;
  return doc;
}

bool IsExportRequest(const Json& doc) {
  return doc.is_object() && machinery::ApiVersionOf(doc) == kApiVersion &&
         machinery::Kind(doc) == kApiServiceExportRequestKind;
}

core::Result<ExportRequest> DecodeExportRequest(const Json& doc) {
  if (!IsExportRequest(doc)) {
    return core::BadRequest(
        fmt::format("expected an APIServiceExportRequest of {}, found {} {}", kApiVersion,
                    core::GoQuote(doc.is_object() ? machinery::ApiVersionOf(doc) : std::string()),
                    core::GoQuote(doc.is_object() ? machinery::Kind(doc) : std::string())));
  }
  const Json* list = machinery::Find(doc, {"spec", "resources"});
  if (list == nullptr || !list->is_array() || list->empty()) {
    return core::BadRequest("spec.resources names no resource to bind");
  }
  ExportRequest request;
  request.name = machinery::Name(doc);
  for (const Json& r : *list) {
    ExportRequestResource item;
    item.group = machinery::GetString(r, {"group"});
    item.resource = machinery::GetString(r, {"resource"});
    if (item.resource.empty()) {
      return core::BadRequest("every spec.resources entry needs a resource");
    }
    if (const Json* claims = machinery::Find(r, {"permissionClaims"});
        claims != nullptr && claims->is_array()) {
      item.permission_claims = *claims;
    }
    request.resources.push_back(std::move(item));
  }
  return request;
}

}  // namespace klutch::apis::klutch
