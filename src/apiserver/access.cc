#include "apiserver/access.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "auth/bootstrap_policy.h"
#include "core/log.h"
#include "core/random.h"
#include "core/strings.h"
#include "core/sync.h"
#include "machinery/object.h"

namespace klutch::apiserver {

namespace fs = std::filesystem;
using machinery::Find;
using machinery::GetString;

namespace {

constexpr std::string_view kRbacPrefix = "/registry/rbac.authorization.k8s.io/";
constexpr std::string_view kServiceAccountPrefix = "/registry/core/serviceaccounts/";
constexpr std::string_view kSecretPrefix = "/registry/core/secrets/";

core::Result<std::string> ReadFile(const std::string& path, std::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::BadRequest(fmt::format("{} {}: cannot read", flag, path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool IsPublicPath(std::string_view path) {
  return path == "/healthz" || path == "/livez" || path == "/readyz" || path == "/version" ||
         path.starts_with("/healthz/") || path.starts_with("/livez/") ||
         path.starts_with("/readyz/");
}

core::Status Unauthorized() { return core::Status(core::Reason::kUnauthorized, "Unauthorized"); }

// "ip:port" (as the transport records the peer) -> "ip": audit events list addresses only, as
// kube-apiserver's sourceIPs do.
std::string SourceIp(std::string_view remote) {
  auto colon = remote.rfind(':');
  return std::string(colon == std::string_view::npos ? remote : remote.substr(0, colon));
}

}  // namespace

auth::Attributes ToAttributes(const auth::UserInfo& user, const RequestInfo& info) {
  auth::Attributes a;
  a.user = &user;
  a.verb = info.verb;
  a.resource_request = info.resource_request;
  a.ns = info.ns;
  a.api_group = info.api_group;
  a.api_version = info.api_version;
  a.resource = info.resource;
  a.subresource = info.subresource;
  a.name = info.name;
  a.path = info.path;
  return a;
}

Json UserInfoJson(const auth::UserInfo& u) {
  Json j = {{"username", u.name}};
  if (!u.uid.empty()) j["uid"] = u.uid;
  if (!u.groups.empty()) j["groups"] = u.groups;
  if (!u.extra.empty()) j["extra"] = u.extra;
  return j;
}

core::Status ForbiddenFor(const auth::UserInfo& user, const RequestInfo& info,
                          std::string_view reason) {
  std::string why;
  if (!info.resource_request) {
    why = fmt::format("User {} cannot {} path {}", core::GoQuote(user.name), info.verb,
                      core::GoQuote(info.path));
  } else {
    std::string resource = info.resource;
    if (!info.subresource.empty()) resource += "/" + info.subresource;
    if (!info.ns.empty()) {
      why = fmt::format("User {} cannot {} resource {} in API group {} in the namespace {}",
                        core::GoQuote(user.name), info.verb, core::GoQuote(resource),
                        core::GoQuote(info.api_group), core::GoQuote(info.ns));
    } else {
      why = fmt::format("User {} cannot {} resource {} in API group {} at the cluster scope",
                        core::GoQuote(user.name), info.verb, core::GoQuote(resource),
                        core::GoQuote(info.api_group));
    }
  }
  if (!reason.empty()) why += fmt::format(": {}", reason);
  core::Details d;
  d.name = info.name;
  d.group = info.api_group;
  d.kind = info.resource;
  std::string qualified = info.resource;
  if (!info.api_group.empty() && !qualified.empty()) qualified += "." + info.api_group;
  std::string message;
  if (!info.resource_request || qualified.empty()) {
    message = "forbidden: " + why;
  } else if (!info.name.empty()) {
    message = fmt::format("{} {} is forbidden: {}", qualified, core::GoQuote(info.name), why);
  } else {
    message = fmt::format("{} is forbidden: {}", qualified, why);
  }
  return core::Status(core::Reason::kForbidden, std::move(message), std::move(d));
}

// Reads ServiceAccounts and Secrets for token validation straight from storage.
class StorageLookup final : public auth::ServiceAccountLookup {
 public:
  explicit StorageLookup(RestStorage& rest) : rest_(rest) {}

  std::optional<std::string> ServiceAccountUid(std::string_view ns,
                                               std::string_view name) override {
    auto r = rest_.registry().Find("", "v1", "serviceaccounts");
    if (!r) return std::nullopt;
    auto obj = rest_.Get(*r, ns, name);
    if (!obj.ok() || machinery::IsBeingDeleted(*obj)) return std::nullopt;
    return machinery::Uid(*obj);
  }

  std::optional<Secret> GetSecret(std::string_view ns, std::string_view name) override {
    auto r = rest_.registry().Find("", "v1", "secrets");
    if (!r) return std::nullopt;
    auto obj = rest_.Get(*r, ns, name);
    if (!obj.ok() || machinery::IsBeingDeleted(*obj)) return std::nullopt;
    Secret s;
    s.uid = machinery::Uid(*obj);
    s.type = GetString(*obj, {"type"});
    s.service_account_name =
        GetString(*obj, {"metadata", "annotations", "kubernetes.io/service-account.name"});
    if (auto token = core::Base64Decode(GetString(*obj, {"data", "token"}))) s.token = *token;
    return s;
  }

 private:
  RestStorage& rest_;
};

class AccessControl::Impl {
 public:
  Impl(AccessOptions options, RestStorage& rest) : options_(std::move(options)), rest_(rest) {}

  ~Impl() {
    watch_.reset();
    if (oidc_refresh_.joinable()) oidc_refresh_.join();
  }

  core::Status Start(const std::string& pki_dir) {
    authenticator_ = std::make_unique<auth::Authenticator>(
        auth::AuthenticatorOptions{.anonymous = options_.anonymous});
    if (!options_.token_auth_file.empty()) {
      KLUTCH_ASSIGN_OR_RETURN(auto file,
                              auth::TokenFileAuthenticator::Load(options_.token_auth_file));
      authenticator_->AddTokenAuthenticator(std::move(file));
    }
    if (options_.service_account_max_expiration < options_.service_account_min_expiration) {
      return core::BadRequest(
          "--service-account-max-token-expiration must not be below "
          "--service-account-min-token-expiration");
    }
    KLUTCH_ASSIGN_OR_RETURN(auth::SigningKey key, LoadSigningKey(pki_dir));
    std::vector<auth::PublicKey> extra;
    for (const auto& f : options_.service_account_key_files) {
      KLUTCH_ASSIGN_OR_RETURN(std::string pem, ReadFile(f, "--service-account-key-file"));
      auto keys = auth::PublicKeysFromPem(pem);
      if (!keys.ok()) {
        return core::BadRequest(
            fmt::format("--service-account-key-file {}: {}", f, keys.status().message()));
      }
      for (auto& k : *keys) extra.push_back(std::move(k));
    }
    lookup_ = std::make_unique<StorageLookup>(rest_);
    auto tokens = std::make_unique<auth::ServiceAccountTokens>(
        std::move(key), std::move(extra),
        auth::ServiceAccountTokenOptions{.issuer = options_.service_account_issuer,
                                         .api_audiences = options_.api_audiences,
                                         .min_expiration = options_.service_account_min_expiration,
                                         .max_expiration = options_.service_account_max_expiration},
        *lookup_);
    tokens_ = tokens.get();
    authenticator_->AddTokenAuthenticator(std::move(tokens));
    if (options_.oidc) {
      KLUTCH_ASSIGN_OR_RETURN(auto oidc, auth::OidcAuthenticator::New(*options_.oidc));
      auth::OidcAuthenticator* raw = oidc.get();
      authenticator_->AddTokenAuthenticator(std::move(oidc));
      // The provider may start after us: a failed first fetch is retried on the first token.
      oidc_refresh_ = std::thread([raw, issuer = options_.oidc->issuer_url] {
        auto st = raw->Refresh();
        if (!st.ok()) KLUTCH_LOG(kWarn, "auth", "OIDC issuer {}: {}", issuer, st.message());
      });
    }
    if (!options_.audit_log_path.empty()) {
      core::MutexLock lock(audit_mu_);
      audit_.open(options_.audit_log_path, std::ios::app | std::ios::binary);
      if (!audit_) {
        return core::BadRequest(
            fmt::format("--audit-log-path {}: cannot open for writing", options_.audit_log_path));
      }
      auditing_ = true;
    }
    KLUTCH_RETURN_IF_ERROR(SeedBootstrapPolicy());
    return StartFeed();
  }

  core::Result<auth::SigningKey> LoadSigningKey(const std::string& pki_dir) {
    std::string path = options_.service_account_signing_key_file;
    if (path.empty()) {
      path = (fs::path(pki_dir) / "sa.key").string();
      if (!fs::exists(path)) {
        KLUTCH_ASSIGN_OR_RETURN(auth::SigningKey key, auth::SigningKey::Generate());
        fs::path tmp = path + ".tmp";
        // Owner-only from the first byte: the file never exists with wider permissions.
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) return core::Internal(fmt::format("cannot write {}", tmp.string()));
        const std::string pem = key.PrivatePem();
        bool written = ::write(fd, pem.data(), pem.size()) == static_cast<ssize_t>(pem.size());
        written = ::fsync(fd) == 0 && written;
        ::close(fd);
        if (!written) return core::Internal(fmt::format("cannot write {}", tmp.string()));
        std::error_code ec;
        fs::rename(tmp, path, ec);
        if (ec) return core::Internal(fmt::format("cannot write {}: {}", path, ec.message()));
        return key;
      }
    }
    KLUTCH_ASSIGN_OR_RETURN(std::string pem, ReadFile(path, "--service-account-signing-key-file"));
    auto key = auth::SigningKey::FromPem(pem);
    if (!key.ok()) {
      return core::BadRequest(
          fmt::format("--service-account-signing-key-file {}: {}", path, key.status().message()));
    }
    return key;
  }

  core::Status SeedBootstrapPolicy() {
    for (Json obj : auth::BootstrapPolicy()) {
      auto r = rest_.registry().FindKind(auth::kRbacGroup, "v1", obj.value("kind", ""));
      if (!r) return core::Internal("bootstrap policy names an unknown kind");
      auto res =
          rest_.Create(*r, "", std::move(obj), WriteOptions{.field_manager = "klutch-apiserver"});
      if (!res.ok() && !core::IsAlreadyExists(res.status())) return res.status();
    }
    return core::Status::Ok();
  }

  // Lists the RBAC objects, then follows every change in storage from that revision: RBAC
  // objects feed the authorizer, ServiceAccount and Secret changes drop cached tokens.
  core::Status StartFeed() {
    // One list at one revision, so no change can fall between the snapshot and the watch.
    KLUTCH_ASSIGN_OR_RETURN(storage::ListResult list,
                            rest_.store().List({.prefix = std::string(kRbacPrefix)}));
    std::vector<Json> objects;
    for (const auto& kv : list.items) {
      auto obj = machinery::ParseJson(*kv.value);
      if (obj.ok()) objects.push_back(std::move(*obj));
    }
    rbac_.Replace(objects);
    {
      core::MutexLock lock(mu_);
      applied_ = list.revision;
    }
    KLUTCH_ASSIGN_OR_RETURN(
        watch_, rest_.store().Watch(
                    "/registry/", list.revision,
                    [this](const std::vector<storage::EventPtr>& events) { OnEvents(events); }));
    return core::Status::Ok();
  }

  // Runs on the store's writer thread: cheap checks, one RBAC rebuild per batch.
  void OnEvents(const std::vector<storage::EventPtr>& events) {
    core::MutexLock lock(feed_mu_);
    if (feed_held_) {
      held_.insert(held_.end(), events.begin(), events.end());
      return;
    }
    ApplyEvents(events);
  }

  void HoldFeed(bool hold) {
    core::MutexLock lock(feed_mu_);
    feed_held_ = hold;
    if (!hold && !held_.empty()) {
      ApplyEvents(held_);
      held_.clear();
    }
  }

  // Under feed_mu_, so batches apply one at a time and in order.
  void ApplyEvents(const std::vector<storage::EventPtr>& events) REQUIRES(feed_mu_) {
    std::vector<auth::RbacAuthorizer::Change> changes;
    bool accounts_changed = false;
    for (const auto& e : events) {
      const bool removed = e->type == storage::Event::Type::kDelete;
      if (e->key.starts_with(kRbacPrefix)) {
        const auto& bytes = e->value ? e->value : e->prev_value;
        if (!bytes) continue;
        auto obj = machinery::ParseJson(*bytes);
        if (obj.ok()) changes.push_back({std::move(*obj), removed});
      } else if (e->key.starts_with(kServiceAccountPrefix)) {
        accounts_changed = true;
      } else if (e->key.starts_with(kSecretPrefix)) {
        // Tokens depend on a Secret's existence (bound tokens) and on the token a
        // service-account-token Secret holds (legacy tokens): other Secret writes leave
        // cached results alone.
        accounts_changed =
            accounts_changed || removed || IsTokenSecret(e->value) || IsTokenSecret(e->prev_value);
      }
    }
    rbac_.Apply(changes);
    if (accounts_changed) authenticator_->InvalidateServiceAccountTokens();
    if (!events.empty()) {
      core::MutexLock lock(mu_);
      applied_ = std::max(applied_, events.back()->revision);
    }
    cv_.SignalAll();
  }

  static bool IsTokenSecret(const std::shared_ptr<const std::string>& bytes) {
    if (!bytes || bytes->find(auth::kServiceAccountTokenSecretType) == std::string::npos) {
      return false;
    }
    auto obj = machinery::ParseJson(*bytes);
    return obj.ok() && GetString(*obj, {"type"}) == auth::kServiceAccountTokenSecretType;
  }

  core::Status WaitForRevision(int64_t revision) {
    int64_t applied = 0;
    {
      core::MutexLock lock(mu_);
      const auto deadline = core::CondVar::DeadlineAfter(options_.settle_timeout);
      while (applied_ < revision) {
        if (!cv_.WaitUntil(mu_, deadline)) break;
      }
      if (applied_ >= revision) return core::Status::Ok();
      applied = applied_;
    }
    settle_timeouts_.fetch_add(1, std::memory_order_relaxed);
    KLUTCH_LOG(kWarn, "access",
               "authorization and token caches still at revision {} after {} ms waiting for "
               "revision {}: answering the write without them",
               applied, options_.settle_timeout.count(), revision);
    return core::Status(
        core::Reason::kTimeout,
        fmt::format("the authorization cache has not caught up with this write (revision {}) "
                    "yet: requests made right after it may still be authorized as before it",
                    revision));
  }

  auth::Decision Decide(const auth::Attributes& a) {
    // kube-apiserver authorizes system:masters before any other authorizer, so the group
    // keeps its power even when the RBAC objects are broken or missing.
    if (a.user && a.user->InGroup(auth::kMastersGroup)) return {true, ""};
    return rbac_.Authorize(a);
  }

  core::Result<Caller> Authenticate(const http::Request& req, Caller* refused) {
    auth::Credentials c;
    if (req.client_certificate) {
      c.certificate_cn = &req.client_certificate->common_name;
      c.certificate_organizations = &req.client_certificate->organizations;
    }
    c.authorization = req.headers.Get("Authorization");
    c.certificate_rejected = req.client_certificate_rejected;
    auto result = authenticator_->Authenticate(c);
    Caller caller;
    if (!result.ok()) {
      if (c.certificate_cn == nullptr && !c.certificate_rejected && c.authorization.empty() &&
          IsPublicPath(req.path)) {
        caller.user.name = auth::kAnonymousUser;
        caller.user.groups = {auth::kUnauthenticatedGroup};
        return caller;
      }
      KLUTCH_LOG(kDebug, "auth", "{} {} from {}: {}", req.method, req.path, req.remote_address,
                 result.status().message());
      return Unauthorized();
    }
    caller.user = std::move(result->user);
    if (auto st = Impersonate(req, caller); !st.ok()) {
      if (refused) *refused = std::move(caller);
      return st;
    }
    return caller;
  }

  // Impersonate-User, -Group, -Uid and -Extra-<key>: each requested part is authorized with
  // the impersonate verb before the request runs as that user.
  core::Status Impersonate(const http::Request& req, Caller& caller) {
    std::string user;
    std::optional<std::string> uid;
    std::vector<std::string> groups;
    std::map<std::string, std::vector<std::string>> extra;
    bool any = false;
    for (const auto& [name, value] : req.headers.items()) {
      std::string lower = core::ToLower(name);
      if (lower == "impersonate-user") {
        user = value;
        any = true;
      } else if (lower == "impersonate-group") {
        groups.push_back(value);
        any = true;
      } else if (lower == "impersonate-uid") {
        uid = value;
        any = true;
      } else if (lower.starts_with("impersonate-extra-")) {
        auto key =
            core::PercentDecode(lower.substr(std::string_view("impersonate-extra-").size()), false);
        if (!key || key->empty()) return core::BadRequest("malformed Impersonate-Extra- header");
        for (auto v : core::Split(value, ',')) extra[*key].emplace_back(core::Trim(v));
        any = true;
      }
    }
    if (!any) return core::Status::Ok();
    if (user.empty()) {
      return core::BadRequest(
          "requested impersonation of groups, a uid or extra fields without impersonating a user");
    }
    const auth::UserInfo& actor = caller.user;
    auto check = [&](RequestInfo info) -> core::Status {
      info.resource_request = true;
      info.verb = "impersonate";
      auto d = Decide(ToAttributes(actor, info));
      if (d.allowed) return core::Status::Ok();
      return ForbiddenFor(actor, info, d.reason);
    };
    auth::UserInfo target;
    target.name = user;
    if (auto sa = auth::ParseServiceAccountUser(user)) {
      KLUTCH_RETURN_IF_ERROR(
          check({.ns = sa->first, .resource = "serviceaccounts", .name = sa->second}));
      if (groups.empty()) {
        target.groups = {auth::kServiceAccountsGroup,
                         std::string(auth::kServiceAccountsGroup) + ":" + sa->first};
      }
    } else {
      KLUTCH_RETURN_IF_ERROR(check({.resource = "users", .name = user}));
    }
    for (const auto& g : groups) {
      KLUTCH_RETURN_IF_ERROR(check({.resource = "groups", .name = g}));
      target.groups.push_back(g);
    }
    if (uid) {
      KLUTCH_RETURN_IF_ERROR(
          check({.api_group = "authentication.k8s.io", .resource = "uids", .name = *uid}));
      target.uid = *uid;
    }
    for (const auto& [key, values] : extra) {
      for (const auto& v : values) {
        KLUTCH_RETURN_IF_ERROR(check({.api_group = "authentication.k8s.io",
                                      .resource = "userextras",
                                      .subresource = key,
                                      .name = v}));
      }
      target.extra[key] = values;
    }
    // As kube completes them: system:authenticated for anyone but system:anonymous (unless
    // the request names system:unauthenticated), system:unauthenticated for the anonymous.
    const bool anonymous = user == auth::kAnonymousUser;
    const bool has_auth_group =
        target.InGroup(auth::kAuthenticatedGroup) || target.InGroup(auth::kUnauthenticatedGroup);
    if (!anonymous && !has_auth_group) target.groups.push_back(auth::kAuthenticatedGroup);
    if (anonymous && !target.InGroup(auth::kUnauthenticatedGroup)) {
      target.groups.push_back(auth::kUnauthenticatedGroup);
    }
    caller.impersonator = std::move(caller.user);
    caller.user = std::move(target);
    return core::Status::Ok();
  }

  void Audit(const http::Request& req, const RequestInfo& info, const Caller* caller, int code,
             std::string_view decision, std::string_view reason, const AuditFacts* facts) {
    if (!auditing_) return;
    const std::string now = core::FormatMicroTime(core::RealClock::Get().Now());
    Json e = {{"kind", "Event"},
              {"apiVersion", "audit.k8s.io/v1"},
              {"level", "Metadata"},
              {"auditID", core::NewUuid()},
              {"stage", "ResponseComplete"},
              {"requestURI", req.target},
              {"verb", info.verb},
              {"user", Json::object()},
              {"sourceIPs", Json::array({SourceIp(req.remote_address)})},
              {"responseStatus", {{"metadata", Json::object()}, {"code", code}}},
              {"requestReceivedTimestamp", now},
              {"stageTimestamp", now}};
    if (std::string_view ua = req.headers.Get("User-Agent"); !ua.empty()) {
      // kube-apiserver keeps the first 1024 bytes of a longer User-Agent.
      constexpr size_t kMaxUserAgent = 1024;
      e["userAgent"] = ua.size() > kMaxUserAgent
                           ? std::string(ua.substr(0, kMaxUserAgent)) + "...TRUNCATED"
                           : std::string(ua);
    }
    if (caller) {
      if (caller->impersonator) {
        e["user"] = UserInfoJson(*caller->impersonator);
        e["impersonatedUser"] = UserInfoJson(caller->user);
      } else {
        e["user"] = UserInfoJson(caller->user);
      }
    }
    if (info.resource_request) {
      Json ref = {{"resource", info.resource}, {"apiVersion", info.api_version}};
      if (!info.ns.empty()) ref["namespace"] = info.ns;
      if (!info.name.empty()) {
        ref["name"] = info.name;
      } else if (facts && !facts->name.empty()) {
        ref["name"] = facts->name;
      }
      if (!info.api_group.empty()) ref["apiGroup"] = info.api_group;
      if (!info.subresource.empty()) ref["subresource"] = info.subresource;
      e["objectRef"] = std::move(ref);
    }
    if (!decision.empty()) {
      e["annotations"] = {{"authorization.k8s.io/decision", decision},
                          {"authorization.k8s.io/reason", reason}};
    }
    // Header values, names and paths come from the client and need not be UTF-8: Dump
    // replaces invalid bytes with U+FFFD (as Go's JSON encoder does) instead of throwing, so
    // every request gets its event.
    std::string line = machinery::Dump(e);
    line += '\n';
    core::MutexLock lock(audit_mu_);
    audit_ << line;
    audit_.flush();
  }

  AccessOptions options_;
  RestStorage& rest_;
  std::unique_ptr<auth::Authenticator> authenticator_;
  std::unique_ptr<StorageLookup> lookup_;
  auth::ServiceAccountTokens* tokens_ = nullptr;  // owned by authenticator_
  auth::RbacAuthorizer rbac_;
  std::thread oidc_refresh_;
  core::Mutex mu_;
  core::CondVar cv_;  // applied_ advanced
  int64_t applied_ GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> settle_timeouts_{0};
  // The feed's test seam (HoldFeedForTesting); also orders a release against new events.
  core::Mutex feed_mu_;
  bool feed_held_ GUARDED_BY(feed_mu_) = false;
  std::vector<storage::EventPtr> held_ GUARDED_BY(feed_mu_);
  std::unique_ptr<storage::WatchHandle> watch_;
  core::Mutex audit_mu_;
  bool auditing_ = false;  // audit_ is open; set in Start, before any request
  std::ofstream audit_ GUARDED_BY(audit_mu_);
};

core::Result<std::unique_ptr<AccessControl>> AccessControl::Start(const AccessOptions& options,
                                                                  const std::string& pki_dir,
                                                                  RestStorage& rest) {
  auto impl = std::make_unique<Impl>(options, rest);
  KLUTCH_RETURN_IF_ERROR(impl->Start(pki_dir));
  return std::unique_ptr<AccessControl>(new AccessControl(std::move(impl)));
}

AccessControl::AccessControl(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AccessControl::~AccessControl() = default;

core::Result<Caller> AccessControl::Authenticate(const http::Request& request, Caller* refused) {
  return impl_->Authenticate(request, refused);
}

bool AccessControl::QuickToAuthenticate(const http::Request& request) {
  auto token = auth::BearerToken(request.headers.Get("Authorization"));
  return !token || impl_->authenticator_->IsCached(*token);
}

auth::Decision AccessControl::Decide(const auth::Attributes& attributes) {
  return impl_->Decide(attributes);
}

std::vector<auth::PolicyRule> AccessControl::RulesFor(const auth::UserInfo& user,
                                                      std::string_view ns) {
  if (user.InGroup(auth::kMastersGroup)) {
    return {{.verbs = {"*"}, .api_groups = {"*"}, .resources = {"*"}},
            {.verbs = {"*"}, .non_resource_urls = {"*"}}};
  }
  return impl_->rbac_.RulesFor(user, ns);
}

core::Status AccessControl::AdmitRbac(const auth::UserInfo& user, const Json& object,
                                      const Json* old) {
  return impl_->rbac_.ConfirmNoEscalation(user, object, old);
}

core::Status AccessControl::WaitForRevision(int64_t revision) {
  return impl_->WaitForRevision(revision);
}

uint64_t AccessControl::settle_timeouts() const {
  return impl_->settle_timeouts_.load(std::memory_order_relaxed);
}

void AccessControl::HoldFeedForTesting(bool hold) { impl_->HoldFeed(hold); }

void AccessControl::Audit(const http::Request& request, const RequestInfo& info,
                          const Caller* caller, int code, std::string_view decision,
                          std::string_view reason, const AuditFacts* facts) {
  impl_->Audit(request, info, caller, code, decision, reason, facts);
}

auth::Authenticator& AccessControl::authenticator() { return *impl_->authenticator_; }
auth::ServiceAccountTokens& AccessControl::tokens() { return *impl_->tokens_; }
const AccessOptions& AccessControl::options() const { return impl_->options_; }

}  // namespace klutch::apiserver
