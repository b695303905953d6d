// The connection to one provider (§4.4-§4.8): heartbeat and kubeconfig mirroring, namespace
// deletion, CRDs from exports, export status, and the syncers of each export.
#include "konnector/connection.h"

#include <thread>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "konnector/export_syncer.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"
#include "reconcile/step.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

constexpr std::string_view kControllerPrefix = "klutch-konnector-";

std::string FormatGoDuration(std::chrono::milliseconds d) {
  int64_t total_ms = d.count();
  int64_t h = total_ms / 3600000, m = (total_ms / 60000) % 60, s = (total_ms / 1000) % 60,
          ms = total_ms % 1000;
  std::string sec = std::to_string(s);
  if (ms) {
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03lld", static_cast<long long>(ms));
    std::string f = frac;
    while (f.back() == '0') f.pop_back();
    sec += f;
  }
  if (h) return std::to_string(h) + "h" + std::to_string(m) + "m" + sec + "s";
  if (m) return std::to_string(m) + "m" + sec + "s";
  return sec + "s";
}

// "vA.B.C" out of our version string; "" when it has none (§4.5 version parsing).
std::string ParseKonnectorVersion(const std::string& v) {
  std::string s = v;
  if (auto p = s.find("+kube-bind-"); p != std::string::npos) s = s.substr(p + 11);
  if (s.size() < 6 || s[0] != 'v') return "";
  size_t i = 1;
  for (int part = 0; part < 3; ++part) {
    size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == start) return "";
    if (part < 2) {
      if (i >= s.size() || s[i] != '.') return "";
      ++i;
    }
  }
  return s.substr(0, i);
}

}  // namespace

std::string SecretKeyOf(const Json& binding) {
  return machinery::GetString(binding, {"spec", "kubeconfigSecretRef", "namespace"}) + "/" +
         machinery::GetString(binding, {"spec", "kubeconfigSecretRef", "name"});
}

Connection::Connection(Context& ctx, std::string kubeconfig, client::RestClient& provider,
                       std::unique_ptr<client::RestClient> owned, std::string provider_ns)
    : ctx_(ctx),
      kubeconfig_(std::move(kubeconfig)),
      provider_(provider),
      owned_provider_(std::move(owned)),
      provider_ns_(std::move(provider_ns)) {
  // Until every cache of the connection has listed, "not in the cache" does not mean "does
  // not exist": reconcilers wait (CachesSynced) and the last first list brings them back.
  client::InformerOptions o{.ns = provider_ns_,
                            .on_synced =
                                [this] {
                                  if (!CachesSynced()) return;
                                  heartbeat_->queue().Add("cluster");
                                  EnqueueBindingsAndExports();
                                },
                            .clock = &ctx_.clock};
  cluster_bindings_ =
      std::make_unique<client::Informer>(provider_, apis::klutch::kClusterBindings, o);
  exports_ = std::make_unique<client::Informer>(provider_, apis::klutch::kApiServiceExports, o);
  service_namespaces_ =
      std::make_unique<client::Informer>(provider_, apis::klutch::kApiServiceNamespaces, o);
  (void)service_namespaces_->indexer().AddIndex(kByProviderNamespaceIndex, [](const Json& asn) {
    std::string ns = machinery::GetString(asn, {"status", "namespace"});
    return ns.empty() ? std::vector<std::string>{} : std::vector<std::string>{ns};
  });
  if (!ctx_.options.control_plane_mode) {
    provider_secrets_ =
        std::make_unique<client::Informer>(provider_, client::resources::kSecrets, o);
  }

  auto make = [&](std::string name, auto fn, std::unique_ptr<reconcile::FuncReconciler>& r,
                  std::unique_ptr<reconcile::Controller>& c) {
    r = std::make_unique<reconcile::FuncReconciler>(std::move(fn));
    c = std::make_unique<reconcile::Controller>(
        std::string(kControllerPrefix) + name, *r,
        reconcile::ControllerOptions{.workers = ctx_.options.workers,
                                     .metrics = &ctx_.controller_metrics,
                                     .clock = &ctx_.clock});
  };
  make(
      "clusterbinding", [this](const Request&) { return ReconcileHeartbeat(); },
      heartbeat_reconciler_, heartbeat_);
  make(
      "namespacedeletion", [this](const Request& r) { return ReconcileNamespace(r); },
      namespace_reconciler_, namespaces_);
  make(
      "servicebinding-crd", [this](const Request& r) { return ReconcileCrd(r); }, crd_reconciler_,
      crds_);
  make(
      "serviceexport", [this](const Request& r) { return ReconcileExport(r); }, export_reconciler_,
      export_controller_);
}

