// RestMapper: what a server serves, from discovery, for going between kinds and resources.
//
// It reads aggregated discovery (apidiscovery.k8s.io/v2, two requests) and falls back to
// the legacy documents (/api, /apis and one list per group-version) for servers that do not
// offer it. Lookups of a kind or resource it does not know refresh the data once (at most
// once per `min_refresh_interval`), so a CRD created after start is found. Thread-safe.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "client/rest_client.h"
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
  core::Status Refresh();

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
  core::Status EnsureLoaded(bool force_if_stale);
  core::Status LoadAggregated(bool& supported, std::vector<ResourceMapping>& out);
  core::Status LoadLegacy(std::vector<ResourceMapping>& out);

  RestClient& rest_;
  std::chrono::milliseconds min_refresh_interval_;
  std::mutex mu_;  // serialises refreshes and guards the fields below
  std::vector<ResourceMapping> mappings_;
  bool loaded_ = false;
  std::chrono::steady_clock::time_point last_refresh_{};
};

}  // namespace klutch::client
