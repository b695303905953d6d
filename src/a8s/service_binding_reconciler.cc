#include "a8s/service_binding_reconciler.h"

#include <fmt/format.h>

#include "a8s/a8s_names.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "core/random.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::a8s {

using reconcile::Result;
using reconcile::Step;

struct ServiceBindingReconciler::Pass {
  Json object;
  Json modified;
  std::string instance_ns;
  std::string instance_name;
  InstanceRecord record;  // the instance's, once resolved
  BindingAccount account;
  std::string key() const { return machinery::Namespace(object) + "/" + machinery::Name(object); }
  std::string secret_name() const {
    return machinery::Name(object) + std::string(kBindingSecretSuffix);
  }
};

namespace {

// A role name of the binding's own, from its UID: stable across restarts, never reused.
std::string RoleName(const std::string& uid) {
  std::string hex;
  for (char c : uid) {
    if (c != '-') hex += c;
  }
  return "a8s_sb_" + hex.substr(0, 20);
}

// Whether `secret` is controlled by the ServiceBinding with `uid`.
bool OwnedBy(const Json& secret, const std::string& uid) {
  const Json* refs = machinery::Find(secret, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_array()) return false;
  for (const Json& ref : *refs) {
    if (machinery::GetString(ref, {"uid"}) == uid) return true;
  }
  return false;
}

}  // namespace

core::Result<Result> ServiceBindingReconciler::Reconcile(const reconcile::Request& request) {
  auto cached = ctx_.bindings.indexer().Get(request.Key());
  if (cached == nullptr) return Result::Done();
  Pass p{.object = *cached, .modified = *cached};
  p.instance_name = machinery::GetString(p.object, {"spec", "instance", "name"});
  p.instance_ns = machinery::GetString(p.object, {"spec", "instance", "namespace"});
  if (p.instance_ns.empty()) p.instance_ns = machinery::Namespace(p.object);
  if (machinery::IsBeingDeleted(p.object)) return Delete(p);
  if (!machinery::Find(p.modified, {"status", "implemented"})) {
    p.modified["status"]["implemented"] = false;
  }
  KLUTCH_RUN_STEP(EnsureFinalizer(p));
  KLUTCH_RUN_STEP(ResolveInstance(p));
  KLUTCH_RUN_STEP(EnsureLogin(p));
  KLUTCH_RUN_STEP(EnsureSecret(p));
  return ReportStatus(p);
}

// The role goes (its sessions end at once), then the Secret, then the finalizer.
core::Result<Result> ServiceBindingReconciler::Delete(Pass& p) {
  if (!machinery::HasFinalizer(p.object, kFinalizer)) return Result::Done();
  const std::string uid = machinery::Uid(p.object);
  for (const InstanceRecord& listed : ctx_.store.All()) {
    if (!listed.bindings.contains(uid)) continue;
    auto lock = ctx_.store.LockFor(listed.id);
    core::MutexLock hold(*lock);
    auto saved = ctx_.store.Get(listed.id);
    if (!saved) continue;
    InstanceRecord record = std::move(*saved);
    auto it = record.bindings.find(uid);
    if (it == record.bindings.end()) continue;
    if (auto st = ctx_.engine.Unbind(record, AppliedLimits(record), it->second); !st.ok()) {
      // A Postgresql being deleted waits for its bindings; when its servers cannot answer, the
      // login goes with them instead, or neither would ever go.
      if (!InstanceBeingDeleted(record)) {
        return Failed(ctx_, kServiceBindings, p.object, p.modified, "UnbindFailed",
                      fmt::format("ServiceBinding {}: removing its login failed ({}); retrying",
                                  p.key(), st.message()),
                      std::chrono::seconds(5));
      }
      KLUTCH_LOG(kInfo, "operator",
                 "ServiceBinding {}: its login goes with Postgresql {}/{}, which is being "
                 "deleted and cannot answer: {}",
                 p.key(), record.namespace_, record.name, st.message());
    }
    record.bindings.erase(it);
    KLUTCH_RETURN_IF_ERROR(ctx_.store.Save(record));
  }
  client::ResourceClient secrets(ctx_.rest, client::resources::kSecrets,
                                 machinery::Namespace(p.object));
  if (auto live = secrets.Get(p.secret_name()); live.ok() && OwnedBy(*live, uid)) {
    auto deleted = secrets.Delete(p.secret_name());
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
  }
  KLUTCH_RETURN_IF_ERROR(SetFinalizer(ctx_, kServiceBindings, p.object, false).status());
  return Result::Done();
}

