#include "compose/object_helpers.h"

#include "compose/names.h"
#include "compose/write_tracker.h"
#include "compose/xrd.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::compose {

using machinery::Find;
using machinery::GetString;
using machinery::Json;

bool IsPaused(const Json& o) { return machinery::Annotation(o, kAnnotationPaused) == "true"; }

Json ControllerRef(const Json& owner) {
  return Json{{"apiVersion", machinery::ApiVersionOf(owner)},
              {"kind", machinery::Kind(owner)},
              {"name", machinery::Name(owner)},
              {"uid", machinery::Uid(owner)},
              {"controller", true},
              {"blockOwnerDeletion", true}};
}

std::string ControllerUid(const Json& o) {
  const Json* refs = Find(o, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return "";
  for (const Json& r : *refs) {
    const Json* c = Find(r, {"controller"});
    if (c && c->is_boolean() && *c->get_ptr<const Json::boolean_t*>()) return GetString(r, {"uid"});
  }
  return "";
}

std::string GvrKey(const client::GroupVersionResource& g) {
  return g.group + "/" + g.version + "/" + g.resource;
}

std::map<std::string, std::string> SecretData(const Json& secret) {
  std::map<std::string, std::string> out;
  const Json* data = Find(secret, {"data"});
  if (!data || !data->is_object()) return out;
  for (auto it = data->begin(); it != data->end(); ++it) {
    if (!it->is_string()) continue;
    if (auto v = core::Base64Decode(*it->get_ptr<const std::string*>())) out[it.key()] = *v;
  }
  return out;
}

core::Status PublishConnectionSecret(client::RestClient& rest, const Json& owner,
                                     const std::string& ns, const std::string& name,
                                     const std::map<std::string, std::string>& data,
                                     bool& changed) {
  changed = false;
  client::ResourceClient secrets(rest, client::resources::kSecrets, ns);
  auto existing = secrets.Get(name);
  if (!existing.ok() && !core::IsNotFound(existing.status())) return existing.status();
  Json want = Json::object();
  for (const auto& [k, v] : data) want[k] = core::Base64Encode(v);
  if (existing.ok()) {
    const Json* have = Find(*existing, {"data"});
    if ((have ? *have : Json::object()) == want) return core::Status::Ok();
    if (ControllerUid(*existing) != machinery::Uid(owner)) {
      return core::Status(core::Reason::kConflict,
                          "Secret " + ns + "/" + name +
                              " exists and is not controlled by this resource: delete it or "
                              "choose another writeConnectionSecretToRef.name");
    }
  }
  Json secret{{"apiVersion", "v1"},
              {"kind", "Secret"},
              {"metadata", Json{{"name", name},
                                {"namespace", ns},
                                {"ownerReferences", Json::array({ControllerRef(owner)})}}},
              {"type", std::string(kConnectionSecretType)},
              {"data", want}};
  auto w = secrets.Patch(name, client::PatchType::kApply, machinery::Dump(secret),
                         {.field_manager = std::string(kFieldManager), .force = true});
  if (!w.ok()) return w.status();
  changed = true;
  return core::Status::Ok();
}

core::Result<reconcile::Result> MarkPaused(const Json& object,
                                           const reconcile::Committer& committer,
                                           WriteTracker& writes, const std::string& key,
                                           const core::Clock& clock) {
  Json modified = object;
  reconcile::SetCondition(modified,
                          {.type = "Synced",
                           .status = "False",
                           .reason = "ReconcilePaused",
                           .message = "Reconciliation is paused via the pause annotation"},
                          clock);
  auto w = committer.CommitStatus(object, modified);
  writes.Wrote(key, object, w);
  if (!w.ok()) return w.status();
  return reconcile::Result::Done();
}

}  // namespace klutch::compose
