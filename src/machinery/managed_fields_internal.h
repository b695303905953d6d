// What the sources of managed_fields.h share (managed_fields.cc, managed_fields_walks.cc,
// managed_fields_entries.cc): the walks over an object and its schema, and managedFields
// entries. Not a public API; pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "machinery/fieldpath.h"
#include "machinery/json.h"
#include "machinery/managed_fields.h"
#include "machinery/schema_cursor.h"

namespace klutch::machinery::internal {

inline constexpr std::string_view kApply = "Apply";
inline constexpr std::string_view kUpdate = "Update";
inline constexpr std::string_view kFieldsV1 = "FieldsV1";
inline constexpr std::string_view kBeforeFirstApply = "before-first-apply";
inline constexpr size_t kFieldManagerMaxLength = 128;

// --- walks (managed_fields_walks.cc) ---------------------------------------------------------

// `set` without the fields Kubernetes never tracks and without `options.ignore_paths`.
FieldSet FilterTracked(const FieldSet& set, const ManagedFieldsOptions& options);

// The fields `value` sets (FieldSetOf, unfiltered). With `error`, the first element that
// cannot be keyed, or a duplicate key, is reported there with its path ("" when none).
FieldSet WalkFieldSet(const Json& value, const SchemaCursor& schema, std::string* error);

struct Comparison {
  FieldSet added;
  FieldSet removed;
  FieldSet modified;
};

// The fields added, removed and modified from `l` to `r` (either may be nullptr for
// "absent"), filtered as FilterTracked.
Comparison CompareObjects(const Json* l, const Json* r, const SchemaCursor& schema,
                          const ManagedFieldsOptions& options);

// `r` merged into `l` as server-side apply merges (maps per key, map and set lists per
// element, everything else replaced); `path` is where `l` sits in the object.
Json Merge(const Json& l, const Json& r, const SchemaCursor& c, Path& path);

// `set` plus the declared properties that have owned fields below them.
FieldSet WithNamedParents(const FieldSet& set, const SchemaCursor& schema);

// Removes from `node` what `last` holds and `owned` does not (see managed_fields_walks.cc).
void Prune(Json& node, const FieldSet& last, const FieldSet* owned, const SchemaCursor& c,
           Path& path);

// --- entries (managed_fields_entries.cc) ----------------------------------------------------

struct Entry {
  std::string manager;
  std::string operation;
  std::string api_version;
  std::string time;
  std::string fields_type;
  std::string subresource;
  bool has_fields = false;
  FieldSet fields;
};

// kube-apiserver's manager identifier of `e`.
std::string Identity(const Entry& e);
// How conflict messages name a manager: "m", "m" using v1, "m" with subresource "status"...
std::string PrintManager(const Entry& e);
Json EncodeEntries(const std::vector<Entry>& entries);
// Validates and decodes a managedFields array. `*cleared` is set for the `[{}]` form.
core::Result<std::vector<Entry>> DecodeEntries(const Json& managed_fields, bool* cleared);
// The index of the entry with `identity` (the last of duplicates), -1 when none.
int FindEntry(const std::vector<Entry>& entries, const std::string& identity);
// Drops the entries whose field set is empty.
void DropEmpty(std::vector<Entry>& entries);
// A new, empty entry of `who` with `operation`.
Entry EntryFor(const ManagerInfo& who, std::string_view operation);
// The string at object.a (or object.a.b), "" when absent or not a string.
std::string StringAt(const Json& object, std::string_view a, std::string_view b = {});
// "/v1, Kind=ConfigMap" as Go prints the GroupVersionKind of `object`.
std::string GvkString(const Json& object);

struct Conflict {
  std::string identity;
  std::string printed;
  Path path;
};

// The Conflict status of an apply, worded as kube-apiserver words it.
core::Status ConflictError(std::vector<Conflict> conflicts);
// Sets metadata.managedFields (removes it when `managed_fields` is empty).
void SetManagedFields(Json& object, const Json& managed_fields);

}  // namespace klutch::machinery::internal
