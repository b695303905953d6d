#include "compose/composed_informers.h"

#include <vector>

#include "compose/object_helpers.h"
#include "compose/xrd.h"
#include "core/log.h"
#include "machinery/object.h"

namespace klutch::compose {

using client::ObjectPtr;

client::Informer& ComposedInformers::Get(const client::GroupVersionResource& gvr,
                                         std::chrono::milliseconds& age) {
  const auto now = clock_.MonotonicNow();
  const std::string key = GvrKey(gvr);
  core::MutexLock lock(mu_);
  auto it = informers_.find(key);
  if (it != informers_.end()) {
    age = std::chrono::duration_cast<std::chrono::milliseconds>(now - started_[key]);
    return *it->second;
  }
  age = std::chrono::milliseconds(0);
  started_[key] = now;
  client::InformerOptions o{
      .label_selector = std::string(kLabelComposite), .compact = true, .clock = &clock_};
  auto informer = std::make_unique<client::Informer>(rest_, gvr, o);
  (void)informer->indexer().AddIndex(kByComposite, [](const client::Json& obj) {
    std::string xr = machinery::GetString(obj, {"metadata", "labels", kLabelComposite});
    return xr.empty() ? std::vector<std::string>{} : std::vector<std::string>{xr};
  });
  informer->AddEventHandler(
      {.on_add = [this](const ObjectPtr& o) { route_(*o); },
       .on_update = [this](const ObjectPtr&, const ObjectPtr& o) { route_(*o); },
       .on_delete = [this](const ObjectPtr& o) { route_(*o); }});
  informer->Start();
  KLUTCH_LOG(kInfo, "compose", "watching composed resources {}", gvr.GroupResource());
  return *informers_.emplace(key, std::move(informer)).first->second;
}

void ComposedInformers::Stop() {
  std::map<std::string, std::unique_ptr<client::Informer>> informers;
  {
    core::MutexLock lock(mu_);
    informers.swap(informers_);
  }
  for (auto& [key, informer] : informers) informer->Stop();
}

}  // namespace klutch::compose
