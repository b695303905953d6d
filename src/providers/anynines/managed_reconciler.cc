#include "providers/anynines/managed_reconciler.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "client/discovery.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "core/random.h"
#include "core/strings.h"
#include "machinery/merge_patch.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::providers::anynines {

using machinery::Find;
using machinery::GetString;
using reconcile::Request;
using reconcile::Result;
using std::chrono::milliseconds;

namespace {

constexpr std::string_view kLog = "provider-anynines";

Json Only(const Json& o, const char* key) {
  Json out = Json::object();
  if (o.is_object() && o.contains(key)) out[key] = o[key];
  return out;
}

// The kind of data service a ProviderConfig serves, as claims name it in
// spec.serviceInstanceType: Klutch's compositions name the configs "<type>-service-broker"
// (instances, bindings) and "<type>-backup-manager" (backups, restores).
std::string ServiceType(const Json& mr) {
  std::string pc = GetString(mr, {"spec", "providerConfigRef", "name"});
  for (std::string_view suffix : {"-service-broker", "-backup-manager"}) {
    if (pc.size() > suffix.size() && pc.ends_with(suffix)) {
      pc.resize(pc.size() - suffix.size());
      break;
    }
  }
  return pc;
}

}  // namespace

Json& AtProvider(Json& mr) {
  Json& status = mr["status"];
  if (!status.is_object()) status = Json::object();
  Json& at = status["atProvider"];
  if (!at.is_object()) at = Json::object();
  return at;
}

std::optional<int64_t> IntAt(const Json& mr, std::initializer_list<std::string_view> path) {
  const Json* v = Find(mr, path);
  if (!v) return std::nullopt;
  if (const auto* i = v->get_ptr<const int64_t*>()) return *i;
  if (const auto* u = v->get_ptr<const uint64_t*>()) return static_cast<int64_t>(*u);
  return std::nullopt;
}

std::optional<int64_t> IntAnnotation(const Json& mr, std::string_view key) {
  std::string v = machinery::Annotation(mr, key);
  if (v.empty()) return std::nullopt;
  return core::ParseInt64(v);
}

// The one object of `informer` indexed under `value`; UserErrors for none or several, in the
// claim author's terms: the claim `name` their `field` names in namespace `ns`.
core::Result<client::ObjectPtr> FindOne(client::Informer& informer, const char* index,
                                        const std::string& value, std::string_view what,
                                        std::string_view name, std::string_view ns,
                                        std::string_view field) {
  auto found = informer.indexer().ByIndex(index, value);
  if (found.empty()) {
    return UserError(fmt::format(
        "{} \"{}\" was not found: {} names \"{}\", but namespace \"{}\" has no {} of that "
        "name; create it, or set {} to the name of an existing one",
        what, name, field, name, ns, what, field));
  }
  if (found.size() > 1) {
    return UserError(
        fmt::format("{} is ambiguous: {} managed resources belong to claim \"{}\" in "
                    "namespace \"{}\"",
                    what, found.size(), name, ns));
  }
  return found.front();
}

// A UserError when `mr` reaches `target` (the `what` its claim names) through another
// ProviderConfig than the target's: its spec.serviceInstanceType names another data service,
// and the broker it would ask does not know the target.
core::Status SameServiceType(const Json& mr, const Json& target, std::string_view what,
                             std::string_view name) {
  std::string want = ServiceType(target), have = ServiceType(mr);
  if (want.empty() || want == have) return core::Status::Ok();
  return UserError(fmt::format(
      "{} \"{}\" has serviceInstanceType \"{}\", but this claim's spec.serviceInstanceType "
      "is \"{}\": set it to \"{}\"",
      what, name, want, have, want));
}

// --- ManagedReconciler ------------------------------------------------------------------------

ManagedReconciler::ManagedReconciler(Context& ctx, client::Informer*& informer, std::string kind)
    : ctx_(ctx),
      informer_(informer),
      kind_(std::move(kind)),
      fast_(ctx.options.fast_poll_min, ctx.options.fast_poll_max),
      failures_(ctx.options.failure_backoff_min, ctx.options.poll_interval) {}

