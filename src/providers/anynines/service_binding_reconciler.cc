#include "providers/anynines/service_binding_reconciler.h"

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

// A duration for messages: "30s", or "300ms" when it is not whole seconds.
std::string GoDuration(milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

milliseconds Until(core::SystemTime now, core::SystemTime t) {
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(t - now));
}

}  // namespace

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

// What one pass knows of the binding beyond the MR.
struct ServiceBindingReconciler::Binding {
  std::string uid, claim_ns, instance_name;
  std::vector<Superseded> superseded;
  core::Result<client::ObjectPtr> instance = client::ObjectPtr();  // the instance MR
  std::string instance_id, service_id, plan_id;
  bool accepts = true;     // acceptsIncomplete
  std::string current;     // the current broker binding's ID
  int64_t generation = 0;  // its rotation number
  core::SystemTime now{};
  Json credentials;                    // what the broker holds for the current binding
  std::optional<milliseconds> sooner;  // when a rotation or an unbind is due
};

core::Result<Result> ServiceBindingReconciler::Run(Pass& p) {
  Json& at = AtProvider(p.mr);
  if (!at.contains("state")) at["state"] = "Pending";
  Binding b;
  b.uid = machinery::Uid(p.mr);
  b.claim_ns = GetString(p.mr, {"metadata", "labels", kLabelClaimNamespace});
  b.instance_name = GetString(p.mr, {"spec", "forProvider", "instanceName"});
  for (auto& [id, t] :
       ParseSupersededList(machinery::Annotation(p.mr, kAnnotationSupersededBindings))) {
    b.superseded.push_back({id, t});
  }
  if (p.deleting) return Delete(p, b.superseded);
  KLUTCH_RUN_STEP(ResolveInstance(p, b));
  if (machinery::Annotation(p.mr, kAnnotationBindingCreated) != "true") return CreateBinding(p, b);
  // §6.3 steps 4-5: does the current binding still exist?
  b.current = machinery::Annotation(p.mr, kAnnotationBindingId);
  if (b.current.empty()) b.current = b.uid;
  b.generation = IntAnnotation(p.mr, kAnnotationBindingGeneration).value_or(0);
  b.now = ctx_.clock.Now();
  KLUTCH_RUN_STEP(RotateIfDue(p, b));
  KLUTCH_RUN_STEP(FetchCurrent(p, b));
  KLUTCH_RETURN_IF_ERROR(UnbindSuperseded(p, b));
  return PublishCurrent(p, b);
}

// §6.3 step 1: the instance's IDs (kept current while the instance MR exists); a binding whose
// instance is gone is never Ready.
reconcile::Step ServiceBindingReconciler::ResolveInstance(Pass& p, Binding& b) {
  Json& at = AtProvider(p.mr);
  b.instance = FindOne(*ctx_.instances, kByClaim, b.claim_ns + "/" + b.instance_name, "instance",
                       b.instance_name, b.claim_ns, "spec.instanceRef");
  if (b.instance.ok()) {
    if (auto same = SameServiceType(p.mr, **b.instance, "instance", b.instance_name); !same.ok()) {
      return Fail(p, same, "CannotObserveExternalResource");
    }
    const Json& inst = **b.instance;
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
      ctx_.instances->indexer().ByIndex(kByClaim, b.claim_ns + "/" + b.instance_name).empty()) {
    SetReady(p.mr, "Unavailable",
             fmt::format("service instance \"{}\" does not exist any more, so the credentials of "
                         "this binding no longer work: delete the binding, or create the "
                         "instance again",
                         b.instance_name),
             ctx_.clock);
    return Fail(p, core::NotFound("service instance " + b.instance_name + " is gone"),
                "InstanceGone");
  }
  b.instance_id = GetString(at, {"instanceId"});
  b.service_id = GetString(at, {"serviceID"});
  b.plan_id = GetString(at, {"planID"});
  if (b.instance_id.empty() || b.service_id.empty() || b.plan_id.empty()) {
    if (!b.instance.ok()) return Fail(p, b.instance.status(), "CannotObserveExternalResource");
    return Fail(p, UserError("service instance is not ready"), "CannotObserveExternalResource");
  }
  const Json* accepts_ptr = Find(p.mr, {"spec", "forProvider", "acceptsIncomplete"});
  b.accepts = !accepts_ptr || !accepts_ptr->is_boolean() || *accepts_ptr->get_ptr<const bool*>();
  return reconcile::Continue();
}

// Binds `binding_id`: its credentials, or nullopt while the broker works on it (a 202).
core::Result<std::optional<Json>> ServiceBindingReconciler::BindAs(Pass& p, const Binding& b,
                                                                   const std::string& binding_id) {
  OsbClient& osb = *p.conn.osb;
  auto op = osb.Bind(b.instance_id, binding_id, b.service_id, b.plan_id, b.accepts);
  if (!op.ok()) {
    if (ServiceErrorStatus(op.status()) != 409) return op.status();
    // Exists already with other attributes: take what the broker holds.
    KLUTCH_ASSIGN_OR_RETURN(Json fetched, osb.GetBinding(b.instance_id, binding_id));
    const Json* c = Find(fetched, {"credentials"});
    return std::optional<Json>(c ? *c : Json());
  }
  if (op->async) return std::optional<Json>();
  const Json* c = Find(op->body, {"credentials"});
  return std::optional<Json>(c ? *c : Json());
}