Connection::~Connection() { Stop(); }

void Connection::Attach(const std::string& binding_key) {
  {
    core::MutexLock lock(mu_);
    bindings_.insert(binding_key);
  }
  crds_->queue().Add(binding_key);
  export_controller_->queue().Add(provider_ns_ + "/" + Request::FromKey(binding_key).name);
  heartbeat_->queue().Add("cluster");
}

void Connection::Detach(const std::string& binding_key) {
  {
    core::MutexLock lock(mu_);
    bindings_.erase(binding_key);
  }
  export_controller_->queue().Add(provider_ns_ + "/" + Request::FromKey(binding_key).name);
}

bool Connection::Empty() const {
  core::MutexLock lock(mu_);
  return bindings_.empty();
}

std::set<std::string> Connection::Bindings() const {
  core::MutexLock lock(mu_);
  return bindings_;
}

ObjectPtr Connection::BindingNamed(const std::string& name) const {
  for (const auto& key : Bindings()) {
    if (Request::FromKey(key).name != name) continue;
    if (ObjectPtr b = ctx_.bindings.indexer().Get(key)) return b;
  }
  return nullptr;
}

bool Connection::CachesSynced() const {
  return cluster_bindings_->HasSynced() && exports_->HasSynced() &&
         service_namespaces_->HasSynced() && (!provider_secrets_ || provider_secrets_->HasSynced());
}

std::string Connection::ConsumerNamespaceFor(const std::string& pns) const {
  auto asns = service_namespaces_->indexer().ByIndex(kByProviderNamespaceIndex, pns);
  return asns.empty() ? "" : machinery::Name(*asns.front());
}

std::string Connection::ProviderNamespaceFor(const std::string& cns) const {
  ObjectPtr asn = service_namespaces_->indexer().Get(provider_ns_ + "/" + cns);
  return asn ? machinery::GetString(*asn, {"status", "namespace"}) : "";
}

void Connection::EnqueueBindingsAndExports() {
  for (const auto& key : Bindings()) {
    crds_->queue().Add(key);
    export_controller_->queue().Add(provider_ns_ + "/" + Request::FromKey(key).name);
  }
}

void Connection::Start() {
  WatchProvider();
  WatchConsumer();
  cluster_bindings_->Start();
  exports_->Start();
  service_namespaces_->Start();
  if (provider_secrets_) provider_secrets_->Start();
  heartbeat_->Start();
  namespaces_->Start();
  crds_->Start();
  export_controller_->Start();
  heartbeat_->queue().Add("cluster");
  ctx_.metrics.connections.With({}).Add(1);
}

