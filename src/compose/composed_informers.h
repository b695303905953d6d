// ComposedInformers: one informer per composed resource kind (label crossplane.io/composite,
// indexed by it), created and started when a composition first uses the kind. Every event
// of a composed resource goes to `route` (which queues its controlling XR). Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "client/dynamic.h"
#include "client/informer.h"
#include "core/clock.h"
#include "core/sync.h"

namespace klutch::compose {

// The index of composed resources by their XR's name (label crossplane.io/composite).
inline constexpr const char* kByComposite = "composite";

class ComposedInformers {
 public:
  // `rest` and `clock` must outlive this.
  ComposedInformers(client::RestClient& rest, const core::Clock& clock,
                    std::function<void(const client::Json& composed)> route)
      : rest_(rest), clock_(clock), route_(std::move(route)) {}
  ~ComposedInformers() { Stop(); }

  // The informer of `gvr`, started on first use; `age` says how long ago.
  client::Informer& Get(const client::GroupVersionResource& gvr, std::chrono::milliseconds& age);
  // Stops every informer started so far. Idempotent.
  void Stop();

 private:
  client::RestClient& rest_;
  const core::Clock& clock_;
  const std::function<void(const client::Json&)> route_;
  core::Mutex mu_;
  std::map<std::string, std::unique_ptr<client::Informer>> informers_ GUARDED_BY(mu_);
  std::map<std::string, core::MonoTime> started_ GUARDED_BY(mu_);
};

}  // namespace klutch::compose
