#include "bind/app_cluster_binding_reconciler.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/appclusterbinding.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/export_request.h"
#include "apis/klutch/register.h"
#include "bind/konnector_deployment.h"
#include "bind/names.h"
#include "bind/object_writes.h"
#include "client/kubeconfig.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::bind {

using client::Json;
using client::ObjectPtr;
using reconcile::Result;

namespace {

constexpr std::string_view kSecretValid = "SecretValid";
constexpr std::string_view kKonnectorDeployed = "KonnectorDeployed";
constexpr std::string_view kResourcesReady = "ResourcesReady";

// lowercase, runs of other characters -> '-', trimmed, at most `max` characters.
std::string Sanitize(std::string_view s, size_t max) {
  std::string out;
  for (char c : s) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if ((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9')) {
      out.push_back(l);
    } else if (!out.empty() && out.back() != '-') {
      out.push_back('-');
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > max) out.resize(max);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::string Fnv32a(std::string_view s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", h);
  return buf;
}

std::string RequestName(const std::string& binding, const std::string& template_name) {
  const std::string head = "appclusterbinding-" + Sanitize(binding, 24) + "-";
  const std::string tail = "-" + Fnv32a(template_name);
  std::string middle = Sanitize(template_name, 24);
  if (head.size() + middle.size() + tail.size() > 63) middle.resize(63 - head.size() - tail.size());
  return head + middle + tail;
}

Json Labels(const Json& acb) {
  return {{std::string(apis::klutch::kAppClusterBindingNameLabel), machinery::Name(acb)},
          {std::string(apis::klutch::kAppClusterBindingNamespaceLabel), machinery::Namespace(acb)}};
}

std::string LabelSelector(const Json& acb) {
  return std::string(apis::klutch::kAppClusterBindingNameLabel) + "=" + machinery::Name(acb) + "," +
         std::string(apis::klutch::kAppClusterBindingNamespaceLabel) + "=" +
         machinery::Namespace(acb);
}

bool HasLabels(const Json& object, const Json& labels) {
  const Json* have = machinery::Find(object, {"metadata", "labels"});
  return have != nullptr && machinery::Covers(*have, labels);
}

void AddLabels(Json& object, const Json& labels) {
  Json& meta = machinery::MutableMetadata(object);
  if (!meta["labels"].is_object()) meta["labels"] = Json::object();
  for (auto it = labels.begin(); it != labels.end(); ++it) meta["labels"][it.key()] = it.value();
}

struct KubeconfigSecretCheck {
  bool valid = false;
  std::string reason, message;
  Json secret;
};

// §2.6.5 SecretValid, plus: a kubeconfig that references files or runs plugins is refused,
// since the konnector would read or run them on the Control Plane.
KubeconfigSecretCheck CheckKubeconfigSecret(client::RestClient& rest, const Json& acb) {
  KubeconfigSecretCheck out;
  const std::string ns = machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "namespace"});
  const std::string name = machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "name"});
  std::string key = machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "key"});
  if (key.empty()) key = apis::klutch::kKubeconfigKey;
  const std::string where = "Secret " + ns + "/" + name;
  auto secret = client::ResourceClient(rest, client::resources::kSecrets, ns).Get(name);
  if (!secret.ok()) {
    out.reason = "KubeconfigSecretNotFound";
    out.message = where + " cannot be read (" + secret.status().message() +
                  "): create it with the App Cluster's kubeconfig under key " + key;
    return out;
  }
  out.secret = *secret;
  out.reason = "KubeconfigSecretInvalid";
  auto text = core::Base64Decode(machinery::GetString(*secret, {"data", key}));
  if (!text || text->empty()) {
    out.message = where + " has no key " + core::GoQuote(key) + ": store the kubeconfig there";
    return out;
  }
  auto parsed = client::ParseKubeconfig(*text, where, "/nonexistent");
  if (!parsed.ok()) {
    out.message = where + " holds no valid kubeconfig: " + parsed.status().message();
    return out;
  }
  auto current = parsed->contexts.find(parsed->current_context);
  if (parsed->current_context.empty() || current == parsed->contexts.end()) {
    out.message = where + ": the kubeconfig has no current context; set current-context";
    return out;
  }
  const auto& context = current->second;
  auto user = parsed->users.find(context.user);
  auto cluster = parsed->clusters.find(context.cluster);
  if (user != parsed->users.end() &&
      (user->second.exec || user->second.has_auth_provider || !user->second.token_file.empty() ||
       !user->second.client_certificate.empty() || !user->second.client_key.empty())) {
    out.message = where +
                  ": the kubeconfig's user refers to files or credential plugins, which the "
                  "Control Plane does not have; embed the credentials (token or *-data fields)";
    return out;
  }
  if (cluster != parsed->clusters.end() && !cluster->second.certificate_authority.empty()) {
    out.message = where +
                  ": the kubeconfig's cluster refers to a CA file; embed it as "
                  "certificate-authority-data";
    return out;
  }
  auto config = client::ResolveKubeconfig(*parsed);
  if (!config.ok()) {
    out.message = where + ": " + config.status().message();
    return out;
  }
  out.valid = true;
  return out;
}