void Connection::WatchProvider() {
  // Provider-side events.
  cluster_bindings_->AddEventHandler(OnChange([this](const Json&) {
    heartbeat_->queue().Add("cluster");
    EnqueueBindingsAndExports();  // the pretty name
  }));
  exports_->AddEventHandler(OnChange([this](const Json& e) {
    export_controller_->queue().Add(provider_ns_ + "/" + machinery::Name(e));
    for (const auto& key : Bindings()) {
      if (Request::FromKey(key).name == machinery::Name(e)) crds_->queue().Add(key);
    }
  }));
  // Syncers are told outside the lock: they start and stop informers.
  auto tell_syncers = [this](const Json& asn, bool deleted) {
    std::vector<std::shared_ptr<ExportSyncer>> syncers;
    {
      core::MutexLock lock(mu_);
      for (auto& [name, s] : syncers_) syncers.push_back(s);
    }
    for (auto& s : syncers) s->OnServiceNamespace(asn, deleted);
  };
  service_namespaces_->AddEventHandler(
      {.on_add =
           [this, tell_syncers](const ObjectPtr& o) {
             namespaces_->queue().Add(machinery::Name(*o));
             tell_syncers(*o, false);
           },
       .on_update =
           [this, tell_syncers](const ObjectPtr&, const ObjectPtr& o) {
             namespaces_->queue().Add(machinery::Name(*o));
             tell_syncers(*o, false);
           },
       .on_delete = [tell_syncers](const ObjectPtr& o) { tell_syncers(*o, true); }});
  if (provider_secrets_) {
    provider_secrets_->AddEventHandler(
        OnChange([this](const Json&) { heartbeat_->queue().Add("cluster"); }));
  }
}

void Connection::WatchConsumer() {
  // Consumer-side events, through the konnector's shared informers.
  auto share = [this](client::Informer& informer, std::function<void(const Json&)> fn) {
    shared_handlers_.emplace_back(&informer, informer.AddEventHandler(OnChange(std::move(fn))));
  };
  share(ctx_.bindings, [this](const Json& b) {
    std::string key = client::ObjectKey(b);
    bool ours;
    {
      core::MutexLock lock(mu_);
      ours = bindings_.count(key) > 0;
    }
    if (!ours) return;
    crds_->queue().Add(key);
    export_controller_->queue().Add(provider_ns_ + "/" + machinery::Name(b));
    heartbeat_->queue().Add("cluster");
  });
  share(ctx_.secrets, [this](const Json& s) {
    std::string key = client::ObjectKey(s);
    for (const auto& b : Bindings()) {
      ObjectPtr binding = ctx_.bindings.indexer().Get(b);
      if (binding && SecretKeyOf(*binding) == key) {
        heartbeat_->queue().Add("cluster");
        return;
      }
    }
  });
  share(ctx_.app_crds, [this](const Json& crd) {
    const std::string name = machinery::Name(crd);
    for (const auto& key : Bindings()) {
      if (Request::FromKey(key).name == name) crds_->queue().Add(key);
    }
    export_controller_->queue().Add(provider_ns_ + "/" + name);
  });
  share(ctx_.app_namespaces,
        [this](const Json& ns) { namespaces_->queue().Add(machinery::Name(ns)); });
}

