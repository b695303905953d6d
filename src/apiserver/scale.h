// The scale subresource (autoscaling/v1 Scale) of Deployments and of custom resources that
// declare `subresources.scale`: a view onto the replicas fields of the object.
#pragma once

#include "apiserver/rest_storage.h"

namespace klutch::apiserver {

struct ScalePaths {
  std::string spec_replicas;    // ".spec.replicas"
  std::string status_replicas;  // ".status.replicas"
  std::string label_selector;   // ".status.selector" (may be empty)
};

// The replicas paths of a resource's scale subresource.
core::Result<ScalePaths> ScalePathsFor(const RestStorage& storage, const ResourceInfo& r);

core::Result<Json> GetScale(RestStorage& storage, const ResourceInfo& r, std::string_view ns,
                            std::string_view name);
// PUT (`body` is a Scale) or PATCH (`patch` applied to the current Scale) of the scale.
core::Result<Json> UpdateScale(RestStorage& storage, const ResourceInfo& r, std::string_view ns,
                               std::string_view name, const Json* body, const PatchRequest* patch,
                               const WriteOptions& options);

}  // namespace klutch::apiserver
