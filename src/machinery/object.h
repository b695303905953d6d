// Object model helpers: group/version/kind/resource names and ObjectMeta access on JSON
// objects (Kubernetes' "unstructured" view), plus Status <-> metav1.Status conversion.
//
// Accessors never throw: a missing or mistyped field reads as empty. Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::machinery {

struct GroupVersion {
  std::string group;  // "" for the core group
  std::string version;
  // "v1" for core, "apps/v1" otherwise.
  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  bool operator==(const GroupVersion&) const = default;
};

// Splits an apiVersion string ("apps/v1" -> {apps, v1}; "v1" -> {"", v1}).
GroupVersion ParseApiVersion(std::string_view api_version);

struct GroupVersionKind {
  std::string group;
  std::string version;
  std::string kind;
  bool operator==(const GroupVersionKind&) const = default;
};

struct GroupVersionResource {
  std::string group;
  std::string version;
  std::string resource;
  bool operator==(const GroupVersionResource&) const = default;
  // "configmaps" or "widgets.example.com": the qualified resource name used in messages.
  std::string GroupResource() const { return group.empty() ? resource : resource + "." + group; }
};

// String field of an object at a dotted path of object keys ("metadata.name"); "" if absent.
std::string GetString(const Json& obj, std::initializer_list<std::string_view> path);
// Pointer to the node at a path, nullptr if any step is missing or not an object.
const Json* Find(const Json& obj, std::initializer_list<std::string_view> path);
// The string items of an array node (other items skipped); empty for nullptr or a non-array.
std::vector<std::string> Strings(const Json* array);

inline std::string Name(const Json& o) { return GetString(o, {"metadata", "name"}); }
inline std::string Namespace(const Json& o) { return GetString(o, {"metadata", "namespace"}); }
inline std::string Uid(const Json& o) { return GetString(o, {"metadata", "uid"}); }
inline std::string ResourceVersion(const Json& o) {
  return GetString(o, {"metadata", "resourceVersion"});
}
inline std::string Kind(const Json& o) { return GetString(o, {"kind"}); }
inline std::string ApiVersionOf(const Json& o) { return GetString(o, {"apiVersion"}); }

// metadata, created as an object when absent or not an object.
Json& MutableMetadata(Json& obj);
// The finalizers of an object (empty when absent).
std::vector<std::string> Finalizers(const Json& obj);
bool HasFinalizer(const Json& obj, std::string_view finalizer);
// Appends `finalizer` unless present / removes every occurrence; true when metadata changed.
bool AddFinalizer(Json& obj, std::string_view finalizer);
bool RemoveFinalizer(Json& obj, std::string_view finalizer);
bool IsBeingDeleted(const Json& obj);
// Sets one annotation (creating metadata.annotations as needed).
void SetAnnotation(Json& object, std::string_view key, std::string_view value);
// The annotation's value, "" when absent.
std::string Annotation(const Json& object, std::string_view key);

// True when every value `want` sets is in `have` (objects compared key by key, anything else
// by equality): a written object "covers" what a controller wants even when the server or
// another controller added fields of its own. With ListCover::kInOrder arrays are compared
// element by element in order and `have` may hold extra elements between them (an extra
// ownerReference, defaults inside list items); a reordered or shortened list never covers.
// Removals are not seen: pair it with a hash of what was last written.
enum class ListCover { kExact, kInOrder };
bool Covers(const Json& have, const Json& want, ListCover lists = ListCover::kExact);
// A stable 64-bit FNV-1a hash of a JSON value's serialization, as 16 hex digits.
std::string JsonHash(const Json& value);

// metav1.Status JSON for an error (or a success Status for OK).
Json StatusToJson(const core::Status& status);
// The Status carried by a metav1.Status JSON object (reason, message, code, details).
core::Status StatusFromJson(const Json& status);

// A 422 Invalid Status as kube-apiserver builds it: message
// `<Kind> "<name>" is invalid: <field>: <detail>` (several causes in brackets).
core::Status InvalidObject(std::string_view group, std::string_view kind, std::string_view name,
                           std::vector<core::Cause> causes);

// Cause constructors with Kubernetes' wording. `value` is rendered the way field errors do.
core::Cause FieldInvalid(std::string field, const Json& value, std::string detail);
core::Cause FieldRequired(std::string field, std::string detail = "");
core::Cause FieldForbidden(std::string field, std::string detail);
core::Cause FieldNotSupported(std::string field, const Json& value,
                              const std::vector<std::string>& supported);
core::Cause FieldTooLong(std::string field, const Json& value, size_t max);
core::Cause FieldDuplicate(std::string field, const Json& value);

}  // namespace klutch::machinery