void Connection::Stop() {
  {
    core::MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  for (auto& [informer, id] : shared_handlers_) informer->RemoveEventHandler(id);
  shared_handlers_.clear();
  for (auto* c : {heartbeat_.get(), namespaces_.get(), crds_.get(), export_controller_.get()}) {
    c->Stop();
  }
  std::map<std::string, std::shared_ptr<ExportSyncer>> syncers;
  {
    core::MutexLock lock(mu_);
    syncers.swap(syncers_);
  }
  syncers.clear();  // each stops (when no event handler holds it any more)
  ctx_.metrics.syncers.Remove({{"connection", provider_ns_}});
  cluster_bindings_->Stop();
  exports_->Stop();
  service_namespaces_->Stop();
  if (provider_secrets_) provider_secrets_->Stop();
  ctx_.metrics.connections.With({}).Add(-1);
}

// ---------------------------------------------------------------------------------------------
// §4.5: heartbeat, version and kubeconfig mirroring.

core::Status Connection::MirrorKubeconfig(const Json& cluster_binding, Json& status_object) {
  const std::string name =
      machinery::GetString(cluster_binding, {"spec", "kubeconfigSecretRef", "name"});
  std::string key = machinery::GetString(cluster_binding, {"spec", "kubeconfigSecretRef", "key"});
  if (key.empty()) key = apis::klutch::kKubeconfigKey;
  ObjectPtr secret = provider_secrets_->indexer().Get(provider_ns_ + "/" + name);
  if (!secret) {
    reconcile::MarkFalse(status_object, "SecretValid", "ProviderSecretNotFound",
                         reconcile::kSeverityWarning,
                         "kubeconfig Secret " + provider_ns_ + "/" + name +
                             " of the ClusterBinding not found on the provider",
                         ctx_.clock);
    return core::Status::Ok();
  }
  if (!SecretValue(*secret, key)) {
    reconcile::MarkFalse(
        status_object, "SecretValid", "ProviderSecretInvalid", reconcile::kSeverityWarning,
        "kubeconfig Secret " + provider_ns_ + "/" + name + " has no key " + key, ctx_.clock);
    return core::Status::Ok();
  }
  reconcile::MarkTrue(status_object, "SecretValid", ctx_.clock);
  const Json* data = machinery::Find(*secret, {"data"});
  std::string type = machinery::GetString(*secret, {"type"});
  client::ResourceClient secrets(ctx_.binding, client::resources::kSecrets);
  core::Status result = core::Status::Ok();
  for (const auto& b : Bindings()) {
    ObjectPtr binding = ctx_.bindings.indexer().Get(b);
    if (!binding) continue;
    const std::string ns =
        machinery::GetString(*binding, {"spec", "kubeconfigSecretRef", "namespace"});
    const std::string sname =
        machinery::GetString(*binding, {"spec", "kubeconfigSecretRef", "name"});
    ObjectPtr current = ctx_.secrets.indexer().Get(ns + "/" + sname);
    if (current && machinery::Find(*current, {"data"}) &&
        *machinery::Find(*current, {"data"}) == (data ? *data : Json::object()) &&
        machinery::GetString(*current, {"type"}) == type) {
      continue;
    }
    Json desired = current ? *current
                           : Json{{"apiVersion", "v1"},
                                  {"kind", "Secret"},
                                  {"metadata", {{"name", sname}, {"namespace", ns}}}};
    desired["data"] = data ? *data : Json::object();
    if (!type.empty()) desired["type"] = type;
    auto r =
        current ? secrets.Namespace(ns).Update(desired) : secrets.Namespace(ns).Create(desired);
    ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", current ? "update" : "create"}});
    if (!r.ok()) result = r.status();
  }
  return result;
}

core::Result<Result> Connection::ReconcileHeartbeat() {
  if (!CachesSynced()) return Result::Done();
  ObjectPtr cb = cluster_bindings_->indexer().Get(provider_ns_ + "/" +
                                                  std::string(apis::klutch::kClusterBindingName));
  if (!cb) return Result::Done();  // the backend creates it; its add event brings us back
  Json modified = *cb;
  core::Status mirror = core::Status::Ok();
  if (!ctx_.options.control_plane_mode) mirror = MirrorKubeconfig(*cb, modified);

  const auto interval = ctx_.options.heartbeat_interval;
  const auto now = ctx_.clock.Now();
  std::string last = machinery::GetString(*cb, {"status", "lastHeartbeatTime"});
  auto last_time = core::ParseTime(last);
  // Timestamps have whole seconds: renew when less than half a second of the interval is left.
  auto due = last_time ? *last_time + interval - std::chrono::milliseconds(500) : now;
  if (!last_time || now >= due) {
    modified["status"]["lastHeartbeatTime"] = core::FormatTime(now);
    last_time = now;
  }
  modified["status"]["heartbeatInterval"] = FormatGoDuration(interval);
  std::string version = ParseKonnectorVersion(ctx_.options.version);
  if (version.empty()) {
    modified["status"]["konnectorVersion"] = "unknown";
    reconcile::MarkFalse(modified, "ValidVersion", "ParseError", reconcile::kSeverityWarning,
                         "could not parse konnector version " + ctx_.options.version, ctx_.clock);
  } else {
    modified["status"]["konnectorVersion"] = version;
    reconcile::MarkTrue(modified, "ValidVersion", ctx_.clock);
  }
  reconcile::SetSummary(modified, ctx_.clock);
  auto committed =
      reconcile::Committer(client::ResourceClient(provider_, apis::klutch::kClusterBindings),
                           std::string(apis::klutch::kKonnectorFieldManager))
          .CommitStatus(*cb, modified);
  ctx_.metrics.heartbeats.Increment({{"result", committed.ok() ? "ok" : "error"}});
  reconcile::SeverityCondition heartbeating{.type = "Heartbeating", .status = "True"};
  if (!committed.ok() && !core::IsConflict(committed.status())) {
    heartbeating = {.type = "Heartbeating",
                    .status = "False",
                    .severity = std::string(reconcile::kSeverityWarning),
                    .reason = "ClusterBindingUpdateFailed",
                    .message = "updating ClusterBinding " + provider_ns_ +
                               "/cluster on the provider failed: " + committed.status().message()};
  }
  if (committed.ok() || !core::IsConflict(committed.status())) {
    for (const auto& b : Bindings()) SetBindingCondition(b, heartbeating);
  }
  // A failed heartbeat is retried within the interval, not after the controller's backoff
  // (up to 1000 s), so the provider sees the konnector again as soon as it is reachable.
  if (!committed.ok() || !mirror.ok()) {
    const core::Status& failed = committed.ok() ? mirror : committed.status();
    KLUTCH_LOG(kWarn, "konnector", "heartbeat of {}: {}", provider_ns_, failed.message());
    return Result::RequeueAfter(std::min(interval, std::chrono::milliseconds(5000)));
  }
  auto wait = *last_time + interval - ctx_.clock.Now();
  return Result::RequeueAfter(std::max(std::chrono::duration_cast<std::chrono::milliseconds>(wait),
                                       std::chrono::milliseconds(100)));
}

void Connection::SetBindingCondition(const std::string& binding_key,
                                     const reconcile::SeverityCondition& c) {
  ObjectPtr binding = ctx_.bindings.indexer().Get(binding_key);
  if (!binding) return;
  Json modified = *binding;
  if (!reconcile::SetSeverityCondition(modified, c, ctx_.clock)) return;
  reconcile::SetSummary(modified, ctx_.clock);
  auto r =
      reconcile::Committer(client::ResourceClient(ctx_.binding, apis::klutch::kApiServiceBindings),
                           std::string(apis::klutch::kKonnectorFieldManager))
          .CommitStatus(*binding, modified);
  if (!r.ok() && !core::IsConflict(r.status())) {
    KLUTCH_LOG(kWarn, "konnector", "updating status of APIServiceBinding {}: {}", binding_key,
               r.status().message());
  }
}

// ---------------------------------------------------------------------------------------------
// §4.6: a consumer namespace that is gone takes its APIServiceNamespace with it.

core::Result<Result> Connection::ReconcileNamespace(const Request& request) {
  const std::string& ns = request.name;
  if (!CachesSynced() || !ctx_.app_namespaces.HasSynced()) return Result::Done();
  if (ctx_.app_namespaces.indexer().Get(ns)) return Result::Done();
  if (!service_namespaces_->indexer().Get(provider_ns_ + "/" + ns)) return Result::Done();
  auto r = client::ResourceClient(provider_, apis::klutch::kApiServiceNamespaces, provider_ns_)
               .Delete(ns);
  ctx_.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "delete"}});
  if (!r.ok() && !core::IsNotFound(r.status())) return r.status();
  return Result::Done();
}

