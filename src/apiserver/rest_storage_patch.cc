#include <fmt/format.h>

#include "apiserver/rest_storage.h"
#include "apiserver/rest_storage_internal.h"
#include "machinery/json_patch.h"
#include "machinery/managed_fields.h"
#include "machinery/merge_patch.h"
#include "machinery/object.h"
#include "machinery/strategic_merge_patch.h"

// Patches: JSON, merge and strategic merge patches and server-side apply, each as a transform
// of the current object through the update loop (rest_storage_update.cc).

namespace klutch::apiserver {

using machinery::Find;
using machinery::GetString;

core::Result<WriteOutcome> RestStorage::Patch(const ResourceInfo& r, std::string_view ns,
                                              std::string_view name, const PatchRequest& patch,
                                              const WriteOptions& options) {
  if (patch.force && patch.type != PatchType::kApply) {
    return machinery::InvalidObject(
        r.group, r.kind, name,
        {machinery::FieldInvalid("force", Json(true), "may not be specified for non-apply patch")});
  }
  if (patch.type == PatchType::kStrategic && !r.strategic_merge) {
    return core::Status(
        core::Reason::kUnsupportedMediaType,
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
  }
  if (patch.type == PatchType::kApply) {
    if (options.field_manager.empty()) {
      core::Status s(core::Reason::kInvalid,
                     "fieldManager: Required value: is required for apply patch");
      s.mutable_details().causes.push_back(
          {"FieldValueRequired", "Required value: is required for apply patch", "fieldManager"});
      return s;
    }
    KLUTCH_ASSIGN_OR_RETURN(Json applied, machinery::ParseYaml(patch.body));
    if (!applied.is_object()) return core::BadRequest("the apply patch must be an object");
    if (GetString(applied, {"apiVersion"}) != r.ApiVersion() ||
        GetString(applied, {"kind"}) != r.kind) {
      return core::BadRequest(fmt::format(
          "the API version and kind in the data ({}, {}) do not match the resource ({}, {})",
          GetString(applied, {"apiVersion"}), GetString(applied, {"kind"}), r.ApiVersion(),
          r.kind));
    }
    if (machinery::Name(applied) != name) {
      return core::BadRequest(
          fmt::format("the name of the object ({}) does not match the name on the URL ({})",
                      machinery::Name(applied), name));
    }
    machinery::SchemaCursor schema = r.Schema();
    auto who = internal::Who(r, options, clock_, "Apply");
    return GuaranteedUpdate(
        r, ns, name, options,
        [&](const Json* current) -> core::Result<Json> {
          Json live = current ? *current : Json();
          Json managed = current && Find(*current, {"metadata", "managedFields"})
                             ? (*current)["metadata"]["managedFields"]
                             : Json::array();
          if (current) machinery::MutableMetadata(live).erase("managedFields");
          KLUTCH_ASSIGN_OR_RETURN(
              machinery::ApplyResult res,
              machinery::ServerSideApply(live, applied, managed, who, patch.force, schema));
          Json out = std::move(res.object);
          if (current) {
            machinery::MutableMetadata(out)["resourceVersion"] =
                machinery::ResourceVersion(*current);
          }
          if (res.managed_fields.is_array() && !res.managed_fields.empty()) {
            machinery::MutableMetadata(out)["managedFields"] = std::move(res.managed_fields);
          } else {
            machinery::MutableMetadata(out).erase("managedFields");
          }
          return out;
        },
        /*allow_create=*/options.subresource.empty(), /*apply_manages_fields=*/true);
  }

  core::Result<Json> parsed_patch = machinery::ParseJson(patch.body);
  if (!parsed_patch.ok()) return parsed_patch.status();
  const Json& p = *parsed_patch;
  if (patch.type != PatchType::kJson && !p.is_object()) {
    return core::BadRequest("the patch must be a JSON object");
  }
  machinery::SchemaCursor schema = r.Schema();
  return GuaranteedUpdate(
      r, ns, name, options,
      [&](const Json* current) -> core::Result<Json> {
        switch (patch.type) {
          case PatchType::kJson: {
            auto res = machinery::ApplyJsonPatch(*current, p);
            if (!res.ok()) {
              if (res.status().reason() == core::Reason::kBadRequest) return res.status();
              core::Status s(core::Reason::kInvalid,
                             "the server rejected our request due to an error in our request");
              s.mutable_details().causes.push_back({"", res.status().message(), ""});
              return s;
            }
            return res;
          }
          case PatchType::kMerge:
            return machinery::ApplyMergePatch(*current, p);
          case PatchType::kStrategic:
            return machinery::ApplyStrategicMergePatch(*current, p, schema);
          case PatchType::kApply:
            break;
        }
        return core::Internal("unreachable patch type");
      },
      /*allow_create=*/false, /*apply_manages_fields=*/false);
}

}  // namespace klutch::apiserver
