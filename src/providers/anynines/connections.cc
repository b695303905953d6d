#include "providers/anynines/connections.h"

#include "machinery/object.h"

namespace klutch::providers::anynines {

Connections::Connections(CredentialSources sources, const AnyninesProviderOptions& options,
                         const core::Clock& clock)
    : sources_(std::move(sources)), options_(options), clock_(clock) {}

core::Result<Connections::Connection> Connections::For(const Json& pc) {
  const std::string name = machinery::Name(pc);
  const std::string rv = machinery::ResourceVersion(pc);
  {
    core::MutexLock lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end() && it->second.resource_version == rv &&
        clock_.MonotonicNow() - it->second.loaded < options_.credentials_ttl) {
      return it->second.connection;
    }
  }
  KLUTCH_ASSIGN_OR_RETURN(ProviderConfigSettings settings,
                          LoadProviderConfig(pc, sources_, options_.request_timeout));
  core::MutexLock lock(mu_);
  Entry& e = entries_[name];
  if (!e.connection.osb || !(e.connection.settings.endpoint == settings.endpoint)) {
    // New credentials or TLS settings: new clients (and connection pools). Resources still
    // holding the old ones finish their requests with them.
    KLUTCH_ASSIGN_OR_RETURN(
        std::unique_ptr<OsbClient> osb,
        OsbClient::New(settings.endpoint, {.catalog_ttl = options_.catalog_ttl, .clock = &clock_}));
    KLUTCH_ASSIGN_OR_RETURN(std::unique_ptr<BackupClient> backup,
                            BackupClient::New(settings.endpoint));
    e.connection.osb = std::move(osb);
    e.connection.backup = std::move(backup);
  }
  e.connection.settings = std::move(settings);
  e.resource_version = rv;
  e.loaded = clock_.MonotonicNow();
  return e.connection;
}

void Connections::Invalidate(const std::string& name) {
  core::MutexLock lock(mu_);
  auto it = entries_.find(name);
  if (it != entries_.end()) it->second.resource_version.clear();
}

}  // namespace klutch::providers::anynines
