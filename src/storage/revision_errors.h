// The two revision errors every backend reports, worded as kube-apiserver words them so the
// API layer can pass them through.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace klutch::storage {

// kExpired (410): "too old resource version: 5 (12)".
core::Status TooOldRevision(int64_t requested, int64_t compacted);
// kTimeout (504): "Too large resource version: 50, current: 12".
core::Status TooLargeRevision(int64_t requested, int64_t current);

}  // namespace klutch::storage
