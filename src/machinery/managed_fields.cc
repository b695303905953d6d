#include "machinery/managed_fields.h"

#include <string>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "fmt/format.h"
#include "machinery/managed_fields_internal.h"

// managed_fields.h is implemented here (the four operations), in managed_fields_walks.cc (field
// sets, comparison, merge and prune over object and schema) and in managed_fields_entries.cc
// (managedFields entries).

namespace klutch::machinery {

FieldSet FieldSetOf(const Json& object, const SchemaCursor& schema,
                    const ManagedFieldsOptions& options) {
  return internal::FilterTracked(internal::WalkFieldSet(object, schema, nullptr), options);
}

core::Result<Json> UpdateManagedFields(const Json& old_object, const Json& new_object,
                                       const Json& managed_fields, const ManagerInfo& who,
                                       const SchemaCursor& schema,
                                       const ManagedFieldsOptions& options) {
  if (!who.operation.empty() && who.operation != internal::kUpdate) {
    return core::BadRequest(
        fmt::format("managed fields update: operation must be \"Update\", "
                    "not {}",
                    core::GoQuote(who.operation)));
  }
  bool cleared = false;
  KLUTCH_ASSIGN_OR_RETURN(std::vector<internal::Entry> entries,
                          internal::DecodeEntries(managed_fields, &cleared));

  internal::Comparison cmp = internal::CompareObjects(old_object.is_null() ? nullptr : &old_object,
                                                      &new_object, schema, options);
  FieldSet changed = cmp.modified.Union(cmp.added);
  FieldSet taken = changed.Difference(cmp.removed);

  internal::Entry self = internal::EntryFor(who, internal::kUpdate);
  int self_index = internal::FindEntry(entries, internal::Identity(self));
  for (size_t i = 0; i < entries.size(); ++i) {
    internal::Entry& e = entries[i];
    FieldSet kept = e.fields.Difference(changed).Difference(cmp.removed);
    if (static_cast<int>(i) == self_index) kept = kept.Union(taken);
    e.fields = std::move(kept);
  }
  if (!taken.Empty()) {
    if (self_index < 0) {
      self.fields = taken;
      entries.push_back(std::move(self));
      self_index = static_cast<int>(entries.size()) - 1;
    }
    entries[self_index].time = who.time;
    entries[self_index].fields_type = std::string(internal::kFieldsV1);
    entries[self_index].has_fields = true;
  }
  internal::DropEmpty(entries);
  return internal::EncodeEntries(entries);
}

namespace {

// What server-side apply requires of its own arguments: a field manager, and an object that
// does not carry managedFields.
core::Status CheckApplyArguments(const Json& applied, const ManagerInfo& who) {
  if (who.manager.empty()) {
    core::Details details;
    details.causes.push_back(
        {"FieldValueRequired", "Required value: is required for apply patch", "fieldManager"});
    return core::Status(core::Reason::kInvalid,
                        "fieldManager: Required value: is required for apply patch",
                        std::move(details));
  }
  if (!applied.is_object()) {
    return core::BadRequest(
        fmt::format("apply patch must be a JSON object, found {}", applied.type_name()));
  }
  if (auto meta = applied.find("metadata"); meta != applied.end() && meta->is_object()) {
    if (auto mf = meta->find("managedFields"); mf != meta->end() && !mf->is_null()) {
      return core::BadRequest("metadata.managedFields must be nil");
    }
  }
  return core::Status::Ok();
}

// The fields the applied configuration sets; kUnknown when an element cannot be keyed or a
// key repeats.
core::Result<FieldSet> AppliedFieldSet(const Json& applied, const SchemaCursor& schema,
                                       const ManagedFieldsOptions& options) {
  std::string error;
  FieldSet applied_set = internal::WalkFieldSet(applied, schema, &error);
  if (!error.empty()) {
    return core::Status(core::Reason::kUnknown,
                        fmt::format("failed to create typed patch object ({}/{}; {}): {}",
                                    internal::StringAt(applied, "metadata", "namespace"),
                                    internal::StringAt(applied, "metadata", "name"),
                                    internal::GvkString(applied), error));
  }
  return internal::FilterTracked(applied_set, options);
}

}  // namespace

core::Result<ApplyResult> ServerSideApply(const Json& live, const Json& applied,
                                          const Json& managed_fields, const ManagerInfo& who,
                                          bool force, const SchemaCursor& schema,
                                          const ManagedFieldsOptions& options) {
  KLUTCH_RETURN_IF_ERROR(CheckApplyArguments(applied, who));
  bool cleared = false;
  KLUTCH_ASSIGN_OR_RETURN(std::vector<internal::Entry> entries,
                          internal::DecodeEntries(managed_fields, &cleared));

  Json base = live.is_null() ? Json::object() : live;
  internal::SetManagedFields(base, Json::array());
  if (!live.is_null() && entries.empty()) {
    // An object nobody has tracked yet: everything in it belongs to a placeholder manager, so
    // the first apply cannot silently take over fields someone else set.
    internal::Entry before;
    before.manager = std::string(internal::kBeforeFirstApply);
    before.operation = std::string(internal::kUpdate);
    before.api_version = internal::StringAt(live, "apiVersion");
    before.fields_type = std::string(internal::kFieldsV1);
    before.has_fields = true;
    before.fields = FieldSetOf(base, schema, options);
    if (!before.fields.Empty()) entries.push_back(std::move(before));
  }

  KLUTCH_ASSIGN_OR_RETURN(FieldSet applied_set, AppliedFieldSet(applied, schema, options));

  Path path;
  Json merged = internal::Merge(base, applied, schema, path);

  internal::Entry self = internal::EntryFor(who, internal::kApply);
  int self_index = internal::FindEntry(entries, internal::Identity(self));
  FieldSet owned = applied_set;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (static_cast<int>(i) != self_index) owned = owned.Union(entries[i].fields);
  }
  if (self_index >= 0 && !entries[self_index].fields.Empty()) {
    FieldSet last = internal::WithNamedParents(entries[self_index].fields, schema);
    FieldSet owned_named = internal::WithNamedParents(owned, schema);
    internal::Prune(merged, last, &owned_named, schema, path);
  }

