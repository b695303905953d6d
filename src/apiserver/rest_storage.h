// RestStorage: Kubernetes object semantics over a storage::Store, independent of HTTP.
//
// Create, get, list, update, patch (JSON, merge, strategic merge, server-side apply), delete
// and deletecollection for any resource of the Registry, checked and answered as
// kube-apiserver does:
//  - writes: apiVersion/kind must match the resource (CheckTypeMeta); objects are stored at
//    the resource's storage version; metadata rules (uid, creationTimestamp, generateName,
//    generation, immutable fields, no new finalizers while deleting); unknown and duplicate
//    fields pruned and reported per fieldValidation (Strict/Warn/Ignore); built-in kinds
//    type-checked against their schema; custom resources defaulted, validated against the
//    CRD schema, then its x-kubernetes-validations rules (oldSelf = the stored object); the
//    kind's strategy; the caller's validating admission (WriteOptions::admit) last.
//    managedFields for every write, optimistic concurrency on resourceVersion (updates and
//    patches re-read and retry on a lost compare-and-swap), unchanged objects not written,
//    the status subresource separated, dry run, namespaces that must exist and not be
//    terminating, ResourceQuota object counts (quota.h) enforced on create and kept in the
//    quotas' status.
//  - deletes: preconditions, finalizers and deletionTimestamp, propagation (Background,
//    Foreground, Orphan), namespaces turning Terminating.
//  - lists: one store snapshot, label/field selectors (Filter, filter.h), limit/continue,
//    resourceVersion and resourceVersionMatch.
// The HTTP handler (handler.cc) serves every resource request through it, so every client,
// including the built-in controllers over their in-process RestClient, meets the same rules;
// watches (watch.h), TokenRequest (reviews.h) and the scale subresource (scale.h, through
// Mutate) build on it. Thread-safe: all state is in the Store.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apiserver/filter.h"
#include "apiserver/quota.h"
#include "apiserver/resource.h"
#include "core/clock.h"
#include "core/status.h"
#include "storage/store.h"

namespace klutch::apiserver {

enum class FieldValidation { kIgnore, kWarn, kStrict };

struct WriteOptions {
  std::string field_manager;  // owner recorded in managedFields
  bool dry_run = false;
  FieldValidation field_validation = FieldValidation::kWarn;
  std::string subresource;  // "" or "status" (or "finalize" for namespaces)
  // Keys the request body repeated within one object ("metadata.name"), found by the
  // decoder; reported like unknown fields under field validation.
  std::vector<std::string> duplicate_fields;
  // Validating admission: called with the object about to be written (and the stored one on
  // updates) after every other check passed; an error refuses the write as it is.
  std::function<core::Status(const Json& object, const Json* old)> admit;
};

struct WriteOutcome {
  Json object;
  bool created = false;  // answer 201
  std::vector<std::string> warnings;
};

enum class PatchType { kJson, kMerge, kStrategic, kApply };

struct PatchRequest {
  PatchType type = PatchType::kMerge;
  std::string body;
  bool force = false;  // apply only
};

struct DeleteOptions {
  std::string propagation_policy;  // Background (default), Foreground, Orphan
  std::optional<bool> orphan_dependents;
  std::string precondition_uid;
  std::string precondition_resource_version;
  bool dry_run = false;
};

struct DeleteOutcome {
  Json object;           // the object as deleted, or as it stays (finalizers pending)
  bool deleted = false;  // gone now: answer a success Status
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;
  std::string continue_token;
  std::string resource_version;
  std::string resource_version_match;
};

// One list item: its stored bytes and, when the list had to look inside, the parsed object.
struct ListItem {
  std::shared_ptr<const std::string> raw;
  std::shared_ptr<const Json> parsed;
  // The object, parsing `raw` if needed.
  const Json& Object();
};

struct ListOutcome {
  std::vector<ListItem> items;
  std::string resource_version;
  std::string continue_token;
};

class RestStorage {
 public:
  RestStorage(storage::Store& store, const Registry& registry, const core::Clock& clock);

