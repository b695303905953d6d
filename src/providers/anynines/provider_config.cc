#include "providers/anynines/provider_config.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "client/dynamic.h"
#include "core/duration.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::providers::anynines {
namespace {

using machinery::Find;
using machinery::GetString;
using reconcile::Request;
using reconcile::Result;
using std::chrono::milliseconds;

constexpr milliseconds kMaxDefaultGrace = std::chrono::hours(1);
constexpr milliseconds kForcedCheckSpacing{2000};

core::Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::NotFound("cannot open " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One key of a Secret, base64-decoded.
core::Result<std::string> SecretKey(const CredentialSources& sources, const std::string& pc,
                                    const std::string& ns, const std::string& name,
                                    const std::string& key) {
  if (name.empty()) {
    return UserError(fmt::format("ProviderConfig {}: a secretRef needs a name", pc));
  }
  auto secret = sources.get_secret(ns, name);
  if (!secret.ok()) {
    return UserError(fmt::format("ProviderConfig {}: cannot read Secret {}/{}: {}", pc, ns, name,
                                 secret.status().message()));
  }
  const Json* data = Find(*secret, {"data"});
  auto it = data && data->is_object() ? data->find(key) : Json::const_iterator();
  if (!data || !data->is_object() || it == data->end() || !it->is_string()) {
    return UserError(
        fmt::format("ProviderConfig {}: Secret {}/{} has no key {}", pc, ns, name, key));
  }
  auto decoded = core::Base64Decode(*it->get_ptr<const std::string*>());
  if (!decoded) {
    return UserError(
        fmt::format("ProviderConfig {}: Secret {}/{} key {} is not base64", pc, ns, name, key));
  }
  return *decoded;
}

// providerCredentials.<field> for `source`.
core::Result<std::string> Credential(const CredentialSources& sources, const Json& pc,
                                     std::string_view source, std::string_view field) {
  const std::string name = machinery::Name(pc);
  const Json* selector = Find(pc, {"spec", "providerCredentials", field});
  if (!selector || !selector->is_object()) {
    return UserError(
        fmt::format("ProviderConfig {}: spec.providerCredentials.{} is required", name, field));
  }
  std::string value;
  if (source == "Secret") {
    KLUTCH_ASSIGN_OR_RETURN(
        value, SecretKey(sources, name, GetString(*selector, {"secretRef", "namespace"}),
                         GetString(*selector, {"secretRef", "name"}),
                         GetString(*selector, {"secretRef", "key"})));
  } else if (source == "Environment") {
    std::string var = GetString(*selector, {"env", "name"});
    const char* v = var.empty()
                        ? nullptr
                        : (sources.getenv ? sources.getenv(var.c_str()) : ::getenv(var.c_str()));
    if (!v) {
      return UserError(fmt::format(
          "ProviderConfig {}: spec.providerCredentials.{}: environment variable \"{}\" is not set",
          name, field, var));
    }
    value = v;
  } else {  // Filesystem
    std::string path = GetString(*selector, {"fs", "path"});
    auto text = sources.read_file ? sources.read_file(path) : ReadFile(path);
    if (path.empty() || !text.ok()) {
      return UserError(fmt::format(
          "ProviderConfig {}: spec.providerCredentials.{}: cannot read \"{}\"", name, field, path));
    }
    value = *text;
  }
  return std::string(core::Trim(value));
}

core::Result<milliseconds> DurationAnnotation(const Json& pc, std::string_view key) {
  std::string text = machinery::Annotation(pc, key);
  if (text.empty()) return milliseconds(0);
  auto d = core::ParseGoDuration(text);
  if (!d.ok() || d->seconds < 0 || d->nanos < 0) {
    return UserError(fmt::format("ProviderConfig {}: annotation {}: {}", machinery::Name(pc), key,
                                 d.ok() ? "must not be negative" : d.status().message()));
  }
  return milliseconds(d->seconds * 1000 + d->nanos / 1000000);
}

}  // namespace

core::Result<ProviderConfigSettings> LoadProviderConfig(const Json& pc,
                                                        const CredentialSources& sources,
                                                        milliseconds request_timeout) {
  ProviderConfigSettings s;
  s.name = machinery::Name(pc);
  s.endpoint.url = GetString(pc, {"spec", "url"});
  if (s.endpoint.url.empty()) {
    return UserError(fmt::format("ProviderConfig {}: spec.url is required", s.name));
  }
  s.service_type = GetString(pc, {"spec", "serviceType"});
  if (s.service_type.empty()) s.service_type = std::string(kServiceTypeBroker);
  if (s.service_type != kServiceTypeBroker && s.service_type != kServiceTypeBackupManager) {
    return UserError(fmt::format(
        "ProviderConfig {}: spec.serviceType: Unsupported value: \"{}\": supported values: "
        "\"servicebroker\", \"backupmanager\"",
        s.name, s.service_type));
  }
  s.health_endpoint = GetString(pc, {"spec", "healthCheckEndpoint"});
  if (s.health_endpoint.empty()) s.health_endpoint = std::string(kDefaultHealthEndpoint);
  if (!s.health_endpoint.starts_with('/')) s.health_endpoint.insert(0, "/");

  std::string source = GetString(pc, {"spec", "providerCredentials", "source"});
  if (source == "Secret" || source == "Environment" || source == "Filesystem") {
    KLUTCH_ASSIGN_OR_RETURN(s.endpoint.username, Credential(sources, pc, source, "username"));
    KLUTCH_ASSIGN_OR_RETURN(s.endpoint.password, Credential(sources, pc, source, "password"));
  } else if (source != "None") {
    return UserError(fmt::format(
        "ProviderConfig {}: spec.providerCredentials.source \"{}\" cannot authenticate to a "
        "service broker or backup manager: use Secret, Environment, Filesystem or None",
        s.name, source));
  }

  if (const Json* tls = Find(pc, {"spec", "tls"}); tls && tls->is_object()) {
    if (const Json* insecure = Find(*tls, {"insecureSkipVerify"})) {
      if (const bool* b = insecure->get_ptr<const bool*>()) s.endpoint.insecure_skip_verify = *b;
    }
    s.endpoint.server_name = GetString(*tls, {"overrideServerName"});
    if (const Json* ref = Find(*tls, {"caBundleSecretRef"}); ref && ref->is_object()) {
      std::string key = GetString(*ref, {"key"});
      KLUTCH_ASSIGN_OR_RETURN(s.endpoint.ca_pem,
                              SecretKey(sources, s.name, GetString(*ref, {"namespace"}),
                                        GetString(*ref, {"name"}), key.empty() ? "ca.crt" : key));
    }
  }
  s.endpoint.timeout = request_timeout;

  KLUTCH_ASSIGN_OR_RETURN(s.max_credential_age,
                          DurationAnnotation(pc, kAnnotationMaxCredentialAge));
  KLUTCH_ASSIGN_OR_RETURN(s.credential_grace_period,
                          DurationAnnotation(pc, kAnnotationCredentialGracePeriod));
  if (machinery::Annotation(pc, kAnnotationCredentialGracePeriod).empty()) {
    s.credential_grace_period = std::min(s.max_credential_age, kMaxDefaultGrace);
  }
  return s;
}

// --- Connections ------------------------------------------------------------------------------

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

// --- usage ------------------------------------------------------------------------------------

core::Status TrackUsage(Context& ctx, const Json& mr, const std::string& pc_name) {
  const std::string uid = machinery::Uid(mr);
  if (uid.empty()) return core::Status::Ok();
  client::ObjectPtr existing = ctx.usages->indexer().Get(uid);
  if (existing && GetString(*existing, {"providerConfigRef", "name"}) == pc_name &&
      GetString(*existing, {"metadata", "labels", kLabelProviderConfig}) == pc_name) {
    return core::Status::Ok();
  }
  Json usage = {{"apiVersion", kApiVersion},
                {"kind", "ProviderConfigUsage"},
                {"metadata",
                 {{"name", uid},
                  {"labels", {{kLabelProviderConfig, pc_name}}},
                  {"ownerReferences", Json::array({OwnerReference(mr, true)})}}},
                {"providerConfigRef", {{"name", pc_name}}},
                {"resourceRef",
                 {{"apiVersion", machinery::ApiVersionOf(mr)},
                  {"kind", machinery::Kind(mr)},
                  {"name", machinery::Name(mr)},
                  {"uid", uid}}}};
  client::ResourceClient usages(ctx.rest, kProviderConfigUsages);
  if (!existing) {
    auto created = usages.Create(usage, {.field_manager = std::string(kFieldManager)});
    if (created.ok() || !core::IsAlreadyExists(created.status())) return created.status();
  }
  Json patch = {{"metadata", {{"labels", {{kLabelProviderConfig, pc_name}}}}},
                {"providerConfigRef", usage["providerConfigRef"]},
                {"resourceRef", usage["resourceRef"]}};
  return usages
      .Patch(uid, client::PatchType::kMerge, machinery::Dump(patch),
             {.field_manager = std::string(kFieldManager)})
      .status();
}

// --- the ProviderConfig controller ------------------------------------------------------------

void ProviderConfigReconciler::RequestCheck(const std::string& name) {
  core::MutexLock lock(mu_);
  forced_.insert(name);
}

core::Result<Result> ProviderConfigReconciler::Reconcile(const Request& r) {
  client::ObjectPtr ptr = ctx_.configs->indexer().Get(r.Key());
  if (!ptr) {
    core::MutexLock lock(mu_);
    health_.erase(r.name);
    forced_.erase(r.name);
    return Result::Done();
  }
  Json pc = *ptr;
  const size_t users = ctx_.usages->indexer().ByIndex(kByProviderConfig, r.name).size();
  client::ResourceClient configs(ctx_.rest, kProviderConfigs);
  reconcile::Committer committer(configs, std::string(kFieldManager));
  if (machinery::IsBeingDeleted(pc)) {
    if (users > 0) {
      ctx_.events.Event(pc, reconcile::kEventTypeWarning, "InUse",
                        fmt::format("cannot delete ProviderConfig {}: {} managed resource(s) still "
                                    "use it",
                                    r.name, users));
      return Result::RequeueAfter(ctx_.options.poll_interval);
    }
    Json modified = pc;
    if (machinery::RemoveFinalizer(modified, kInUseFinalizer)) {
      auto w = committer.Commit(pc, modified);
      if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
    }
    return Result::Done();
  }
  Json modified = pc;
  if (machinery::AddFinalizer(modified, kInUseFinalizer)) {
    KLUTCH_ASSIGN_OR_RETURN(pc, committer.Commit(pc, modified));
  }
  modified = pc;
  modified["status"]["users"] = static_cast<int64_t>(users);
  KLUTCH_ASSIGN_OR_RETURN(pc, committer.CommitStatus(pc, modified));

  // Health: from memory, or (after a restart) from what status says.
  Health h;
  bool forced = false;
  {
    core::MutexLock lock(mu_);
    h = health_[r.name];
    forced = forced_.count(r.name) > 0;
  }
  const core::MonoTime now = ctx_.clock.MonotonicNow();
  const Json* last_check = Find(pc, {"status", "health", "lastCheckTime"});
  const bool cleared = !last_check || last_check->is_null();
  if (!h.checked && !cleared) {
    if (auto t = core::ParseTime(GetString(pc, {"status", "health", "lastCheckTime"}))) {
      h.checked = true;
      h.at = now - std::chrono::duration_cast<std::chrono::nanoseconds>(ctx_.clock.Now() - *t);
      if (const Json* s = Find(pc, {"status", "health", "lastStatus"})) {
        if (const bool* b = s->get_ptr<const bool*>()) h.healthy = *b;
      }
    }
  }
  const milliseconds interval =
      h.healthy ? ctx_.options.health_interval : ctx_.options.health_retry_interval;
  const core::MonoTime due = h.at + interval;
  const core::MonoTime forced_due = h.at + std::min(kForcedCheckSpacing, interval);
  // A resource's failure is news only while the service counts as healthy.
  forced = forced && h.healthy;
  if (!h.checked || cleared || now >= due || (forced && now >= forced_due)) {
    return Result::RequeueAfter(Check(pc, h));
  }
  core::MonoTime next = forced ? std::min(due, forced_due) : due;
  return Result::RequeueAfter(
      std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(next - now)));
}