  internal::Comparison cmp = internal::CompareObjects(&base, &merged, schema, options);
  FieldSet changed = cmp.modified.Union(cmp.added);
  std::vector<internal::Conflict> conflicts;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (static_cast<int>(i) == self_index) continue;
    FieldSet overlap = entries[i].fields.Intersection(changed);
    if (overlap.Empty()) continue;
    std::string identity = internal::Identity(entries[i]);
    std::string printed = internal::PrintManager(entries[i]);
    overlap.Iterate([&](const Path& p) { conflicts.push_back({identity, printed, p}); });
  }
  if (!conflicts.empty() && !force) return internal::ConflictError(std::move(conflicts));

  bool object_changed = merged != base;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (static_cast<int>(i) == self_index) continue;
    entries[i].fields = entries[i].fields.Difference(changed).Difference(cmp.removed);
  }
  if (self_index < 0) {
    entries.push_back(std::move(self));
    self_index = static_cast<int>(entries.size()) - 1;
    object_changed = true;  // a new entry always gets a time
  }
  internal::Entry& mine = entries[self_index];
  mine.fields = std::move(applied_set);
  mine.api_version = who.api_version;
  mine.fields_type = std::string(internal::kFieldsV1);
  mine.has_fields = true;
  if (object_changed) mine.time = who.time;
  internal::DropEmpty(entries);

  ApplyResult result;
  result.managed_fields = internal::EncodeEntries(entries);
  internal::SetManagedFields(merged, result.managed_fields);
  result.object = std::move(merged);
  return result;
}

core::Result<Json> ValidateManagedFields(const Json& managed_fields) {
  bool cleared = false;
  KLUTCH_ASSIGN_OR_RETURN(std::vector<internal::Entry> entries,
                          internal::DecodeEntries(managed_fields, &cleared));
  return internal::EncodeEntries(entries);
}

}  // namespace klutch::machinery
