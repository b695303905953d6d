// provider-anynines: the managed resources of dataservices.anynines.com/v1 (ServiceInstance,
// ServiceBinding, Backup, Restore, ProviderConfig, ProviderConfigUsage) reconciled against any
// Open Service Broker and a9s Backup Manager over HTTP(S), as data-services.md §4 and §6 say
// (the code lives in anynines/).
//
//  * ServiceInstance: provider-chosen instance ID, provision / update (plan and a parameter
//    delta with nulls for removed keys) / deprovision, asynchronous operations followed through
//    last_operation, state from the a9s `GET /instances/{id}` (or, for brokers without that
//    extension, from the OSB fetch).
//  * ServiceBinding: broker binding with the MR's UID as binding ID, credentials flattened into
//    the connection Secret (writeConnectionSecretToRef, else `<claim-name>-creds` in the claim
//    namespace; type connection.crossplane.io/v1alpha1, controlled by the MR and deleted with
//    it), endpoints in status. Credential rotation when the ProviderConfig carries
//    `klutch.anynines.com/max-credential-age` (anynines/controllers.h).
//  * Backup, Restore: through the Backup Manager; restores cannot be deleted while queued or
//    running.
//  * ProviderConfig: health checks (status.health, CheckSuccess/CheckFailure Events), usage
//    records and the `in-use.crossplane.io` finalizer.
// Errors a user can act on (a broker's 4xx description, an unknown plan, an unreachable broker)
// show verbatim in the MR's Synced condition; anything else is logged and shown as "Internal
// error in provider". While a broker operation is in flight a resource is re-checked quickly
// (fast_poll_min doubling to fast_poll_max); in steady state every poll_interval.
//
// The kinds' CRDs come from the provider's package; until all of them are Established this
// provider only watches CustomResourceDefinitions, so `klutch manager` starts without them.
// Controllers run while the manager leads. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "reconcile/manager.h"

namespace klutch::providers {

struct AnyninesProviderOptions {
  int workers = 4;  // per controller
  // Steady-state re-check of every resource (the manager's --poll-interval).
  std::chrono::milliseconds poll_interval{60000};
  // Re-checks while a broker or backup manager operation is in flight.
  std::chrono::milliseconds fast_poll_min{50};
  std::chrono::milliseconds fast_poll_max{1000};
  // Backoff of a failing resource: from failure_backoff_min doubling to poll_interval.
  std::chrono::milliseconds failure_backoff_min{200};
  // ProviderConfig health checks (§4.6): after a success, after a failure, bound per check.
  std::chrono::milliseconds health_interval{180000};
  std::chrono::milliseconds health_retry_interval{30000};
  std::chrono::milliseconds health_timeout{10000};
  // Bounds one request to a broker or backup manager.
  std::chrono::milliseconds request_timeout{60000};
  std::chrono::milliseconds catalog_ttl{15000};
  // How long credentials read from a ProviderConfig's Secret / environment / file are reused
  // before they are read again (a changed ProviderConfig is re-read at once).
  std::chrono::milliseconds credentials_ttl{30000};
  std::string component = "klutch-manager";  // Events' source
  std::string instance;
  const core::Clock* clock = nullptr;  // nullptr: real time
  // Environment lookup for `providerCredentials.source: Environment` (nullptr: ::getenv).
  std::function<const char*(const char*)> getenv;
};

class AnyninesProvider {
 public:
  // `manager` must outlive the provider.
  AnyninesProvider(reconcile::Manager& manager, AnyninesProviderOptions options);
  ~AnyninesProvider();  // Stop()
  AnyninesProvider(const AnyninesProvider&) = delete;
  AnyninesProvider& operator=(const AnyninesProvider&) = delete;

  // Registers the CRD watch that starts the controllers; before manager.Start().
  core::Status Setup();
  // Stops the controllers and their informers (after the manager stopped its own).
  // Idempotent.
  void Stop();

  // True while the managed-resource controllers run (their CRDs are Established).
  bool running() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::providers