core::Status Upsert(client::RestClient& rest, const client::GroupVersionResource& gvr,
                    const Json& desired, const std::function<bool(const Json&)>& up_to_date,
                    const std::function<void(Json&)>& fix) {
  client::ResourceClient rc(rest, gvr, machinery::Namespace(desired));
  auto existing = rc.Get(machinery::Name(desired));
  if (!existing.ok() && !core::IsNotFound(existing.status())) return existing.status();
  if (!existing.ok()) {
    auto created = rc.Create(desired, {.field_manager = std::string(kFieldManager)});
    return created.ok() || core::IsAlreadyExists(created.status()) ? core::Status::Ok()
                                                                   : created.status();
  }
  if (up_to_date(*existing)) return core::Status::Ok();
  Json modified = *existing;
  fix(modified);
  auto updated = rc.Update(modified, {.field_manager = std::string(kFieldManager)});
  return updated.ok() ? core::Status::Ok() : updated.status();
}

}  // namespace

struct AppClusterBindingReconciler::Pass {
  const Json& acb;
  const reconcile::Committer& committer;
  Json modified;  // the binding with the conditions this pass sets
  std::string name, root;
  Json labels;
  KubeconfigSecretCheck check;
  std::string key, secret_name;  // of the kubeconfig Secret
  std::vector<std::string> errors;
  std::string konnector_error;
  // Records a failed write (`what`: the object) for ResourcesReady; whether it went well.
  bool Note(const core::Status& s, const std::string& what) {
    if (!s.ok()) errors.push_back(what + ": " + s.message());
    return s.ok();
  }
};

core::Result<Result> AppClusterBindingReconciler::Reconcile(const reconcile::Request& request) {
  ObjectPtr acb = ctx_.app_cluster_bindings->indexer().Get(request.Key());
  if (!acb) return Result::Done();
  reconcile::Committer committer(
      client::ResourceClient(ctx_.rest, apis::klutch::kAppClusterBindings),
      std::string(kFieldManager));
  if (machinery::IsBeingDeleted(*acb)) return Delete(*acb, committer);
  KLUTCH_RUN_STEP(EnsureFinalizer(*acb, committer));
  Pass p{.acb = *acb, .committer = committer, .modified = *acb, .name = machinery::Name(*acb)};
  p.root = apis::klutch::BindingRootNamespace(request.ns, p.name);
  p.labels = Labels(*acb);
  p.check = CheckKubeconfigSecret(ctx_.rest, *acb);
  if (!p.check.valid) {
    const bool changed =
        reconcile::MarkFalse(p.modified, kSecretValid, p.check.reason, reconcile::kSeverityError,
                             p.check.message, ctx_.clock);
    // The Secret's events bring the next pass.
    return Failed(p, changed, p.check.reason, p.check.message, /*retry=*/false);
  }
  reconcile::MarkTrue(p.modified, kSecretValid, ctx_.clock);
  Provision(p);
  return ReportResources(p);
}

void AppClusterBindingReconciler::Provision(Pass& p) {
  p.key = machinery::GetString(p.acb, {"spec", "kubeconfigSecretRef", "key"});
  if (p.key.empty()) p.key = apis::klutch::kKubeconfigKey;
  p.secret_name = machinery::GetString(p.acb, {"spec", "kubeconfigSecretRef", "name"});
  if (!EnsureRootNamespace(p)) return;
  EnsureClusterBinding(p);
  EnsureConnectorRbac(p);
  const WantedApiMap desired = WantedApis(p);
  EnsureApiServiceBindings(p, desired);
  EnsureExportRequests(p, desired);
  EnsureKonnectorDeployment(p);
}

