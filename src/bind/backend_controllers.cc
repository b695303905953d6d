// Wiring of the backend controllers: informers, indexes, event sources and a reconciler per
// kind on the manager (the reconcilers are in <kind>_reconciler.{h,cc}).
#include "bind/backend_controllers.h"

#include <algorithm>

#include "apis/klutch/appclusterbinding.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "apis/klutch_crds.h"
#include "bind/app_cluster_binding_reconciler.h"
#include "bind/backend_context.h"
#include "bind/cluster_binding_reconciler.h"
#include "bind/consumer_quota_reconciler.h"
#include "bind/export_reconciler.h"
#include "bind/export_request_reconciler.h"
#include "bind/kubeconfig_reconciler.h"
#include "bind/names.h"
#include "bind/service_namespace_reconciler.h"
#include "core/strings.h"
#include "reconcile/crd_installer.h"

namespace klutch::bind {

using client::Json;
using client::ObjectPtr;
using reconcile::Request;
namespace resources = client::resources;

Json BinderClusterRole() {
  auto rule = [](std::string group, std::string resource, Json verbs) {
    return Json{{"apiGroups", Json::array({group})},
                {"resources", Json::array({resource})},
                {"verbs", std::move(verbs)}};
  };
  const std::string g(apis::klutch::kGroup);
  const Json all = {"create", "delete", "get", "list", "patch", "update", "watch"};
  const Json read = {"get", "list", "watch"};
  const Json write_status = {"get", "patch", "update"};
  return {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "ClusterRole"},
      {"metadata", {{"name", apis::klutch::kBinderName}}},
      {"rules",
       Json::array(
           {rule(g, "apiserviceexportrequests", all), rule(g, "clusterbindings", read),
            rule(g, "clusterbindings/status", write_status), rule(g, "apiserviceexports", read),
            rule(g, "apiserviceexports/status", write_status), rule(g, "apiservicenamespaces", all),
            rule("", "namespaces", {"get"}), rule("", "secrets", read)})}};
}

core::Status ApplyBinderClusterRole(client::RestClient& admin) {
  client::ResourceClient roles(admin, resources::kClusterRoles);
  Json desired = BinderClusterRole();
  for (int attempt = 0;; ++attempt) {
    auto existing = roles.Get(apis::klutch::kBinderName);
    if (!existing.ok() && !core::IsNotFound(existing.status())) return existing.status();
    core::Result<Json> written = core::NotFound("");
    if (!existing.ok()) {
      written = roles.Create(desired, {.field_manager = std::string(kFieldManager)});
      if (!written.ok() && core::IsAlreadyExists(written.status()) && attempt < 5) continue;
    } else {
      if ((*existing)["rules"] == desired["rules"]) return core::Status::Ok();
      Json modified = *existing;
      modified["rules"] = desired["rules"];
      written = roles.Update(modified, {.field_manager = std::string(kFieldManager)});
      if (!written.ok() && core::IsConflict(written.status()) && attempt < 5) continue;
    }
    if (!written.ok()) {
      return core::Status(written.status()).Annotate("applying ClusterRole klutch-binder");
    }
    return core::Status::Ok();
  }
}

core::Result<std::map<std::string, int64_t>> ParseConsumerQuota(std::string_view text) {
  std::map<std::string, int64_t> out;
  for (std::string_view entry : core::Split(text, ',')) {
    entry = core::Trim(entry);
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    std::string resource(core::Trim(entry.substr(0, eq)));
    if (resource.starts_with("count/")) resource.erase(0, 6);
    const std::string count =
        eq == std::string_view::npos ? "" : std::string(core::Trim(entry.substr(eq + 1)));
    const bool valid_name =
        !resource.empty() && std::all_of(resource.begin(), resource.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
        });
    const bool valid_count =
        !count.empty() && count.size() <= 12 &&
        std::all_of(count.begin(), count.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!valid_name || !valid_count) {
      return core::Invalid("consumer quota entry " + core::GoQuote(entry) +
                           ": want <resource>=<count>, such as secrets=200 or "
                           "postgresqlinstances.anynines.com=10 (claims=N for every exported "
                           "kind)");
    }
    out[resource] = std::stoll(count);
  }
  return out;
}

