// LeaderElector: one active replica among several, decided by a coordination.k8s.io/v1
// Lease, with the rules of client-go's leader election.
//
// A candidate takes the lease when it is free (no holder) or expired: its holder has not
// renewed it for leaseDurationSeconds as measured on the candidate's own clock since it
// last saw the lease change (so clock skew between replicas does not matter). The leader
// renews every retry_period; if it cannot renew for renew_deadline it stops leading.
// Writes carry the lease's resourceVersion, so two candidates never both win. On Stop() a
// leader releases the lease (empty holder, duration 1 s) so a successor need not wait.
// All waiting and expiry is measured on the injected core::Clock (its monotonic face; the
// wall face stamps acquireTime/renewTime), so tests run elections in simulated time.
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "client/dynamic.h"
#include "core/clock.h"
#include "core/sync.h"

namespace klutch::reconcile {

struct LeaderElectionOptions {
  std::string lease_namespace = "kube-system";
  std::string lease_name;
  std::string identity;  // unique per replica; default: hostname + "_" + random suffix
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  std::function<void()> on_started_leading;  // called on the elector's thread
  std::function<void()> on_stopped_leading;  // called when leadership is lost or released
  // Called when this replica becomes the holder (after the lease write succeeded).
  std::function<void(const std::string& holder)> on_new_leader;
};

class LeaderElector {
 public:
  LeaderElector(client::RestClient& rest, LeaderElectionOptions options,
                const core::Clock& clock = core::RealClock::Get());
  ~LeaderElector();  // Stop()

  // Starts campaigning on a thread of its own.
  void Start();
  // Stops campaigning; a leader releases the lease and calls on_stopped_leading first.
  void Stop();

  // True from the lease's acquisition until it is released or lost; it turns true just before
  // on_started_leading runs and false just before on_stopped_leading does.
  bool IsLeader() const;
  const std::string& identity() const { return options_.identity; }

 private:
  void Run() EXCLUDES(mu_);
  // One attempt to acquire or renew: true when we hold the lease afterwards.
  bool TryAcquireOrRenew();
  void Release();
  // Waits `d` on the clock unless stopped first; false when stopping.
  bool Wait(std::chrono::milliseconds d) EXCLUDES(mu_);

  std::unique_ptr<client::RestClient> lease_client_;
  client::ResourceClient leases_;
  LeaderElectionOptions options_;
  const core::Clock& clock_;

  mutable core::Mutex mu_;
  core::CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool leading_ GUARDED_BY(mu_) = false;
  std::thread thread_ GUARDED_BY(mu_);

  // Only the elector's thread touches these: what we last saw of the lease, and when (our
  // clock), for the expiry rule.
  std::string observed_record_;
  core::MonoTime observed_at_;
  std::string observed_rv_;
  bool taken_by_other_ = false;  // the last attempt saw another live holder
};

}  // namespace klutch::reconcile
