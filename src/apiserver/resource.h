// ResourceInfo and Registry: what the server serves, as data.
//
// A ResourceInfo describes one resource in one group-version: names, scope, verbs,
// subresources, printer columns, schema and the behaviours the generic REST code switches on
// (status subresource, generation tracking, strategic merge patch support). The Registry holds
// the built-in resources plus those of established CRDs and is what discovery, OpenAPI,
// routing and the REST layer read. Registry is thread-safe; ResourceInfo values are
// immutable once registered and shared by pointer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/sync.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "machinery/schema_cursor.h"
#include "machinery/validation.h"

namespace klutch::schema {
class ValidationRules;
}

namespace klutch::apiserver {

using machinery::Json;

// A Table column: name, type and format as in metav1.TableColumnDefinition, plus how to
// compute the cell (`json_path` for CRD printer columns, or a built-in cell function).
struct Column {
  std::string name;
  std::string type;  // string, integer, number, boolean, date
  std::string format;
  std::string description;
  int priority = 0;
  std::string json_path;
  // Built-in kinds compute cells from the object (and the time, for ages). Without a cell
  // function and json_path, the column shows the object's age (the "Age" column).
  std::function<Json(const Json& object)> cell;
};

struct SubresourceInfo {
  std::string name;  // "status", "scale", "finalize", "token"
  machinery::GroupVersionKind kind;
  std::vector<std::string> verbs;
};

// Per-kind hooks for defaulting and validation beyond the generic metadata checks.
struct Strategy {
  // Called on create after decoding; may default fields. Returns causes for 422.
  std::function<void(Json& object, std::vector<core::Cause>& causes)> prepare_create;
  // Called on update (and patch) with the old object.
  std::function<void(Json& object, const Json& old, std::vector<core::Cause>& causes)>
      prepare_update;
  // Extra field selectors of this kind: value of `field` for `object`, nullopt if unknown.
  std::function<std::optional<std::string>(const Json& object, std::string_view field)> fields;
};

struct ResourceInfo {
  std::string group;
  std::string version;
  std::string kind;
  std::string list_kind;
  std::string plural;
  std::string singular;
  bool namespaced = true;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::vector<std::string> verbs;
  std::vector<SubresourceInfo> subresources;
  std::vector<Column> columns;
  // Behaviour switches.
  bool custom = false;      // a custom resource (JSON only, no SMP, CRD schema)
  bool has_status = false;  // status subresource: main writes keep status, /status keeps rest
  bool tracks_generation = false;
  bool strategic_merge = false;  // built-ins accept strategic merge patches
  machinery::NameRule name_rule = machinery::NameRule::kDns1123Subdomain;
  // The version objects are stored in (CRDs with several versions; same as version otherwise).
  std::string storage_version;
  // Schema: components.schemas (built-ins share one, each CRD version has its own) and the
  // name of this kind's schema in it.
  std::shared_ptr<const Json> schemas;
  std::string schema_name;
  // The CRD version's x-kubernetes-validations rules, compiled once (null for built-ins).
  std::shared_ptr<const schema::ValidationRules> rules;
  Strategy strategy;
  // CRD that defines this resource (empty for built-ins).
  std::string crd_name;
  // Not stored: the only verb is create, answered by the handler (access reviews).
  bool create_only = false;

  // CRD versions whose schema has `default`s apply them to objects read from storage too,
  // so objects stored before a default was added get it on GET, LIST and WATCH.
  bool defaults_on_read = false;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  // Whether objects read from storage are changed before clients see them: another served
  // version (apiVersion rewritten) or defaults applied on read.
  bool TransformsOnRead() const { return version != storage_version || defaults_on_read; }
  // That change, applied to an object read from storage.
  void ToServed(Json& object) const;
  machinery::GroupVersionResource Gvr() const { return {group, version, plural}; }
  std::string GroupResource() const { return Gvr().GroupResource(); }
  bool HasSubresource(std::string_view name) const;
  // A cursor on this kind's schema (unknown when there is none).
  machinery::SchemaCursor Schema() const;
  // Prefix of storage keys: "/registry/<group|core>/<plural>/".
  std::string KeyPrefix() const;
  // The key of one object (`ns` ignored for cluster-scoped resources).
  std::string Key(std::string_view ns, std::string_view name) const;
};

using ResourcePtr = std::shared_ptr<const ResourceInfo>;

// One group with its versions in preference order, for discovery.
struct GroupEntry {
  std::string name;
  std::vector<std::string> versions;
};

class Registry {
 public:
  // Adds or replaces the resources of one owner ("builtin" or a CRD name) atomically.
  void SetOwner(const std::string& owner, std::vector<ResourcePtr> resources);
  void RemoveOwner(const std::string& owner);

  ResourcePtr Find(std::string_view group, std::string_view version, std::string_view plural) const;
  ResourcePtr FindKind(std::string_view group, std::string_view version,
                       std::string_view kind) const;
  // The storage-version resource of a group and plural, whatever version the caller has.
  ResourcePtr FindStored(std::string_view group, std::string_view plural) const;
  // The storage-version resource serving `kind` in `group`, in any version.
  ResourcePtr FindGroupKind(std::string_view group, std::string_view kind) const;
  // Every served resource, sorted by group, version, plural.
  std::vector<ResourcePtr> All() const;
  // Groups in discovery order: core first, then built-in groups, then CRD groups by name.
  std::vector<GroupEntry> Groups() const;
  bool HasGroupVersion(std::string_view group, std::string_view version) const;
  // Bumped on every change; lets caches (discovery, OpenAPI) know when to rebuild.
  uint64_t generation() const;
  // Runs `callback` after every change (outside the lock).
  void OnChange(std::function<void()> callback);

 private:
  mutable core::Mutex mu_;
  std::map<std::string, std::vector<ResourcePtr>> owners_ GUARDED_BY(mu_);
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::vector<std::function<void()>> listeners_ GUARDED_BY(mu_);
};

// Preference rank of a version string as Kubernetes sorts them (v1 > v1beta2 > v1alpha1 >
// other); lower is preferred.
bool VersionPreferred(std::string_view a, std::string_view b);

}  // namespace klutch::apiserver