core::Status InstallProviderCrds(client::RestClient& admin, bool control_plane_mode,
                                 std::chrono::milliseconds timeout, const core::Clock& clock) {
  for (std::string_view file : apis::ProviderCrdFiles(control_plane_mode)) {
    auto crd = machinery::ParseYaml(apis::KlutchCrdYaml(file));
    if (!crd.ok()) {
      return core::Internal("embedded CRD " + std::string(file) + ": " + crd.status().message());
    }
    KLUTCH_RETURN_IF_ERROR(reconcile::InstallCrd(admin, *crd, timeout, clock));
  }
  return core::Status::Ok();
}

namespace {

// Normalised option values; "" when invalid.
std::string NormaliseScope(std::string_view scope) {
  const std::string s = core::ToLower(scope);
  if (s == "namespaced") return "Namespaced";
  if (s == "cluster") return "Cluster";
  return "";
}

std::string NormaliseIsolation(std::string_view isolation) {
  const std::string s = core::ToLower(isolation);
  if (s == "prefixed") return "Prefixed";
  if (s == "namespaced") return "Namespaced";
  if (s == "none") return "None";
  return "";
}

// The objects `informer` indexes under `value` of `index`, as requests.
std::vector<Request> RequestsByIndex(client::Informer& informer, const char* index,
                                     const std::string& value) {
  std::vector<Request> out;
  for (const ObjectPtr& o : informer.indexer().ByIndex(index, value)) {
    out.push_back({machinery::Namespace(*o), machinery::Name(*o)});
  }
  return out;
}

// "<plural>.<group>" (or the plural of the core group) of each spec.resources entry of an
// APIServiceExportRequest.
std::vector<std::string> CrdNamesOfRequest(const Json& ser) {
  std::vector<std::string> out;
  const Json* resources = machinery::Find(ser, {"spec", "resources"});
  if (resources == nullptr || !resources->is_array()) return out;
  for (const Json& r : *resources) {
    const std::string group = machinery::GetString(r, {"group"});
    const std::string resource = machinery::GetString(r, {"resource"});
    out.push_back(group.empty() ? resource : resource + "." + group);
  }
  return out;
}

// The APIServiceNamespace a provider Namespace was made for ("<cluster ns>/<name>"), "" if none.
std::string ServiceNamespaceOwner(const Json& ns) {
  return machinery::Annotation(ns, apis::klutch::kApiServiceNamespaceAnnotation);
}

}  // namespace

// Setup() as steps: the options checked, the ClusterRole applied, the informers and their
// indexes registered, then one step per controller.
class BackendControllers::Impl {
 public:
  Impl(reconcile::Manager& manager, BackendControllersOptions options)
      : manager_(manager),
        options_(std::move(options)),
        clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
        events_(manager.rest(), {options_.component, options_.instance}, &clock_) {}

  core::Status Setup() {
    KLUTCH_RETURN_IF_ERROR(CheckScopes());
    KLUTCH_RETURN_IF_ERROR(ApplyBinderClusterRole(manager_.rest()));
    KLUTCH_RETURN_IF_ERROR(AddInformers());
    KLUTCH_RETURN_IF_ERROR(CheckQuotaAndGrace());
    KLUTCH_RETURN_IF_ERROR(MakeContext());
    SetupExportRequestController();
    SetupExportController();
    SetupServiceNamespaceController();
    SetupClusterBindingController();
    SetupKubeconfigController();
    SetupConsumerQuotaController();
    SetupAppClusterBindingController();
    return core::Status::Ok();
  }

  void Stop() { events_.Stop(); }

 private:
  // The Control Plane's informers of every mode (MakeContext adds the control-plane-mode ones).
  struct Informers {
    client::Informer& requests;
    client::Informer& exports;
    client::Informer& service_namespaces;
    client::Informer& cluster_bindings;
    client::Informer& crds;
    client::Informer& templates;
    client::Informer& namespaces;
  };

