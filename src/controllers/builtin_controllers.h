// The API server's own controllers, started beside `klutch apiserver`:
//   klutch-apiserver-namespace       namespace deletion (Terminating -> contents gone -> removed)
//   klutch-apiserver-namespace-defaults  a "default" ServiceAccount and the kube-root-ca.crt
//                                    ConfigMap in every active namespace
//   klutch-apiserver-crd             CRD serving, status conditions and instance cleanup
//   klutch-apiserver-gc              garbage collection by ownerReferences (background,
//                                    foreground and orphan)
#pragma once

#include <memory>

#include "apiserver/server.h"
#include "core/clock.h"
#include "core/status.h"

namespace klutch::controllers {

class BuiltinControllers {
 public:
  virtual ~BuiltinControllers() = default;
  virtual void Stop() = 0;
};

struct BuiltinControllersOptions {
  // Time for queues, backoff, resync and requeues (nullptr: core::RealClock::Get()); tests
  // pass a core::FakeClock. Must outlive the controllers.
  const core::Clock* clock = nullptr;
};

// Starts the controllers against `server` through an in-process client (the server's own
// handler, as user "system:apiserver" in group system:masters: authenticated, authorized and
// audited like any request) and returns once their caches have synced.
core::Result<std::unique_ptr<BuiltinControllers>> StartBuiltinControllers(
    apiserver::ApiServer& server, BuiltinControllersOptions options = {});

}  // namespace klutch::controllers