core::Result<Result> ServiceBindingReconciler::BindingInProgress(Pass& p,
                                                                 const std::string& binding_id) {
  SetReady(p.mr, "Creating",
           fmt::format("the broker is creating binding {}; asking again", binding_id), ctx_.clock);
  return Fast(p);
}

// The first broker binding (ID: the MR's UID), once the instance is Ready.
core::Result<Result> ServiceBindingReconciler::CreateBinding(Pass& p, Binding& b) {
  if (!p.policies.create) {
    SetReady(p.mr, "Creating",
             "the binding does not exist and management policies do not allow creating it",
             ctx_.clock);
    return Steady(p);
  }
  if (b.instance.ok() && !reconcile::IsConditionTrue(**b.instance, "Ready")) {
    SetReady(p.mr, "Creating",
             fmt::format("waiting for service instance {} to become ready", b.instance_name),
             ctx_.clock);
    return Steady(p);  // the instance's change queues this binding again
  }
  auto creds = BindAs(p, b, b.uid);
  if (!creds.ok()) return Fail(p, creds.status(), "CannotCreateExternalResource");
  if (!*creds) return BindingInProgress(p, b.uid);
  return Publish(p, **creds, b.uid, 0, std::move(b.superseded), false);
}

// Rotation: a new broker binding once the current one is older than the maximum age.
reconcile::Step ServiceBindingReconciler::RotateIfDue(Pass& p, Binding& b) {
  const ProviderConfigSettings& settings = p.conn.settings;
  if (settings.max_credential_age.count() <= 0) return reconcile::Continue();
  std::optional<core::SystemTime> born =
      core::ParseTime(machinery::Annotation(p.mr, kAnnotationBindingCreatedAt));
  if (!born) born = core::ParseTime(GetString(p.mr, {"metadata", "creationTimestamp"}));
  if (born && b.now - *born < settings.max_credential_age) return reconcile::Continue();
  const int64_t next = b.generation + 1;
  const std::string next_id = fmt::format("{}-r{}", b.uid, next);
  auto creds = BindAs(p, b, next_id);
  if (!creds.ok()) return Fail(p, creds.status(), "CannotRotateCredentials");
  if (!*creds) return BindingInProgress(p, next_id);
  b.superseded.push_back({b.current, b.now});
  return Publish(p, **creds, next_id, next, std::move(b.superseded), true);
}

// The current binding's credentials; a binding the broker lost (404/410) is bound again.
reconcile::Step ServiceBindingReconciler::FetchCurrent(Pass& p, Binding& b) {
  auto fetched = p.conn.osb->GetBinding(b.instance_id, b.current);
  if (fetched.ok()) {
    if (const Json* c = Find(*fetched, {"credentials"})) b.credentials = *c;
    return reconcile::Continue();
  }
  if (!IsGoneOrNotFound(fetched.status())) {
    return Fail(p, fetched.status(), "CannotObserveExternalResource");
  }
  Event(p, reconcile::kEventTypeWarning, "BindingLost",
        fmt::format("the broker does not know binding {} (any more); binding again", b.current));
  auto creds = BindAs(p, b, b.current);
  if (!creds.ok()) return Fail(p, creds.status(), "CannotCreateExternalResource");
  if (!*creds) return BindingInProgress(p, b.current);
  return Publish(p, **creds, b.current, b.generation, std::move(b.superseded), false);
}

// Superseded bindings past their grace period go; `b.sooner` says when the next is due (or the
// next rotation).
core::Status ServiceBindingReconciler::UnbindSuperseded(Pass& p, Binding& b) {
  const ProviderConfigSettings& settings = p.conn.settings;
  std::vector<Superseded> kept;
  for (const Superseded& s : b.superseded) {
    core::SystemTime due = s.at + settings.credential_grace_period;
    if (b.now >= due) {
      auto r = p.conn.osb->Unbind(b.instance_id, s.id, b.service_id, b.plan_id, b.accepts);
      if (r.ok() || IsGoneOrNotFound(r.status())) {
        Event(p, reconcile::kEventTypeNormal, "DeletedSupersededBinding",
              fmt::format("the broker deleted superseded binding {}", s.id));
        continue;
      }
      bool internal = false;
      Event(p, reconcile::kEventTypeWarning, "CannotDeleteSupersededBinding",
            fmt::format("binding {}: {}", s.id, UserMessage(r.status(), internal)));
      due = b.now + ctx_.options.poll_interval;
    }
    kept.push_back(s);
    milliseconds d = Until(b.now, due);
    b.sooner = b.sooner ? std::min(*b.sooner, d) : d;
  }
  if (kept.size() != b.superseded.size()) {
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
        born ? Until(b.now, *born + settings.max_credential_age) : settings.max_credential_age;
    b.sooner = b.sooner ? std::min(*b.sooner, d) : d;
  }
  return core::Status::Ok();
}

// The Secret holds the current credentials (repaired when deleted or edited); Ready.
core::Result<Result> ServiceBindingReconciler::PublishCurrent(Pass& p, const Binding& b) {
  if (b.credentials.is_object() && !b.credentials.empty()) {
    SecretData data = FlattenCredentials(b.credentials);
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
  return Steady(p, b.sooner);
}

}  // namespace klutch::providers::anynines
