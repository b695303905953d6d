#include <fmt/format.h>

#include "apiserver/rest_storage.h"
#include "apiserver/rest_storage_internal.h"
#include "machinery/managed_fields.h"
#include "machinery/object.h"

// Updates (PUT, Mutate, and every patch): the compare-and-swap loop, the status and finalize
// subresources, generation, managedFields, and the write or removal.

namespace klutch::apiserver {

using machinery::Find;
using machinery::GetString;

namespace {

Json WithoutVolatile(const Json& object) {
  Json copy = object;
  if (copy.is_object() && copy.contains("metadata") && copy["metadata"].is_object()) {
    copy["metadata"].erase("managedFields");
    copy["metadata"].erase("resourceVersion");
  }
  return copy;
}

// Everything but metadata (and status, when it is a subresource): what metadata.generation
// counts changes of.
Json SpecPart(const Json& object, bool status_is_subresource) {
  Json copy = object;
  if (copy.is_object()) {
    copy.erase("metadata");
    if (status_is_subresource) copy.erase("status");
    copy.erase("apiVersion");
    copy.erase("kind");
  }
  return copy;
}

// Whether two managedFields lists record the same ownership (timestamps aside), so that an
// apply that changes nothing writes nothing.
bool SameOwnership(const Json* a, const Json* b) {
  auto strip = [](const Json* mf) {
    Json out = mf && mf->is_array() ? *mf : Json::array();
    for (auto& e : out) {
      if (e.is_object()) e.erase("time");
    }
    return out;
  };
  return strip(a) == strip(b);
}

// Whether a deleted object may now disappear: no finalizers left (and, for namespaces, no
// spec.finalizers).
bool ReadyToRemove(const ResourceInfo& r, const Json& object) {
  if (!machinery::IsBeingDeleted(object)) return false;
  if (!machinery::Finalizers(object).empty()) return false;
  if (internal::IsNamespaces(r)) {
    const Json* f = Find(object, {"spec", "finalizers"});
    if (f && f->is_array() && !f->empty()) return false;
  }
  return true;
}

// Fields kube-apiserver does not let clients set, reset from the current object (or cleared
// on create).
void CopyServerOwnedMetadata(const Json& current, Json& updated) {
  Json& m = machinery::MutableMetadata(updated);
  const Json* cm = Find(current, {"metadata"});
  for (const char* k : {"uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation"}) {
    const Json* v = cm ? Find(*cm, {k}) : nullptr;
    if (v) {
      m[k] = *v;
    } else {
      m.erase(k);
    }
  }
  m.erase("selfLink");
}

// Preconditions and identity of an update's result against the stored object: a
// resourceVersion in it must match the current one, its name the URL's, its namespace the
// request's; what the server owns in metadata comes from `current`.
core::Status CheckUpdatedIdentity(const ResourceInfo& r, std::string_view ns, std::string_view name,
                                  const Json& current, Json& updated) {
  const std::string want_rv = machinery::ResourceVersion(updated);
  const std::string have_rv = machinery::ResourceVersion(current);
  if (!want_rv.empty() && want_rv != have_rv) return ConflictError(r, name, internal::kModified);
  if (machinery::Name(updated) != name) {
    return core::BadRequest(
        fmt::format("the name of the object ({}) does not match the name on the URL ({})",
                    machinery::Name(updated), name));
  }
  Json& um = machinery::MutableMetadata(updated);
  if (r.namespaced) {
    std::string body_ns = GetString(um, {"namespace"});
    if (!body_ns.empty() && body_ns != ns) {
      return core::BadRequest(
          "the namespace of the provided object does not match the namespace sent on the "
          "request");
    }
    um["namespace"] = std::string(ns);
  } else {
    um.erase("namespace");
  }
  CopyServerOwnedMetadata(current, updated);
  return core::Status::Ok();
}

// The status subresource: a write to /status changes only status (and managedFields the
// client sent), a write to /finalize only spec.finalizers, and a write to the main resource
// of a kind with a status subresource everything but status.
void SeparateSubresource(const ResourceInfo& r, const WriteOptions& options, const Json& current,
                         const Json& client_managed, Json& updated) {
  if (options.subresource == "status") {
    Json status = updated.contains("status") ? updated["status"] : Json();
    Json keep = current;
    if (status.is_null()) {
      keep.erase("status");
    } else {
      keep["status"] = std::move(status);
    }
    if (!client_managed.is_null())
      machinery::MutableMetadata(keep)["managedFields"] = client_managed;
    updated = std::move(keep);
  } else if (options.subresource == "finalize") {
    Json spec_finalizers =
        Find(updated, {"spec", "finalizers"}) ? updated["spec"]["finalizers"] : Json();
    Json keep = current;
    if (spec_finalizers.is_null()) {
      if (keep.contains("spec") && keep["spec"].is_object()) keep["spec"].erase("finalizers");
    } else {
      keep["spec"]["finalizers"] = std::move(spec_finalizers);
    }
    updated = std::move(keep);
  } else if (r.has_status) {
    if (current.contains("status")) {
      updated["status"] = current["status"];
    } else {
      updated.erase("status");
    }
  }
}

// metadata.generation counts changes of everything but metadata (and status, when it is a
// subresource).
void BumpGeneration(const ResourceInfo& r, const Json& current, Json& updated) {
  int64_t gen = 1;
  if (const Json* g = Find(current, {"metadata", "generation"}); g && g->is_number_integer()) {
    gen = g->get<int64_t>();
  }
  if (SpecPart(updated, r.has_status) != SpecPart(current, r.has_status)) ++gen;
  machinery::MutableMetadata(updated)["generation"] = gen;
}

}  // namespace

core::Result<WriteOutcome> RestStorage::WriteUpdate(const ResourceInfo& r, const std::string& key,
                                                    int64_t mod_revision, const Json& current,
                                                    Json updated, const WriteOptions& options) {
  WriteOutcome out;
  const std::string name = machinery::Name(current);
  // An update that takes the last finalizer off an object being deleted removes it instead.
  const bool remove = ReadyToRemove(r, updated);
  if (options.dry_run) {
    out.object = std::move(updated);
    return out;
  }
  auto shared = std::make_shared<Json>(std::move(updated));
  storage::WriteRequest w;
  w.op = remove ? storage::WriteRequest::Op::kDelete : storage::WriteRequest::Op::kPut;
  w.key = key;
  w.expected_mod_revision = mod_revision;
  w.make_value = internal::Stamp(shared);
  KLUTCH_ASSIGN_OR_RETURN(storage::WriteResult res, store_.Write(std::move(w)));
  if (!res.succeeded) return ConflictError(r, name, internal::kModified);
  out.object = std::move(*shared);
  internal::ToRequestedVersion(r, out.object);
  // (A status write never removes: it keeps the finalizers. Quota recounts write status.)
  if (remove && options.subresource != "status") {
    quotas_.Removed(r, machinery::Namespace(out.object));
  }
  return out;
}

core::Result<WriteOutcome> RestStorage::GuaranteedUpdate(
    const ResourceInfo& r, std::string_view ns, std::string_view name, const WriteOptions& options,
    const Transform& transform, bool allow_create, bool apply_manages_fields) {
  const std::string key = r.Key(ns, name);
  for (int attempt = 0; attempt < internal::kMaxUpdateAttempts; ++attempt) {
    KLUTCH_ASSIGN_OR_RETURN(auto kv, store_.Get(key));
    if (!kv) {
      if (!allow_create) return NotFoundError(r, name);
      KLUTCH_ASSIGN_OR_RETURN(Json created, transform(nullptr));
      auto res = CreateParsed(r, ns, std::move(created), options, apply_manages_fields);
      if (!res.ok() && core::IsAlreadyExists(res.status())) continue;  // raced with a create
      return res;
    }
    KLUTCH_ASSIGN_OR_RETURN(Json current, internal::Parse(kv->value));
    internal::ToRequestedVersion(r, current);
    KLUTCH_ASSIGN_OR_RETURN(Json updated, transform(&current));
    if (!updated.is_object()) return core::BadRequest("the result of the update is not an object");

    KLUTCH_RETURN_IF_ERROR(CheckUpdatedIdentity(r, ns, name, current, updated));
    const Json* client_mf = Find(updated, {"metadata", "managedFields"});
    Json client_managed = client_mf ? *client_mf : Json();

    SeparateSubresource(r, options, current, client_managed, updated);
    updated["apiVersion"] = r.ApiVersion();
    updated["kind"] = r.kind;

    std::vector<std::string> warnings;
    KLUTCH_RETURN_IF_ERROR(ValidateObject(r, updated, &current, options, warnings));

    if (r.tracks_generation) BumpGeneration(r, current, updated);

    // Field ownership for this write.
    const Json* current_mf = Find(current, {"metadata", "managedFields"});
    bool client_reset_managed =
        !client_managed.is_null() && (current_mf == nullptr || client_managed != *current_mf);
    if (!apply_manages_fields) {
      Json base = current_mf ? *current_mf : Json::array();
      if (client_reset_managed) {
        KLUTCH_ASSIGN_OR_RETURN(base, machinery::ValidateManagedFields(client_managed));
      }
      Json before = current, after = updated;
      machinery::MutableMetadata(before).erase("managedFields");
      machinery::MutableMetadata(after).erase("managedFields");
      if (WithoutVolatile(before) == WithoutVolatile(after) && !client_reset_managed) {
        // No change: no write, no new resourceVersion, no event.
        WriteOutcome same;
        same.object = std::move(current);
        same.warnings = std::move(warnings);
        return same;
      }
      KLUTCH_ASSIGN_OR_RETURN(
          Json mf,
          machinery::UpdateManagedFields(before, after, base,
                                         internal::Who(r, options, clock_, "Update"), r.Schema()));
      Json& meta = machinery::MutableMetadata(updated);
      if (mf.empty()) {
        meta.erase("managedFields");
      } else {
        meta["managedFields"] = std::move(mf);
      }
    } else if (WithoutVolatile(updated) == WithoutVolatile(current) &&
               SameOwnership(Find(updated, {"metadata", "managedFields"}), current_mf)) {
      WriteOutcome same;
      same.object = std::move(current);
      return same;
    }
    machinery::MutableMetadata(updated).erase("resourceVersion");
    if (r.version != r.storage_version) {
      updated["apiVersion"] =
          r.group.empty() ? r.storage_version : r.group + "/" + r.storage_version;
    }
    auto res = WriteUpdate(r, key, kv->mod_revision, current, std::move(updated), options);
    // Lost a race with another writer: transform the newer object again. A resourceVersion
    // the client put in its request then no longer matches and ends the loop with 409.
    if (!res.ok() && core::IsConflict(res.status())) continue;
    if (res.ok()) res->warnings = std::move(warnings);
    // A quota's spec changed: its status follows (the status subresource is written by the
    // recount itself).
    if (res.ok() && internal::IsResourceQuotas(r) && options.subresource.empty() &&
        !options.dry_run) {
      quotas_.QuotaWritten(ns);
    }
    return res;
  }
  return ConflictError(r, name, internal::kModified);
}

core::Result<WriteOutcome> RestStorage::Update(const ResourceInfo& r, std::string_view ns,
                                               std::string_view name, Json object,
                                               const WriteOptions& options) {
  KLUTCH_RETURN_IF_ERROR(CheckTypeMeta({r.group, r.version, r.kind}, object));
  if (r.custom && options.subresource.empty() && machinery::ResourceVersion(object).empty()) {
    return machinery::InvalidObject(r.group, r.kind, name,
                                    {machinery::FieldInvalid("metadata.resourceVersion", Json(0),
                                                             "must be specified for an update")});
  }
  return GuaranteedUpdate(
      r, ns, name, options, [&](const Json*) -> core::Result<Json> { return object; },
      /*allow_create=*/false, /*apply_manages_fields=*/false);
}

core::Result<WriteOutcome> RestStorage::Mutate(
    const ResourceInfo& r, std::string_view ns, std::string_view name,
    const std::function<core::Status(Json& object)>& mutate, const WriteOptions& options) {
  return GuaranteedUpdate(
      r, ns, name, options,
      [&](const Json* current) -> core::Result<Json> {
        Json copy = *current;
        KLUTCH_RETURN_IF_ERROR(mutate(copy));
        return copy;
      },
      /*allow_create=*/false, /*apply_manages_fields=*/false);
}

}  // namespace klutch::apiserver
