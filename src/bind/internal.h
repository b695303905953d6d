// The AppClusterBinding reconcile, still a function over the context
// (app_cluster_bindings.cc), for backend_controllers.cc (wiring). Not a public header.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bind/backend_context.h"
#include "bind/object_writes.h"
#include "client/dynamic.h"
#include "client/informer.h"
#include "reconcile/conditions.h"
#include "reconcile/controller.h"
#include "reconcile/events.h"

namespace klutch::bind::internal {

using client::Json;
using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;
using Context = BackendContext;

core::Result<Result> ReconcileAppClusterBinding(Context& ctx, const Request& request);

}  // namespace klutch::bind::internal
