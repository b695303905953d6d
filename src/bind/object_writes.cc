#include "bind/object_writes.h"

#include "bind/names.h"
#include "machinery/object.h"

namespace klutch::bind {

using client::Json;

core::Result<Json> GetOrCreate(const client::ResourceClient& rc, const Json& desired) {
  auto created = rc.Create(desired, {.field_manager = std::string(kFieldManager)});
  if (created.ok() || !core::IsAlreadyExists(created.status())) return created;
  return rc.Get(machinery::Name(desired));
}

core::Status EnsureRoleBinding(client::RestClient& rest, const std::string& ns,
                               const std::string& name, const std::string& role_kind,
                               const std::string& role, const std::string& sa_ns,
                               const std::string& sa_name, const Json& labels) {
  client::ResourceClient bindings(rest, client::resources::kRoleBindings, ns);
  Json desired = {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "RoleBinding"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"subjects",
       Json::array({{{"kind", "ServiceAccount"}, {"name", sa_name}, {"namespace", sa_ns}}})},
      {"roleRef",
       {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role}}}};
  if (!labels.empty()) desired["metadata"]["labels"] = labels;
  auto existing = bindings.Get(name);
  if (!existing.ok() && !core::IsNotFound(existing.status())) return existing.status();
  if (existing.ok()) {
    const Json* have_labels = machinery::Find(*existing, {"metadata", "labels"});
    const bool labels_ok =
        labels.empty() || (have_labels != nullptr && machinery::Covers(*have_labels, labels));
    if ((*existing)["roleRef"] == desired["roleRef"] && labels_ok) {
      if ((*existing)["subjects"] == desired["subjects"]) return core::Status::Ok();
      Json modified = *existing;
      modified["subjects"] = desired["subjects"];
      auto updated = bindings.Update(modified, {.field_manager = std::string(kFieldManager)});
      return updated.ok() ? core::Status::Ok() : updated.status();
    }
    // roleRef is immutable: replace the binding.
    auto deleted = bindings.Delete(name);
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
  }
  auto created = bindings.Create(desired, {.field_manager = std::string(kFieldManager)});
  return created.ok() || core::IsAlreadyExists(created.status()) ? core::Status::Ok()
                                                                 : created.status();
}

}  // namespace klutch::bind
