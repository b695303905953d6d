// The clients of provider-anynines' ProviderConfigs (data-services.md §4.5): an OSB client
// and a backup-manager client per ProviderConfig, built from its resolved settings
// (provider_config.h) and reused while they stay the same. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "core/sync.h"
#include "providers/anynines/backup_client.h"
#include "providers/anynines/osb_client.h"
#include "providers/anynines/provider_config.h"
#include "providers/anynines_provider.h"

namespace klutch::providers::anynines {

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

}  // namespace klutch::providers::anynines
