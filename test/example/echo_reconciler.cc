#include "test/example/echo_reconciler.h"

#include <functional>

#include "machinery/object.h"

namespace klutch::example {

using client::Json;

bool IsEchoSource(const Json& cm) {
  return machinery::GetString(cm, {"metadata", "labels", kEchoLabel}) == "true";
}

core::Result<reconcile::Result> EchoReconciler::Reconcile(const reconcile::Request& request) {
  client::ObjectPtr source = cache_.Get(request.Key());
  if (!source || !IsEchoSource(*source) || machinery::IsBeingDeleted(*source)) {
    // Gone or no longer a source: its echo goes with it (the garbage collector also
    // removes it when the source is deleted; this covers the label being removed).
    client::ResourceClient cms(rest_, client::resources::kConfigMaps, request.ns);
    std::string echo_name = request.name + "-echo";
    if (client::ObjectPtr echo = cache_.Get(request.ns + "/" + echo_name)) {
      auto r = cms.Delete(echo_name, {.precondition_uid = machinery::Uid(*echo)});
      if (!r.ok() && !core::IsNotFound(r.status())) return r.status();
    }
    return reconcile::Result::Done();
  }
  const Json& src = *source;
  Json data = src.contains("data") ? src["data"] : Json::object();
  Json owner = {{"apiVersion", "v1"},         {"kind", "ConfigMap"}, {"name", machinery::Name(src)},
                {"uid", machinery::Uid(src)}, {"controller", true},  {"blockOwnerDeletion", true}};
  client::ResourceClient cms(rest_, client::resources::kConfigMaps, request.ns);
  const std::string echo_name = request.name + "-echo";
  client::ObjectPtr echo = cache_.Get(request.ns + "/" + echo_name);
  if (!echo) {
    Json want = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata",
                  {{"name", echo_name},
                   {"namespace", request.ns},
                   {"ownerReferences", Json::array({owner})}}},
                 {"data", data}};
    auto r = cms.Create(want, {.field_manager = kControllerName});
    if (!r.ok() && !core::IsAlreadyExists(r.status())) return r.status();
  } else {
    Json modified = *echo;
    modified["data"] = data;
    modified["metadata"]["ownerReferences"] = Json::array({owner});
    reconcile::Committer committer(cms, kControllerName);
    KLUTCH_RETURN_IF_ERROR(committer.Commit(*echo, modified).status());
  }
  // Record on the source which data was echoed (a fingerprint of it: the source's own
  // resourceVersion would change with this very write and loop forever).
  std::string fingerprint = std::to_string(std::hash<std::string>{}(data.dump()));
  if (machinery::GetString(src, {"metadata", "annotations", kEchoedAnnotation}) != fingerprint) {
    Json modified = src;
    modified["metadata"]["annotations"][kEchoedAnnotation] = fingerprint;
    reconcile::Committer committer(cms, kControllerName);
    KLUTCH_RETURN_IF_ERROR(committer.Commit(src, modified).status());
  }
  return reconcile::Result::Done();
}

}  // namespace klutch::example