core::Result<Result> AppClusterBindingReconciler::ReportResources(Pass& p) {
  bool resources_changed;
  if (p.errors.empty()) {
    resources_changed = reconcile::MarkTrue(p.modified, kResourcesReady, ctx_.clock);
  } else {
    resources_changed =
        reconcile::MarkFalse(p.modified, kResourcesReady, "ProvisioningFailed",
                             reconcile::kSeverityError, core::Join(p.errors, "; "), ctx_.clock);
  }
  if (!p.errors.empty() || !p.konnector_error.empty()) {
    std::string message = core::Join(p.errors, "; ");
    if (!p.konnector_error.empty()) message += (message.empty() ? "" : "; ") + p.konnector_error;
    return Failed(p, resources_changed || !p.konnector_error.empty(), "ProvisioningFailed", message,
                  /*retry=*/true);
  }
  KLUTCH_RETURN_IF_ERROR(CommitStatus(p));
  return Result::Done();
}

reconcile::Step AppClusterBindingReconciler::EnsureFinalizer(
    const Json& acb, const reconcile::Committer& committer) {
  if (machinery::HasFinalizer(acb, apis::klutch::kAppClusterBindingFinalizer)) {
    return reconcile::Continue();
  }
  Json modified = acb;
  machinery::AddFinalizer(modified, apis::klutch::kAppClusterBindingFinalizer);
  auto committed = committer.Commit(acb, modified);
  if (!committed.ok()) return committed.status();
  return Result::Done();
}

core::Result<Result> AppClusterBindingReconciler::Delete(const Json& acb,
                                                         const reconcile::Committer& committer) {
  if (!machinery::HasFinalizer(acb, apis::klutch::kAppClusterBindingFinalizer)) {
    return Result::Done();
  }
  KLUTCH_ASSIGN_OR_RETURN(Result cleaned, Cleanup(acb));
  if (cleaned.requeue || cleaned.requeue_after.count() > 0) return cleaned;
  Json modified = acb;
  machinery::RemoveFinalizer(modified, apis::klutch::kAppClusterBindingFinalizer);
  auto committed = committer.Commit(acb, modified);
  if (!committed.ok()) return committed.status();
  return Result::Done();
}

core::Result<Result> AppClusterBindingReconciler::Cleanup(const Json& acb) {
  const std::string root =
      apis::klutch::BindingRootNamespace(machinery::Namespace(acb), machinery::Name(acb));
  client::ResourceClient bindings(ctx_.rest, apis::klutch::kApiServiceBindings, root);
  auto listed = bindings.List({.label_selector = LabelSelector(acb)});
  if (!listed.ok() && !core::IsNotFound(listed.status())) return listed.status();
  if (listed.ok()) {
    bool remaining = false;
    for (const Json& b : (*listed)["items"]) {
      remaining = true;
      if (machinery::IsBeingDeleted(b)) continue;
      auto deleted = bindings.Delete(machinery::Name(b));
      if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
    }
    // The konnector releases the App Cluster's CRDs when a binding goes; wait for that.
    if (remaining) return Result::RequeueAfter(std::chrono::seconds(1));
  }
  const std::string legacy =
      "klutch-konnector-" + machinery::Namespace(acb) + "-" + machinery::Name(acb);
  for (const auto* gvr :
       {&client::resources::kClusterRoleBindings, &client::resources::kClusterRoles}) {
    auto deleted = client::ResourceClient(ctx_.rest, *gvr).Delete(legacy);
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
  }
  client::ResourceClient namespaces(ctx_.rest, client::resources::kNamespaces);
  auto ns = namespaces.Get(root);
  if (ns.ok()) {
    if (!machinery::IsBeingDeleted(*ns)) {
      auto deleted = namespaces.Delete(root);
      if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
    }
    return Result::RequeueAfter(std::chrono::seconds(1));
  }
  if (!core::IsNotFound(ns.status())) return ns.status();
  return Result::Done();
}

