#include <fmt/format.h>

#include "apiserver/rest_storage.h"
#include "apiserver/rest_storage_internal.h"
#include "core/random.h"
#include "machinery/managed_fields.h"
#include "machinery/object.h"

// Creates: name generation, server-owned metadata, validation, managedFields, and the write
// once the namespace's ResourceQuotas leave room.

namespace klutch::apiserver {

using machinery::GetString;

namespace {

core::Status CheckNamespace(const ResourceInfo& r, std::string_view ns, Json& object) {
  Json& m = machinery::MutableMetadata(object);
  if (!r.namespaced) {
    m.erase("namespace");
    return core::Status::Ok();
  }
  std::string body_ns = GetString(m, {"namespace"});
  if (body_ns.empty()) {
    m["namespace"] = std::string(ns);
  } else if (body_ns != ns) {
    return core::BadRequest(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<WriteOutcome> RestStorage::Create(const ResourceInfo& r, std::string_view ns,
                                               Json object, const WriteOptions& options) {
  KLUTCH_RETURN_IF_ERROR(CheckTypeMeta({r.group, r.version, r.kind}, object));
  return CreateParsed(r, ns, std::move(object), options, /*managed_fields_done=*/false);
}

core::Result<WriteOutcome> RestStorage::CreateParsed(const ResourceInfo& r, std::string_view ns,
                                                     Json object, const WriteOptions& options,
                                                     bool managed_fields_done) {
  WriteOutcome out;
  KLUTCH_RETURN_IF_ERROR(CheckNamespace(r, ns, object));
  Json& m = machinery::MutableMetadata(object);
  if (GetString(m, {"name"}).empty()) {
    std::string generate = GetString(m, {"generateName"});
    if (!generate.empty()) {
      if (generate.size() > 58) generate.resize(58);
      m["name"] = generate + core::RandomSuffix(5);
    }
  }
  m["uid"] = core::NewUuid();
  m["creationTimestamp"] = internal::Now(clock_);
  for (const char* k :
       {"resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}) {
    m.erase(k);
  }
  if (r.tracks_generation) {
    m["generation"] = 1;
  } else {
    m.erase("generation");
  }
  if (r.has_status && r.custom) object.erase("status");
  KLUTCH_RETURN_IF_ERROR(ValidateObject(r, object, nullptr, options, out.warnings));
  const std::string name = machinery::Name(object);
  KLUTCH_RETURN_IF_ERROR(CheckNamespaceForCreate(r, ns, name));
  if (!managed_fields_done) {
    Json& meta = machinery::MutableMetadata(object);
    Json base = meta.contains("managedFields") ? meta["managedFields"] : Json();
    if (!base.is_null()) {
      KLUTCH_ASSIGN_OR_RETURN(base, machinery::ValidateManagedFields(base));
    }
    meta.erase("managedFields");
    KLUTCH_ASSIGN_OR_RETURN(Json mf, machinery::UpdateManagedFields(
                                         Json(), object, base,
                                         internal::Who(r, options, clock_, "Update"), r.Schema()));
    if (!mf.empty()) machinery::MutableMetadata(object)["managedFields"] = std::move(mf);
  }
  object["apiVersion"] = r.group.empty() ? r.storage_version : r.group + "/" + r.storage_version;
  // The write, once the namespace's quotas leave room for one more object.
  auto write = [&]() -> core::Status {
    if (options.dry_run) {
      KLUTCH_ASSIGN_OR_RETURN(auto existing, store_.Get(r.Key(ns, name)));
      if (existing) return AlreadyExistsError(r, name);
      internal::ToRequestedVersion(r, object);
      out.object = std::move(object);
      out.created = true;
      return core::Status::Ok();
    }
    auto shared = std::make_shared<Json>(std::move(object));
    storage::WriteRequest w;
    w.op = storage::WriteRequest::Op::kPut;
    w.key = r.Key(ns, name);
    w.expected_mod_revision = storage::kMustNotExist;
    w.make_value = internal::Stamp(shared);
    KLUTCH_ASSIGN_OR_RETURN(storage::WriteResult res, store_.Write(std::move(w)));
    if (!res.succeeded) return AlreadyExistsError(r, name);
    out.object = std::move(*shared);
    internal::ToRequestedVersion(r, out.object);
    out.created = true;
    return core::Status::Ok();
  };
  KLUTCH_RETURN_IF_ERROR(quotas_.AdmitCreate(r, ns, name, options.dry_run, write));
  if (internal::IsResourceQuotas(r) && !options.dry_run) quotas_.QuotaWritten(ns);
  return out;
}

}  // namespace klutch::apiserver
