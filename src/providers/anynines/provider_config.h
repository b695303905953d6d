// ProviderConfigs of provider-anynines (data-services.md §4.5, §4.6): what one says once its
// credentials are resolved (LoadProviderConfig) and the usage records managed resources leave
// on it (TrackUsage). The clients built from one: connections.h; its controller (health
// checks, status.users, the `in-use.crossplane.io` finalizer): provider_config_reconciler.h.
//
// Credential values (Secret keys, environment variables, files) are whitespace-trimmed.
// Annotations beyond upstream: kAnnotationMaxCredentialAge and
// kAnnotationCredentialGracePeriod (context.h) configure binding credential rotation.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "core/status.h"
#include "providers/anynines/api_client.h"
#include "providers/anynines/context.h"

namespace klutch::providers::anynines {

inline constexpr std::string_view kServiceTypeBroker = "servicebroker";
inline constexpr std::string_view kServiceTypeBackupManager = "backupmanager";
inline constexpr std::string_view kDefaultHealthEndpoint = "/instances";

struct ProviderConfigSettings {
  std::string name;
  std::string service_type;     // kServiceTypeBroker or kServiceTypeBackupManager
  std::string health_endpoint;  // default kDefaultHealthEndpoint
  ServiceEndpoint endpoint;
  std::chrono::milliseconds max_credential_age{0};  // 0: no rotation
  std::chrono::milliseconds credential_grace_period{0};
};

// Where credential values come from (tests inject fakes).
struct CredentialSources {
  // The Secret namespace/name as JSON (data base64-encoded).
  std::function<core::Result<Json>(const std::string& ns, const std::string& name)> get_secret;
  std::function<const char*(const char*)> getenv;                               // nullptr: ::getenv
  std::function<core::Result<std::string>(const std::string& path)> read_file;  // nullptr: disk
};

// Reads a ProviderConfig: url, serviceType, healthCheckEndpoint, providerCredentials
// (source Secret / Environment / Filesystem / None; username and password), tls (caBundleSecretRef
// with key default ca.crt, insecureSkipVerify, overrideServerName) and the rotation
// annotations. UserErrors naming the field for anything missing or malformed.
core::Result<ProviderConfigSettings> LoadProviderConfig(const Json& pc,
                                                        const CredentialSources& sources,
                                                        std::chrono::milliseconds request_timeout);

// Makes sure a ProviderConfigUsage named after the MR's UID records that `mr` uses
// ProviderConfig `pc_name` (label crossplane.io/provider-config, controller-owned by the MR).
core::Status TrackUsage(Context& ctx, const Json& mr, const std::string& pc_name);

}  // namespace klutch::providers::anynines