bool AppClusterBindingReconciler::EnsureRootNamespace(Pass& p) {
  Json root_ns = {{"apiVersion", "v1"},
                  {"kind", "Namespace"},
                  {"metadata", {{"name", p.root}, {"labels", p.labels}}}};
  return p.Note(Upsert(
                    ctx_.rest, client::resources::kNamespaces, root_ns,
                    [&](const Json& have) { return HasLabels(have, p.labels); },
                    [&](Json& have) { AddLabels(have, p.labels); }),
                "namespace " + p.root);
}

void AppClusterBindingReconciler::EnsureClusterBinding(Pass& p) {
  const std::string& root = p.root;
  p.Note(GetOrCreate(client::ResourceClient(ctx_.rest, client::resources::kServiceAccounts, root),
                     {{"apiVersion", "v1"},
                      {"kind", "ServiceAccount"},
                      {"metadata", {{"name", apis::klutch::kBinderName}, {"namespace", root}}}})
             .status(),
         "ServiceAccount " + root + "/klutch-binder");
  if (machinery::GetString(p.acb, {"spec", "kubeconfigSecretRef", "namespace"}) != root) {
    Json data = {{p.key, machinery::GetString(p.check.secret, {"data", p.key})}};
    const std::string type = machinery::GetString(p.check.secret, {"type"});
    Json mirror = {
        {"apiVersion", "v1"},
        {"kind", "Secret"},
        {"type", type.empty() ? std::string("Opaque") : type},
        {"metadata", {{"name", p.secret_name}, {"namespace", root}, {"labels", p.labels}}},
        {"data", data}};
    p.Note(Upsert(
               ctx_.rest, client::resources::kSecrets, mirror,
               [&](const Json& have) {
                 return HasLabels(have, p.labels) && have.contains("data") && have["data"] == data;
               },
               [&](Json& have) {
                 AddLabels(have, p.labels);
                 have["data"] = data;
               }),
           "mirrored Secret " + root + "/" + p.secret_name);
  }
  Json cb_spec = {{"kubeconfigSecretRef", {{"name", p.secret_name}, {"key", p.key}}},
                  {"providerPrettyName", p.name}};
  Json cb = {
      {"apiVersion", apis::klutch::kApiVersion},
      {"kind", "ClusterBinding"},
      {"metadata",
       {{"name", apis::klutch::kClusterBindingName}, {"namespace", root}, {"labels", p.labels}}},
      {"spec", cb_spec}};
  p.Note(Upsert(
             ctx_.rest, apis::klutch::kClusterBindings, cb,
             [&](const Json& have) {
               return HasLabels(have, p.labels) && have.contains("spec") &&
                      machinery::Covers(have["spec"], cb_spec);
             },
             [&](Json& have) {
               AddLabels(have, p.labels);
               have["spec"]["providerPrettyName"] = p.name;
             }),
         "ClusterBinding " + root + "/cluster");
}

void AppClusterBindingReconciler::EnsureConnectorRbac(Pass& p) {
  const std::string& root = p.root;
  Json rules = Json::array(
      {{{"apiGroups", {std::string(apis::klutch::kGroup)}},
        {"resources", {"apiservicebindings"}},
        {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}},
       {{"apiGroups", {std::string(apis::klutch::kGroup)}},
        {"resources", {"apiservicebindings/status"}},
        {"verbs", {"patch", "update"}}},
       {{"apiGroups", {"coordination.k8s.io"}},
        {"resources", {"leases"}},
        {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}},
       {{"apiGroups", {""}}, {"resources", {"events"}}, {"verbs", {"create", "patch"}}}});
  Json role = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
               {"kind", "Role"},
               {"metadata",
                {{"name", apis::klutch::kControlPlaneConnectorName},
                 {"namespace", root},
                 {"labels", p.labels}}},
               {"rules", rules}};
  p.Note(Upsert(
             ctx_.rest, client::resources::kRoles, role,
             [&](const Json& have) { return have.contains("rules") && have["rules"] == rules; },
             [&](Json& have) { have["rules"] = rules; }),
         "Role " + root + "/control-plane-connector");
  p.Note(EnsureRoleBinding(ctx_.rest, root, std::string(apis::klutch::kControlPlaneConnectorName),
                           "Role", std::string(apis::klutch::kControlPlaneConnectorName), root,
                           std::string(apis::klutch::kBinderName), p.labels),
         "RoleBinding " + root + "/control-plane-connector");
}