// ---------------------------------------------------------------------------------------------
// §4.7: the consumer CRD of each binding, and the binding's Connected condition.

// A CRD controlled by an earlier APIServiceBinding of the same name that no longer exists
// anywhere in the App Cluster (a binding of that uid in another namespace still owns it).
bool Connection::AdoptableCrd(const Json& crd, const Json& binding) const {
  std::string earlier = EarlierBindingUid(crd, binding);
  if (earlier.empty()) return false;
  for (const ObjectPtr& b : ctx_.bindings.indexer().List()) {
    if (machinery::Uid(*b) == earlier) return false;
  }
  return true;
}

core::Result<Result> Connection::ReconcileCrd(const Request& request) {
  if (!CachesSynced()) return Result::Done();
  {
    core::MutexLock lock(mu_);
    if (!bindings_.count(request.Key())) return Result::Done();
  }
  ObjectPtr binding = ctx_.bindings.indexer().Get(request.Key());
  if (!binding) return Result::Done();
  Json modified = *binding;
  core::Status retry = core::Status::Ok();
  if (ObjectPtr exp = exports_->indexer().Get(provider_ns_ + "/" + request.name)) {
    retry = EnsureCrd(request.name, *exp, *binding, modified);
  } else {
    MarkNotConnected(modified, *binding, "APIServiceExportNotFound",
                     "APIServiceExport " + provider_ns_ + "/" + request.name +
                         " not found on the provider; the provider no longer offers this API, "
                         "bind it again or delete this binding");
  }
  ObjectPtr cb = cluster_bindings_->indexer().Get(provider_ns_ + "/cluster");
  modified["status"]["providerPrettyName"] =
      cb ? machinery::GetString(*cb, {"spec", "providerPrettyName"}) : "";
  reconcile::MarkTrue(modified, "InformersSynced", ctx_.clock);
  reconcile::SetSummary(modified, ctx_.clock);
  auto r =
      reconcile::Committer(client::ResourceClient(ctx_.binding, apis::klutch::kApiServiceBindings),
                           std::string(apis::klutch::kKonnectorFieldManager))
          .CommitStatus(*binding, modified);
  if (!r.ok()) return r.status();
  if (!retry.ok()) return retry;
  return Result::Done();
}

