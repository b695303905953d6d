// Field ownership (metadata.managedFields) and server-side apply for JSON objects.
//
// Every write records who set which fields: an `Update` entry per (manager, apiVersion,
// subresource) for ordinary writes, an `Apply` entry per (manager, subresource) for
// server-side apply. Ownership is a FieldSet (fieldpath.h) computed against the object's
// OpenAPI schema, which says how lists and maps are keyed:
//   - `x-kubernetes-list-type: map` lists are keyed by `x-kubernetes-list-map-keys` (a list
//     with no list-type but `x-kubernetes-patch-strategy: merge` and a
//     `x-kubernetes-patch-merge-key` counts as a map list keyed by that key; with a merge
//     strategy and no key it is a set);
//   - `set` lists are keyed by their scalar values;
//   - every other list is atomic: one leaf, replaced as a whole;
//   - objects merge per field unless `x-kubernetes-map-type: atomic`.
// An unknown schema (SchemaCursor with no node) means granular maps and atomic lists; a root
// schema whose `metadata` is not described gets ObjectMeta's list types built in (finalizers
// a set, ownerReferences keyed by uid).
//
// Fields Kubernetes never tracks are left out of every set: apiVersion, kind, metadata itself
// and metadata.{name, namespace, uid, resourceVersion, generation, creationTimestamp,
// deletionTimestamp, deletionGracePeriodSeconds, selfLink, managedFields}. Callers that reset a
// part of the object on some endpoint (status on the main resource when a status subresource
// exists, spec on /status) pass it in `ManagedFieldsOptions::ignore_paths`.
//
// The semantics follow kube-apiserver's field manager (structured-merge-diff): see each
// function. Walks recurse once per nesting level of their inputs; callers decode untrusted
// JSON with a nesting bound first. Pure functions over JSON values the caller owns;
// thread-safe.
#pragma once

#include <string>

#include "core/status.h"
#include "machinery/fieldpath.h"
#include "machinery/json.h"
#include "machinery/schema_cursor.h"

namespace klutch::machinery {

// Who is writing, as recorded in a managedFields entry.
struct ManagerInfo {
  std::string manager;      // the fieldManager query parameter
  std::string operation;    // "Update" or "Apply"
  std::string api_version;  // the request's group/version, e.g. "v1", "apps/v1"
  std::string subresource;  // "" or e.g. "status"
  std::string time;         // RFC 3339, e.g. "2024-05-01T10:00:00Z"
};

struct ManagedFieldsOptions {
  // Paths (and everything below them) this endpoint does not let the caller own, e.g.
  // {.status} for the main resource of a kind with a status subresource.
  FieldSet ignore_paths;
};

struct ApplyResult {
  // The live object with the applied configuration merged in and fields the applier dropped
  // removed; metadata.managedFields holds `managed_fields` (absent when that is empty).
  Json object;
  // The new metadata.managedFields array.
  Json managed_fields;
};

// The fields `object` sets: every scalar, null, atomic list and atomic map is a leaf member;
// every entry of a map (a key its schema does not declare as a property) and every element of
// a map or set list is a member too (written `".":{}` when it also has members below); a
// declared property whose value is an empty object is a member. Untracked metadata fields and
// `options.ignore_paths` are left out. A map-list element missing a key field (with no schema
// default for it) or a set-list element that is an object is keyed by its index instead;
// ServerSideApply rejects such input.
FieldSet FieldSetOf(const Json& object, const SchemaCursor& schema,
                    const ManagedFieldsOptions& options = {});

// Records an ordinary write (POST, PUT, non-apply PATCH) by `who`, whose operation must be
// "Update". `old_object` is null on create (every field of `new_object` then counts as set).
// Fields that are new or changed between old and new move to `who`'s entry (created and
// appended when missing; its time and apiVersion are set) and leave every other entry;
// removed fields leave every entry. An entry whose set becomes empty is dropped; when the
// write changed nothing `who` does not get an entry and no time changes. `managed_fields` is
// the current array (the live object's, or the client's after ValidateManagedFields), null or
// [] for none. Returns the new array, entries in their existing order.
// Errors: those of ValidateManagedFields when `managed_fields` is malformed; BadRequest when
// `who.operation` is neither "Update" nor empty.
core::Result<Json> UpdateManagedFields(const Json& old_object, const Json& new_object,
                                       const Json& managed_fields, const ManagerInfo& who,
                                       const SchemaCursor& schema,
                                       const ManagedFieldsOptions& options = {});

// Server-side apply of the configuration `applied` by `who` (operation "Apply") to `live`
// (null when the object does not exist yet; the result is then the applied configuration).
//   - Merge: maps merge per key, map lists per key and set lists by value (the live order
//     kept, new elements placed as the applied order says), atomic lists and atomic maps and
//     scalars are replaced.
//   - Prune: fields in `who`'s previous Apply set that the new configuration omits are removed
//     from the object unless another entry (or the new configuration) owns them; a struct
//     property is owned through any field under it, so a struct nobody owns anything in
//     disappears with it.
//   - Conflicts: a field whose value the apply changes (or adds) and which another entry owns
//     — Update or Apply, another manager or the same name with another operation — conflicts.
//     Without `force` that fails with Conflict, the message exactly as kube-apiserver writes
//     it (`Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.a`;
//     several: `Apply failed with 2 conflicts: conflicts with "m1" using v1:\n- .a\n- .b`,
//     managers sorted, Update managers with ` using <apiVersion>`) and one
//     FieldManagerConflict cause per field. With `force` the fields leave the other entries.
//     Fields set to the value they already have are shared, not conflicts.
//   - `who`'s Apply entry becomes exactly FieldSetOf(applied) (dropped when empty); its time
//     is set when the object changed or the entry is new. Fields the apply removed leave
//     every entry.
//   - A live object with no managedFields is treated as owned entirely by a
//     "before-first-apply" Update entry, as Kubernetes does.
// Errors: Invalid when `who.manager` is empty (`fieldManager: Required value: is required for
// apply patch`); BadRequest when `applied` is not an object or carries
// metadata.managedFields; those of ValidateManagedFields for malformed `managed_fields`; Unknown
// (HTTP 500, as kube-apiserver answers) when `applied` has a map-list element without its key
// fields or duplicate keys; Conflict as above. Nothing is returned but the error in those cases.
core::Result<ApplyResult> ServerSideApply(const Json& live, const Json& applied,
                                          const Json& managed_fields, const ManagerInfo& who,
                                          bool force, const SchemaCursor& schema,
                                          const ManagedFieldsOptions& options = {});

// Checks a client-written metadata.managedFields (PUT or PATCH may replace them). Accepts an
// array of entries {manager, operation "Apply"|"Update", apiVersion, time (RFC 3339),
// fieldsType "FieldsV1", fieldsV1 (FieldsV1 JSON), subresource}; null and [] are returned as
// []; a list of only empty entries (kubectl's `[{}]`) means "clear" and also gives [].
// Callers that follow Kubernetes keep the live managedFields when the client sent none ([] or
// absent), and when this fails (kube-apiserver silently falls back to the live ones).
// Errors: BadRequest for wrong JSON types or unparsable time/fieldsV1, naming
// `metadata.managedFields[i].<field>`; Invalid (with causes) for operation not Apply/Update,
// missing apiVersion, fieldsType not FieldsV1, manager longer than 128 bytes or with
// unprintable characters. Returns the entries normalized (fieldsV1 re-serialized).
core::Result<Json> ValidateManagedFields(const Json& managed_fields);

}  // namespace klutch::machinery