core::Result<Result> ManagedReconciler::Reconcile(const Request& r) {
  client::ObjectPtr ptr = informer_->indexer().Get(r.Key());
  if (!ptr) {
    fast_.Reset(r.Key());
    failures_.Reset(r.Key());
    core::MutexLock lock(memo_mu_);
    std::erase_if(memo_, [&](const auto& kv) { return kv.first.starts_with(r.Key() + "|"); });
    written_.erase(r.Key());
    return Result::Done();
  }
  Pass p;
  p.key = r.Key();
  p.original = *ptr;
  std::string written;
  {
    core::MutexLock lock(memo_mu_);
    auto it = written_.find(p.key);
    if (it != written_.end()) {
      written = it->second;
      written_.erase(it);
    }
  }
  if (!written.empty() && machinery::ResourceVersion(p.original) != written) {
    auto live = client::ResourceClient(ctx_.rest, informer_->gvr()).Get(r.name);
    if (!live.ok() && core::IsNotFound(live.status())) return Result::Done();
    if (!live.ok()) return live.status();
    p.original = std::move(*live);
  }
  p.mr = p.original;
  p.deleting = machinery::IsBeingDeleted(p.mr);
  if (p.deleting && !machinery::HasFinalizer(p.mr, kManagedFinalizer)) return Result::Done();
  if (machinery::Annotation(p.mr, kAnnotationPaused) == "true") {
    reconcile::SetCondition(p.mr,
                            {.type = "Synced",
                             .status = "False",
                             .reason = "ReconcilePaused",
                             .message = "Reconciliation is paused via the pause annotation"},
                            ctx_.clock);
    KLUTCH_RETURN_IF_ERROR(CommitStatus(p));
    return Result::Done();
  }
  p.policies = PoliciesOf(p.mr);
  p.pc_name = ProviderConfigName(p.mr);
  client::ObjectPtr pc = ctx_.configs->indexer().Get(p.pc_name);
  if (!pc) {
    if (p.deleting && (Orphans(p.mr) || !p.policies.del)) return Finalize(p);
    // Read on the claim too, where nobody can change the reference: say who can act.
    const bool backups = kind_ == "Backup" || kind_ == "Restore";
    return Fail(p,
                UserError(fmt::format(
                    "no {} is set up for this service on the Control Plane: ProviderConfig "
                    "\"{}\" not found; the platform team creates it, pointing at {}",
                    backups ? "backup manager" : "service broker", p.pc_name,
                    backups ? "the a9s Backup Manager of the service"
                            : "a broker that offers the service")),
                "CannotConnectToProvider");
  }
  if (!p.deleting) {
    if (auto s = TrackUsage(ctx_, p.mr, p.pc_name); !s.ok()) {
      return Fail(p, s, "CannotConnectToProvider");
    }
  }
  auto conn = ctx_.connections.For(*pc);
  if (!conn.ok()) return Fail(p, conn.status(), "CannotConnectToProvider");
  p.conn = std::move(*conn);
  if (!p.deleting) {
    Json modified = p.mr;
    machinery::AddFinalizer(modified, kManagedFinalizer);
    if (machinery::Annotation(modified, kAnnotationExternalName).empty()) {
      machinery::SetAnnotation(modified, kAnnotationExternalName, machinery::Name(modified));
    }
    if (modified != p.mr) {
      reconcile::Committer committer(client::ResourceClient(ctx_.rest, informer_->gvr()),
                                     std::string(kFieldManager));
      KLUTCH_ASSIGN_OR_RETURN(Json stored, committer.Commit(p.original, modified));
      p.original = stored;
      p.mr = std::move(stored);
      Wrote(p);
    }
  }
  return Run(p);
}

core::Result<Result> ManagedReconciler::Fail(Pass& p, const core::Status& error,
                                             std::string_view reason) {
  bool internal = false;
  std::string message = UserMessage(error, internal);
  if (internal) {
    KLUTCH_LOG(kWarn, kLog, "{} {}: {}", kind_, machinery::Name(p.mr), error.ToString());
  } else if (auto was = reconcile::FindCondition(p.original, "Synced");
             !was || was->message != message) {
    // Once per new message, not per retry: the log tells what the claim's author is told.
    KLUTCH_LOG(kInfo, kLog, "{} {} (claim {}/{}): {}: {}", kind_, machinery::Name(p.mr),
               GetString(p.mr, {"metadata", "labels", kLabelClaimNamespace}),
               GetString(p.mr, {"metadata", "labels", kLabelClaimName}), reason, message);
  }
  if (IsUnreachable(error) && ctx_.request_health_check) ctx_.request_health_check(p.pc_name);
  const int code = ServiceErrorStatus(error);
  if (code == 401 || code == 403) ctx_.connections.Invalidate(p.pc_name);
  SetSynced(p.mr, false, message, ctx_.clock);
  auto s = CommitStatus(p);
  if (!s.ok() && !core::IsNotFound(s)) return s;
  Event(p, reconcile::kEventTypeWarning, reason, message);
  fast_.Reset(p.key);
  return Result::RequeueAfter(failures_.Next(p.key));
}

core::Result<Result> ManagedReconciler::Fast(Pass& p) {
  SetSynced(p.mr, true, "", ctx_.clock);
  KLUTCH_RETURN_IF_ERROR(CommitStatus(p));
  failures_.Reset(p.key);
  return Result::RequeueAfter(fast_.Next(p.key));
}

core::Result<Result> ManagedReconciler::Steady(Pass& p, std::optional<milliseconds> sooner) {
  SetSynced(p.mr, true, "", ctx_.clock);
  KLUTCH_RETURN_IF_ERROR(CommitStatus(p));
  failures_.Reset(p.key);
  fast_.Reset(p.key);
  milliseconds after = ctx_.options.poll_interval;
  if (sooner) after = std::max(milliseconds(1), std::min(after, *sooner));
  return Result::RequeueAfter(after);
}

