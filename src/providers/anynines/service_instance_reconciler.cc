#include "providers/anynines/service_instance_reconciler.h"

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
#include "reconcile/step.h"

namespace klutch::providers::anynines {

using machinery::Find;
using machinery::GetString;
using reconcile::Request;
using reconcile::Result;
using std::chrono::milliseconds;

namespace {

// Broker instance states (§4.1).
constexpr std::string_view kStateCreated = "created";
constexpr std::string_view kStateProvisioned = "provisioned";
constexpr std::string_view kStateAvailable = "available";
constexpr std::string_view kStateDeleted = "deleted";
constexpr std::string_view kStateDeleting = "deleting";
constexpr std::string_view kStateDeploying = "deploying";
constexpr std::string_view kStateFailed = "failed";

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

namespace {

// What the broker says about an instance.
struct Observed {
  bool exists = false;
  std::string state, plan_id, service_id, instance_id;
  std::string provisioned_at, deleted_at, created_at, updated_at;
  // What the broker says about a running instance: the a9s document's message, and Klutch's
  // broker's served_by when the service's name promises a version it does not run.
  std::string served_by, message;
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
    o.served_by = GetString(*doc, {"served_by"});
    o.message = GetString(*doc, {"message"});
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
  // A binding going away queues this instance again (runtime.cc); the composite's
  // annotation is not watched, so look again soon.
  return Steady(p, std::chrono::seconds(10));
}

// What one pass knows of the instance beyond the MR.
struct ServiceInstanceReconciler::Instance {
  std::string id;
  std::string service_name, plan_name;
  bool accepts = true;  // acceptsIncomplete
  PlanIds desired;
  // The operation in flight (§6.2 step 7), when status.pendingOperation names one.
  std::string pending_key;
  bool in_progress = false;
  std::string progress, failure;
  Observed observed;
};

core::Result<Result> ServiceInstanceReconciler::Run(Pass& p) {
  Instance in;
  KLUTCH_RUN_STEP(EnsureInstanceId(p, in));
  KLUTCH_RUN_STEP(ResolvePlan(p, in));
  KLUTCH_RUN_STEP(FollowOperation(p, in));
  KLUTCH_RUN_STEP(ObserveExternal(p, in));
  const Observed& o = in.observed;
  if (!o.exists || o.state == kStateDeleted) return HandleAbsent(p, in);
  RecordObserved(p, in);
  if (!in.failure.empty()) {
    SetReady(p.mr, "Unavailable", in.failure, ctx_.clock);
    KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
    return Fail(p, UserError(in.failure), "CannotUpdateExternalResource");
  }
  if (p.deleting) return Deprovision(p, in);
  KLUTCH_RUN_STEP(SetReadyFromState(p, in));
  bool busy = in.in_progress || o.state == kStateCreated || o.state == kStateDeploying ||
              o.state == kStateDeleting;
  if (!busy && p.policies.update) KLUTCH_RUN_STEP(EnsureUpToDate(p, in, busy));
  if (busy) return Fast(p);
  return Steady(p);
}

// The instance ID in status.atProvider, generated (and persisted before anything is created,
// so the broker never sees two IDs for one MR) on the first pass.
reconcile::Step ServiceInstanceReconciler::EnsureInstanceId(Pass& p, Instance& in) {
  in.id = GetString(p.mr, {"status", "atProvider", "instanceId"});
  if (!in.id.empty()) return reconcile::Continue();
  if (p.deleting) return Finalize(p);  // nothing was ever provisioned
  if (!p.policies.create) {
    SetReady(p.mr, "Creating",
             "the instance does not exist and management policies do not allow creating it",
             ctx_.clock);
    return Steady(p);
  }
  auto fresh = NewInstanceId(*p.conn.osb);
  if (!fresh.ok()) return Fail(p, fresh.status(), "CannotObserveExternalResource");
  in.id = *fresh;
  AtProvider(p.mr)["instanceId"] = in.id;
  return CommitStatus(p);
}

// The service and plan IDs the spec's names resolve to (not needed to delete).
reconcile::Step ServiceInstanceReconciler::ResolvePlan(Pass& p, Instance& in) {
  in.service_name = GetString(p.mr, {"spec", "forProvider", "serviceName"});
  in.plan_name = GetString(p.mr, {"spec", "forProvider", "planName"});
  const Json* accepts_ptr = Find(p.mr, {"spec", "forProvider", "acceptsIncomplete"});
  in.accepts = !accepts_ptr || !accepts_ptr->is_boolean() || *accepts_ptr->get_ptr<const bool*>();
  if (p.deleting) return reconcile::Continue();
  if (in.service_name.empty() || in.plan_name.empty()) {
    return Fail(p, UserError("spec.forProvider.serviceName and planName are required"),
                "CannotObserveExternalResource");
  }
  auto ids = p.conn.osb->ResolvePlan(in.service_name, in.plan_name);
  if (!ids.ok()) return Fail(p, ids.status(), "CannotObserveExternalResource");
  in.desired = *ids;
  return reconcile::Continue();
}

// An operation in flight (§6.2 step 7): still running, succeeded or failed.
reconcile::Step ServiceInstanceReconciler::FollowOperation(Pass& p, Instance& in) {
  const Json* pending_ptr = Find(p.mr, {"status", "pendingOperation"});
  if (!pending_ptr || !pending_ptr->is_string()) return reconcile::Continue();
  in.pending_key = *pending_ptr->get_ptr<const std::string*>();
  auto lo = p.conn.osb->GetLastOperation(in.id, in.pending_key);
  if (!lo.ok() && !IsGoneOrNotFound(lo.status())) {
    return Fail(p, lo.status(), "CannotObserveExternalResource");
  }
  if (!lo.ok() || lo->state == "succeeded") {
    p.mr["status"].erase("pendingOperation");
    Event(p, reconcile::kEventTypeNormal, "OperationSucceeded",
          Describe(fmt::format("the broker finished operation \"{}\"", in.pending_key),
                   lo.ok() ? lo->description : ""));
  } else if (lo->state == "failed") {
    p.mr["status"].erase("pendingOperation");
    in.failure =
        Describe(fmt::format("{}\"{}\" failed", kFailedOperation, in.pending_key), lo->description);
    Event(p, reconcile::kEventTypeWarning, "OperationFailed", in.failure);
  } else {
    in.in_progress = true;
    in.progress = lo->description;
  }
  return reconcile::Continue();
}

reconcile::Step ServiceInstanceReconciler::ObserveExternal(Pass& p, Instance& in) {
  auto observed = ObserveInstance(*p.conn.osb, in.id);
  if (observed.ok()) {
    in.observed = *std::move(observed);
    return reconcile::Continue();
  }
  if (in.in_progress && IsServiceError(observed.status()) &&
      ServiceErrorStatus(observed.status()) < 500) {
    // Some brokers answer fetches with 4xx while an operation runs.
    SetReady(p.mr, "Unavailable", Describe("the broker is working on the instance", in.progress),
             ctx_.clock);
    return Fast(p);
  }
  return Fail(p, observed.status(), "CannotObserveExternalResource");
}

// The broker has no such instance (or a deleted one): deleted, being provisioned, failed, or
// to be provisioned now.
core::Result<Result> ServiceInstanceReconciler::HandleAbsent(Pass& p, Instance& in) {
  if (p.deleting) {
    Event(p, reconcile::kEventTypeNormal, "DeletedExternalResource",
          fmt::format("the broker deleted instance {}", in.id));
    return Finalize(p);
  }
  if (in.in_progress) {
    SetReady(p.mr, "Creating", Describe("the broker is provisioning the instance", in.progress),
             ctx_.clock);
    KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
    return Fast(p);
  }
  if (!in.failure.empty()) {
    SetReady(p.mr, "Unavailable", in.failure, ctx_.clock);
    KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
    return Fail(p, UserError(in.failure), "CannotCreateExternalResource");
  }
  if (!p.policies.create) {
    SetReady(p.mr, "Creating",
             "the instance does not exist and management policies do not allow creating it",
             ctx_.clock);
    return Steady(p);
  }
  return Provision(p, in);
}

core::Result<Result> ServiceInstanceReconciler::Provision(Pass& p, Instance& in) {
  ProvisionRequest req{
      .instance_id = in.id,
      .service_id = in.desired.service_id,
      .plan_id = in.desired.plan_id,
      .organization_guid = GetString(p.mr, {"spec", "forProvider", "organizationGuid"}),
      .space_guid = GetString(p.mr, {"spec", "forProvider", "spaceGuid"}),
      .parameters = nullptr,
      .accepts_incomplete = in.accepts};
  if (const Json* params = Find(p.mr, {"spec", "forProvider", "parameters"});
      params && params->is_object()) {
    req.parameters = *params;
  }
  auto op = p.conn.osb->Provision(req);
  if (!op.ok()) return Fail(p, op.status(), "CannotCreateExternalResource");
  if (op->async) p.mr["status"]["pendingOperation"] = op->operation;
  Event(p, reconcile::kEventTypeNormal, "CreatedExternalResource",
        fmt::format("the broker {} instance {} (service {}, plan {})",
                    op->async ? "is provisioning" : "provisioned", in.id, in.service_name,
                    in.plan_name));
  SetReady(p.mr, "Creating", "the broker is provisioning the instance", ctx_.clock);
  KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
  return Fast(p);
}

// §6.2 step 5: the broker's view, in status.atProvider.
void ServiceInstanceReconciler::RecordObserved(Pass& p, const Instance& in) {
  const Observed& o = in.observed;
  Json& at = AtProvider(p.mr);
  at["state"] = o.state;
  at["planId"] = o.plan_id;
  at["serviceId"] = o.service_id;
  at["instanceId"] = o.instance_id.empty() ? in.id : o.instance_id;
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
}

// A deleted MR: the instance deprovisioned once no binding uses it (or deletion is forced).
core::Result<Result> ServiceInstanceReconciler::Deprovision(Pass& p, Instance& in) {
  const Observed& o = in.observed;
  if (!p.policies.del || Orphans(p.mr)) return Finalize(p);
  if (!in.in_progress && o.state != kStateDeleting) {
    std::vector<std::string> users = BindingsUsing(p.mr);
    if (!users.empty() && !DeletionForced(p.mr)) return WaitForBindings(p, users);
  }
  SetReady(p.mr, "Deleting", Describe("the broker is deleting the instance", in.progress),
           ctx_.clock);
  if (!in.in_progress && o.state != kStateDeleting && !RecentlySent(p.key, "deprovision", "")) {
    auto op = p.conn.osb->Deprovision(
        in.id, o.service_id.empty() ? in.desired.service_id : o.service_id, o.plan_id, in.accepts);
    if (!op.ok()) {
      if (IsInstanceNotFound(op.status())) return Finalize(p);
      return Fail(p, op.status(), "CannotDeleteExternalResource");
    }
    Remember(p.key, "deprovision", "");
    if (op->async) p.mr["status"]["pendingOperation"] = op->operation;
    Event(p, reconcile::kEventTypeNormal, "DeletingExternalResource",
          fmt::format("the broker {} instance {}", op->async ? "is deleting" : "deleted", in.id));
  }
  KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
  return Fast(p);
}

// §6.2 step 8: Ready from the operation in flight and the broker's state.
reconcile::Step ServiceInstanceReconciler::SetReadyFromState(Pass& p, const Instance& in) {
  const Observed& o = in.observed;
  if (in.in_progress) {
    SetReady(p.mr, "Unavailable",
             Describe(fmt::format("the broker is working on operation \"{}\"", in.pending_key),
                      in.progress),
             ctx_.clock);
  } else if (o.state == kStateCreated || o.state == kStateDeploying) {
    SetReady(p.mr, "Creating", fmt::format("the broker reports state \"{}\"", o.state), ctx_.clock);
  } else if (o.state == kStateProvisioned || o.state == kStateAvailable) {
    std::vector<std::string> notes;
    for (const std::string* note : {&o.served_by, &o.message}) {
      if (!note->empty()) notes.push_back(*note);
    }
    SetReady(p.mr, "Available", core::Join(notes, "; "), ctx_.clock);
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
  return reconcile::Continue();
}

// §6.2 step 9: an update of plan or parameters when they differ (not repeated for the same
// desired state within poll_interval); `busy` says whether one was sent.
reconcile::Step ServiceInstanceReconciler::EnsureUpToDate(Pass& p, const Instance& in, bool& busy) {
  const Observed& o = in.observed;
  const Json* spec_params = Find(p.mr, {"spec", "forProvider", "parameters"});
  Json delta = ParameterDelta(o.parameters, spec_params ? *spec_params : Json());
  const bool plan_differs = in.desired.plan_id != o.plan_id;
  if (delta.empty() && !plan_differs) return reconcile::Continue();
  const std::string hash = machinery::JsonHash(Json{{"plan", in.desired.plan_id}, {"p", delta}});
  if (RecentlySent(p.key, "update", hash)) return reconcile::Continue();
  UpdateRequest req{
      .instance_id = in.id,
      .service_id = in.desired.service_id,
      .plan_id = in.desired.plan_id,
      .parameters = delta.empty() ? Json() : delta,
      .organization_guid = GetString(p.mr, {"spec", "forProvider", "organizationGuid"}),
      .space_guid = GetString(p.mr, {"spec", "forProvider", "spaceGuid"}),
      .previous_plan_id = o.plan_id,
      .accepts_incomplete = in.accepts};
  auto op = p.conn.osb->Update(req);
  if (!op.ok()) return Fail(p, op.status(), "CannotUpdateExternalResource");
  Remember(p.key, "update", hash);
  std::string what = plan_differs ? fmt::format("plan {}", in.plan_name) : "";
  if (!delta.empty()) {
    what += (what.empty() ? "" : ", ") + fmt::format("parameters {}", machinery::Dump(delta));
  }
  Event(p, reconcile::kEventTypeNormal, "UpdatedExternalResource",
        fmt::format("the broker {} instance {}: {}", op->async ? "is updating" : "updated", in.id,
                    what));
  if (op->async) {
    p.mr["status"]["pendingOperation"] = op->operation;
    SetReady(p.mr, "Unavailable",
             fmt::format("the broker is working on operation \"{}\"", op->operation), ctx_.clock);
  }
  KLUTCH_RETURN_IF_ERROR(ForceStatus(p));
  busy = true;
  return reconcile::Continue();
}

}  // namespace klutch::providers::anynines
