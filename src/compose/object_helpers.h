// The object helpers the compose reconcilers share: controller references, the pause
// annotation, connection Secrets. Stateless functions.
#pragma once

#include <map>
#include <string>

#include "client/dynamic.h"
#include "core/clock.h"
#include "core/status.h"
#include "machinery/json.h"
#include "reconcile/committer.h"
#include "reconcile/controller.h"

namespace klutch::compose {

class WriteTracker;

// Whether the object carries crossplane.io/paused: "true".
bool IsPaused(const machinery::Json& object);
// The controller owner reference of `owner` (cluster-scoped, so it may own anything).
machinery::Json ControllerRef(const machinery::Json& owner);
// The uid of the controlling owner ("" when none).
std::string ControllerUid(const machinery::Json& object);
// "group/version/resource", a map key.
std::string GvrKey(const client::GroupVersionResource& gvr);
// A Secret's data, decoded (values that are not base64 strings skipped).
std::map<std::string, std::string> SecretData(const machinery::Json& secret);

// Writes Secret ns/name (type connection.crossplane.io/v1alpha1, controlled by `owner`) with
// `data` by server-side apply, unless it holds that data already; `changed` says whether it
// wrote. Conflict when the Secret exists and another object controls it.
core::Status PublishConnectionSecret(client::RestClient& rest, const machinery::Json& owner,
                                     const std::string& ns, const std::string& name,
                                     const std::map<std::string, std::string>& data, bool& changed);

// Synced=False, reason ReconcilePaused (the crossplane.io/paused annotation), written through
// `committer` and recorded in `writes` under `key`.
core::Result<reconcile::Result> MarkPaused(const machinery::Json& object,
                                           const reconcile::Committer& committer,
                                           WriteTracker& writes, const std::string& key,
                                           const core::Clock& clock);

}  // namespace klutch::compose
