// MultiNamespaceInformer: one resource watched in a changing set of namespaces, for a client
// whose rights stop at namespace borders (a konnector's provider account may list claims only
// in the namespaces mapped to its consumer, never cluster-wide).
//
// It keeps one Informer per namespace, added and removed while it runs. Handlers apply to
// every namespace, present and future; a namespace added later delivers its first list as
// adds, and `on_synced` tells when one namespace's cache is complete (so a controller can
// treat "not in the cache" as "does not exist" only for synced namespaces). Removing a
// namespace stops its informer and forgets its objects without delete events: the objects
// were not deleted, they left the view. Thread-safe; handlers run on the namespaces'
// reflector threads, one namespace at a time each.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/informer.h"
#include "core/sync.h"

namespace klutch::client {

class MultiNamespaceInformer {
 public:
  MultiNamespaceInformer(RestClient& rest, GroupVersionResource gvr, InformerOptions options = {});
  ~MultiNamespaceInformer();  // Stop()
  MultiNamespaceInformer(const MultiNamespaceInformer&) = delete;
  MultiNamespaceInformer& operator=(const MultiNamespaceInformer&) = delete;

  // Add handlers before Start(); they are attached to every namespace's informer.
  void AddEventHandler(EventHandler handler);
  // Called (on a reflector thread) when a namespace's first list has been delivered.
  void OnSynced(std::function<void(const std::string& ns)> callback);

  // Starts watching `ns` (no-op when watched); its informer starts with Start() or now.
  void AddNamespace(const std::string& ns);
  // Stops watching `ns` (no-op when not watched). Must not be called from a handler.
  void RemoveNamespace(const std::string& ns);
  std::vector<std::string> Namespaces() const;

  // The cached object "namespace/name", nullptr when absent or the namespace not watched.
  ObjectPtr Get(const std::string& key) const;
  std::vector<ObjectPtr> List(const std::string& ns) const;
  // True when `ns` is watched and its first list has been delivered.
  bool HasSynced(const std::string& ns) const;
  const GroupVersionResource& gvr() const { return gvr_; }

  void Start();
  void Stop();

 private:
  std::unique_ptr<Informer> NewInformer(const std::string& ns) REQUIRES(mu_);

  RestClient& rest_;
  GroupVersionResource gvr_;
  InformerOptions options_;
  mutable core::Mutex mu_;
  std::vector<EventHandler> handlers_ GUARDED_BY(mu_);
  std::function<void(const std::string&)> on_synced_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Informer>> informers_ GUARDED_BY(mu_);
  bool started_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
};

}  // namespace klutch::client