bool ServiceBindingReconciler::InstanceBeingDeleted(const InstanceRecord& record) const {
  auto pg = ctx_.postgresqls.indexer().Get(record.namespace_ + "/" + record.name);
  return pg == nullptr || machinery::Uid(*pg) != record.id || machinery::IsBeingDeleted(*pg);
}

Step ServiceBindingReconciler::EnsureFinalizer(Pass& p) {
  KLUTCH_ASSIGN_OR_RETURN(bool wrote, SetFinalizer(ctx_, kServiceBindings, p.object, true));
  if (wrote) return Result::Done();
  return reconcile::Continue();
}

// The Postgresql it names must exist here and run; until then the binding waits and says why.
Step ServiceBindingReconciler::ResolveInstance(Pass& p) {
  const std::string kind = machinery::GetString(p.object, {"spec", "instance", "kind"});
  const std::string api = machinery::GetString(p.object, {"spec", "instance", "apiVersion"});
  if (p.instance_ns != machinery::Namespace(p.object)) {
    // A binding gets the credentials of an owner of the instance's data: only in its own
    // namespace (as Klutch's claims are), never a database of another tenant.
    return Failed(ctx_, kServiceBindings, p.object, p.modified, "OtherNamespace",
                  fmt::format("ServiceBinding {}: spec.instance.namespace {} is not the binding's "
                              "own; bind to a Postgresql in namespace {} (or leave the field out)",
                              p.key(), p.instance_ns, machinery::Namespace(p.object)));
  }
  if (kind != "Postgresql" || api != kPostgresqlApiVersion) {
    return Failed(ctx_, kServiceBindings, p.object, p.modified, "UnsupportedInstance",
                  fmt::format("ServiceBinding {}: spec.instance is a {} ({}); klutch operator "
                              "binds to Postgresql ({}) only",
                              p.key(), kind, api, kPostgresqlApiVersion));
  }
  auto instance = ctx_.postgresqls.indexer().Get(p.instance_ns + "/" + p.instance_name);
  if (instance == nullptr) {
    return Failed(ctx_, kServiceBindings, p.object, p.modified, "InstanceNotFound",
                  fmt::format("ServiceBinding {}: there is no Postgresql {}/{} ({}); it is bound "
                              "once one exists",
                              p.key(), p.instance_ns, p.instance_name,
                              FieldOfClaim("spec.instance.name", "spec.instanceRef")));
  }
  auto record = ctx_.store.Get(machinery::Uid(*instance));
  // A login made before stays usable while a server restarts; a new one waits for all of them.
  const bool bound = record && record->bindings.contains(machinery::Uid(p.object));
  if (!record || !record->provisioned ||
      (!bound && machinery::GetString(*instance, {"status", "clusterStatus"}) != kRunning)) {
    return Failed(ctx_, kServiceBindings, p.object, p.modified, "InstanceNotRunning",
                  fmt::format("ServiceBinding {}: waiting for Postgresql {}/{} to run", p.key(),
                              p.instance_ns, p.instance_name),
                  std::chrono::seconds(2));
  }
  if (machinery::IsBeingDeleted(*instance)) {
    return Failed(ctx_, kServiceBindings, p.object, p.modified, "InstanceDeleting",
                  fmt::format("ServiceBinding {}: Postgresql {}/{} is being deleted", p.key(),
                              p.instance_ns, p.instance_name));
  }
  p.record = std::move(*record);
  return reconcile::Continue();
}

// The login: made once, then recorded with its password (which the Secret keeps); a crash in
// between leaves a role no record names, which binding again with a new password takes over
// (the role's name comes from the binding's UID).
Step ServiceBindingReconciler::EnsureLogin(Pass& p) {
  const std::string uid = machinery::Uid(p.object);
  auto it = p.record.bindings.find(uid);
  if (it != p.record.bindings.end()) {
    p.account = it->second;
    return reconcile::Continue();
  }
  auto lock = ctx_.store.LockFor(p.record.id);
  core::MutexLock hold(*lock);
  // Saved by others since it was read (another binding, a failover): changed from what is
  // saved now.
  auto fresh = ctx_.store.Get(p.record.id);
  if (!fresh) return core::Unavailable("the record of the instance is gone");
  p.record = std::move(*fresh);
  BindingAccount account;
  account.binding_uid = uid;
  account.username = RoleName(uid);
  account.password = core::RandomPassword(32);
  auto credentials = ctx_.engine.Bind(p.record, AppliedLimits(p.record), account);
  if (!credentials.ok()) {
    (void)ctx_.engine.Unbind(p.record, AppliedLimits(p.record), account);
    return Failed(ctx_, kServiceBindings, p.object, p.modified, "BindFailed",
                  fmt::format("ServiceBinding {}: making its login failed: {}", p.key(),
                              credentials.status().message()),
                  std::chrono::seconds(5));
  }
  p.record.bindings[uid] = account;
  KLUTCH_RETURN_IF_ERROR(ctx_.store.Save(p.record));
  p.account = account;
  ctx_.events.Event(p.object, reconcile::kEventTypeNormal, "Bound",
                    fmt::format("login {} on Postgresql {}/{}", account.username, p.instance_ns,
                                p.instance_name));
  return reconcile::Continue();
}

