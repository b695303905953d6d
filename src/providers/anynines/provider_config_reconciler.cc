#include "providers/anynines/provider_config_reconciler.h"

#include <fmt/format.h>

#include "client/dynamic.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "providers/anynines/connections.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::providers::anynines {
namespace {

using machinery::Find;
using machinery::GetString;
using reconcile::Request;
using reconcile::Result;
using std::chrono::milliseconds;

// At most this often a health check a resource asked for (RequestCheck).
constexpr milliseconds kForcedCheckSpacing{2000};

}  // namespace

void ProviderConfigReconciler::RequestCheck(const std::string& name) {
  core::MutexLock lock(mu_);
  forced_.insert(name);
}

struct ProviderConfigReconciler::Pass {
  Json pc;  // the ProviderConfig as last read or written
  const std::string name;
  const size_t users;  // ProviderConfigUsages naming it
  reconcile::Committer committer;
};

core::Result<Result> ProviderConfigReconciler::Reconcile(const Request& r) {
  client::ObjectPtr ptr = ctx_.configs->indexer().Get(r.Key());
  if (!ptr) {
    Forget(r.name);
    return Result::Done();
  }
  Pass p{.pc = *ptr,
         .name = r.name,
         .users = ctx_.usages->indexer().ByIndex(kByProviderConfig, r.name).size(),
         .committer = reconcile::Committer(client::ResourceClient(ctx_.rest, kProviderConfigs),
                                           std::string(kFieldManager))};
  if (machinery::IsBeingDeleted(p.pc)) return Delete(p);
  KLUTCH_RETURN_IF_ERROR(EnsureFinalizer(p));
  KLUTCH_RETURN_IF_ERROR(RecordUsers(p));
  return CheckHealthWhenDue(p);
}

void ProviderConfigReconciler::Forget(const std::string& name) {
  core::MutexLock lock(mu_);
  health_.erase(name);
  forced_.erase(name);
}

core::Result<Result> ProviderConfigReconciler::Delete(Pass& p) {
  if (p.users > 0) {
    ctx_.events.Event(p.pc, reconcile::kEventTypeWarning, "InUse",
                      fmt::format("cannot delete ProviderConfig {}: {} managed resource(s) still "
                                  "use it",
                                  p.name, p.users));
    return Result::RequeueAfter(ctx_.options.poll_interval);
  }
  Json modified = p.pc;
  if (machinery::RemoveFinalizer(modified, kInUseFinalizer)) {
    auto w = p.committer.Commit(p.pc, modified);
    if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
  }
  return Result::Done();
}

core::Status ProviderConfigReconciler::EnsureFinalizer(Pass& p) {
  Json modified = p.pc;
  if (machinery::AddFinalizer(modified, kInUseFinalizer)) {
    KLUTCH_ASSIGN_OR_RETURN(p.pc, p.committer.Commit(p.pc, modified));
  }
  return core::Status::Ok();
}

core::Status ProviderConfigReconciler::RecordUsers(Pass& p) {
  Json modified = p.pc;
  modified["status"]["users"] = static_cast<int64_t>(p.users);
  KLUTCH_ASSIGN_OR_RETURN(p.pc, p.committer.CommitStatus(p.pc, modified));
  return core::Status::Ok();
}

core::Result<Result> ProviderConfigReconciler::CheckHealthWhenDue(Pass& p) {
  // Health: from memory, or (after a restart) from what status says.
  Health h;
  bool forced = false;
  {
    core::MutexLock lock(mu_);
    h = health_[p.name];
    forced = forced_.count(p.name) > 0;
  }
  const core::MonoTime now = ctx_.clock.MonotonicNow();
  const Json* last_check = Find(p.pc, {"status", "health", "lastCheckTime"});
  const bool cleared = !last_check || last_check->is_null();
  if (!h.checked && !cleared) RestoreHealth(p.pc, now, h);
  const milliseconds interval =
      h.healthy ? ctx_.options.health_interval : ctx_.options.health_retry_interval;
  const core::MonoTime due = h.at + interval;
  const core::MonoTime forced_due = h.at + std::min(kForcedCheckSpacing, interval);
  // A resource's failure is news only while the service counts as healthy.
  forced = forced && h.healthy;
  if (!h.checked || cleared || now >= due || (forced && now >= forced_due)) {
    return Result::RequeueAfter(Check(p.pc, h));
  }
  core::MonoTime next = forced ? std::min(due, forced_due) : due;
  return Result::RequeueAfter(
      std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(next - now)));
}

void ProviderConfigReconciler::RestoreHealth(const Json& pc, core::MonoTime now, Health& h) {
  if (auto t = core::ParseTime(GetString(pc, {"status", "health", "lastCheckTime"}))) {
    h.checked = true;
    h.at = now - std::chrono::duration_cast<std::chrono::nanoseconds>(ctx_.clock.Now() - *t);
    if (const Json* s = Find(pc, {"status", "health", "lastStatus"})) {
      if (const bool* b = s->get_ptr<const bool*>()) h.healthy = *b;
    }
  }
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
