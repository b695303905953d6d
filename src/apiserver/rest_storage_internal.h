// What the sources of RestStorage (rest_storage*.cc) share: the conflict wording, the update
// retry bound, and small helpers for stored objects and field managers. Not a public API.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "apiserver/rest_storage.h"
#include "core/clock.h"
#include "core/status.h"
#include "machinery/json.h"
#include "machinery/managed_fields.h"

namespace klutch::apiserver::internal {

inline constexpr std::string_view kModified =
    "the object has been modified; please apply your changes to the latest version and try "
    "again";
// Compare-and-swap attempts of one update or delete before it answers 409.
inline constexpr int kMaxUpdateAttempts = 32;

// The clock's time in RFC 3339.
std::string Now(const core::Clock& clock);

// The stored form of an object: resourceVersion stamped at commit time.
std::function<std::string(int64_t, int64_t)> Stamp(std::shared_ptr<Json> object);

// A stored object, parsed (kInternalError when it does not parse).
core::Result<Json> Parse(const std::shared_ptr<const std::string>& raw);

// Copies `r`'s apiVersion onto an object read from storage (CRDs with several versions and
// conversion None).
void ToRequestedVersion(const ResourceInfo& r, Json& object);

bool IsNamespaces(const ResourceInfo& r);
bool IsResourceQuotas(const ResourceInfo& r);

// The managedFields entry of a write by `options.field_manager`.
machinery::ManagerInfo Who(const ResourceInfo& r, const WriteOptions& options,
                           const core::Clock& clock, std::string operation);

}  // namespace klutch::apiserver::internal
