#include "storage/revision_errors.h"

#include <fmt/format.h>

namespace klutch::storage {

core::Status TooOldRevision(int64_t requested, int64_t compacted) {
  return core::Status(core::Reason::kExpired,
                      fmt::format("too old resource version: {} ({})", requested, compacted));
}

core::Status TooLargeRevision(int64_t requested, int64_t current) {
  core::Status s(core::Reason::kTimeout,
                 fmt::format("Too large resource version: {}, current: {}", requested, current));
  auto& d = s.mutable_details();
  d.causes.push_back({"ResourceVersionTooLarge", "Too large resource version", ""});
  d.retry_after_seconds = 1;
  return s;
}

}  // namespace klutch::storage
