// Dynamic access to any resource by GroupVersionResource, and typed shortcuts for the
// built-in kinds this project uses.
//
// ResourceClient is a value naming (resource, namespace) plus the RestClient it talks
// through; its verbs build the paths and query strings of the Kubernetes REST API
// (https://kubernetes.io/docs/reference/using-api/api-concepts/) and return objects as
// JSON. Thread-safe as far as the RestClient is (it is).
#pragma once

#include <optional>
#include <string>

#include "client/rest_client.h"
#include "client/watch.h"
#include "machinery/object.h"

namespace klutch::client {

using machinery::GroupVersionResource;

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;  // 0: everything in one response
  std::string continue_token;
  std::string resource_version;        // "" most recent (quorum), "0" any cached
  std::string resource_version_match;  // "", "NotOlderThan", "Exact"
  // Leave items' metadata.managedFields out while parsing (never allocated).
  bool skip_managed_fields = false;
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;
  bool allow_bookmarks = true;
  int timeout_seconds = 0;  // 0: the server's default
  bool send_initial_events = false;
  // Leave objects' metadata.managedFields out while decoding (never allocated).
  bool skip_managed_fields = false;
  // End the watch after this long without a byte (bookmarks count): 0 = never.
  std::chrono::milliseconds idle_timeout{0};
};

struct DeleteOptions {
  std::string propagation_policy;  // "", Background, Foreground, Orphan
  std::optional<std::string> precondition_uid;
  std::optional<std::string> precondition_resource_version;
  std::optional<int64_t> grace_period_seconds;
  bool dry_run = false;
};

struct WriteOptions {
  std::string field_manager;
  bool dry_run = false;
  std::string field_validation;  // "", Ignore, Warn, Strict
  bool force = false;            // server-side apply: take over conflicting fields
};

enum class PatchType { kMerge, kStrategicMerge, kJsonPatch, kApply };

// How a watch ended (see ResourceClient::Watch).
struct WatchEnd {
  bool gone = false;     // the server said 410: the resourceVersion is too old; list again
  bool complete = true;  // false: the connection broke mid-stream
  bool cancelled = false;
  std::string error;                  // a decoding error or the server's error message
  std::string last_resource_version;  // of the last event or bookmark seen
};

// The REST path of a collection or object: /api/v1/namespaces/ns/configmaps/name/status.
std::string ResourcePath(const GroupVersionResource& gvr, std::string_view ns,
                         std::string_view name = {}, std::string_view subresource = {});

class ResourceClient {
 public:
  ResourceClient(RestClient& rest, GroupVersionResource gvr, std::string ns = {})
      : rest_(&rest), gvr_(std::move(gvr)), ns_(std::move(ns)) {}

  // The same resource in another namespace ("" = all namespaces / cluster scope).
  ResourceClient Namespace(std::string ns) const { return ResourceClient(*rest_, gvr_, ns); }
  const GroupVersionResource& gvr() const { return gvr_; }
  const std::string& ns() const { return ns_; }

  core::Result<Json> Get(std::string_view name, std::string_view subresource = {}) const;
  // One page (or everything when options.limit == 0) of a list: {"items":[...],
  // "metadata":{"resourceVersion","continue"}}.
  core::Result<Json> List(const ListOptions& options = {}) const;
  // Every page of a list, concatenated (page size options.limit or 500); the result's
  // resourceVersion is the first page's, the snapshot all pages come from.
  core::Result<Json> ListAll(ListOptions options = {}) const;
  core::Result<Json> Create(const Json& object, const WriteOptions& options = {}) const;
  // PUT; the object's resourceVersion (when set) is the precondition.
  core::Result<Json> Update(const Json& object, const WriteOptions& options = {}) const;
  core::Result<Json> UpdateStatus(const Json& object, const WriteOptions& options = {}) const;
  core::Result<Json> Patch(std::string_view name, PatchType type, const std::string& patch,
                           const WriteOptions& options = {},
                           std::string_view subresource = {}) const;
  // Returns the object as the server answered: the deleted object, or the object still
  // waiting for finalizers, or a Status for some kinds.
  core::Result<Json> Delete(std::string_view name, const DeleteOptions& options = {}) const;
  core::Result<Json> DeleteCollection(const ListOptions& selection,
                                      const DeleteOptions& options = {}) const;

  // Watches until the server ends the stream, the connection breaks, `on_event` returns
  // false or `canceller` fires. ERROR events end the watch: a 410 sets `gone`. Failing to
  // get a response at all (or a non-2xx one) is an error Status.
  core::Result<WatchEnd> Watch(const WatchOptions& options,
                               const std::function<bool(const WatchEvent&)>& on_event,
                               StreamCanceller* canceller = nullptr,
                               std::string_view accept = "application/json") const;

 private:
  Request Make(std::string verb, std::string_view name = {},
               std::string_view subresource = {}) const;
  RestClient* rest_;
  GroupVersionResource gvr_;
  std::string ns_;
};

// Built-in resources, for typed-style access: Resource(rest, kConfigMaps).Namespace("x").
namespace resources {
inline const GroupVersionResource kNamespaces{"", "v1", "namespaces"};
inline const GroupVersionResource kConfigMaps{"", "v1", "configmaps"};
inline const GroupVersionResource kSecrets{"", "v1", "secrets"};
inline const GroupVersionResource kServiceAccounts{"", "v1", "serviceaccounts"};
inline const GroupVersionResource kEvents{"", "v1", "events"};
inline const GroupVersionResource kServices{"", "v1", "services"};
inline const GroupVersionResource kLeases{"coordination.k8s.io", "v1", "leases"};
inline const GroupVersionResource kDeployments{"apps", "v1", "deployments"};
inline const GroupVersionResource kRoles{"rbac.authorization.k8s.io", "v1", "roles"};
inline const GroupVersionResource kRoleBindings{"rbac.authorization.k8s.io", "v1", "rolebindings"};
inline const GroupVersionResource kClusterRoles{"rbac.authorization.k8s.io", "v1", "clusterroles"};
inline const GroupVersionResource kClusterRoleBindings{"rbac.authorization.k8s.io", "v1",
                                                       "clusterrolebindings"};
inline const GroupVersionResource kCustomResourceDefinitions{"apiextensions.k8s.io", "v1",
                                                             "customresourcedefinitions"};
}  // namespace resources

}  // namespace klutch::client
