// AccessControl: authentication, impersonation, authorization and audit for the API server.
//
// Owns the authenticator chain (client certificates, --token-auth-file, service-account JWTs
// signed with the server's key or a --service-account-key-file key, OIDC, whose discovery is
// fetched in the background at start), the service-account token issuer, the RBAC authorizer
// (members of system:masters are allowed everything first, as kube-apiserver's
// privileged-group authorizer does) with its escalation check for RBAC writes, and the audit
// log (one JSON line per request). Start seeds the bootstrap RBAC policy, lists the RBAC
// objects at one storage revision and follows every storage change after it with one Store
// watch: RBAC objects feed the authorizer (one rebuild per storage batch); ServiceAccount and
// token Secret changes drop cached service-account token results. WaitForRevision lets the
// handler answer such writes once the caches reflect them (bounded: on a timeout the write
// stands and the answer carries a warning). 401 and 403 answers carry the Status
// kube-apiserver sends. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apiserver/request_info.h"
#include "apiserver/rest_storage.h"
#include "auth/oidc.h"
#include "auth/rbac.h"
#include "auth/service_account.h"
#include "auth/user.h"
#include "http/message.h"

namespace klutch::apiserver {

struct AccessOptions {
  // Requests without credentials become system:anonymous (group system:unauthenticated) and
  // are authorized like any other. Off: they get 401, except for the health and version
  // endpoints, which anonymous callers may always read (as kube-apiserver's
  // AnonymousAuthConfigurableEndpoints allows).
  bool anonymous = false;
  std::string token_auth_file;
  std::optional<auth::OidcOptions> oidc;
  std::string service_account_issuer = "https://kubernetes.default.svc.cluster.local";
  std::vector<std::string> api_audiences;  // empty: {service_account_issuer}
  // PEM private key signing service-account tokens (default: pki/sa.key, generated).
  std::string service_account_signing_key_file;
  // More PEM public keys (or certificates) whose tokens are accepted.
  std::vector<std::string> service_account_key_files;
  std::chrono::seconds service_account_min_expiration = std::chrono::minutes(10);
  std::chrono::seconds service_account_max_expiration = std::chrono::hours(48);
  std::string audit_log_path;  // JSON lines, one per request; "" = no audit log
  // How long WaitForRevision waits for the authorizer and token caches before it gives up.
  std::chrono::milliseconds settle_timeout = std::chrono::seconds(2);
};

// What a request's audit event records beyond its RequestInfo, learned while serving it.
struct AuditFacts {
  // The object a create named in its body, or the name it got (generateName's result) once
  // created: kube-apiserver fills objectRef.name from the request object.
  std::string name;
};

// Who a request is from, after impersonation.
struct Caller {
  auth::UserInfo user;
  std::optional<auth::UserInfo> impersonator;  // the authenticated user, when impersonating
};

class AccessControl {
 public:
  // Loads or generates the service-account key under `pki_dir`, loads the token file, seeds
  // the bootstrap policy and starts the authorizer's feed. kBadRequest naming the flag for
  // bad configuration.
  static core::Result<std::unique_ptr<AccessControl>> Start(const AccessOptions& options,
                                                            const std::string& pki_dir,
                                                            RestStorage& rest);
  ~AccessControl();

  // The caller of a request: credentials, then Impersonate-* headers (authorized with the
  // impersonate verb). 401 for missing or bad credentials; 403 when impersonation is not
  // allowed; 400 for malformed impersonation headers.
  // When impersonation is refused, `refused` (optional) receives the authenticated caller,
  // for the audit log.
  core::Result<Caller> Authenticate(const http::Request& request, Caller* refused = nullptr);
  // Whether Authenticate can answer without slow work (no bearer token, or one whose result
  // is cached): only such requests may run on an I/O thread.
  bool QuickToAuthenticate(const http::Request& request);
  // The authorizer's answer: system:masters, else RBAC.
  auth::Decision Decide(const auth::Attributes& attributes);
  // Every rule that applies to `user` in `ns` (SelfSubjectRulesReview).
  std::vector<auth::PolicyRule> RulesFor(const auth::UserInfo& user, std::string_view ns);
  // Admission for writes of Roles, ClusterRoles and their bindings: the RBAC escalation check.
  // `old` is the stored object on updates.
  core::Status AdmitRbac(const auth::UserInfo& user, const Json& object, const Json* old);
  // Waits until the authorizer and token caches reflect storage revision `revision`, so a
  // client that changed RBAC objects or service accounts sees the effect on its next request.
  // Ok once they do. kTimeout when they have not within options().settle_timeout: the write
  // stands, but requests made right after it may still be authorized as before; the message
  // (naming the revision) is meant for the client as a warning. Each timeout is logged and
  // counted in settle_timeouts().
  core::Status WaitForRevision(int64_t revision);
  // How many WaitForRevision calls have timed out since start (for /metrics).
  uint64_t settle_timeouts() const;
  // Test seam: while held, the caches' feed keeps the storage changes it receives instead of
  // applying them, so they stay behind storage; releasing applies what was kept, in order,
  // before it returns.
  void HoldFeedForTesting(bool hold);

  // One audit event (JSON line) for a finished request, when the audit log is on. `facts`
  // (optional) adds what the handler learned (the name of a created object).
  void Audit(const http::Request& request, const RequestInfo& info, const Caller* caller, int code,
             std::string_view decision, std::string_view reason, const AuditFacts* facts = nullptr);

  auth::Authenticator& authenticator();
  auth::ServiceAccountTokens& tokens();
  const AccessOptions& options() const;

  class Impl;

 private:
  explicit AccessControl(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The attributes the authorizer sees for `info` done by `user` (which must outlive them).
auth::Attributes ToAttributes(const auth::UserInfo& user, const RequestInfo& info);

// authentication.k8s.io/v1 UserInfo (username, uid, groups, extra; empty fields omitted), as
// reviews and audit events carry it.
Json UserInfoJson(const auth::UserInfo& user);

// The Forbidden status kube-apiserver answers when `user` may not do `info`.
core::Status ForbiddenFor(const auth::UserInfo& user, const RequestInfo& info,
                          std::string_view reason);

}  // namespace klutch::apiserver
