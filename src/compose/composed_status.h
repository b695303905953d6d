// What a composed resource says about itself, read for its composite's Ready condition: the
// composite names each unready resource with the reason the resource gives, so the claim's
// `kubectl describe` shows why (issue #23), not only which. Pure functions of the object.
#pragma once

#include <string>

#include "machinery/object.h"

namespace klutch::compose {

// The message of the resource's Synced=False condition (an error reconciling it), else of its
// Ready=False condition (progress, or why it is unavailable); "" when neither says anything.
std::string UnreadyReason(const machinery::Json& composed);

// True when the resource reports an error rather than progress: Synced=False, or Ready=False
// with a reason other than Creating or Deleting (Unavailable, InUse, ...).
bool ComposedFailing(const machinery::Json& composed);

}  // namespace klutch::compose