AppClusterBindingReconciler::WantedApiMap AppClusterBindingReconciler::WantedApis(Pass& p) {
  const std::vector<Json> templates = Objects(ctx_.templates);
  WantedApiMap desired;
  const Json* apis = machinery::Find(p.acb, {"spec", "apiExports"});
  if (!apis || !apis->is_array()) return desired;
  for (const Json& api : *apis) {
    const std::string group(core::Trim(machinery::GetString(api, {"group"})));
    const std::string resource(core::Trim(machinery::GetString(api, {"resource"})));
    const std::string export_name = group.empty() ? resource : resource + "." + group;
    const Json* tmpl = nullptr;
    for (const Json& t : templates) {
      if (core::Trim(machinery::GetString(t, {"spec", "APIServiceSelector", "group"})) == group &&
          core::Trim(machinery::GetString(t, {"spec", "APIServiceSelector", "resource"})) ==
              resource) {
        tmpl = &t;
        break;
      }
    }
    if (tmpl == nullptr) {
      p.errors.push_back("no APIServiceExportTemplate offers " + core::GoQuote(export_name) +
                         ": fix spec.apiExports or ask for the API to be offered");
      continue;
    }
    OfferedApi api_info;
    api_info.group = group;
    api_info.resource = resource;
    api_info.template_name = machinery::Name(*tmpl);
    const Json* claims = machinery::Find(*tmpl, {"spec", "permissionClaims"});
    api_info.permission_claims = claims != nullptr && claims->is_array() ? *claims : Json::array();
    desired.emplace(export_name, std::move(api_info));
  }
  return desired;
}

void AppClusterBindingReconciler::EnsureApiServiceBindings(Pass& p, const WantedApiMap& desired) {
  const std::string& root = p.root;
  client::ResourceClient bindings(ctx_.rest, apis::klutch::kApiServiceBindings, root);
  for (const auto& [export_name, api] : desired) {
    Json accepted = Json::array();
    for (Json claim : api.permission_claims) {
      claim["state"] = "Accepted";
      accepted.push_back(std::move(claim));
    }
    Json binding = {
        {"apiVersion", apis::klutch::kApiVersion},
        {"kind", "APIServiceBinding"},
        {"metadata", {{"name", export_name}, {"namespace", root}, {"labels", p.labels}}},
        {"spec",
         {{"kubeconfigSecretRef", {{"name", p.secret_name}, {"key", p.key}, {"namespace", root}}},
          {"permissionClaims", accepted}}}};
    p.Note(Upsert(
               ctx_.rest, apis::klutch::kApiServiceBindings, binding,
               [&](const Json& have) { return HasLabels(have, p.labels); },
               [&](Json& have) { AddLabels(have, p.labels); }),
           "APIServiceBinding " + root + "/" + export_name);
  }
  for (const ObjectPtr& b :
       ctx_.api_service_bindings->indexer().ByIndex(client::Indexer::kNamespaceIndex, root)) {
    if (!HasLabels(*b, p.labels) || desired.contains(machinery::Name(*b))) continue;
    auto deleted = bindings.Delete(machinery::Name(*b));
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) {
      p.Note(deleted.status(), "deleting APIServiceBinding " + machinery::Name(*b));
    }
  }
}

std::set<std::string> AppClusterBindingReconciler::DeleteUnwantedExports(
    Pass& p, const WantedApiMap& desired) {
  const std::string& root = p.root;
  std::set<std::string> requested;
  client::ResourceClient requests(ctx_.rest, apis::klutch::kApiServiceExportRequests, root);
  for (const ObjectPtr& ser :
       ctx_.export_requests.indexer().ByIndex(client::Indexer::kNamespaceIndex, root)) {
    const Json* resources_list = machinery::Find(*ser, {"spec", "resources"});
    std::string first;
    if (resources_list != nullptr && resources_list->is_array() && !resources_list->empty()) {
      const std::string g = machinery::GetString((*resources_list)[0], {"group"});
      const std::string r = machinery::GetString((*resources_list)[0], {"resource"});
      first = g.empty() ? r : r + "." + g;
    }
    if (HasLabels(*ser, p.labels) && !desired.contains(first)) {
      auto deleted = requests.Delete(machinery::Name(*ser));
      if (!deleted.ok() && !core::IsNotFound(deleted.status())) {
        p.Note(deleted.status(), "deleting APIServiceExportRequest " + machinery::Name(*ser));
      }
      continue;
    }
    if (machinery::GetString(*ser, {"status", "phase"}) != "Failed") requested.insert(first);
  }
  client::ResourceClient exports(ctx_.rest, apis::klutch::kApiServiceExports, root);
  for (const ObjectPtr& e :
       ctx_.exports.indexer().ByIndex(client::Indexer::kNamespaceIndex, root)) {
    if (desired.contains(machinery::Name(*e))) continue;
    auto deleted = exports.Delete(machinery::Name(*e));
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) {
      p.Note(deleted.status(), "deleting APIServiceExport " + machinery::Name(*e));
    }
  }
  return requested;
}

