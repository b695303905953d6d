// KonnectorRunner: the sandbox's stand-in for a kubelet, for exactly one kind of Pod. It
// watches the Deployments of one cluster and, for each Deployment with a container named
// `konnector` (kubectl bind's deploy/konnector, or the bind backend's control-plane-mode
// konnectors), runs `klutch konnector` as a local process with that container's arguments
// and environment, as a Pod of the Deployment would run (whatever the container's command,
// and with the kubeconfig below replacing any the arguments name):
//  - a kubeconfig standing in for the mounted service account: the cluster's address and CA,
//    and a token of the Deployment's service account from the TokenRequest API, renewed
//    before it expires (the file is rewritten; the konnector re-reads it);
//  - POD_NAME / POD_NAMESPACE, literal env values, $(VAR) references in args expanded;
//  - probe and metrics addresses moved to free loopback ports (several konnectors share the
//    host).
// One process per replica (spec.replicas, default 1, at most 5), as a ReplicaSet would run
// pods: replica i is process `konnector-<cluster>-<ns>-<name>-<i>` with POD_NAME
// `<name>-sandbox-<i>`, its identity in the leader election, so one replica holds the Lease
// and runs the controllers while the others wait as warm standbys. The Deployment's status is
// what the deployment controller would write from the kubelet's probes: replicas and
// updatedReplicas count the processes, readyReplicas/availableReplicas those whose /readyz
// answers 200 (a standby is ready once its caches are in, as in Kubernetes), so a healthy
// konnector reads 2/2 and a hung, dead or starting replica shows as unready until it answers
// (probed every 10 s, every second while a Deployment is not fully ready). A
// changed pod template restarts every replica, fewer replicas stop the highest ones, a
// deleted Deployment (or replicas 0) stops them all, and a process that dies is restarted by
// the ProcessSet. Thread-safe.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "client/rest_client.h"
#include "core/status.h"
#include "sandbox/processes.h"

namespace klutch::sandbox {

struct KonnectorRunnerOptions {
  std::string cluster_name;   // "app-1", "control-plane": names processes and files
  std::string klutch_binary;  // the `klutch` executable to run
  std::filesystem::path dir;  // tokens, kubeconfigs and logs go here (created)
  std::chrono::seconds token_ttl{3600};
};

class KonnectorRunner {
 public:
  // `admin` reaches the watched cluster with rights to read Deployments and request tokens;
  // `processes` runs the konnectors. Both must outlive the runner.
  KonnectorRunner(client::RestClient& admin, ProcessSet& processes, KonnectorRunnerOptions options);
  ~KonnectorRunner();  // Stop()
  KonnectorRunner(const KonnectorRunner&) = delete;
  KonnectorRunner& operator=(const KonnectorRunner&) = delete;

  // Starts watching; returns once the first list is in (or after 30 s).
  void Start();
  // Stops watching and ends the konnectors it started. Idempotent.
  void Stop();
  // How many konnector processes (replicas of all Deployments) it runs now.
  int Running() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::sandbox
