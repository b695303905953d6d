// ApiServerMetrics: what kube-apiserver exposes on /metrics, under its names so existing
// dashboards and alerts apply:
//   apiserver_request_total{verb,dry_run,group,version,resource,subresource,scope,component,code}
//   apiserver_request_duration_seconds{verb,dry_run,group,version,resource,subresource,scope,
//                                      component} (histogram)
//   apiserver_storage_objects{resource}        objects stored per resource, kept current from
//                                              the store's own watch (no scan per scrape)
//   apiserver_longrunning_requests{verb="WATCH",group,resource,component}  open watches
//   etcd_request_duration_seconds{operation,type}  storage latency per operation and resource
//                                              (measured by MeteredStore, whatever the backend)
// Verbs are kube's metric verbs (GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE,
// DELETECOLLECTION; any other method is "other"), scopes kube's CleanScope. Cardinality stays
// bounded whatever clients send: group, version and resource are labelled only for resources
// the server serves, a subresource only when that resource has it; non-resource requests are
// counted with their path as subresource for the well-known paths and "other" for the rest.
// Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "apiserver/request_info.h"
#include "apiserver/resource.h"
#include "core/status.h"
#include "http/message.h"
#include "serving/metrics.h"
#include "storage/store.h"

namespace klutch::apiserver {

class WatchManager;

class ApiServerMetrics {
 public:
  explicit ApiServerMetrics(serving::MetricRegistry& registry);
  ~ApiServerMetrics();

  // One answered request; `seconds` from its arrival to its answer (a watch: to the start of
  // its stream). `served` is the resource the request names as the registry resolved it
  // (nullptr for non-resource requests and resources the server does not serve).
  void OnRequest(const RequestInfo& info, const http::Request& request, const ResourceInfo* served,
                 int code, double seconds);
  // One storage operation ("get", "list", "create", "update", "delete", "watch") on `key`.
  void OnStorage(std::string_view operation, std::string_view key, double seconds);
  // Counts objects per resource from `store` (a list, then its watch); scrapes report them.
  // Counting stops when the returned handle is destroyed, which must happen before `store`
  // goes away.
  core::Result<std::unique_ptr<storage::WatchHandle>> CountObjects(storage::Store& store);
  // Scrapes report `watches`' open watches.
  void ReportWatches(const WatchManager& watches);

  serving::MetricRegistry& registry() { return registry_; }

  class Impl;

 private:
  serving::MetricRegistry& registry_;
  std::unique_ptr<Impl> impl_;
};

// A Store that times every call into `metrics` and forwards it to `inner`.
std::unique_ptr<storage::Store> NewMeteredStore(std::unique_ptr<storage::Store> inner,
                                                ApiServerMetrics& metrics);

// "configmaps" or "deployments.apps" for a key under /registry/<group|core>/<resource>/...;
// "" for other keys.
std::string ResourceOfKey(std::string_view key);

}  // namespace klutch::apiserver
