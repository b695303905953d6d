#include "compose/composed_status.h"

#include "reconcile/conditions.h"

namespace klutch::compose {

std::string UnreadyReason(const machinery::Json& composed) {
  for (const char* type : {"Synced", "Ready"}) {
    auto c = reconcile::FindCondition(composed, type);
    if (c && c->status == reconcile::kConditionFalse && !c->message.empty()) return c->message;
  }
  return "";
}

bool ComposedFailing(const machinery::Json& composed) {
  if (reconcile::IsConditionFalse(composed, "Synced")) return true;
  auto ready = reconcile::FindCondition(composed, "Ready");
  return ready && ready->status == reconcile::kConditionFalse && !ready->reason.empty() &&
         ready->reason != "Creating" && ready->reason != "Deleting";
}

}  // namespace klutch::compose
