#include "providers/anynines/context.h"

#include <set>

#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::providers::anynines {

using machinery::Find;
using machinery::GetString;

Policies PoliciesOf(const Json& mr) {
  Policies p;
  const Json* list = Find(mr, {"spec", "managementPolicies"});
  if (!list || !list->is_array() || list->empty()) return p;
  std::set<std::string> s;
  for (const auto& v : machinery::Strings(list)) s.insert(v);
  const bool all = s.count("*") > 0;
  p.create = all || s.count("Create");
  p.update = all || s.count("Update");
  p.del = all || s.count("Delete");
  return p;
}

bool Orphans(const Json& mr) { return GetString(mr, {"spec", "deletionPolicy"}) == "Orphan"; }

std::string ProviderConfigName(const Json& mr) {
  std::string name = GetString(mr, {"spec", "providerConfigRef", "name"});
  return name.empty() ? "default" : name;
}

std::string ClaimKey(const Json& mr) {
  std::string name = GetString(mr, {"metadata", "labels", kLabelClaimName});
  if (name.empty()) return "";
  return GetString(mr, {"metadata", "labels", kLabelClaimNamespace}) + "/" + name;
}

void SetReady(Json& mr, std::string_view reason, std::string message, const core::Clock& clock) {
  reconcile::SetCondition(mr,
                          {.type = "Ready",
                           .status = reason == "Available" ? "True" : "False",
                           .reason = std::string(reason),
                           .message = std::move(message)},
                          clock);
}

void SetSynced(Json& mr, bool ok, std::string message, const core::Clock& clock) {
  reconcile::SetCondition(mr,
                          {.type = "Synced",
                           .status = ok ? "True" : "False",
                           .reason = ok ? "ReconcileSuccess" : "ReconcileError",
                           .message = std::move(message)},
                          clock);
}

Json OwnerReference(const Json& mr, bool controller) {
  Json ref = {{"apiVersion", machinery::ApiVersionOf(mr)},
              {"kind", machinery::Kind(mr)},
              {"name", machinery::Name(mr)},
              {"uid", machinery::Uid(mr)}};
  if (controller) {
    ref["controller"] = true;
    ref["blockOwnerDeletion"] = true;
  }
  return ref;
}

bool IsControlledBy(const Json& object, const std::string& uid) {
  const Json* refs = Find(object, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return false;
  for (const Json& ref : *refs) {
    const Json* c = Find(ref, {"controller"});
    if (c && c->is_boolean() && *c->get_ptr<const bool*>() && GetString(ref, {"uid"}) == uid) {
      return true;
    }
  }
  return false;
}

}  // namespace klutch::providers::anynines
