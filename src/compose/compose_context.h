// ComposeContext: what the compose reconcilers share, built once by the Composer (composer.h)
// and read by the XRD, CompositionRevision, claim and composite reconcilers: the manager (its
// REST client, metrics), the options, time, discovery, Events, the informers of the
// manager's own kinds and of composed kinds, the circuit breaker. The informer pointers are
// set in Composer::Setup, before any reconcile runs; afterwards nothing here changes.
#pragma once

#include <string>

#include "client/discovery.h"
#include "client/informer.h"
#include "compose/circuit_breaker.h"
#include "compose/composed_informers.h"
#include "compose/composer.h"
#include "reconcile/controller.h"
#include "reconcile/events.h"
#include "reconcile/manager.h"
#include "serving/metrics.h"

namespace klutch::compose {

struct ComposeContext {
  reconcile::Manager& manager;
  const ComposerOptions& options;
  const core::Clock& clock;
  client::RestMapper& mapper;
  reconcile::EventRecorder& events;
  serving::CounterFamily& composed_writes;  // by verb: apply, delete
  ComposedInformers& composed;
  CircuitBreaker& breaker;
  client::Informer* xrds = nullptr;
  client::Informer* compositions = nullptr;
  client::Informer* revisions = nullptr;
  client::Informer* functions = nullptr;
  client::Informer* crds = nullptr;  // the CRDs XRDs generated (label crossplane.io/xrd)
  reconcile::Controller* xrd_controller = nullptr;

  client::RestClient& rest() const { return manager.rest(); }
  // XRD `name` from the cache (an empty object when it is gone).
  client::Json Xrd(const std::string& name) const {
    client::ObjectPtr x = xrds->indexer().Get(name);
    return x ? *x : client::Json::object();
  }
};

}  // namespace klutch::compose
