// Installing the CustomResourceDefinitions a controller process serves, at start-up: create
// or update each CRD and wait until the server reports it Established. Connection errors,
// 409 Conflict and 429 are retried until the timeout; Invalid and Forbidden end at once.
#pragma once

#include <chrono>

#include "client/rest_client.h"
#include "core/clock.h"
#include "core/status.h"
#include "machinery/json.h"

namespace klutch::reconcile {

// `crd` is a full apiextensions.k8s.io/v1 CustomResourceDefinition. An existing one gets
// `crd`'s spec (and labels) only when they differ. kTimeout names the CRD and the last error.
core::Status InstallCrd(client::RestClient& rest, const machinery::Json& crd,
                        std::chrono::milliseconds timeout,
                        const core::Clock& clock = core::RealClock::Get());

}  // namespace klutch::reconcile