core::Status ManagedReconciler::CommitStatus(Pass& p) {
  reconcile::Committer committer(client::ResourceClient(ctx_.rest, informer_->gvr()),
                                 std::string(kFieldManager));
  KLUTCH_ASSIGN_OR_RETURN(Json stored, committer.CommitStatus(p.original, p.mr));
  p.original = stored;
  p.mr = std::move(stored);
  Wrote(p);
  return core::Status::Ok();
}

core::Status ManagedReconciler::ForceStatus(Pass& p) {
  Json patch = machinery::CreateMergePatch(Only(p.original, "status"), Only(p.mr, "status"));
  if (patch.is_null() || (patch.is_object() && patch.empty())) return core::Status::Ok();
  KLUTCH_ASSIGN_OR_RETURN(
      Json stored,
      client::ResourceClient(ctx_.rest, informer_->gvr())
          .Patch(machinery::Name(p.mr), client::PatchType::kMerge, machinery::Dump(patch),
                 {.field_manager = std::string(kFieldManager)}, "status"));
  p.original = stored;
  p.mr = std::move(stored);
  Wrote(p);
  return core::Status::Ok();
}

core::Status ManagedReconciler::Annotate(
    Pass& p, const std::map<std::string, std::optional<std::string>>& changes) {
  Json annotations = Json::object();
  for (const auto& [k, v] : changes) {
    if (v) {
      annotations[k] = *v;
    } else {
      annotations[k] = nullptr;
    }
  }
  Json patch = {{"metadata", {{"annotations", annotations}}}};
  KLUTCH_ASSIGN_OR_RETURN(Json stored, client::ResourceClient(ctx_.rest, informer_->gvr())
                                           .Patch(machinery::Name(p.mr), client::PatchType::kMerge,
                                                  machinery::Dump(patch),
                                                  {.field_manager = std::string(kFieldManager)}));
  // Status edits of this pass stay in p.mr; the stored object is the new base for them.
  p.mr["metadata"] = stored["metadata"];
  p.original = std::move(stored);
  Wrote(p);
  return core::Status::Ok();
}

core::Result<Result> ManagedReconciler::Finalize(Pass& p) {
  fast_.Reset(p.key);
  failures_.Reset(p.key);
  Json modified = p.original;
  if (!machinery::RemoveFinalizer(modified, kManagedFinalizer)) return Result::Done();
  reconcile::Committer committer(client::ResourceClient(ctx_.rest, informer_->gvr()),
                                 std::string(kFieldManager));
  auto w = committer.Commit(p.original, modified);
  if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
  return Result::Done();
}

core::Result<int64_t> ManagedReconciler::CreateOnce(
    Pass& p, std::string_view pending_key, std::string_view id_key,
    const std::function<core::Result<Json>()>& list,
    const std::function<core::Result<int64_t>()>& create, const std::function<bool(int64_t)>& taken,
    bool& adopted) {
  adopted = false;
  KLUTCH_ASSIGN_OR_RETURN(Json listed, list());
  std::vector<int64_t> ids;
  if (listed.is_array()) {
    for (const Json& item : listed) {
      if (auto id = IntField(item, "id")) ids.push_back(*id);
    }
  }
  std::sort(ids.begin(), ids.end());
  if (auto before = core::ParseInt64(machinery::Annotation(p.mr, pending_key))) {
    for (int64_t id : ids) {
      if (id <= *before || taken(id)) continue;
      KLUTCH_RETURN_IF_ERROR(
          Annotate(p, {{std::string(id_key), std::to_string(id)}, {std::string(pending_key), {}}}));
      adopted = true;
      return id;
    }
  }
  const int64_t highest = ids.empty() ? 0 : ids.back();
  KLUTCH_RETURN_IF_ERROR(Annotate(p, {{std::string(pending_key), std::to_string(highest)}}));
  KLUTCH_ASSIGN_OR_RETURN(int64_t id, create());
  KLUTCH_RETURN_IF_ERROR(
      Annotate(p, {{std::string(id_key), std::to_string(id)}, {std::string(pending_key), {}}}));
  return id;
}

void ManagedReconciler::Wrote(const Pass& p) {
  core::MutexLock lock(memo_mu_);
  written_[p.key] = machinery::ResourceVersion(p.original);
}

void ManagedReconciler::Event(const Pass& p, std::string_view type, std::string_view reason,
                              std::string_view message) {
  ctx_.events.Event(p.original, type, reason, message);
}

bool ManagedReconciler::RecentlySent(const std::string& key, const std::string& what,
                                     const std::string& hash) {
  core::MutexLock lock(memo_mu_);
  auto it = memo_.find(key + "|" + what);
  return it != memo_.end() && it->second.hash == hash &&
         ctx_.clock.MonotonicNow() - it->second.at < ctx_.options.poll_interval;
}

void ManagedReconciler::Remember(const std::string& key, const std::string& what,
                                 const std::string& hash) {
  core::MutexLock lock(memo_mu_);
  memo_[key + "|" + what] = {hash, ctx_.clock.MonotonicNow()};
}

}  // namespace klutch::providers::anynines