core::Status Connection::EnsureCrd(const std::string& name, const Json& exp, const Json& binding,
                                   Json& modified) {
  core::Status retry = core::Status::Ok();
  Json desired = ExportToCrd(exp, binding);
  ObjectPtr existing = ctx_.app_crds.indexer().Get(name);
  if (!existing) {
    auto r = client::ResourceClient(ctx_.app, client::resources::kCustomResourceDefinitions)
                 .Create(desired);
    ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", "create"}});
    if (r.ok() || core::IsAlreadyExists(r.status())) {
      reconcile::MarkTrue(modified, "Connected", ctx_.clock);
    } else if (core::IsInvalid(r.status()) || r.status().reason() == core::Reason::kForbidden) {
      MarkNotConnected(
          modified, binding, "CustomResourceDefinitionCreateFailed",
          "the App Cluster refused CustomResourceDefinition " + name + ": " + r.status().message());
    } else {
      retry = r.status();
    }
  } else if (!CrdOwnedBy(*existing, binding) && AdoptableCrd(*existing, binding)) {
    // Left by an earlier binding of this name (unbound, then bound again): the CRD and the
    // objects kept in it are this binding's now, as kubectl users expect of a re-bind.
    Json adopted = *existing;
    adopted["spec"] = desired["spec"];
    adopted["metadata"]["ownerReferences"] = desired["metadata"]["ownerReferences"];
    if (UpdateCrd(adopted, binding, modified, retry)) {
      ctx_.binding_events.Event(binding, "Normal", "AdoptedCustomResourceDefinition",
                                "CustomResourceDefinition " + name +
                                    " was left by an earlier binding of this name; this "
                                    "binding serves it now");
    }
  } else if (!CrdOwnedBy(*existing, binding)) {
    MarkNotConnected(modified, binding, "ForeignCustomResourceDefinition",
                     "CustomResourceDefinition " + name +
                         " already exists in the App Cluster and is not owned by this binding; "
                         "delete it or bind under another name");
  } else {
    Json updated = *existing;
    updated["spec"] = desired["spec"];
    // The API server fills defaults (conversion, ...): compare only what we set.
    const Json* have = machinery::Find(*existing, {"spec"});
    if (have && Covers(*have, desired["spec"])) {
      reconcile::MarkTrue(modified, "Connected", ctx_.clock);
    } else {
      UpdateCrd(updated, binding, modified, retry);
    }
  }
  return retry;
}

