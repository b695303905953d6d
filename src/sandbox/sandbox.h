// Sandbox: the whole local Klutch behind `klutch up` (docs/architecture.md "Sandbox"). Under
// one state directory it runs, as processes on loopback:
//   - a Control Plane API server and N App Cluster API servers (`klutch apiserver`);
//   - an OpenID Connect provider (Debian's glewlwyd) with a demo user;
//   - on the Control Plane: `klutch manager` with the Klutch package (deploy/package,
//     deploy/provider-anynines) applied, `klutch broker` with its ProviderConfigs, and
//     `klutch backend` with the APIServiceExportTemplates of the Klutch APIs;
//   - a KonnectorRunner per cluster, which runs a konnector for each konnector Deployment
//     (`kubectl bind` creates them in App Clusters; the backend on the Control Plane in
//     control-plane mode).
// App Cluster 1 is bound at first start the way a platform operator scripts it (`kubectl bind
// apiservice` with a provider kubeconfig); the others are left for `kubectl bind`. Everything
// keeps its state under the directory, so a second start resumes; a second sandbox on the same
// directory is refused while one runs. Not thread-safe: one owner calls Start and Stop.
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace klutch::sandbox {

struct SandboxOptions {
  std::filesystem::path state_dir;
  int app_clusters = 2;
  // The binaries to run; "" = next to the running executable (/proc/self/exe).
  std::string klutch_binary;
  std::string kubectl_bind_binary;
  std::ostream* log = nullptr;  // progress lines; nullptr = quiet
  // Polled while starting; once true, Start stops what it started and fails (Ctrl-C).
  std::function<bool()> cancelled;
};

// What a user (or a test) needs to reach the sandbox.
struct SandboxInfo {
  std::filesystem::path control_plane_kubeconfig;
  std::vector<std::filesystem::path> app_kubeconfigs;  // [0] is App Cluster 1
  std::string backend_url;                             // https://127.0.0.1:PORT
  std::string export_url;                              // backend_url + "/export"
  std::filesystem::path ca_file;                       // signs the backend and the IdP
  std::string oidc_issuer;
  std::string demo_user, demo_password;
};

class Sandbox {
 public:
  // Starts (or resumes) everything and returns once App Cluster 1 is ready for claims.
  // kAlreadyExists when another sandbox runs on the directory (naming its PID); other errors
  // name the component that failed and where its log is. On error everything started is
  // stopped again.
  static core::Result<std::unique_ptr<Sandbox>> Start(SandboxOptions options);
  ~Sandbox();  // Stop()
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  const SandboxInfo& info() const;
  // The next steps, printed by `klutch up` once the sandbox is ready.
  std::string Banner() const;
  // Stops every process it started, data-service instances included (the broker stops them).
  // Idempotent.
  void Stop();
  // SIGKILLs every process it started, at once (a second Ctrl-C), also while Stop runs on
  // another thread. The broker's data-service instances are left running; the next start's
  // broker adopts them.
  void Kill();

  class Impl;

 private:
  explicit Sandbox(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::sandbox
