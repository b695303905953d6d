#include <fmt/format.h>

#include "apiserver/rest_storage.h"
#include "apiserver/rest_storage_internal.h"
#include "machinery/object.h"

// Deletes: preconditions, finalizers and deletionTimestamp, propagation (Background,
// Foreground, Orphan), namespaces turning Terminating; deletecollection.

namespace klutch::apiserver {

using machinery::Find;
using machinery::GetString;

namespace {

// propagationPolicy, or orphanDependents when it is not given; "" means Background.
core::Result<std::string> PropagationPolicy(const DeleteOptions& options) {
  std::string policy = options.propagation_policy;
  if (policy.empty() && options.orphan_dependents.has_value()) {
    policy = *options.orphan_dependents ? "Orphan" : "Background";
  }
  if (!policy.empty() && policy != "Orphan" && policy != "Background" && policy != "Foreground") {
    core::Status s(core::Reason::kInvalid,
                   fmt::format("propagationPolicy: Unsupported value: \"{}\": supported values: "
                               "\"Foreground\", \"Background\", \"Orphan\"",
                               policy));
    return s;
  }
  return policy;
}

// The delete's preconditions on the UID and resourceVersion of `current`.
core::Status CheckPreconditions(const ResourceInfo& r, std::string_view name,
                                const DeleteOptions& options, const Json& current) {
  if (!options.precondition_uid.empty() && options.precondition_uid != machinery::Uid(current)) {
    return ConflictError(r, name,
                         fmt::format("Precondition failed: UID in precondition: {}, UID in "
                                     "object meta: {}",
                                     options.precondition_uid, machinery::Uid(current)));
  }
  if (!options.precondition_resource_version.empty() &&
      options.precondition_resource_version != machinery::ResourceVersion(current)) {
    return ConflictError(
        r, name,
        fmt::format("Precondition failed: ResourceVersion in precondition: {}, "
                    "ResourceVersion in object meta: {}",
                    options.precondition_resource_version, machinery::ResourceVersion(current)));
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<DeleteOutcome> RestStorage::Delete(const ResourceInfo& r, std::string_view ns,
                                                std::string_view name,
                                                const DeleteOptions& options) {
  KLUTCH_ASSIGN_OR_RETURN(const std::string policy, PropagationPolicy(options));
  const std::string key = r.Key(ns, name);
  for (int attempt = 0; attempt < internal::kMaxUpdateAttempts; ++attempt) {
    KLUTCH_ASSIGN_OR_RETURN(auto kv, store_.Get(key));
    if (!kv) return NotFoundError(r, name);
    KLUTCH_ASSIGN_OR_RETURN(Json current, internal::Parse(kv->value));
    internal::ToRequestedVersion(r, current);
    KLUTCH_RETURN_IF_ERROR(CheckPreconditions(r, name, options, current));
    Json updated = current;
    std::vector<std::string> add;
    if (policy == "Foreground") add.push_back("foregroundDeletion");
    if (policy == "Orphan") add.push_back("orphan");
    bool graceful = !machinery::Finalizers(current).empty() || !add.empty();
    if (internal::IsNamespaces(r)) {
      const Json* f = Find(current, {"spec", "finalizers"});
      if (f && f->is_array() && !f->empty()) graceful = true;
    }
    DeleteOutcome out;
    if (!graceful) {
      out.deleted = true;
      if (options.dry_run) {
        out.object = std::move(current);
        return out;
      }
      auto tomb = std::make_shared<Json>(current);
      storage::WriteRequest w;
      w.op = storage::WriteRequest::Op::kDelete;
      w.key = key;
      w.expected_mod_revision = kv->mod_revision;
      w.make_value = internal::Stamp(tomb);
      KLUTCH_ASSIGN_OR_RETURN(storage::WriteResult res, store_.Write(std::move(w)));
      if (!res.succeeded) continue;
      out.object = std::move(*tomb);
      quotas_.Removed(r, ns);
      return out;
    }
    // Graceful: mark for deletion and let the finalizers' owners finish.
    Json& m = machinery::MutableMetadata(updated);
    bool changed = false;
    if (!machinery::IsBeingDeleted(current)) {
      m["deletionTimestamp"] = internal::Now(clock_);
      m["deletionGracePeriodSeconds"] = 0;
      changed = true;
    }
    for (const auto& f : add) {
      if (!machinery::HasFinalizer(updated, f)) {
        if (!m.contains("finalizers") || !m["finalizers"].is_array())
          m["finalizers"] = Json::array();
        m["finalizers"].push_back(f);
        changed = true;
      }
    }
    if (internal::IsNamespaces(r)) {
      if (GetString(updated, {"status", "phase"}) != "Terminating") {
        updated["status"]["phase"] = "Terminating";
        changed = true;
      }
    }
    if (!changed) {
      out.object = std::move(current);
      return out;
    }
    if (options.dry_run) {
      out.object = std::move(updated);
      return out;
    }
    m.erase("resourceVersion");
    auto shared = std::make_shared<Json>(std::move(updated));
    storage::WriteRequest w;
    w.op = storage::WriteRequest::Op::kPut;
    w.key = key;
    w.expected_mod_revision = kv->mod_revision;
    w.make_value = internal::Stamp(shared);
    KLUTCH_ASSIGN_OR_RETURN(storage::WriteResult res, store_.Write(std::move(w)));
    if (!res.succeeded) continue;
    out.object = std::move(*shared);
    return out;
  }
  return ConflictError(r, name, internal::kModified);
}

core::Result<std::vector<Json>> RestStorage::DeleteCollection(const ResourceInfo& r,
                                                              std::string_view ns,
                                                              const ListOptions& list,
                                                              const DeleteOptions& options) {
  KLUTCH_ASSIGN_OR_RETURN(ListOutcome items, List(r, ns, list));
  std::vector<Json> out;
  for (auto& item : items.items) {
    const Json& obj = item.Object();
    auto res = Delete(r, machinery::Namespace(obj), machinery::Name(obj), options);
    if (!res.ok()) {
      if (core::IsNotFound(res.status())) continue;
      return res.status();
    }
    out.push_back(std::move(res->object));
  }
  return out;
}

}  // namespace klutch::apiserver