bool Connection::UpdateCrd(const Json& crd, const Json& binding, Json& modified,
                           core::Status& retry) {
  auto r =
      client::ResourceClient(ctx_.app, client::resources::kCustomResourceDefinitions).Update(crd);
  ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", "update"}});
  if (r.ok()) {
    reconcile::MarkTrue(modified, "Connected", ctx_.clock);
  } else if (core::IsInvalid(r.status())) {
    MarkNotConnected(modified, binding, "CustomResourceDefinitionUpdateFailed",
                     "the App Cluster refused the update of CustomResourceDefinition " +
                         machinery::Name(crd) + ": " + r.status().message());
  } else {
    retry = r.status();  // conflicts and outages: try again (upstream swallows these)
  }
  return r.ok();
}

void Connection::MarkNotConnected(Json& modified, const Json& binding, const std::string& reason,
                                  const std::string& message) {
  if (reconcile::MarkFalse(modified, "Connected", reason, reconcile::kSeverityError, message,
                           ctx_.clock)) {
    ctx_.binding_events.Event(binding, "Warning", reason, message);
  }
}

// ---------------------------------------------------------------------------------------------
// §4.8: syncer lifecycle and the export's status.

struct Connection::ExportPass {
  const std::string& name;
  ObjectPtr exp;      // the APIServiceExport, null when gone
  ObjectPtr binding;  // the attached binding of the same name, null when none
  ObjectPtr crd;      // the App Cluster's CRD of that name, null when none
  core::Status start_error = core::Status::Ok();  // a syncer that could not start
};

core::Result<Result> Connection::ReconcileExport(const Request& request) {
  if (!CachesSynced()) return Result::Done();
  ExportPass pass{.name = request.name,
                  .exp = exports_->indexer().Get(provider_ns_ + "/" + request.name),
                  .binding = BindingNamed(request.name),
                  .crd = ctx_.app_crds.indexer().Get(request.name)};
  KLUTCH_RUN_STEP(EnsureSyncer(pass));
  if (!pass.exp) return Result::Done();
  return UpdateExportStatus(pass);
}

reconcile::Step Connection::EnsureSyncer(ExportPass& pass) {
  const ObjectPtr& exp = pass.exp;
  const ObjectPtr& binding = pass.binding;
  bool runnable = exp && binding && pass.crd && CrdOwnedBy(*pass.crd, *binding) &&
                  reconcile::IsConditionTrue(*pass.crd, "Established") &&
                  !FirstServedVersion(*exp).empty();
  // The provider namespace's uid (cluster-scoped exports) is read before taking the lock.
  std::string ns_uid;
  if (runnable && machinery::GetString(*exp, {"spec", "scope"}) == "Cluster") {
    auto ns = client::ResourceClient(provider_, client::resources::kNamespaces).Get(provider_ns_);
    if (ns.ok()) {
      ns_uid = machinery::Uid(*ns);
    } else {
      pass.start_error = ns.status();
      runnable = false;
    }
  }
  std::shared_ptr<ExportSyncer> stale;
  {
    core::MutexLock lock(mu_);
    if (stopped_) return Result::Done();
    auto it = syncers_.find(pass.name);
    int64_t generation = exp ? Generation(*exp) : 0;
    if (it != syncers_.end() && (!runnable || it->second->generation() != generation ||
                                 it->second->claims() != AcceptedClaims(*binding))) {
      stale = std::move(it->second);
      syncers_.erase(it);
      it = syncers_.end();
    }
    if (runnable && it == syncers_.end()) {
      auto syncer = std::make_shared<ExportSyncer>(*this, *exp, *binding, ns_uid);
      pass.start_error = syncer->Start();  // starts threads, never blocks
      if (pass.start_error.ok()) {
        // Tell it about the namespaces mapped so far.
        for (const auto& asn : service_namespaces_->indexer().List()) {
          syncer->OnServiceNamespace(*asn, false);
        }
        syncers_.emplace(pass.name, std::move(syncer));
      }
    }
    ctx_.metrics.syncers.With({{"connection", provider_ns_}})
        .Set(static_cast<double>(syncers_.size()));
  }
  stale.reset();  // stops outside the lock
  return reconcile::Continue();
}