  client::InformerOptions InformerOptions() const { return {.clock = &clock_}; }

  core::Status CheckScopes() {
    scope_ = NormaliseScope(options_.consumer_scope);
    if (scope_.empty()) {
      return core::Invalid("consumer scope " + core::GoQuote(options_.consumer_scope) +
                           " must be Namespaced or Cluster");
    }
    isolation_ = NormaliseIsolation(options_.cluster_scoped_isolation);
    if (isolation_.empty()) {
      return core::Invalid("cluster-scoped isolation " +
                           core::GoQuote(options_.cluster_scoped_isolation) +
                           " must be Prefixed, Namespaced or None");
    }
    return core::Status::Ok();
  }

  core::Status CheckQuotaAndGrace() const {
    for (const auto& [resource, count] : options_.consumer_quota) {
      if (resource.empty() || count < 0) {
        return core::Invalid("consumer quota " + core::GoQuote(resource) + "=" +
                             std::to_string(count) +
                             ": the resource must be named and the count 0 or more");
      }
    }
    if (options_.unconnected_cluster_grace.count() < 0) {
      return core::Invalid("the unconnected-cluster grace period must not be negative");
    }
    return core::Status::Ok();
  }

  // The informers of every mode and their indexes.
  core::Status AddInformers() {
    const client::InformerOptions o = InformerOptions();
    informers_ = std::make_unique<Informers>(
        Informers{.requests = manager_.Informer(apis::klutch::kApiServiceExportRequests, o),
                  .exports = manager_.Informer(apis::klutch::kApiServiceExports, o),
                  .service_namespaces = manager_.Informer(apis::klutch::kApiServiceNamespaces, o),
                  .cluster_bindings = manager_.Informer(apis::klutch::kClusterBindings, o),
                  .crds = manager_.Informer(resources::kCustomResourceDefinitions, o),
                  .templates = manager_.Informer(apis::klutch::kApiServiceExportTemplates, o),
                  .namespaces = manager_.Informer(resources::kNamespaces, o)});
    Informers& in = *informers_;
    KLUTCH_RETURN_IF_ERROR(in.requests.indexer().AddIndex(kByCrdIndex, CrdNamesOfRequest));
    KLUTCH_RETURN_IF_ERROR(in.requests.indexer().AddIndex(kByExportIndex, [](const Json& ser) {
      std::vector<std::string> out = CrdNamesOfRequest(ser);
      for (auto& n : out) n = machinery::Namespace(ser) + "/" + n;
      return out;
    }));
    KLUTCH_RETURN_IF_ERROR(in.exports.indexer().AddIndex(
        kByCrdIndex, [](const Json& e) { return std::vector<std::string>{machinery::Name(e)}; }));
    KLUTCH_RETURN_IF_ERROR(
        in.namespaces.indexer().AddIndex(kByServiceNamespaceIndex, [](const Json& ns) {
          std::string owner = ServiceNamespaceOwner(ns);
          return owner.empty() ? std::vector<std::string>{} : std::vector<std::string>{owner};
        }));
    return in.namespaces.indexer().AddIndex(kByClusterNamespaceIndex, [](const Json& ns) {
      std::string owner = ServiceNamespaceOwner(ns);
      const size_t slash = owner.find('/');
      return slash == std::string::npos ? std::vector<std::string>{}
                                        : std::vector<std::string>{owner.substr(0, slash)};
    });
  }