void AppClusterBindingReconciler::EnsureExportRequests(Pass& p, const WantedApiMap& desired) {
  const std::string& root = p.root;
  const std::set<std::string> requested = DeleteUnwantedExports(p, desired);
  client::ResourceClient requests(ctx_.rest, apis::klutch::kApiServiceExportRequests, root);
  for (const auto& [export_name, api] : desired) {
    if (ctx_.exports.indexer().Get(root + "/" + export_name) || requested.contains(export_name)) {
      continue;
    }
    // The protocol's one writer of the document; the namespace and labels are ours.
    apis::klutch::ExportRequest request =
        apis::klutch::ExportRequestFor(api.group, api.resource, api.permission_claims);
    request.name = RequestName(p.name, api.template_name);
    Json ser = apis::klutch::EncodeExportRequest(request);
    ser["metadata"]["namespace"] = root;
    ser["metadata"]["labels"] = p.labels;
    auto created = requests.Create(ser, {.field_manager = std::string(kFieldManager)});
    if (!created.ok() && !core::IsAlreadyExists(created.status())) {
      p.Note(created.status(), "creating APIServiceExportRequest for " + export_name);
    }
  }
}

void AppClusterBindingReconciler::EnsureKonnectorDeployment(Pass& p) {
  client::ResourceClient deployments(ctx_.rest, client::resources::kDeployments, p.root);
  const std::string deployment_name = "konnector-" + p.name;
  const Json* deploy = machinery::Find(p.acb, {"spec", "konnector", "deploy"});
  core::Status konnector;
  if (deploy != nullptr && deploy->is_boolean() && *deploy == true) {
    Json desired_deployment = KonnectorDeployment(p.acb, ctx_.options.konnector_image, p.root,
                                                  p.secret_name, p.key, p.labels);
    const std::string hash =
        machinery::Annotation(desired_deployment, kKonnectorSpecHashAnnotation);
    konnector = Upsert(
        ctx_.rest, client::resources::kDeployments, desired_deployment,
        [&](const Json& have) {
          return machinery::Annotation(have, kKonnectorSpecHashAnnotation) == hash;
        },
        [&](Json& have) {
          have["spec"] = desired_deployment["spec"];
          have["metadata"]["labels"] = desired_deployment["metadata"]["labels"];
          machinery::SetAnnotation(have, kKonnectorSpecHashAnnotation, hash);
        });
  } else {
    auto deleted = deployments.Delete(deployment_name);
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) konnector = deleted.status();
  }
  if (konnector.ok()) {
    reconcile::MarkTrue(p.modified, kKonnectorDeployed, ctx_.clock);
    return;
  }
  p.konnector_error = "the konnector Deployment " + p.root + "/" + deployment_name +
                      " could not be written: " + konnector.message();
  reconcile::MarkFalse(p.modified, kKonnectorDeployed, "KonnectorDeploymentFailed",
                       reconcile::kSeverityError, p.konnector_error, ctx_.clock);
}

core::Status AppClusterBindingReconciler::CommitStatus(Pass& p) {
  reconcile::SetSummary(p.modified, ctx_.clock);
  auto committed = p.committer.CommitStatus(p.acb, p.modified);
  return committed.ok() ? core::Status::Ok() : committed.status();
}

core::Result<Result> AppClusterBindingReconciler::Failed(Pass& p, bool event,
                                                         std::string_view reason,
                                                         const std::string& message, bool retry) {
  KLUTCH_RETURN_IF_ERROR(CommitStatus(p));
  if (event) ctx_.events.Event(p.acb, reconcile::kEventTypeWarning, reason, message);
  if (!retry) return Result::Done();
  return core::Status(core::Reason::kInternalError, message);
}

}  // namespace klutch::bind
