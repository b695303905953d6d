#include "reconcile/committer.h"

#include "machinery/json.h"
#include "machinery/merge_patch.h"

namespace klutch::reconcile {

namespace {
Json Without(const Json& o, const char* key) {
  Json copy = o;
  if (copy.is_object()) copy.erase(key);
  return copy;
}
Json Only(const Json& o, const char* key) {
  Json out = Json::object();
  if (o.is_object() && o.contains(key)) out[key] = o[key];
  return out;
}
}  // namespace

core::Result<Json> Committer::Send(const Json& original, Json patch,
                                   std::string_view subresource) const {
  if (patch.is_null() || (patch.is_object() && patch.empty())) return original;
  // The precondition: the server rejects the patch unless the object is still at the
  // resourceVersion this change was computed from.
  patch["metadata"]["resourceVersion"] = machinery::ResourceVersion(original);
  return resource_.Namespace(machinery::Namespace(original))
      .Patch(machinery::Name(original), client::PatchType::kMerge, machinery::Dump(patch),
             {.field_manager = field_manager_}, subresource);
}

core::Result<Json> Committer::Commit(const Json& original, const Json& modified) const {
  Json a = Without(original, "status");
  Json b = Without(modified, "status");
  // Server-owned metadata is never the reconciler's to change.
  for (Json* o : {&a, &b}) {
    if (o->contains("metadata") && (*o)["metadata"].is_object()) {
      for (const char* k :
           {"resourceVersion", "managedFields", "generation", "uid", "creationTimestamp"}) {
        (*o)["metadata"].erase(k);
      }
    }
  }
  return Send(original, machinery::CreateMergePatch(a, b), "");
}

core::Result<Json> Committer::CommitStatus(const Json& original, const Json& modified) const {
  return Send(original,
              machinery::CreateMergePatch(Only(original, "status"), Only(modified, "status")),
              "status");
}

}  // namespace klutch::reconcile