  core::Result<Json> Get(const ResourceInfo& r, std::string_view ns, std::string_view name);
  // Stored bytes of an object, nullopt when the caller must use Get() (version conversion).
  core::Result<std::shared_ptr<const std::string>> GetRaw(const ResourceInfo& r,
                                                          std::string_view ns,
                                                          std::string_view name);
  core::Result<ListOutcome> List(const ResourceInfo& r, std::string_view ns,
                                 const ListOptions& options);

  core::Result<WriteOutcome> Create(const ResourceInfo& r, std::string_view ns, Json object,
                                    const WriteOptions& options);
  // PUT. `name` is the name in the URL.
  core::Result<WriteOutcome> Update(const ResourceInfo& r, std::string_view ns,
                                    std::string_view name, Json object,
                                    const WriteOptions& options);
  core::Result<WriteOutcome> Patch(const ResourceInfo& r, std::string_view ns,
                                   std::string_view name, const PatchRequest& patch,
                                   const WriteOptions& options);
  core::Result<DeleteOutcome> Delete(const ResourceInfo& r, std::string_view ns,
                                     std::string_view name, const DeleteOptions& options);
  core::Result<std::vector<Json>> DeleteCollection(const ResourceInfo& r, std::string_view ns,
                                                   const ListOptions& list,
                                                   const DeleteOptions& options);

  // Applies `mutate` to the current object and writes the result with the usual update
  // rules (retrying on conflicts). For controllers; `mutate` may be called several times.
  core::Result<WriteOutcome> Mutate(const ResourceInfo& r, std::string_view ns,
                                    std::string_view name,
                                    const std::function<core::Status(Json& object)>& mutate,
                                    const WriteOptions& options);

  // Brings the status of every ResourceQuota up to date with what is stored (at start, as
  // kube's quota controller resyncs).
  void RecountQuotas();

  storage::Store& store() { return store_; }
  const Registry& registry() const { return registry_; }
  const core::Clock& clock() const { return clock_; }

  // The continue token for resuming a list after `key` at `revision`.
  static std::string EncodeContinue(int64_t revision, std::string_view start_key_suffix);

 private:
  struct UpdateContext;
  using Transform = std::function<core::Result<Json>(const Json* current)>;
  core::Result<WriteOutcome> GuaranteedUpdate(const ResourceInfo& r, std::string_view ns,
                                              std::string_view name, const WriteOptions& options,
                                              const Transform& transform, bool allow_create,
                                              bool apply_manages_fields);
  core::Result<WriteOutcome> CreateParsed(const ResourceInfo& r, std::string_view ns, Json object,
                                          const WriteOptions& options, bool managed_fields_done);
  core::Status CheckNamespaceForCreate(const ResourceInfo& r, std::string_view ns,
                                       std::string_view name);
  core::Status ValidateObject(const ResourceInfo& r, Json& object, const Json* old,
                              const WriteOptions& options, std::vector<std::string>& warnings);
  core::Result<WriteOutcome> WriteUpdate(const ResourceInfo& r, const std::string& key,
                                         int64_t mod_revision, const Json& current, Json updated,
                                         const WriteOptions& options);

  storage::Store& store_;
  const Registry& registry_;
  const core::Clock& clock_;
  ObjectCountQuota quotas_{*this};
};

// The field manager kube-apiserver derives from a User-Agent when none is given
// ("kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07" -> "kubectl").
std::string DefaultFieldManager(std::string_view user_agent);

// The body's apiVersion and kind against the kind a request expects: both absent are filled
// in; otherwise they must match (kBadRequest with kube-apiserver's wording).
core::Status CheckTypeMeta(const machinery::GroupVersionKind& kind, Json& object);

// "configmaps \"x\" not found" with details, as kube-apiserver reports it.
core::Status NotFoundError(const ResourceInfo& r, std::string_view name);
core::Status AlreadyExistsError(const ResourceInfo& r, std::string_view name);
core::Status ConflictError(const ResourceInfo& r, std::string_view name, std::string_view why);

}  // namespace klutch::apiserver