milliseconds ProviderConfigReconciler::Check(const Json& pc, const Health& previous) {
  const std::string name = machinery::Name(pc);
  core::Status result;
  auto conn = ctx_.connections.For(pc);
  if (!conn.ok()) {
    result = conn.status();
  } else {
    ServiceEndpoint endpoint = conn->settings.endpoint;
    endpoint.timeout = ctx_.options.health_timeout;
    if (conn->settings.service_type == kServiceTypeBackupManager) {
      auto c = BackupClient::New(endpoint);
      result = c.ok() ? (*c)->CheckHealth(conn->settings.health_endpoint) : c.status();
    } else {
      auto c = OsbClient::New(endpoint);
      result = c.ok() ? (*c)->CheckHealth(conn->settings.health_endpoint) : c.status();
    }
  }
  bool internal = false;
  std::string message = result.ok() ? "Available" : UserMessage(result, internal);
  if (internal) {
    KLUTCH_LOG(kWarn, "provider-anynines", "health check of ProviderConfig {}: {}", name,
               result.ToString());
  }
  if (!result.ok()) ctx_.connections.Invalidate(name);
  const bool healthy = result.ok();
  Json patch = {{"status",
                 {{"health",
                   {{"lastStatus", healthy},
                    {"lastMessage", message},
                    {"lastCheckTime", core::FormatTime(ctx_.clock.Now())}}}}}};
  auto w = client::ResourceClient(ctx_.rest, kProviderConfigs)
               .Patch(name, client::PatchType::kMerge, machinery::Dump(patch),
                      {.field_manager = std::string(kFieldManager)}, "status");
  if (!w.ok() && !core::IsNotFound(w.status())) {
    KLUTCH_LOG(kWarn, "provider-anynines", "writing the health of ProviderConfig {}: {}", name,
               w.status().ToString());
  }
  if (!previous.checked || previous.healthy != healthy) {
    if (healthy) {
      ctx_.events.Event(pc, reconcile::kEventTypeNormal, "CheckSuccess",
                        "ProviderConfig is now healthy");
    } else {
      ctx_.events.Event(pc, reconcile::kEventTypeWarning, "CheckFailure",
                        "Health check failed: " + message);
    }
  }
  {
    core::MutexLock lock(mu_);
    health_[name] = {.checked = true, .healthy = healthy, .at = ctx_.clock.MonotonicNow()};
    forced_.erase(name);
  }
  return healthy ? ctx_.options.health_interval : ctx_.options.health_retry_interval;
}

}  // namespace klutch::providers::anynines
