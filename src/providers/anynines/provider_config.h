// ProviderConfigs of provider-anynines (data-services.md §4.5, §4.6): what one says once its
// credentials are resolved (LoadProviderConfig), the clients built from it (Connections), the
// usage records managed resources leave on it (TrackUsage), and its controller: health checks
// into status.health with CheckSuccess / CheckFailure Events, status.users and the
// `in-use.crossplane.io` finalizer that keeps a used ProviderConfig from going away.
//
// Credential values (Secret keys, environment variables, files) are whitespace-trimmed.
// Annotations beyond upstream: kAnnotationMaxCredentialAge and
// kAnnotationCredentialGracePeriod (context.h) configure binding credential rotation.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/status.h"
#include "core/sync.h"
#include "providers/anynines/api.h"
#include "providers/anynines/backup_client.h"
#include "providers/anynines/context.h"
#include "providers/anynines/osb_client.h"
#include "reconcile/controller.h"

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

// The clients of each ProviderConfig, built on first use and kept while the ProviderConfig
// (its resourceVersion) and its resolved credentials stay the same; credentials are read again
// after `credentials_ttl`. Thread-safe.
class Connections {
 public:
  struct Connection {
    ProviderConfigSettings settings;
    std::shared_ptr<OsbClient> osb;
    std::shared_ptr<BackupClient> backup;
  };
  Connections(CredentialSources sources, const AnyninesProviderOptions& options,
              const core::Clock& clock);

  // The clients for `pc` (a ProviderConfig object); the errors of LoadProviderConfig and
  // ApiClient::New.
  core::Result<Connection> For(const Json& pc);
  // Forgets `name`'s credentials so the next For() reads them again (e.g. after a 401).
  void Invalidate(const std::string& name);

 private:
  struct Entry {
    std::string resource_version;
    core::MonoTime loaded;
    Connection connection;
  };
  const CredentialSources sources_;
  const AnyninesProviderOptions& options_;
  const core::Clock& clock_;
  core::Mutex mu_;
  std::map<std::string, Entry> entries_ GUARDED_BY(mu_);
};

// Makes sure a ProviderConfigUsage named after the MR's UID records that `mr` uses
// ProviderConfig `pc_name` (label crossplane.io/provider-config, controller-owned by the MR).
core::Status TrackUsage(Context& ctx, const Json& mr, const std::string& pc_name);

// The ProviderConfig controller's logic (wired in anynines.cc): for each ProviderConfig the
// usage count and finalizer, and the health check when due: health_interval after a success,
// health_retry_interval after a failure, at once when status.health.lastCheckTime is null or
// a resource found the service unreachable while it counted as healthy (RequestCheck, at most
// every 2 s). Thread-safe.
class ProviderConfigReconciler {
 public:
  explicit ProviderConfigReconciler(Context& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request);
  // Marks `name` for an early check; the caller queues it.
  void RequestCheck(const std::string& name);

 private:
  struct Health {
    bool checked = false;
    bool healthy = false;
    core::MonoTime at;
  };
  // Runs the check, writes status.health and the Event; returns the delay to the next check.
  std::chrono::milliseconds Check(const Json& pc, const Health& previous);

  Context& ctx_;
  core::Mutex mu_;
  std::map<std::string, Health> health_ GUARDED_BY(mu_);
  std::set<std::string> forced_ GUARDED_BY(mu_);
};

}  // namespace klutch::providers::anynines