Step ServiceBindingReconciler::EnsureSecret(Pass& p) {
  const std::string host = ctx_.engine_context.host;
  const int port =
      p.record.ports.empty() ? 5432 : p.record.ports[static_cast<size_t>(p.record.primary)];
  // The URI names every server of a cluster and asks for the one taking writes (libpq's
  // target_session_attrs): a client that reconnects after a failover finds the new primary
  // without waiting for this Secret to change. `port` is the primary's now.
  std::vector<std::string> hosts;
  for (int p_port : p.record.ports) hosts.push_back(fmt::format("{}:{}", host, p_port));
  const std::string uri =
      hosts.size() > 1 ? fmt::format("postgresql://{}:{}@{}/{}?target_session_attrs=read-write",
                                     p.account.username, p.account.password, core::Join(hosts, ","),
                                     p.record.database)
                       : fmt::format("postgresql://{}:{}@{}:{}/{}", p.account.username,
                                     p.account.password, host, port, p.record.database);
  auto b64 = [](const std::string& s) { return core::Base64Encode(s); };
  Json data = {{"username", b64(p.account.username)}, {"password", b64(p.account.password)},
               {"database", b64(p.record.database)},  {"instance_service", b64(host)},
               {"port", b64(std::to_string(port))},   {"uri", b64(uri)}};
  Json secret = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata",
       {{"name", p.secret_name()},
        {"namespace", machinery::Namespace(p.object)},
        {"labels", {{"servicebindings.anynines.com/binding", machinery::Name(p.object)}}},
        {"ownerReferences", Json::array({{{"apiVersion", "servicebindings.anynines.com/v1beta3"},
                                          {"kind", "ServiceBinding"},
                                          {"name", machinery::Name(p.object)},
                                          {"uid", machinery::Uid(p.object)},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}})}}},
      {"type", "Opaque"},
      {"data", data}};
  client::ResourceClient secrets(ctx_.rest, client::resources::kSecrets,
                                 machinery::Namespace(p.object));
  auto live = secrets.Get(p.secret_name());
  if (!live.ok()) {
    if (!core::IsNotFound(live.status())) return live.status();
    KLUTCH_RETURN_IF_ERROR(secrets.Create(secret).status());
    return reconcile::Continue();
  }
  if (!OwnedBy(*live, machinery::Uid(p.object))) {
    return Failed(ctx_, kServiceBindings, p.object, p.modified, "SecretExists",
                  fmt::format("ServiceBinding {}: a Secret {} that is not this binding's exists "
                              "already; delete or rename it",
                              p.key(), p.secret_name()));
  }
  const Json* live_data = machinery::Find(*live, {"data"});
  if (live_data != nullptr && *live_data == data) return reconcile::Continue();
  Json updated = *live;
  updated["data"] = data;
  KLUTCH_RETURN_IF_ERROR(secrets.Update(updated).status());
  return reconcile::Continue();
}

core::Result<Result> ServiceBindingReconciler::ReportStatus(Pass& p) {
  Json& status = p.modified["status"];
  status["implemented"] = true;
  status["secret"] = {{"name", p.secret_name()}, {"namespace", machinery::Namespace(p.object)}};
  status.erase("error");
  reconcile::SetCondition(p.modified,
                          {.type = "Ready",
                           .status = "True",
                           .observed_generation = Generation(p.object),
                           .reason = "Bound",
                           .message = ""},
                          ctx_.clock);
  KLUTCH_RETURN_IF_ERROR(WriteStatus(ctx_, kServiceBindings, p.object, p.modified));
  return Result::Done();
}

}  // namespace klutch::a8s
