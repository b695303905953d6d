#include "providers/anynines/controllers.h"

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
namespace {

using machinery::Find;
using machinery::GetString;
using reconcile::Request;
using reconcile::Result;
using std::chrono::milliseconds;

constexpr std::string_view kLog = "provider-anynines";

// Broker instance states (§4.1).
constexpr std::string_view kStateCreated = "created";
constexpr std::string_view kStateProvisioned = "provisioned";
constexpr std::string_view kStateAvailable = "available";
constexpr std::string_view kStateDeleted = "deleted";
constexpr std::string_view kStateDeleting = "deleting";
constexpr std::string_view kStateDeploying = "deploying";
constexpr std::string_view kStateFailed = "failed";

Json& AtProvider(Json& mr) {
  Json& status = mr["status"];
  if (!status.is_object()) status = Json::object();
  Json& at = status["atProvider"];
  if (!at.is_object()) at = Json::object();
  return at;
}

Json Only(const Json& o, const char* key) {
  Json out = Json::object();
  if (o.is_object() && o.contains(key)) out[key] = o[key];
  return out;
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

bool IsEmptyValue(const Json& v) { return v.is_null() || (v.is_array() && v.empty()); }

bool SameValue(const Json& a, const Json& b) {
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    std::vector<bool> used(b.size(), false);
    for (const Json& x : a) {
      bool matched = false;
      for (size_t i = 0; i < b.size(); ++i) {
        if (!used[i] && SameValue(x, b[i])) {
          used[i] = matched = true;
          break;
        }
      }
      if (!matched) return false;
    }
    return true;
  }
  return a == b;
}

// How the message of a failed broker operation starts: `operation "<key>" failed: <words>`.
constexpr std::string_view kFailedOperation = "operation ";

std::string Describe(std::string_view what, const std::string& description) {
  return description.empty() ? std::string(what) : fmt::format("{}: {}", what, description);
}

// A duration for messages: "30s", or "300ms" when it is not whole seconds.
std::string GoDuration(milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

milliseconds Until(core::SystemTime now, core::SystemTime t) {
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(t - now));
}

}  // namespace

Json ParameterDelta(const Json& observed, const Json& desired) {
  Json out = Json::object();
  const Json empty = Json::object();
  const Json& o = observed.is_object() ? observed : empty;
  const Json& d = desired.is_object() ? desired : empty;
  for (auto it = o.begin(); it != o.end(); ++it) {
    auto want = d.find(it.key());
    if ((want == d.end() || IsEmptyValue(*want)) && !IsEmptyValue(it.value())) {
      out[it.key()] = nullptr;
    }
  }
  for (auto it = d.begin(); it != d.end(); ++it) {
    auto have = o.find(it.key());
    const bool missing = have == o.end() || IsEmptyValue(*have);
    if (IsEmptyValue(it.value())) continue;  // handled above (or missing on both sides)
    if (!missing && SameValue(*have, it.value())) continue;
    out[it.key()] = it.value();
  }
  return out;
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
    return Fail(p,
                UserError(fmt::format("ProviderConfig \"{}\" not found: create it, or name an "
                                      "existing one in spec.providerConfigRef",
                                      p.pc_name)),
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

// --- ServiceInstance (§6.2) -------------------------------------------------------------------

namespace {

// What the broker says about an instance.
struct Observed {
  bool exists = false;
  std::string state, plan_id, service_id, instance_id;
  std::string provisioned_at, deleted_at, created_at, updated_at;
  Json parameters;  // null: none
};

bool ExtensionMissing(const core::Status& s) {
  int code = ServiceErrorStatus(s);
  return (code == 404 && !IsInstanceNotFound(s)) || code == 405 || code == 501;
}

core::Result<Observed> ObserveInstance(OsbClient& osb, const std::string& id) {
  Observed o;
  auto doc = osb.GetA9sInstance(id);
  if (doc.ok()) {
    o.exists = true;
    o.state = GetString(*doc, {"state"});
    o.plan_id = GetString(*doc, {"plan_guid"});
    o.service_id = GetString(*doc, {"service_guid"});
    o.instance_id = GetString(*doc, {"guid_at_tenant"});
    o.provisioned_at = GetString(*doc, {"provisioned_at"});
    o.deleted_at = GetString(*doc, {"deleted_at"});
    o.created_at = GetString(*doc, {"created_at"});
    o.updated_at = GetString(*doc, {"updated_at"});
    if (o.state == kStateDeleted) return o;
    auto svc = osb.GetServiceInstance(id);
    if (svc.ok()) {
      if (const Json* params = Find(*svc, {"parameters"})) o.parameters = *params;
    } else if (IsInstanceNotFound(svc.status())) {
      o.exists = false;
    } else if (IsServiceError(svc.status()) && ServiceErrorStatus(svc.status()) < 500) {
      // A broker without the OSB fetch: the a9s document's context carries the parameters.
      if (const Json* params = Find(*doc, {"context", "parameters"})) o.parameters = *params;
    } else {
      return svc.status();
    }
    return o;
  }
  if (IsInstanceNotFound(doc.status())) return o;
  if (!ExtensionMissing(doc.status())) return doc.status();
  // No a9s extension: the OSB fetch says whether the instance exists.
  auto svc = osb.GetServiceInstance(id);
  if (!svc.ok()) {
    if (IsGoneOrNotFound(svc.status())) return o;
    return svc.status();
  }
  o.exists = true;
  o.state = std::string(kStateProvisioned);
  o.plan_id = GetString(*svc, {"plan_id"});
  o.service_id = GetString(*svc, {"service_id"});
  if (const Json* params = Find(*svc, {"parameters"})) o.parameters = *params;
  return o;
}

}  // namespace

core::Result<std::string> ServiceInstanceReconciler::NewInstanceId(OsbClient& osb) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    const int64_t seconds =
        std::chrono::duration_cast<std::chrono::seconds>(ctx_.clock.Now().time_since_epoch())
            .count();
    std::string candidate = core::NewUuid() + "-" + std::to_string(seconds);
    auto doc = osb.GetA9sInstance(candidate);
    if (doc.ok()) continue;  // taken
    if (IsInstanceNotFound(doc.status())) return candidate;
    if (!ExtensionMissing(doc.status())) return doc.status();
    auto svc = osb.GetServiceInstance(candidate);
    if (svc.ok()) continue;
    if (IsGoneOrNotFound(svc.status())) return candidate;
    return svc.status();
  }
  return core::Internal("Could not ensure uniqueness of generated UID for Service Instance");
}

