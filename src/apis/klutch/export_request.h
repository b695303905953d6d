// The APIServiceExportRequest (bind-protocol.md §1.1) as a protocol document: what a consumer
// asks a provider to export. The backend encodes one per bound API into each BindingResponse
// (the wire variant, APIServiceExportRequestResponse: metadata holds only the name); kubectl
// bind checks the ones it is given (a BindingResponse's, or a manifest with
// `kubectl bind apiservice`) with the decoder before it creates them on the provider.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::apis::klutch {

inline constexpr std::string_view kApiServiceExportRequestKind = "APIServiceExportRequest";

// One spec.resources item: an API to export and the permission claims that come with it.
struct ExportRequestResource {
  std::string group;
  std::string resource;
  // The template's permissionClaims as given (a JSON array; empty when there are none).
  machinery::Json permission_claims = machinery::Json::array();

  bool operator==(const ExportRequestResource&) const = default;
};

struct ExportRequest {
  std::string name;  // metadata.name ("" = none)
  std::vector<ExportRequestResource> resources;

  bool operator==(const ExportRequest&) const = default;
};

// The request for one API as the backend answers it: metadata.name "<resource>.<group>", one
// resource with `permission_claims` (an array; an empty one or null writes none).
ExportRequest ExportRequestFor(const std::string& group, const std::string& resource,
                               const machinery::Json& permission_claims);

// {"kind":"APIServiceExportRequest","apiVersion":"klutch.anynines.com/v1alpha1","metadata":
// {"name"} (when named),"spec":{"resources":[{"group","resource","permissionClaims" (when
// not empty)}]},"status":{}}.
machinery::Json EncodeExportRequest(const ExportRequest& request);

// True when `doc` says it is an APIServiceExportRequest of klutch.anynines.com/v1alpha1.
bool IsExportRequest(const machinery::Json& doc);

// Reads an export request: kBadRequest unless `doc` is an APIServiceExportRequest of
// klutch.anynines.com/v1alpha1 whose spec.resources names at least one resource, each with a
// `resource`. Messages read after the document's source ("<file>: expected ...").
core::Result<ExportRequest> DecodeExportRequest(const machinery::Json& doc);

}  // namespace klutch::apis::klutch
