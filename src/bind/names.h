// The backend's own names, which nothing outside it reads: the field manager of its writes and
// the ResourceQuota it keeps per consumer. The names of the binding protocol (resources,
// annotations, labels, finalizers, object names) are in src/apis/klutch/.
// Constants only; thread-safe.
#pragma once

#include <string_view>

namespace klutch::bind {

// The field manager of the backend's writes.
inline constexpr std::string_view kFieldManager = "klutch-backend";
// The ResourceQuota the backend keeps in every consumer namespace (cluster and provider
// namespaces), labelled so its informer watches only these.
inline constexpr std::string_view kConsumerQuotaName = "klutch-consumer";
inline constexpr std::string_view kConsumerQuotaLabel = "klutch.anynines.com/consumer-quota";

}  // namespace klutch::bind