ServiceInstanceReconciler::ServiceInstanceReconciler(Context& ctx)
    : ManagedReconciler(ctx, ctx.instances, "ServiceInstance"),
      mapper_(std::make_unique<client::RestMapper>(ctx.rest)) {}

ServiceInstanceReconciler::~ServiceInstanceReconciler() = default;

std::vector<std::string> ServiceInstanceReconciler::BindingsUsing(const Json& mr) const {
  std::vector<std::string> out;
  const std::string key = ClaimKey(mr);
  if (key.empty() || ctx_.bindings == nullptr) return out;
  for (const auto& b : ctx_.bindings->indexer().ByIndex(kByInstanceRef, key)) {
    std::string claim = GetString(*b, {"metadata", "labels", kLabelClaimName});
    out.push_back(claim.empty() ? machinery::Name(*b) : claim);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool ServiceInstanceReconciler::DeletionForced(const Json& mr) {
  if (machinery::Annotation(mr, kAnnotationDeleteInUse) == "true") return true;
  // The claim's annotations reach its composite resource, not the composed MRs: ask the
  // composite that controls this MR.
  const Json* refs = Find(mr, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return false;
  for (const Json& ref : *refs) {
    const Json* controller = Find(ref, {"controller"});
    const bool* is_controller = controller ? controller->get_ptr<const bool*>() : nullptr;
    if (!is_controller || !*is_controller) continue;
    std::string api_version = GetString(ref, {"apiVersion"});
    auto slash = api_version.find('/');
    std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
    std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
    auto mapping = mapper_->ForKind(group, GetString(ref, {"kind"}), version);
    if (!mapping.ok()) {
      if (mapper_->Refresh().ok())
        mapping = mapper_->ForKind(group, GetString(ref, {"kind"}), version);
      if (!mapping.ok()) return false;
    }
    auto owner = client::ResourceClient(ctx_.rest, mapping->gvr).Get(GetString(ref, {"name"}));
    return owner.ok() && machinery::Annotation(*owner, kAnnotationDeleteInUse) == "true";
  }
  return false;
}

core::Result<Result> ServiceInstanceReconciler::WaitForBindings(
    Pass& p, const std::vector<std::string>& users) {
  std::vector<std::string> quoted;
  for (const auto& u : users) quoted.push_back(fmt::format("\"{}\"", u));
  const std::string message = fmt::format(
      "the instance is still used by ServiceBinding {}: it is deleted once {} gone (delete {} "
      "first), or annotate the instance claim with {}=true to delete it and its data anyway",
      core::Join(quoted, ", "), users.size() == 1 ? "that binding is" : "those bindings are",
      users.size() == 1 ? "it" : "them", kAnnotationDeleteInUse);
  SetReady(p.mr, "InUse", message, ctx_.clock);
  if (!RecentlySent(p.key, "in-use", message)) {
    Event(p, reconcile::kEventTypeWarning, "InUse", message);
    Remember(p.key, "in-use", message);
  }
  KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
  // A binding going away queues this instance again (anynines.cc); the composite's annotation
  // is not watched, so look again soon.
  return Steady(p, std::chrono::seconds(10));
}

core::Result<Result> ServiceInstanceReconciler::Run(Pass& p) {
  OsbClient& osb = *p.conn.osb;
  std::string id = GetString(p.mr, {"status", "atProvider", "instanceId"});
  if (id.empty()) {
    if (p.deleting) return Finalize(p);  // nothing was ever provisioned
    if (!p.policies.create) {
      SetReady(p.mr, "Creating",
               "the instance does not exist and management policies do not allow creating it",
               ctx_.clock);
      return Steady(p);
    }
    auto fresh = NewInstanceId(osb);
    if (!fresh.ok()) return Fail(p, fresh.status(), "CannotObserveExternalResource");
    id = *fresh;
    AtProvider(p.mr)["instanceId"] = id;
    // Persisted before anything is created, so the broker never sees two IDs for one MR.
    KLUTCH_RETURN_IF_ERROR(CommitStatus(p));
  }
  const std::string service_name = GetString(p.mr, {"spec", "forProvider", "serviceName"});
  const std::string plan_name = GetString(p.mr, {"spec", "forProvider", "planName"});
  const Json* accepts_ptr = Find(p.mr, {"spec", "forProvider", "acceptsIncomplete"});
  const bool accepts =
      !accepts_ptr || !accepts_ptr->is_boolean() || *accepts_ptr->get_ptr<const bool*>();
  PlanIds desired;
  if (!p.deleting) {
    if (service_name.empty() || plan_name.empty()) {
      return Fail(p, UserError("spec.forProvider.serviceName and planName are required"),
                  "CannotObserveExternalResource");
    }
    auto ids = osb.ResolvePlan(service_name, plan_name);
    if (!ids.ok()) return Fail(p, ids.status(), "CannotObserveExternalResource");
    desired = *ids;
  }

  // An operation in flight (§6.2 step 7).
  const Json* pending_ptr = Find(p.mr, {"status", "pendingOperation"});
  const bool pending = pending_ptr && pending_ptr->is_string();
  const std::string pending_key = pending ? *pending_ptr->get_ptr<const std::string*>() : "";
  bool in_progress = false;
  std::string progress, failure;
  if (pending) {
    auto lo = osb.GetLastOperation(id, pending_key);
    if (!lo.ok() && !IsGoneOrNotFound(lo.status())) {
      return Fail(p, lo.status(), "CannotObserveExternalResource");
    }
    if (!lo.ok() || lo->state == "succeeded") {
      p.mr["status"].erase("pendingOperation");
      Event(p, reconcile::kEventTypeNormal, "OperationSucceeded",
            Describe(fmt::format("the broker finished operation \"{}\"", pending_key),
                     lo.ok() ? lo->description : ""));
    } else if (lo->state == "failed") {
      p.mr["status"].erase("pendingOperation");
      failure =
          Describe(fmt::format("{}\"{}\" failed", kFailedOperation, pending_key), lo->description);
      Event(p, reconcile::kEventTypeWarning, "OperationFailed", failure);
    } else {
      in_progress = true;
      progress = lo->description;
    }
  }

  auto observed = ObserveInstance(osb, id);
  if (!observed.ok()) {
    if (in_progress && IsServiceError(observed.status()) &&
        ServiceErrorStatus(observed.status()) < 500) {
      // Some brokers answer fetches with 4xx while an operation runs.
      SetReady(p.mr, "Unavailable", Describe("the broker is working on the instance", progress),
               ctx_.clock);
      return Fast(p);
    }
    return Fail(p, observed.status(), "CannotObserveExternalResource");
  }
  const Observed& o = *observed;
  if (!o.exists || o.state == kStateDeleted) {
    if (p.deleting) {
      Event(p, reconcile::kEventTypeNormal, "DeletedExternalResource",
            fmt::format("the broker deleted instance {}", id));
      return Finalize(p);
    }
    if (in_progress) {
      SetReady(p.mr, "Creating", Describe("the broker is provisioning the instance", progress),
               ctx_.clock);
      KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
      return Fast(p);
    }
    if (!failure.empty()) {
      SetReady(p.mr, "Unavailable", failure, ctx_.clock);
      KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
      return Fail(p, UserError(failure), "CannotCreateExternalResource");
    }
    if (!p.policies.create) {
      SetReady(p.mr, "Creating",
               "the instance does not exist and management policies do not allow creating it",
               ctx_.clock);
      return Steady(p);
    }
    ProvisionRequest req{
        .instance_id = id,
        .service_id = desired.service_id,
        .plan_id = desired.plan_id,
        .organization_guid = GetString(p.mr, {"spec", "forProvider", "organizationGuid"}),
        .space_guid = GetString(p.mr, {"spec", "forProvider", "spaceGuid"}),
        .parameters = nullptr,
        .accepts_incomplete = accepts};
    if (const Json* params = Find(p.mr, {"spec", "forProvider", "parameters"});
        params && params->is_object()) {
      req.parameters = *params;
    }
    auto op = osb.Provision(req);
    if (!op.ok()) return Fail(p, op.status(), "CannotCreateExternalResource");
    if (op->async) p.mr["status"]["pendingOperation"] = op->operation;
    Event(p, reconcile::kEventTypeNormal, "CreatedExternalResource",
          fmt::format("the broker {} instance {} (service {}, plan {})",
                      op->async ? "is provisioning" : "provisioned", id, service_name, plan_name));
    SetReady(p.mr, "Creating", "the broker is provisioning the instance", ctx_.clock);
    KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
    return Fast(p);
  }

  // §6.2 step 5: the broker's view.
  Json& at = AtProvider(p.mr);
  at["state"] = o.state;
  at["planId"] = o.plan_id;
  at["serviceId"] = o.service_id;
  at["instanceId"] = o.instance_id.empty() ? id : o.instance_id;
  for (const auto& [key, value] :
       {std::pair{"provisionedAt", &o.provisioned_at}, std::pair{"deletedAt", &o.deleted_at},
        std::pair{"createdAt", &o.created_at}, std::pair{"updatedAt", &o.updated_at}}) {
    if (value->empty()) {
      at.erase(key);
    } else {
      at[key] = *value;
    }
  }
  if (o.parameters.is_object()) {
    at["parameters"] = o.parameters;
  } else {
    at.erase("parameters");
  }
  if (!failure.empty()) {
    SetReady(p.mr, "Unavailable", failure, ctx_.clock);
    KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
    return Fail(p, UserError(failure), "CannotUpdateExternalResource");
  }

  if (p.deleting) {
    if (!p.policies.del || Orphans(p.mr)) return Finalize(p);
    if (!in_progress && o.state != kStateDeleting) {
      std::vector<std::string> users = BindingsUsing(p.mr);
      if (!users.empty() && !DeletionForced(p.mr)) return WaitForBindings(p, users);
    }
    SetReady(p.mr, "Deleting", Describe("the broker is deleting the instance", progress),
             ctx_.clock);
    if (!in_progress && o.state != kStateDeleting && !RecentlySent(p.key, "deprovision", "")) {
      auto op = osb.Deprovision(id, o.service_id.empty() ? desired.service_id : o.service_id,
                                o.plan_id, accepts);
      if (!op.ok()) {
        if (IsInstanceNotFound(op.status())) return Finalize(p);
        return Fail(p, op.status(), "CannotDeleteExternalResource");
      }
      Remember(p.key, "deprovision", "");
      if (op->async) p.mr["status"]["pendingOperation"] = op->operation;
      Event(p, reconcile::kEventTypeNormal, "DeletingExternalResource",
            fmt::format("the broker {} instance {}", op->async ? "is deleting" : "deleted", id));
    }
    KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
    return Fast(p);
  }

  // §6.2 step 8: conditions.
  bool busy = in_progress || o.state == kStateCreated || o.state == kStateDeploying ||
              o.state == kStateDeleting;
  if (in_progress) {
    SetReady(
        p.mr, "Unavailable",
        Describe(fmt::format("the broker is working on operation \"{}\"", pending_key), progress),
        ctx_.clock);
  } else if (o.state == kStateCreated || o.state == kStateDeploying) {
    SetReady(p.mr, "Creating", fmt::format("the broker reports state \"{}\"", o.state), ctx_.clock);
  } else if (o.state == kStateProvisioned || o.state == kStateAvailable) {
    SetReady(p.mr, "Available", "", ctx_.clock);
  } else if (o.state == kStateDeleting) {
    SetReady(p.mr, "Deleting", "the broker reports state \"deleting\"", ctx_.clock);
  } else if (o.state == kStateFailed) {
    // The failed operation's words, set when it ended, stay for as long as the state does:
    // the status schema (upstream's) has no other place for them.
    auto was = reconcile::FindCondition(p.original, "Ready");
    if (!was || was->reason != "Unavailable" || !was->message.starts_with(kFailedOperation)) {
      SetReady(p.mr, "Unavailable", "the broker reports state \"failed\"", ctx_.clock);
    }
  } else {
    return Fail(
        p,
        UserError(fmt::format(
            "unable to determine state of instance: the broker reports state \"{}\"", o.state)),
        "CannotObserveExternalResource");
  }

  // §6.2 step 9: up to date?
  if (!busy && p.policies.update) {
    const Json* spec_params = Find(p.mr, {"spec", "forProvider", "parameters"});
    Json delta = ParameterDelta(o.parameters, spec_params ? *spec_params : Json());
    const bool plan_differs = desired.plan_id != o.plan_id;
    if (!delta.empty() || plan_differs) {
      const std::string hash = machinery::JsonHash(Json{{"plan", desired.plan_id}, {"p", delta}});
      if (!RecentlySent(p.key, "update", hash)) {
        UpdateRequest req{
            .instance_id = id,
            .service_id = desired.service_id,
            .plan_id = desired.plan_id,
            .parameters = delta.empty() ? Json() : delta,
            .organization_guid = GetString(p.mr, {"spec", "forProvider", "organizationGuid"}),
            .space_guid = GetString(p.mr, {"spec", "forProvider", "spaceGuid"}),
            .previous_plan_id = o.plan_id,
            .accepts_incomplete = accepts};
        auto op = osb.Update(req);
        if (!op.ok()) return Fail(p, op.status(), "CannotUpdateExternalResource");
        Remember(p.key, "update", hash);
        std::string what = plan_differs ? fmt::format("plan {}", plan_name) : "";
        if (!delta.empty()) {
          what += (what.empty() ? "" : ", ") + fmt::format("parameters {}", machinery::Dump(delta));
        }
        Event(p, reconcile::kEventTypeNormal, "UpdatedExternalResource",
              fmt::format("the broker {} instance {}: {}", op->async ? "is updating" : "updated",
                          id, what));
        if (op->async) {
          p.mr["status"]["pendingOperation"] = op->operation;
          SetReady(p.mr, "Unavailable",
                   fmt::format("the broker is working on operation \"{}\"", op->operation),
                   ctx_.clock);
        }
        KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
        busy = true;
      }
    }
  }
  if (busy) return Fast(p);
  return Steady(p);
}

// --- ServiceBinding (§6.3, §6.4) --------------------------------------------------------------

namespace {

std::vector<std::pair<std::string, core::SystemTime>> ParseSupersededList(const std::string& text) {
  std::vector<std::pair<std::string, core::SystemTime>> out;
  for (std::string_view item : core::SplitNonEmpty(text, ',')) {
    auto at = item.rfind('@');
    if (at == std::string_view::npos) continue;
    auto t = core::ParseTime(item.substr(at + 1));
    if (!t) continue;
    out.emplace_back(std::string(core::Trim(item.substr(0, at))), *t);
  }
  return out;
}

}  // namespace

ServiceBindingReconciler::Target ServiceBindingReconciler::SecretTarget(const Json& mr) const {
  Target t{GetString(mr, {"spec", "writeConnectionSecretToRef", "namespace"}),
           GetString(mr, {"spec", "writeConnectionSecretToRef", "name"})};
  if (t.name.empty()) {
    std::string claim = GetString(mr, {"metadata", "labels", kLabelClaimName});
    if (!claim.empty()) {
      t.name = claim + "-creds";
      t.ns = GetString(mr, {"metadata", "labels", kLabelClaimNamespace});
    }
  }
  if (t.ns.empty()) t.name.clear();
  return t;
}

core::Status ServiceBindingReconciler::WriteSecret(const Pass& p, const Target& target,
                                                   const SecretData& data) {
  Json encoded = Json::object();
  for (const auto& [k, v] : data) encoded[k] = core::Base64Encode(v);
  const std::string uid = machinery::Uid(p.mr);
  client::ResourceClient secrets(ctx_.rest, client::resources::kSecrets, target.ns);
  auto owned_elsewhere = [&] {
    return UserError(fmt::format("Secret {}/{} exists and is not controlled by ServiceBinding {}",
                                 target.ns, target.name, machinery::Name(p.mr)));
  };
  client::ObjectPtr cached = ctx_.secrets->indexer().Get(target.ns + "/" + target.name);
  if (cached && IsControlledBy(*cached, uid)) {
    const Json* have = Find(*cached, {"data"});
    if ((have ? *have : Json::object()) == encoded) return core::Status::Ok();
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto live = secrets.Get(target.name);
    if (!live.ok()) {
      if (!core::IsNotFound(live.status())) return live.status();
      Json secret = {{"apiVersion", "v1"},
                     {"kind", "Secret"},
                     {"metadata",
                      {{"name", target.name},
                       {"namespace", target.ns},
                       {"ownerReferences", Json::array({OwnerReference(p.mr, true)})}}},
                     {"type", kConnectionSecretType},
                     {"data", encoded}};
      auto created = secrets.Create(secret, {.field_manager = std::string(kFieldManager)});
      if (created.ok()) return core::Status::Ok();
      if (core::IsAlreadyExists(created.status())) continue;
      return created.status();
    }
    if (!IsControlledBy(*live, uid)) return owned_elsewhere();
    const Json* have = Find(*live, {"data"});
    if ((have ? *have : Json::object()) == encoded) return core::Status::Ok();
    Json updated = *live;
    updated["data"] = encoded;  // one write replaces every key: no mix of old and new
    auto w = secrets.Update(updated, {.field_manager = std::string(kFieldManager)});
    if (w.ok()) return core::Status::Ok();
    if (!core::IsConflict(w.status())) return w.status();
  }
  return core::Conflict(fmt::format("Secret {}/{} keeps changing", target.ns, target.name));
}

void ServiceBindingReconciler::SetConnectionDetails(Pass& p, const SecretData& data) {
  std::string type = GetString(p.mr, {"metadata", "labels", kLabelInstanceType});
  Json& at = AtProvider(p.mr);
  if (type.empty()) {
    at["connectionDetails"] = Json::array();
    return;
  }
  auto details = ParseConnectionDetails(type, data);
  if (details.ok()) {
    at["connectionDetails"] = *details;
  } else {
    at["connectionDetails"] = Json::array();
    Event(p, reconcile::kEventTypeWarning, "ConnectionDetails",
          "cannot list the endpoints of the binding: " + details.status().message());
  }
}

core::Result<Result> ServiceBindingReconciler::Publish(Pass& p, const Json& credentials,
                                                       const std::string& binding_id,
                                                       int64_t generation,
                                                       std::vector<Superseded> superseded,
                                                       bool rotated) {
  if (!credentials.is_object() || credentials.empty()) {
    return Fail(p, UserError("The service broker returned no credentials for service binding"),
                "CannotCreateExternalResource");
  }
  SecretData data = FlattenCredentials(credentials);
  Target target = SecretTarget(p.mr);
  if (!target.name.empty()) {
    if (auto s = WriteSecret(p, target, data); !s.ok()) {
      return Fail(p, s, "CannotPublishConnectionDetails");
    }
  }
  const std::string now = core::FormatMicroTime(ctx_.clock.Now());
  std::string list;
  for (const Superseded& s : superseded) {
    list += (list.empty() ? "" : ",") + s.id + "@" + core::FormatMicroTime(s.at);
  }
  KLUTCH_RETURN_IF_ERROR(
      Annotate(p, {{std::string(kAnnotationBindingCreated), "true"},
                   {std::string(kAnnotationBindingId), binding_id},
                   {std::string(kAnnotationBindingGeneration), std::to_string(generation)},
                   {std::string(kAnnotationBindingCreatedAt), now},
                   {std::string(kAnnotationSupersededBindings),
                    list.empty() ? std::nullopt : std::optional<std::string>(list)}}));
  std::string where =
      target.name.empty()
          ? std::string("no Secret (no writeConnectionSecretToRef, no claim labels)")
          : fmt::format("Secret {}/{}", target.ns, target.name);
  if (rotated) {
    Event(p, reconcile::kEventTypeNormal, "RotatedCredentials",
          fmt::format("new broker binding {} now in {}; the one it replaces is removed after {}",
                      binding_id, where, GoDuration(p.conn.settings.credential_grace_period)));
  } else {
    Event(p, reconcile::kEventTypeNormal, "CreatedExternalResource",
          fmt::format("the broker created binding {}; credentials are in {}", binding_id, where));
  }
  AtProvider(p.mr)["state"] = "Created";
  SetConnectionDetails(p, data);
  SetReady(p.mr, "Available", "", ctx_.clock);
  KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
  std::optional<milliseconds> sooner;
  if (p.conn.settings.max_credential_age.count() > 0) sooner = p.conn.settings.max_credential_age;
  for (const Superseded& s : superseded) {
    milliseconds d = Until(ctx_.clock.Now(), s.at + p.conn.settings.credential_grace_period);
    sooner = sooner ? std::min(*sooner, d) : d;
  }
  return Steady(p, sooner);
}

core::Result<Result> ServiceBindingReconciler::Delete(Pass& p,
                                                      const std::vector<Superseded>& superseded) {
  AtProvider(p.mr)["state"] = "Deleting";
  SetReady(p.mr, "Deleting", "", ctx_.clock);
  const Json& at = AtProvider(p.mr);
  const std::string instance_id = GetString(at, {"instanceId"});
  const std::string service_id = GetString(at, {"serviceID"});
  const std::string plan_id = GetString(at, {"planID"});
  const bool created = machinery::Annotation(p.mr, kAnnotationBindingCreated) == "true";
  if (p.policies.del && !Orphans(p.mr) && !instance_id.empty()) {
    std::vector<std::string> ids;
    for (const Superseded& s : superseded) ids.push_back(s.id);
    std::string current = machinery::Annotation(p.mr, kAnnotationBindingId);
    if (current.empty() && created) current = machinery::Uid(p.mr);
    if (!current.empty()) ids.push_back(current);
    for (const std::string& id : ids) {
      auto r = p.conn.osb->Unbind(instance_id, id, service_id, plan_id, true);
      if (!r.ok() && !IsGoneOrNotFound(r.status())) {
        return Fail(p, r.status(), "CannotDeleteExternalResource");
      }
    }
    if (!ids.empty()) {
      Event(p, reconcile::kEventTypeNormal, "DeletedExternalResource",
            fmt::format("the broker deleted binding(s) {}", core::Join(ids, ", ")));
    }
  }
  Target target = SecretTarget(p.mr);
  if (!target.name.empty()) {
    client::ResourceClient secrets(ctx_.rest, client::resources::kSecrets, target.ns);
    auto live = secrets.Get(target.name);
    if (live.ok() && IsControlledBy(*live, machinery::Uid(p.mr))) {
      auto d = secrets.Delete(target.name, {.precondition_uid = machinery::Uid(*live)});
      if (!d.ok() && !core::IsNotFound(d.status())) {
        return Fail(p, d.status(), "CannotDeleteExternalResource");
      }
    } else if (!live.ok() && !core::IsNotFound(live.status())) {
      return Fail(p, live.status(), "CannotDeleteExternalResource");
    }
  }
  return Finalize(p);
}

core::Result<Result> ServiceBindingReconciler::Run(Pass& p) {
  OsbClient& osb = *p.conn.osb;
  Json& at = AtProvider(p.mr);
  if (!at.contains("state")) at["state"] = "Pending";
  const std::string uid = machinery::Uid(p.mr);
  const std::string claim_ns = GetString(p.mr, {"metadata", "labels", kLabelClaimNamespace});
  const std::string instance_name = GetString(p.mr, {"spec", "forProvider", "instanceName"});
  std::vector<Superseded> superseded;
  for (auto& [id, t] :
       ParseSupersededList(machinery::Annotation(p.mr, kAnnotationSupersededBindings))) {
    superseded.push_back({id, t});
  }
  if (p.deleting) return Delete(p, superseded);

  // §6.3 step 1: the instance's IDs (kept current while the instance MR exists).
  auto instance = FindOne(*ctx_.instances, kByClaim, claim_ns + "/" + instance_name, "instance",
                          instance_name, claim_ns, "spec.instanceRef");
  if (instance.ok()) {
    if (auto same = SameServiceType(p.mr, **instance, "instance", instance_name); !same.ok()) {
      return Fail(p, same, "CannotObserveExternalResource");
    }
    const Json& inst = **instance;
    std::string iid = GetString(inst, {"status", "atProvider", "instanceId"});
    std::string sid = GetString(inst, {"status", "atProvider", "serviceId"});
    std::string pid = GetString(inst, {"status", "atProvider", "planId"});
    if (!iid.empty() && !sid.empty() && !pid.empty()) {
      at["instanceId"] = iid;
      at["serviceID"] = sid;
      at["planID"] = pid;
    }
  }
  // A binding whose instance is gone is never Ready: its credentials no longer work.
  if (machinery::Annotation(p.mr, kAnnotationBindingCreated) == "true" &&
      ctx_.instances->indexer().ByIndex(kByClaim, claim_ns + "/" + instance_name).empty()) {
    SetReady(p.mr, "Unavailable",
             fmt::format("service instance \"{}\" does not exist any more, so the credentials of "
                         "this binding no longer work: delete the binding, or create the "
                         "instance again",
                         instance_name),
             ctx_.clock);
    return Fail(p, core::NotFound("service instance " + instance_name + " is gone"),
                "InstanceGone");
  }
  const std::string instance_id = GetString(at, {"instanceId"});
  const std::string service_id = GetString(at, {"serviceID"});
  const std::string plan_id = GetString(at, {"planID"});
  if (instance_id.empty() || service_id.empty() || plan_id.empty()) {
    if (!instance.ok()) return Fail(p, instance.status(), "CannotObserveExternalResource");
    return Fail(p, UserError("service instance is not ready"), "CannotObserveExternalResource");
  }
  const Json* accepts_ptr = Find(p.mr, {"spec", "forProvider", "acceptsIncomplete"});
  const bool accepts =
      !accepts_ptr || !accepts_ptr->is_boolean() || *accepts_ptr->get_ptr<const bool*>();

  auto bind = [&](const std::string& binding_id) -> core::Result<std::optional<Json>> {
    auto op = osb.Bind(instance_id, binding_id, service_id, plan_id, accepts);
    if (!op.ok()) {
      if (ServiceErrorStatus(op.status()) != 409) return op.status();
      // Exists already with other attributes: take what the broker holds.
      KLUTCH_ASSIGN_OR_RETURN(Json fetched, osb.GetBinding(instance_id, binding_id));
      const Json* c = Find(fetched, {"credentials"});
      return std::optional<Json>(c ? *c : Json());
    }
    if (op->async) return std::optional<Json>();
    const Json* c = Find(op->body, {"credentials"});
    return std::optional<Json>(c ? *c : Json());
  };
  auto binding_in_progress = [&](const std::string& binding_id) {
    SetReady(p.mr, "Creating",
             fmt::format("the broker is creating binding {}; asking again", binding_id),
             ctx_.clock);
    return Fast(p);
  };

  const bool created = machinery::Annotation(p.mr, kAnnotationBindingCreated) == "true";
  if (!created) {
    if (!p.policies.create) {
      SetReady(p.mr, "Creating",
               "the binding does not exist and management policies do not allow creating it",
               ctx_.clock);
      return Steady(p);
    }
    if (instance.ok() && !reconcile::IsConditionTrue(**instance, "Ready")) {
      SetReady(p.mr, "Creating",
               fmt::format("waiting for service instance {} to become ready", instance_name),
               ctx_.clock);
      return Steady(p);  // the instance's change queues this binding again
    }
    auto creds = bind(uid);
    if (!creds.ok()) return Fail(p, creds.status(), "CannotCreateExternalResource");
    if (!*creds) return binding_in_progress(uid);
    return Publish(p, **creds, uid, 0, std::move(superseded), false);
  }

  // §6.3 steps 4-5: does the current binding still exist?
  std::string current = machinery::Annotation(p.mr, kAnnotationBindingId);
  if (current.empty()) current = uid;
  const int64_t generation = IntAnnotation(p.mr, kAnnotationBindingGeneration).value_or(0);
  const ProviderConfigSettings& settings = p.conn.settings;
  const core::SystemTime now = ctx_.clock.Now();

  // Rotation: a new broker binding once the current one is older than the maximum age.
  if (settings.max_credential_age.count() > 0) {
    std::optional<core::SystemTime> born =
        core::ParseTime(machinery::Annotation(p.mr, kAnnotationBindingCreatedAt));
    if (!born) born = core::ParseTime(GetString(p.mr, {"metadata", "creationTimestamp"}));
    if (!born || now - *born >= settings.max_credential_age) {
      const int64_t next = generation + 1;
      const std::string next_id = fmt::format("{}-r{}", uid, next);
      auto creds = bind(next_id);
      if (!creds.ok()) return Fail(p, creds.status(), "CannotRotateCredentials");
      if (!*creds) return binding_in_progress(next_id);
      superseded.push_back({current, now});
      return Publish(p, **creds, next_id, next, std::move(superseded), true);
    }
  }

  Json credentials;
  auto fetched = osb.GetBinding(instance_id, current);
  if (fetched.ok()) {
    if (const Json* c = Find(*fetched, {"credentials"})) credentials = *c;
  } else if (IsGoneOrNotFound(fetched.status())) {
    Event(p, reconcile::kEventTypeWarning, "BindingLost",
          fmt::format("the broker does not know binding {} (any more); binding again", current));
    auto creds = bind(current);
    if (!creds.ok()) return Fail(p, creds.status(), "CannotCreateExternalResource");
    if (!*creds) return binding_in_progress(current);
    return Publish(p, **creds, current, generation, std::move(superseded), false);
  } else {
    return Fail(p, fetched.status(), "CannotObserveExternalResource");
  }

  // Superseded bindings past their grace period go.
  std::vector<Superseded> kept;
  std::optional<milliseconds> sooner;
  for (const Superseded& s : superseded) {
    core::SystemTime due = s.at + settings.credential_grace_period;
    if (now >= due) {
      auto r = osb.Unbind(instance_id, s.id, service_id, plan_id, accepts);
      if (r.ok() || IsGoneOrNotFound(r.status())) {
        Event(p, reconcile::kEventTypeNormal, "DeletedSupersededBinding",
              fmt::format("the broker deleted superseded binding {}", s.id));
        continue;
      }
      bool internal = false;
      Event(p, reconcile::kEventTypeWarning, "CannotDeleteSupersededBinding",
            fmt::format("binding {}: {}", s.id, UserMessage(r.status(), internal)));
      due = now + ctx_.options.poll_interval;
    }
    kept.push_back(s);
    milliseconds d = Until(now, due);
    sooner = sooner ? std::min(*sooner, d) : d;
  }
  if (kept.size() != superseded.size()) {
    std::string list;
    for (const Superseded& s : kept) {
      list += (list.empty() ? "" : ",") + s.id + "@" + core::FormatMicroTime(s.at);
    }
    KLUTCH_RETURN_IF_ERROR(
        Annotate(p, {{std::string(kAnnotationSupersededBindings),
                      list.empty() ? std::nullopt : std::optional<std::string>(list)}}));
  }
  if (settings.max_credential_age.count() > 0) {
    auto born = core::ParseTime(machinery::Annotation(p.mr, kAnnotationBindingCreatedAt));
    milliseconds d =
        born ? Until(now, *born + settings.max_credential_age) : settings.max_credential_age;
    sooner = sooner ? std::min(*sooner, d) : d;
  }

  // The Secret holds the current credentials (repaired when deleted or edited).
  if (credentials.is_object() && !credentials.empty()) {
    SecretData data = FlattenCredentials(credentials);
    Target target = SecretTarget(p.mr);
    if (!target.name.empty()) {
      if (auto s = WriteSecret(p, target, data); !s.ok()) {
        return Fail(p, s, "CannotPublishConnectionDetails");
      }
    }
    SetConnectionDetails(p, data);
  }
  AtProvider(p.mr)["state"] = "Created";
  SetReady(p.mr, "Available", "", ctx_.clock);
  return Steady(p, sooner);
}

// --- Backup (§6.6) ----------------------------------------------------------------------------

core::Result<Result> BackupReconciler::Run(Pass& p) {
  BackupClient& manager = *p.conn.backup;
  const std::string claim_ns = GetString(p.mr, {"metadata", "labels", kLabelClaimNamespace});
  const std::string instance_name = GetString(p.mr, {"spec", "forProvider", "instanceName"});
  std::string instance_id = GetString(p.mr, {"status", "atProvider", "instanceId"});
  if (instance_id.empty()) {
    if (p.deleting) return Finalize(p);
    auto instance = FindOne(*ctx_.instances, kByClaim, claim_ns + "/" + instance_name, "instance",
                            instance_name, claim_ns, "spec.instanceRef");
    if (!instance.ok()) return Fail(p, instance.status(), "CannotObserveExternalResource");
    if (auto same = SameServiceType(p.mr, **instance, "instance", instance_name); !same.ok()) {
      return Fail(p, same, "CannotObserveExternalResource");
    }
    instance_id = GetString(**instance, {"status", "atProvider", "instanceId"});
    if (instance_id.empty() || !reconcile::IsConditionTrue(**instance, "Ready")) {
      return Fail(p, UserError("instance is not ready"), "CannotObserveExternalResource");
    }
    AtProvider(p.mr)["instanceId"] = instance_id;
    KLUTCH_RETURN_IF_ERROR(CommitStatus(p));
  }
  std::optional<int64_t> id = IntAnnotation(p.mr, kAnnotationBackupId);
  if (!id) id = IntAt(p.mr, {"status", "atProvider", "id"});
  if (!id) {
    if (p.deleting) return Finalize(p);
    if (!p.policies.create) {
      SetReady(p.mr, "Creating", "management policies do not allow taking the backup", ctx_.clock);
      return Steady(p);
    }
    const std::string uid = machinery::Uid(p.mr);
    bool adopted = false;
    auto created = CreateOnce(
        p, kAnnotationBackupPending, kAnnotationBackupId,
        [&] { return manager.ListBackups(instance_id); },
        [&] { return manager.CreateBackup(instance_id); },
        [&](int64_t candidate) {
          for (const auto& other : ctx_.backups->indexer().List()) {
            if (machinery::Uid(*other) == uid ||
                GetString(*other, {"status", "atProvider", "instanceId"}) != instance_id) {
              continue;
            }
            if (IntAnnotation(*other, kAnnotationBackupId) == candidate ||
                IntAt(*other, {"status", "atProvider", "id"}) == candidate) {
              return true;
            }
          }
          return false;
        },
        adopted);
    if (!created.ok()) return Fail(p, created.status(), "CannotCreateExternalResource");
    AtProvider(p.mr)["id"] = *created;
    Event(p, reconcile::kEventTypeNormal, "CreatedExternalResource",
          fmt::format("the backup manager {} backup {} of instance {}",
                      adopted ? "had started (answer lost, adopted)" : "started", *created,
                      instance_id));
    SetReady(p.mr, "Creating", "the backup manager is taking the backup", ctx_.clock);
    KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
    return Fast(p);
  }
  Json& at = AtProvider(p.mr);
  at["id"] = *id;
  auto info = manager.GetBackup(instance_id, *id);
  if (!info.ok()) {
    if (IsGoneOrNotFound(info.status())) {
      if (p.deleting) return Finalize(p);
      SetReady(p.mr, "Unavailable", "Backup has been deleted", ctx_.clock);
      return Steady(p);
    }
    return Fail(p, info.status(), "CannotObserveExternalResource");
  }
  const std::string previous = GetString(at, {"status"});
  at["id"] = info->id;
  at["size"] = info->size;
  at["status"] = info->status;
  at["downloadable"] = info->downloadable;
  for (const auto& [key, value] : {std::pair{"triggered_at", &info->triggered_at},
                                   std::pair{"finished_at", &info->finished_at}}) {
    if (value->empty()) {
      at.erase(key);
    } else {
      at[key] = *value;
    }
  }
  if (p.deleting) {
    if (info->status == kBackupDeleted || !p.policies.del || Orphans(p.mr)) return Finalize(p);
    SetReady(p.mr, "Deleting", "the backup manager is deleting the backup", ctx_.clock);
    if (!RecentlySent(p.key, "delete", "")) {
      auto d = manager.DeleteBackup(instance_id, *id);
      if (!d.ok()) {
        if (IsGoneOrNotFound(d)) return Finalize(p);
        return Fail(p, d, "CannotDeleteExternalResource");
      }
      Remember(p.key, "delete", "");
    }
    KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
    return Fast(p);
  }
  const std::string& s = info->status;
  if (s != previous) {
    if (s == kBackupDone) {
      Event(p, reconcile::kEventTypeNormal, "BackupDone",
            fmt::format("backup {} is done ({} bytes)", info->id, info->size));
    } else if (s == kBackupFailed) {
      Event(p, reconcile::kEventTypeWarning, "BackupFailed",
            fmt::format("the backup manager reports backup {} failed", info->id));
    }
  }
  if (s == kBackupQueued || s == kBackupRunning) {
    SetReady(p.mr, "Creating", fmt::format("the backup is {}", s), ctx_.clock);
    return Fast(p);
  }
  if (s == kBackupDone) {
    SetReady(p.mr, "Available", "", ctx_.clock);
  } else if (s == kBackupFailed) {
    SetReady(p.mr, "Unavailable", "Backup has failed", ctx_.clock);
  } else if (s == kBackupDeleted) {
    SetReady(p.mr, "Unavailable", "Backup has been deleted", ctx_.clock);
  } else {
    at.erase("status");
    return Fail(p,
                UserError(fmt::format(
                    "cannot determine state of backup: a9s Backup Manager returned unknown status "
                    "\"{}\". Known statuses are \"queued\", \"running\", \"done\", \"failed\" "
                    "and \"deleted\"",
                    s)),
                "CannotObserveExternalResource");
  }
  return Steady(p);
}

// --- Restore (§6.7) ---------------------------------------------------------------------------

core::Result<Result> RestoreReconciler::Run(Pass& p) {
  BackupClient& manager = *p.conn.backup;
  const std::string claim_ns = GetString(p.mr, {"metadata", "labels", kLabelClaimNamespace});
  const std::string backup_name = GetString(p.mr, {"spec", "forProvider", "backupName"});
  std::string instance_id = GetString(p.mr, {"status", "atProvider", "instanceId"});
  std::optional<int64_t> backup_id = IntAt(p.mr, {"status", "atProvider", "backupId"});
  if (instance_id.empty() || !backup_id) {
    if (p.deleting) return Finalize(p);
    auto backup = FindOne(*ctx_.backups, kByClaim, claim_ns + "/" + backup_name, "backup",
                          backup_name, claim_ns, "spec.backupRef");
    if (!backup.ok()) return Fail(p, backup.status(), "CannotObserveExternalResource");
    if (auto same = SameServiceType(p.mr, **backup, "backup", backup_name); !same.ok()) {
      return Fail(p, same, "CannotObserveExternalResource");
    }
    instance_id = GetString(**backup, {"status", "atProvider", "instanceId"});
    backup_id = IntAt(**backup, {"status", "atProvider", "id"});
    if (instance_id.empty() || !backup_id) {
      return Fail(p, UserError("backup is not ready"), "CannotObserveExternalResource");
    }
    AtProvider(p.mr)["instanceId"] = instance_id;
    AtProvider(p.mr)["backupId"] = *backup_id;
    KLUTCH_RETURN_IF_ERROR(CommitStatus(p));
  }
  std::optional<int64_t> id = IntAnnotation(p.mr, kAnnotationRestoreId);
  if (!id) id = IntAt(p.mr, {"status", "atProvider", "restoreId"});
  if (!id) {
    if (p.deleting) return Finalize(p);
    if (!p.policies.create) {
      SetReady(p.mr, "Creating", "management policies do not allow starting the restore",
               ctx_.clock);
      return Steady(p);
    }
    const std::string uid = machinery::Uid(p.mr);
    bool adopted = false;
    auto created = CreateOnce(
        p, kAnnotationRestorePending, kAnnotationRestoreId,
        [&]() -> core::Result<Json> {
          // Only restores of this backup are candidates.
          KLUTCH_ASSIGN_OR_RETURN(Json all, manager.ListRestores(instance_id));
          Json mine = Json::array();
          if (all.is_array()) {
            for (const Json& r : all) {
              auto of = IntField(r, "backup_id");
              if (!of || *of == *backup_id) mine.push_back(r);
            }
          }
          return mine;
        },
        [&] { return manager.CreateRestore(instance_id, *backup_id); },
        [&](int64_t candidate) {
          for (const auto& other : ctx_.restores->indexer().List()) {
            if (machinery::Uid(*other) == uid ||
                GetString(*other, {"status", "atProvider", "instanceId"}) != instance_id) {
              continue;
            }
            if (IntAnnotation(*other, kAnnotationRestoreId) == candidate ||
                IntAt(*other, {"status", "atProvider", "restoreId"}) == candidate) {
              return true;
            }
          }
          return false;
        },
        adopted);
    if (!created.ok()) return Fail(p, created.status(), "CannotCreateExternalResource");
    AtProvider(p.mr)["restoreId"] = *created;
    Event(p, reconcile::kEventTypeNormal, "CreatedExternalResource",
          fmt::format("the backup manager started restore {} of backup {} into instance {}",
                      *created, *backup_id, instance_id));
    SetReady(p.mr, "Creating", "the backup manager is restoring the backup", ctx_.clock);
    KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
    return Fast(p);
  }
  Json& at = AtProvider(p.mr);
  at["restoreId"] = *id;
  auto info = manager.GetRestore(instance_id, *id);
  if (!info.ok()) {
    if (IsGoneOrNotFound(info.status())) {
      if (p.deleting) return Finalize(p);
      SetReady(p.mr, "Unavailable", "Restore has been deleted", ctx_.clock);
      return Steady(p);
    }
    return Fail(p, info.status(), "CannotObserveExternalResource");
  }
  const std::string& s = info->status;
  const bool known = s == kBackupQueued || s == kBackupRunning || s == kBackupDone ||
                     s == kBackupFailed || s == kBackupDeleted;
  const std::string previous = GetString(at, {"state"});
  if (known) at["state"] = s;
  for (const auto& [key, value] : {std::pair{"triggeredAt", &info->triggered_at},
                                   std::pair{"finishedAt", &info->finished_at}}) {
    if (value->empty()) {
      at.erase(key);
    } else {
      at[key] = *value;
    }
  }
  if (p.deleting) {
    if (s == kBackupQueued || s == kBackupRunning) {
      // There is no way to stop a restore: the resource stays until it has finished.
      std::string message = fmt::format("cannot delete restore that is still {}", s);
      SetReady(p.mr, "Deleting", message, ctx_.clock);
      SetSynced(p.mr, false, message, ctx_.clock);
      KLUTCH_RETURN_IF_ERROR(CommitStatus(p));
      Event(p, reconcile::kEventTypeWarning, "CannotDeleteExternalResource", message);
      failures_.Reset(p.key);
      return Result::RequeueAfter(fast_.Next(p.key));
    }
    return Finalize(p);
  }
  if (known && s != previous) {
    if (s == kBackupDone) {
      Event(p, reconcile::kEventTypeNormal, "RestoreDone",
            fmt::format("restore {} completed successfully", *id));
    } else if (s == kBackupFailed) {
      Event(p, reconcile::kEventTypeWarning, "RestoreFailed",
            fmt::format("the backup manager reports restore {} failed", *id));
    }
  }
  if (s == kBackupQueued || s == kBackupRunning) {
    SetReady(p.mr, "Creating", fmt::format("the restore is {}", s), ctx_.clock);
    return Fast(p);
  }
  if (s == kBackupDone) {
    SetReady(p.mr, "Available", "Restore completed successfully", ctx_.clock);
  } else if (s == kBackupFailed) {
    SetReady(p.mr, "Unavailable", "Restore has failed", ctx_.clock);
  } else if (s == kBackupDeleted) {
    SetReady(p.mr, "Unavailable", "Restore has been deleted", ctx_.clock);
  } else {
    return Fail(p,
                UserError(fmt::format(
                    "cannot determine state of restore: a9s Backup Manager returned unknown "
                    "status \"{}\"",
                    s)),
                "CannotObserveExternalResource");
  }
  return Steady(p);
}

}  // namespace klutch::providers::anynines
