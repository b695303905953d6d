// Credentials: what a REST client presents to the API server on each request, kept current.
//
// One Credentials serves one RestConfig. The material comes from, in order of precedence:
//  - an exec plugin (client.authentication.k8s.io ExecCredential): run on first use, its
//    result cached until status.expirationTimestamp (by the injected Clock) or until
//    Invalidate(), which the REST client calls on a 401; a token or a cert/key pair from the
//    plugin replaces the configured one;
//  - a token file: re-read when it changes (its mtime/size/inode are checked at most once a
//    second, and it is re-read at least once a minute); while it cannot be read the last
//    good token (or the static token) is used;
//  - the static token, client certificate/key and basic-auth username/password.
// Thread-safe: any number of threads may call Current() and Invalidate(); at most one plugin
// runs at a time and concurrent callers share its result.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "client/kubeconfig.h"
#include "core/clock.h"
#include "core/status.h"
#include "core/sync.h"

namespace klutch::client {

// What to present on a request right now.
struct AuthMaterial {
  std::string bearer_token;
  std::string cert_pem, key_pem;
  std::string username, password;
  bool operator==(const AuthMaterial&) const = default;
};

class Credentials {
 public:
  // Checks the configuration (exec: a supported apiVersion, a command, an interactiveMode we
  // can honour; a token file must be readable unless a static token backs it up) ->
  // kInvalid otherwise. `clock` must outlive the Credentials.
  static core::Result<std::unique_ptr<Credentials>> For(
      const RestConfig& config, const core::Clock& clock = core::RealClock::Get());

  Credentials(const Credentials&) = delete;
  Credentials& operator=(const Credentials&) = delete;

  // The material to present now. May run the exec plugin (blocking up to its timeout) or read
  // the token file. A plugin that cannot be started, fails, times out or prints something
  // that is not a usable ExecCredential -> kUnauthorized whose message says why (with the
  // plugin's stderr and install hint); an unreadable token file with nothing to fall back to
  // -> kUnauthorized.
  core::Result<AuthMaterial> Current();

  // Forgets cached plugin output (the next Current() runs the plugin again) and re-checks the
  // token file on the next Current(). For a 401 response.
  void Invalidate();
  // Like Invalidate(), but only when `rejected` is still what Current() hands out, so that
  // several requests failing with the same stale credentials cause one plugin run, not many.
  void Invalidate(const AuthMaterial& rejected);

  // True when Current() can change over time (exec plugin or token file), i.e. a retry after
  // Invalidate() may succeed.
  bool IsDynamic() const { return config_.exec.has_value() || !config_.bearer_token_file.empty(); }

 private:
  struct FileState {
    bool valid = false;
    int64_t mtime_ns = 0;
    int64_t size = 0;
    uint64_t inode = 0;
    uint64_t device = 0;
  };
  struct ExecCache {
    AuthMaterial material;
    std::optional<core::SystemTime> expiry;
  };

  Credentials(RestConfig config, const core::Clock& clock);
  AuthMaterial Static() const;
  // Static() with what the plugin printed folded in.
  AuthMaterial WithPlugin(const AuthMaterial& plugin) const;
  bool ExecCacheFresh() const REQUIRES(mu_);
  void InvalidateLocked() REQUIRES(mu_);
  core::Result<AuthMaterial> CurrentFromExec();
  core::Result<AuthMaterial> CurrentFromTokenFile();
  // Reads the token file when due; keeps the last good token on failure.
  core::Status RefreshTokenFile() REQUIRES(mu_);

  const RestConfig config_;
  const core::Clock& clock_;

  core::Mutex run_mu_;  // serializes plugin runs; taken before mu_
  core::Mutex mu_;
  std::optional<ExecCache> exec_cache_ GUARDED_BY(mu_);
  std::string file_token_ GUARDED_BY(mu_);
  FileState file_state_ GUARDED_BY(mu_);
  std::optional<core::SystemTime> last_stat_ GUARDED_BY(mu_);
  std::optional<core::SystemTime> last_read_ GUARDED_BY(mu_);
};

// Runs an exec credential plugin once, the way Credentials does, and returns what it printed
// as AuthMaterial plus its expiry (nullopt: valid until rejected). `cluster` supplies
// KUBERNETES_EXEC_INFO's spec.cluster when exec.provide_cluster_info is set. Errors as
// Credentials::Current().
struct ExecResult {
  AuthMaterial material;
  std::optional<core::SystemTime> expiry;
};
core::Result<ExecResult> RunExecPlugin(const ExecConfig& exec, const RestConfig& cluster);

}  // namespace klutch::client
