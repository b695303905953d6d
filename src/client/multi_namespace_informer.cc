#include "client/multi_namespace_informer.h"

namespace klutch::client {

MultiNamespaceInformer::MultiNamespaceInformer(RestClient& rest, GroupVersionResource gvr,
                                               InformerOptions options)
    : rest_(rest), gvr_(std::move(gvr)), options_(std::move(options)) {}

MultiNamespaceInformer::~MultiNamespaceInformer() { Stop(); }

void MultiNamespaceInformer::AddEventHandler(EventHandler handler) {
  core::MutexLock lock(mu_);
  handlers_.push_back(std::move(handler));
}

void MultiNamespaceInformer::OnSynced(std::function<void(const std::string& ns)> callback) {
  core::MutexLock lock(mu_);
  on_synced_ = std::move(callback);
}

std::unique_ptr<Informer> MultiNamespaceInformer::NewInformer(const std::string& ns) {
  InformerOptions options = options_;
  options.ns = ns;
  options.on_synced = [this, ns] {
    std::function<void(const std::string&)> callback;
    {
      core::MutexLock lock(mu_);
      callback = on_synced_;
    }
    if (callback) callback(ns);
  };
  auto informer = std::make_unique<Informer>(rest_, gvr_, std::move(options));
  for (const auto& h : handlers_) informer->AddEventHandler(h);
  return informer;
}

void MultiNamespaceInformer::AddNamespace(const std::string& ns) {
  core::MutexLock lock(mu_);
  if (stopped_ || informers_.count(ns)) return;
  std::shared_ptr<Informer> informer = NewInformer(ns);
  if (started_) informer->Start();
  informers_.emplace(ns, std::move(informer));
}

void MultiNamespaceInformer::RemoveNamespace(const std::string& ns) {
  std::shared_ptr<Informer> informer;
  {
    core::MutexLock lock(mu_);
    auto it = informers_.find(ns);
    if (it == informers_.end()) return;
    informer = std::move(it->second);
    informers_.erase(it);
  }
  informer->Stop();
}

std::vector<std::string> MultiNamespaceInformer::Namespaces() const {
  core::MutexLock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [ns, informer] : informers_) out.push_back(ns);
  return out;
}

ObjectPtr MultiNamespaceInformer::Get(const std::string& key) const {
  auto slash = key.find('/');
  if (slash == std::string::npos) return nullptr;
  std::shared_ptr<Informer> informer;
  {
    core::MutexLock lock(mu_);
    auto it = informers_.find(key.substr(0, slash));
    if (it == informers_.end()) return nullptr;
    informer = it->second;
  }
  return informer->indexer().Get(key);
}

std::vector<ObjectPtr> MultiNamespaceInformer::List(const std::string& ns) const {
  std::shared_ptr<Informer> informer;
  {
    core::MutexLock lock(mu_);
    auto it = informers_.find(ns);
    if (it == informers_.end()) return {};
    informer = it->second;
  }
  return informer->indexer().List();
}

bool MultiNamespaceInformer::HasSynced(const std::string& ns) const {
  core::MutexLock lock(mu_);
  auto it = informers_.find(ns);
  return it != informers_.end() && it->second->HasSynced();
}

void MultiNamespaceInformer::Start() {
  core::MutexLock lock(mu_);
  if (started_ || stopped_) return;
  started_ = true;
  for (auto& [ns, informer] : informers_) informer->Start();
}

void MultiNamespaceInformer::Stop() {
  std::map<std::string, std::shared_ptr<Informer>> informers;
  {
    core::MutexLock lock(mu_);
    stopped_ = true;
    informers.swap(informers_);
  }
  for (auto& [ns, informer] : informers) informer->Stop();
}

}  // namespace klutch::client
