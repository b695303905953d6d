// SyncerContext: what the spec, status and adopt reconcilers of one export share (§4.10-§4.12):
// the konnector's context, the connection, the export's resource and kind, the consumer cache,
// the isolation strategy with its provider cache, and the latency clocks. Built by
// ExportSyncer::Start(), which owns every part and outlives the reconcilers.
#pragma once

#include <string>
#include <string_view>

#include "apis/klutch/apiserviceexport.h"
#include "client/informer.h"
#include "konnector/context.h"
#include "konnector/isolation.h"
#include "konnector/sync_latency.h"

namespace klutch::konnector::internal {

class Connection;

struct SyncerContext {
  Context& ctx;
  Connection& connection;
  const client::GroupVersionResource gvr;
  const std::string kind;
  client::Informer& consumer;  // the App Cluster's objects of the resource, cluster-wide
  Isolation& isolation;
  SyncLatency& latency;
};

// The condition the konnector keeps on each bound consumer object.
inline constexpr std::string_view kSyncedCondition = apis::klutch::kControlPlaneSyncedCondition;

// The object's spec (null when it has none).
inline const Json& SpecOf(const Json& object) {
  static const Json kNull;
  const Json* s = machinery::Find(object, {"spec"});
  return s ? *s : kNull;
}

}  // namespace klutch::konnector::internal