core::Result<Result> Connection::UpdateExportStatus(const ExportPass& pass) {
  // The export's status (committer patch to the provider).
  Json modified = *pass.exp;
  if (pass.binding) {
    reconcile::MarkTrue(modified, "Connected", ctx_.clock);
    reconcile::MarkFalse(modified, "ConsumerInSync", "Unknown", reconcile::kSeverityInfo,
                         "the consumer does not report schema conformance", ctx_.clock);
  } else {
    reconcile::MarkFalse(modified, "Connected", "APIServiceBindingNotFound",
                         reconcile::kSeverityInfo, "no APIServiceBinding for this export",
                         ctx_.clock);
    reconcile::MarkFalse(modified, "ConsumerInSync", "NA", reconcile::kSeverityInfo,
                         "no APIServiceBinding for this export", ctx_.clock);
  }
  if (pass.crd && pass.binding && CrdOwnedBy(*pass.crd, *pass.binding)) {
    CopyCrdStatus(*pass.crd, modified);
  }
  if (!pass.start_error.ok()) {
    reconcile::MarkFalse(modified, "Syncing", "SyncerStartFailed", reconcile::kSeverityError,
                         pass.start_error.message(), ctx_.clock);
  } else {
    reconcile::RemoveCondition(modified, "Syncing");
  }
  reconcile::SetSummary(modified, ctx_.clock);
  auto r = reconcile::Committer(client::ResourceClient(provider_, apis::klutch::kApiServiceExports),
                                std::string(apis::klutch::kKonnectorFieldManager))
               .CommitStatus(*pass.exp, modified);
  if (!r.ok()) return r.status();
  if (!pass.start_error.ok()) return pass.start_error;
  return Result::Done();
}

void Connection::CopyCrdStatus(const Json& crd, Json& modified) {
  if (const Json* conds = machinery::Find(crd, {"status", "conditions"});
      conds && conds->is_array()) {
    for (const Json& c : *conds) {
      std::string type = machinery::GetString(c, {"type"});
      if (type.empty() || type == reconcile::kReadyCondition) continue;
      std::string status = machinery::GetString(c, {"status"});
      reconcile::SeverityCondition sc{
          .type = type,
          .status = status,
          .severity = status == "True" ? "" : std::string(reconcile::kSeverityError),
          .last_transition_time = machinery::GetString(c, {"lastTransitionTime"}),
          .reason = machinery::GetString(c, {"reason"}),
          .message = machinery::GetString(c, {"message"})};
      reconcile::SetSeverityCondition(modified, sc, ctx_.clock);
    }
  }
  // Copied once the App Cluster has filled them (the export's schema requires kind and
  // plural in acceptedNames).
  const Json* accepted = machinery::Find(crd, {"status", "acceptedNames"});
  if (accepted && !machinery::GetString(*accepted, {"plural"}).empty()) {
    modified["status"]["acceptedNames"] = *accepted;
  }
  const Json* stored = machinery::Find(crd, {"status", "storedVersions"});
  if (stored && stored->is_array()) modified["status"]["storedVersions"] = *stored;
}

}  // namespace klutch::konnector::internal
