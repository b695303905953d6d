// Discovery documents built from the Registry: aggregated discovery v2
// (APIGroupDiscoveryList for /api and /apis), the legacy APIVersions / APIGroupList /
// APIGroup / APIResourceList documents, and the server version. Thread-safe.
#pragma once

#include <string>

#include "apiserver/resource.h"

namespace klutch::apiserver {

inline constexpr const char* kAggregatedDiscoveryType =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
inline constexpr const char* kAggregatedDiscoveryTypeBeta =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

// Which aggregated discovery version the Accept header asks for: "v2", "v2beta1" or "".
std::string AggregatedDiscoveryVersion(std::string_view accept);

// Aggregated discovery for the core group (`legacy` true, /api) or the named groups (/apis).
Json AggregatedDiscovery(const Registry& registry, bool legacy, std::string_view version);
Json LegacyApiVersions(std::string_view server_address);
Json LegacyApiGroupList(const Registry& registry);
// nullopt-like null Json when the group is not served.
Json LegacyApiGroup(const Registry& registry, std::string_view group);
Json LegacyResourceList(const Registry& registry, std::string_view group, std::string_view version);

}  // namespace klutch::apiserver
