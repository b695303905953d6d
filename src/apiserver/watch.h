// Watch streams: turns store events into Kubernetes watch events (ADDED, MODIFIED, DELETED,
// BOOKMARK, ERROR) on a chunked HTTP response, with selector transitions, Table encoding,
// bookmarks and timeouts. A WatchManager owns every open watch and one ticker thread for
// bookmarks and timeouts. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "apiserver/rest_storage.h"
#include "apiserver/table.h"
#include "core/sync.h"
#include "http/message.h"

namespace klutch::apiserver {

struct WatchRequest {
  ResourcePtr resource;
  std::string ns;
  Filter filter;
  std::string resource_version;
  std::string resource_version_match;
  bool allow_bookmarks = false;
  bool send_initial_events = false;
  std::chrono::seconds timeout{0};  // 0: the server's default
  bool table = false;
  std::string table_api_version;
  IncludeObject include = IncludeObject::kMetadata;
};

class WatchSession;

class WatchManager {
 public:
  WatchManager(RestStorage& storage, std::chrono::seconds bookmark_interval,
               std::chrono::seconds default_timeout);
  ~WatchManager();

  // Starts a watch: an HTTP response whose stream delivers events until timeout, client
  // disconnect or server stop. Errors found before streaming (bad RV) come back as Status.
  core::Result<http::Response> Start(WatchRequest request);
  size_t active() const;
  // Open watches by resource, as "configmaps" or "deployments.apps" (for /metrics).
  std::map<std::string, size_t> ActiveByResource() const;

 private:
  friend class WatchSession;
  void Remove(WatchSession* session) EXCLUDES(mu_);
  void Tick() EXCLUDES(mu_);

  RestStorage& storage_;
  std::chrono::seconds bookmark_interval_;
  std::chrono::seconds default_timeout_;
  mutable core::Mutex mu_;
  std::set<std::shared_ptr<WatchSession>> sessions_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  core::CondVar cv_;
  std::thread ticker_;
};

}  // namespace klutch::apiserver