  // The reconcilers' context; in control-plane mode with the AppClusterBinding informers.
  core::Status MakeContext() {
    const Informers& in = *informers_;
    ctx_ =
        std::make_unique<BackendContext>(BackendContext{.rest = manager_.rest(),
                                                        .options = options_,
                                                        .clock = clock_,
                                                        .events = events_,
                                                        .consumer_scope = scope_,
                                                        .isolation = isolation_,
                                                        .export_requests = in.requests,
                                                        .exports = in.exports,
                                                        .service_namespaces = in.service_namespaces,
                                                        .cluster_bindings = in.cluster_bindings,
                                                        .crds = in.crds,
                                                        .templates = in.templates,
                                                        .namespaces = in.namespaces});
    if (!options_.control_plane_mode) return core::Status::Ok();
    const client::InformerOptions o = InformerOptions();
    ctx_->app_cluster_bindings = &manager_.Informer(apis::klutch::kAppClusterBindings, o);
    ctx_->api_service_bindings = &manager_.Informer(apis::klutch::kApiServiceBindings, o);
    client::InformerOptions meta = o;
    meta.metadata_only = true;
    ctx_->secrets = &manager_.Informer(resources::kSecrets, meta);
    client::InformerOptions labelled = o;
    labelled.label_selector = std::string(apis::klutch::kAppClusterBindingNameLabel);
    ctx_->deployments = &manager_.Informer(resources::kDeployments, labelled);
    return ctx_->app_cluster_bindings->indexer().AddIndex(kBySecretIndex, [](const Json& acb) {
      return std::vector<std::string>{
          machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "namespace"}) + "/" +
          machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "name"})};
    });
  }

  // A controller `name` on the manager running `reconciler`.
  reconcile::Controller& Add(std::string name, std::unique_ptr<reconcile::Reconciler> reconciler) {
    reconcilers_.push_back(std::move(reconciler));
    return manager_.AddController(std::move(name), *reconcilers_.back(),
                                  std::max(1, options_.workers));
  }

  void SetupExportRequestController() {
    client::Informer& requests = informers_->requests;
    auto& ser = Add("klutch-backend-serviceexportrequest",
                    std::make_unique<ExportRequestReconciler>(*ctx_));
    ser.For(requests);
    ser.Watches(informers_->exports, [&requests](const Json& e) {
      return RequestsByIndex(requests, kByExportIndex, client::ObjectKey(e));
    });
    ser.Watches(informers_->crds, [&requests](const Json& crd) {
      return RequestsByIndex(requests, kByCrdIndex, machinery::Name(crd));
    });
    ser.Watches(informers_->templates, [&requests](const Json& t) {
      const std::string group = machinery::GetString(t, {"spec", "APIServiceSelector", "group"});
      const std::string resource =
          machinery::GetString(t, {"spec", "APIServiceSelector", "resource"});
      return RequestsByIndex(requests, kByCrdIndex,
                             group.empty() ? resource : resource + "." + group);
    });
  }

  void SetupExportController() {
    client::Informer& exports = informers_->exports;
    auto& exp = Add("klutch-backend-serviceexport", std::make_unique<ExportReconciler>(*ctx_));
    exp.For(exports);
    exp.Watches(informers_->crds, [&exports](const Json& crd) {
      return RequestsByIndex(exports, kByCrdIndex, machinery::Name(crd));
    });
  }

  void SetupServiceNamespaceController() {
    client::Informer& service_namespaces = informers_->service_namespaces;
    auto& asn =
        Add("klutch-backend-servicenamespace", std::make_unique<ServiceNamespaceReconciler>(*ctx_));
    asn.For(service_namespaces);
    asn.Watches(informers_->namespaces, [](const Json& ns) {
      std::vector<Request> out;
      const std::string owner = ServiceNamespaceOwner(ns);
      if (auto slash = owner.find('/'); slash != std::string::npos) {
        out.push_back({owner.substr(0, slash), owner.substr(slash + 1)});
      }
      return out;
    });
    asn.Watches(informers_->cluster_bindings, [&service_namespaces](const Json& cb) {
      return RequestsByIndex(service_namespaces, client::Indexer::kNamespaceIndex,
                             machinery::Namespace(cb));
    });
  }

  void SetupClusterBindingController() {
    auto& cb =
        Add("klutch-backend-clusterbinding", std::make_unique<ClusterBindingReconciler>(*ctx_));
    cb.For(informers_->cluster_bindings);
    cb.Watches(informers_->exports, [](const Json& o) {
      return std::vector<Request>{
          {machinery::Namespace(o), std::string(apis::klutch::kClusterBindingName)}};
    });
    // The cluster namespace holds the last-bound time the collection of unconnected spaces
    // counts from: a bind renews it, and the ClusterBinding may have been reconciled before
    // the cache saw it (the test that caught this lost the collection now and then).
    cb.Watches(informers_->namespaces, [](const Json& ns) {
      std::vector<Request> out;
      if (!machinery::Annotation(ns, apis::klutch::kIdentityAnnotation).empty()) {
        out.push_back({machinery::Name(ns), std::string(apis::klutch::kClusterBindingName)});
      }
      return out;
    });
  }

  void SetupKubeconfigController() {
    Add("klutch-backend-kubeconfig", std::make_unique<KubeconfigReconciler>(*ctx_))
        .For(informers_->cluster_bindings);
  }

  void SetupConsumerQuotaController() {
    if (options_.consumer_quota.empty()) return;
    client::InformerOptions ours = InformerOptions();
    ours.label_selector = std::string(kConsumerQuotaLabel);
    ctx_->quotas = &manager_.Informer(kResourceQuotas, ours);
    client::Informer& namespaces = informers_->namespaces;
    auto& quota =
        Add("klutch-backend-consumerquota", std::make_unique<ConsumerQuotaReconciler>(*ctx_));
    quota.For(namespaces);
    quota.Watches(*ctx_->quotas, [](const Json& q) {
      return std::vector<Request>{{"", machinery::Namespace(q)}};
    });
    // The claim kinds follow the exports of the cluster namespace, in it and in its
    // provider namespaces.
    quota.Watches(informers_->exports, [&namespaces](const Json& e) {
      const std::string cluster_ns = machinery::Namespace(e);
      std::vector<Request> out{{"", cluster_ns}};
      for (const ObjectPtr& ns :
           namespaces.indexer().ByIndex(kByClusterNamespaceIndex, cluster_ns)) {
        out.push_back({"", machinery::Name(*ns)});
      }
      return out;
    });
  }

  void SetupAppClusterBindingController() {
    if (!options_.control_plane_mode) return;
    auto& acb = Add("klutch-backend-appclusterbinding",
                    std::make_unique<AppClusterBindingReconciler>(*ctx_));
    acb.For(*ctx_->app_cluster_bindings);
    client::Informer* bindings = ctx_->app_cluster_bindings;
    acb.Watches(*ctx_->secrets, [bindings](const Json& secret) {
      return RequestsByIndex(*bindings, kBySecretIndex, client::ObjectKey(secret));
    });
    auto by_labels =
        reconcile::MapByLabels(std::string(apis::klutch::kAppClusterBindingNamespaceLabel),
                               std::string(apis::klutch::kAppClusterBindingNameLabel));
    acb.Watches(*ctx_->api_service_bindings, by_labels);
    acb.Watches(*ctx_->deployments, by_labels);
    acb.Watches(informers_->requests, by_labels);
    acb.Watches(informers_->cluster_bindings, by_labels);
    // Exports in a binding root namespace: through the root Namespace's labels.
    client::Informer& namespaces = informers_->namespaces;
    acb.Watches(informers_->exports, [&namespaces, by_labels](const Json& e) {
      ObjectPtr ns = namespaces.indexer().Get(machinery::Namespace(e));
      return ns ? by_labels(*ns) : std::vector<Request>{};
    });
    acb.Watches(namespaces, by_labels);
  }

  reconcile::Manager& manager_;
  BackendControllersOptions options_;
  const core::Clock& clock_;
  reconcile::EventRecorder events_;
  std::string scope_;      // normalised consumer scope
  std::string isolation_;  // normalised cluster-scoped isolation
  std::unique_ptr<Informers> informers_;
  std::unique_ptr<BackendContext> ctx_;
  std::vector<std::unique_ptr<reconcile::Reconciler>> reconcilers_;
};

BackendControllers::BackendControllers(reconcile::Manager& manager,
                                       BackendControllersOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}

BackendControllers::~BackendControllers() { Stop(); }

core::Status BackendControllers::Setup() { return impl_->Setup(); }

void BackendControllers::Stop() { impl_->Stop(); }

}  // namespace klutch::bind
