// RestMapper: what a server serves, from discovery, for going between kinds and resources.
//
// Refresh() reads aggregated discovery (GET /api and /apis asking for
// apidiscovery.k8s.io/v2 or v2beta1 APIGroupDiscoveryList) and, when the server answers with
// the plain documents instead, falls back to the legacy ones: /api, /apis and one resource
// list per group-version. The preferred version of a group is the first one aggregated
// discovery lists, or the legacy document's preferredVersion. ForKind and ForResource load
// the data on first use; a kind or resource not found triggers one more refresh, unless the
// last one is younger than `min_refresh_interval`, so a CRD created after start is found.
// ForResource resolves names as `kubectl get NAME` does (plural, singular, short name or kind,
// optionally ".group"; the core group and preferred versions win).
//
// Thread-safe. A refresh holds the mapper's lock across its requests: lookups and other
// refreshes wait until it is done.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "client/rest_client.h"
#include "core/sync.h"
#include "machinery/object.h"

namespace klutch::client {

struct ResourceMapping {
  machinery::GroupVersionResource gvr;
  machinery::GroupVersionKind gvk;
  bool namespaced = true;
  std::string singular;
  std::vector<std::string> short_names;
  std::vector<std::string> verbs;
  std::vector<std::string> categories;
  bool preferred_version = false;  // the group's preferred version
};

class RestMapper {
 public:
  explicit RestMapper(RestClient& rest,
                      std::chrono::milliseconds min_refresh_interval = std::chrono::seconds(1))
      : rest_(rest), min_refresh_interval_(min_refresh_interval) {}

  // Re-reads discovery.
  core::Status Refresh() EXCLUDES(mu_);

  // The resource of a kind; `version` "" picks the group's preferred version. NotFound
  // ("no matches for kind \"X\" in group \"g\"") when the server does not serve it.
  core::Result<ResourceMapping> ForKind(std::string_view group, std::string_view kind,
                                        std::string_view version = {});
  // A resource by plural, singular or short name, optionally qualified by group
  // ("deploy", "deployments.apps"), the way kubectl resolves `kubectl get NAME`.
  core::Result<ResourceMapping> ForResource(std::string_view name);

  // Everything known (after at least one successful Refresh()).
  std::vector<ResourceMapping> All();

 private:
  core::Status EnsureLoaded(bool force_if_stale) EXCLUDES(mu_);
  core::Status LoadAggregated(bool& supported, std::vector<ResourceMapping>& out);
  core::Status LoadLegacy(std::vector<ResourceMapping>& out);

  RestClient& rest_;
  std::chrono::milliseconds min_refresh_interval_;
  core::Mutex mu_;  // serialises refreshes (held across their requests)
  std::vector<ResourceMapping> mappings_ GUARDED_BY(mu_);
  bool loaded_ GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point last_refresh_ GUARDED_BY(mu_){};
};

}  // namespace klutch::client
