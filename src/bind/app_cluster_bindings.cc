// AppClusterBinding (control-plane mode, §2.6.5): an App Cluster connected from the Control
// Plane side. Everything lives in the binding root namespace `klutch-bind-<ns>-<name>` and is
// labelled with the two back-references; deleting the AppClusterBinding deletes its bindings
// first (so the konnector releases the App Cluster's CRDs), then the root namespace.
#include <cstdint>
#include <map>
#include <set>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/appclusterbinding.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/export_request.h"
#include "apis/klutch/register.h"
#include "bind/catalog.h"
#include "bind/internal.h"
#include "bind/names.h"
#include "client/kubeconfig.h"
#include "core/log.h"
#include "core/strings.h"
#include "reconcile/committer.h"

namespace klutch::bind::internal {
namespace {

namespace resources = client::resources;
constexpr std::string_view kSecretValid = "SecretValid";
constexpr std::string_view kKonnectorDeployed = "KonnectorDeployed";
constexpr std::string_view kResourcesReady = "ResourcesReady";
constexpr std::string_view kSpecHashAnnotation = "klutch.anynines.com/spec-hash";

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

// Drops ""/0/false/null/[]/{} recursively (so an override never clears a default by accident).
Json DropEmpty(const Json& v) {
  if (v.is_object()) {
    Json out = Json::object();
    for (auto it = v.begin(); it != v.end(); ++it) {
      Json child = DropEmpty(it.value());
      if (!child.is_null()) out[it.key()] = std::move(child);
    }
    return out.empty() ? Json() : out;
  }
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& e : v) {
      Json child = DropEmpty(e);
      if (!child.is_null()) out.push_back(std::move(child));
    }
    return out.empty() ? Json() : out;
  }
  if ((v.is_string() && v.get_ref<const std::string&>().empty()) ||  // json-ok: type checked
      (v.is_boolean() && v == false) || (v.is_number() && v == 0)) {
    return Json();
  }
  return v;
}

// Strategic-merge style: lists of env/ports/volumeMounts/volumeDevices merge by their key,
// other lists replace, objects merge recursively.
void MergeContainer(Json& base, const Json& overrides) {
  static const std::map<std::string, std::string> kMergeKeys = {{"env", "name"},
                                                                {"ports", "containerPort"},
                                                                {"volumeMounts", "mountPath"},
                                                                {"volumeDevices", "devicePath"}};
  for (auto it = overrides.begin(); it != overrides.end(); ++it) {
    const std::string& key = it.key();
    auto merge_key = kMergeKeys.find(key);
    if (merge_key != kMergeKeys.end() && it->is_array()) {
      Json& list = base[key];
      if (!list.is_array()) list = Json::array();
      for (const Json& item : *it) {
        const Json* id = item.is_object() ? machinery::Find(item, {merge_key->second}) : nullptr;
        bool merged = false;
        for (Json& existing : list) {
          const Json* have = machinery::Find(existing, {merge_key->second});
          if (id != nullptr && have != nullptr && *have == *id) {
            existing.merge_patch(item);
            merged = true;
            break;
          }
        }
        if (!merged) list.push_back(item);
      }
    } else if (it->is_object() && base.contains(key) && base[key].is_object()) {
      MergeContainer(base[key], *it);
    } else {
      base[key] = *it;
    }
  }
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

struct SecretCheck {
  bool valid = false;
  std::string reason, message;
  Json secret;
};

// §2.6.5 SecretValid, plus: a kubeconfig that references files or runs plugins is refused,
// since the konnector would read or run them on the Control Plane.
SecretCheck CheckSecret(Context& ctx, const Json& acb) {
  SecretCheck out;
  const std::string ns = machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "namespace"});
  const std::string name = machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "name"});
  std::string key = machinery::GetString(acb, {"spec", "kubeconfigSecretRef", "key"});
  if (key.empty()) key = apis::klutch::kKubeconfigKey;
  const std::string where = "Secret " + ns + "/" + name;
  auto secret = client::ResourceClient(ctx.rest, resources::kSecrets, ns).Get(name);
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

Json KonnectorDeployment(Context& ctx, const Json& acb, const std::string& root,
                         const std::string& secret_name, const std::string& key) {
  Json container = {
      {"name", "konnector"},
      {"image", ctx.options.konnector_image},
      {"command", {"klutch", "konnector"}},
      {"args",
       {"--control-plane-mode", "--app-cluster-kubeconfig-secret-name=" + secret_name,
        "--app-cluster-kubeconfig-secret-namespace=" + root,
        "--app-cluster-kubeconfig-secret-key=" + key, "--binding-root-namespace=" + root,
        "--lease-namespace=$(POD_NAMESPACE)", "--health-probe-bind-address=:8080",
        "--metrics-bind-address=:8081"}},
      {"env",
       Json::array(
           {{{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
            {{"name", "POD_NAMESPACE"},
             {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}}})},
      {"ports", Json::array({{{"name", "health"}, {"containerPort", 8080}, {"protocol", "TCP"}},
                             {{"name", "metrics"}, {"containerPort", 8081}, {"protocol", "TCP"}}})},
      {"readinessProbe",
       {{"httpGet", {{"path", "/readyz"}, {"port", 8080}}}, {"periodSeconds", 10}}},
      {"livenessProbe",
       {{"httpGet", {{"path", "/healthz"}, {"port", 8080}}},
        {"initialDelaySeconds", 15},
        {"periodSeconds", 20}}},
      {"resources",
       {{"requests", {{"cpu", "50m"}, {"memory", "64Mi"}}}, {"limits", {{"memory", "512Mi"}}}}},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", {{"drop", {"ALL"}}}}}},
      {"volumeMounts", Json::array({{{"name", "tmp"}, {"mountPath", "/tmp"}}})}};
  if (const Json* overrides = machinery::Find(acb, {"spec", "konnector", "overrides"})) {
    Json cleaned = DropEmpty(*overrides);
    if (cleaned.is_object()) MergeContainer(container, cleaned);
  }
  Json labels = Labels(acb);
  labels["app"] = "konnector";
  Json selector = {{"app", "konnector"},
                   {std::string(apis::klutch::kAppClusterBindingNameLabel), machinery::Name(acb)}};
  Json spec = {{"replicas", 1},
               {"selector", {{"matchLabels", selector}}},
               {"template",
                {{"metadata", {{"labels", labels}}},
                 {"spec",
                  {{"serviceAccountName", apis::klutch::kBinderName},
                   {"restartPolicy", "Always"},
                   {"securityContext",
                    {{"runAsNonRoot", true},
                     {"runAsUser", 65532},
                     {"runAsGroup", 65532},
                     {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
                   {"containers", Json::array({container})},
                   {"volumes", Json::array({{{"name", "tmp"}, {"emptyDir", Json::object()}}})}}}}}};
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata",
           {{"name", "konnector-" + machinery::Name(acb)},
            {"namespace", root},
            {"labels", labels},
            {"annotations", {{std::string(kSpecHashAnnotation), machinery::JsonHash(spec)}}}}},
          {"spec", spec}};
}

// Deletes what the binding made; Done once the root namespace is gone.
core::Result<Result> Cleanup(Context& ctx, const Json& acb) {
  const std::string root =
      apis::klutch::BindingRootNamespace(machinery::Namespace(acb), machinery::Name(acb));
  client::ResourceClient bindings(ctx.rest, apis::klutch::kApiServiceBindings, root);
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
  for (const auto* gvr : {&resources::kClusterRoleBindings, &resources::kClusterRoles}) {
    auto deleted = client::ResourceClient(ctx.rest, *gvr).Delete(legacy);
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
  }
  client::ResourceClient namespaces(ctx.rest, resources::kNamespaces);
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

// What the steps of one AppClusterBinding pass share.
struct AcbPass {
  Context& ctx;
  const Json& acb;
  Json modified;  // the binding with the conditions this pass sets
  std::string name, root;
  Json labels;
  SecretCheck check;
  std::string key, secret_name;  // of the kubeconfig Secret
  std::vector<std::string> errors;
  std::string konnector_error;
  // Records a failed write (`what`: the object) for ResourcesReady; whether it went well.
  bool Note(const core::Status& s, const std::string& what) {
    if (!s.ok()) errors.push_back(what + ": " + s.message());
    return s.ok();
  }
};

// A deleted binding: what it made goes, then the finalizer.
core::Result<Result> DeleteAppClusterBinding(Context& ctx, const Json& acb,
                                             const reconcile::Committer& committer) {
  if (!machinery::HasFinalizer(acb, apis::klutch::kAppClusterBindingFinalizer)) {
    return Result::Done();
  }
  KLUTCH_ASSIGN_OR_RETURN(Result cleaned, Cleanup(ctx, acb));
  if (cleaned.requeue || cleaned.requeue_after.count() > 0) return cleaned;
  Json modified = acb;
  machinery::RemoveFinalizer(modified, apis::klutch::kAppClusterBindingFinalizer);
  auto committed = committer.Commit(acb, modified);
  if (!committed.ok()) return committed.status();
  return Result::Done();
}

// The root namespace; the rest of the pass needs it.
bool EnsureRootNamespace(AcbPass& p) {
  Json root_ns = {{"apiVersion", "v1"},
                  {"kind", "Namespace"},
                  {"metadata", {{"name", p.root}, {"labels", p.labels}}}};
  return p.Note(Upsert(
                    p.ctx.rest, resources::kNamespaces, root_ns,
                    [&](const Json& have) { return HasLabels(have, p.labels); },
                    [&](Json& have) { AddLabels(have, p.labels); }),
                "namespace " + p.root);
}

// The konnector's ServiceAccount, the kubeconfig Secret mirrored into the root namespace, and
// the ClusterBinding.
void EnsureClusterBinding(AcbPass& p) {
  const std::string& root = p.root;
  p.Note(GetOrCreate(client::ResourceClient(p.ctx.rest, resources::kServiceAccounts, root),
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
               p.ctx.rest, resources::kSecrets, mirror,
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
             p.ctx.rest, apis::klutch::kClusterBindings, cb,
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

// Role and RoleBinding of the control-plane konnector.
void EnsureConnectorRbac(AcbPass& p) {
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
             p.ctx.rest, resources::kRoles, role,
             [&](const Json& have) { return have.contains("rules") && have["rules"] == rules; },
             [&](Json& have) { have["rules"] = rules; }),
         "Role " + root + "/control-plane-connector");
  p.Note(EnsureRoleBinding(p.ctx.rest, root, std::string(apis::klutch::kControlPlaneConnectorName),
                           "Role", std::string(apis::klutch::kControlPlaneConnectorName), root,
                           std::string(apis::klutch::kBinderName), p.labels),
         "RoleBinding " + root + "/control-plane-connector");
}

// The offered APIs spec.apiExports lists, by export name; one no template offers is an error.
std::map<std::string, OfferedApi> WantedApis(AcbPass& p) {
  const std::vector<Json> templates = Objects(p.ctx.templates);
  std::map<std::string, OfferedApi> desired;  // export name -> offered API
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

// An APIServiceBinding per wanted API (claims accepted); the binding's others deleted.
void EnsureApiServiceBindings(AcbPass& p, const std::map<std::string, OfferedApi>& desired) {
  const std::string& root = p.root;
  client::ResourceClient bindings(p.ctx.rest, apis::klutch::kApiServiceBindings, root);
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
               p.ctx.rest, apis::klutch::kApiServiceBindings, binding,
               [&](const Json& have) { return HasLabels(have, p.labels); },
               [&](Json& have) { AddLabels(have, p.labels); }),
           "APIServiceBinding " + root + "/" + export_name);
  }
  for (const ObjectPtr& b :
       p.ctx.api_service_bindings->indexer().ByIndex(client::Indexer::kNamespaceIndex, root)) {
    if (!HasLabels(*b, p.labels) || desired.contains(machinery::Name(*b))) continue;
    auto deleted = bindings.Delete(machinery::Name(*b));
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) {
      p.Note(deleted.status(), "deleting APIServiceBinding " + machinery::Name(*b));
    }
  }
}

// Export requests and exports no longer wanted go; the names of the wanted APIs that have a
// request that has not failed.
std::set<std::string> DeleteUnwantedExports(AcbPass& p,
                                            const std::map<std::string, OfferedApi>& desired) {
  const std::string& root = p.root;
  std::set<std::string> requested;
  client::ResourceClient requests(p.ctx.rest, apis::klutch::kApiServiceExportRequests, root);
  for (const ObjectPtr& ser :
       p.ctx.export_requests.indexer().ByIndex(client::Indexer::kNamespaceIndex, root)) {
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
  client::ResourceClient exports(p.ctx.rest, apis::klutch::kApiServiceExports, root);
  for (const ObjectPtr& e :
       p.ctx.exports.indexer().ByIndex(client::Indexer::kNamespaceIndex, root)) {
    if (desired.contains(machinery::Name(*e))) continue;
    auto deleted = exports.Delete(machinery::Name(*e));
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) {
      p.Note(deleted.status(), "deleting APIServiceExport " + machinery::Name(*e));
    }
  }
  return requested;
}

// Wanted APIs without export or pending request get an export request.
void EnsureExportRequests(AcbPass& p, const std::map<std::string, OfferedApi>& desired) {
  const std::string& root = p.root;
  const std::set<std::string> requested = DeleteUnwantedExports(p, desired);
  client::ResourceClient requests(p.ctx.rest, apis::klutch::kApiServiceExportRequests, root);
  for (const auto& [export_name, api] : desired) {
    if (p.ctx.exports.indexer().Get(root + "/" + export_name) || requested.contains(export_name)) {
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

// The konnector Deployment when spec.konnector.deploy, else none; KonnectorDeployed.
void EnsureKonnectorDeployment(AcbPass& p) {
  client::ResourceClient deployments(p.ctx.rest, resources::kDeployments, p.root);
  const std::string deployment_name = "konnector-" + p.name;
  const Json* deploy = machinery::Find(p.acb, {"spec", "konnector", "deploy"});
  core::Status konnector;
  if (deploy != nullptr && deploy->is_boolean() && *deploy == true) {
    Json desired_deployment = KonnectorDeployment(p.ctx, p.acb, p.root, p.secret_name, p.key);
    const std::string hash = machinery::Annotation(desired_deployment, kSpecHashAnnotation);
    konnector = Upsert(
        p.ctx.rest, resources::kDeployments, desired_deployment,
        [&](const Json& have) { return machinery::Annotation(have, kSpecHashAnnotation) == hash; },
        [&](Json& have) {
          have["spec"] = desired_deployment["spec"];
          have["metadata"]["labels"] = desired_deployment["metadata"]["labels"];
          machinery::SetAnnotation(have, kSpecHashAnnotation, hash);
        });
  } else {
    auto deleted = deployments.Delete(deployment_name);
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) konnector = deleted.status();
  }
  if (konnector.ok()) {
    reconcile::MarkTrue(p.modified, kKonnectorDeployed, p.ctx.clock);
    return;
  }
  p.konnector_error = "the konnector Deployment " + p.root + "/" + deployment_name +
                      " could not be written: " + konnector.message();
  reconcile::MarkFalse(p.modified, kKonnectorDeployed, "KonnectorDeploymentFailed",
                       reconcile::kSeverityError, p.konnector_error, p.ctx.clock);
}

// Everything in the root namespace, once the kubeconfig Secret is valid.
void ProvisionAppCluster(AcbPass& p) {
  p.key = machinery::GetString(p.acb, {"spec", "kubeconfigSecretRef", "key"});
  if (p.key.empty()) p.key = apis::klutch::kKubeconfigKey;
  p.secret_name = machinery::GetString(p.acb, {"spec", "kubeconfigSecretRef", "name"});
  if (!EnsureRootNamespace(p)) return;
  EnsureClusterBinding(p);
  EnsureConnectorRbac(p);
  const std::map<std::string, OfferedApi> desired = WantedApis(p);
  EnsureApiServiceBindings(p, desired);
  EnsureExportRequests(p, desired);
  EnsureKonnectorDeployment(p);
}

// SecretValid, ResourcesReady and the summary written; Events for what went wrong.
core::Result<Result> ReportAppClusterBinding(AcbPass& p, const reconcile::Committer& committer,
                                             bool secret_changed) {
  bool resources_changed = false;
  if (p.check.valid) {
    if (p.errors.empty()) {
      resources_changed = reconcile::MarkTrue(p.modified, kResourcesReady, p.ctx.clock);
    } else {
      resources_changed =
          reconcile::MarkFalse(p.modified, kResourcesReady, "ProvisioningFailed",
                               reconcile::kSeverityError, core::Join(p.errors, "; "), p.ctx.clock);
    }
  }
  reconcile::SetSummary(p.modified, p.ctx.clock);
  auto committed = committer.CommitStatus(p.acb, p.modified);
  if (!committed.ok()) return committed.status();
  if (!p.check.valid) {
    if (secret_changed) {
      p.ctx.events.Event(p.acb, reconcile::kEventTypeWarning, p.check.reason, p.check.message);
    }
    return Result::Done();  // the Secret's events bring the next pass
  }
  if (!p.errors.empty() || !p.konnector_error.empty()) {
    std::string message = core::Join(p.errors, "; ");
    if (!p.konnector_error.empty()) message += (message.empty() ? "" : "; ") + p.konnector_error;
    if (resources_changed || !p.konnector_error.empty()) {
      p.ctx.events.Event(p.acb, reconcile::kEventTypeWarning, "ProvisioningFailed", message);
    }
    return core::Status(core::Reason::kInternalError, message);
  }
  return Result::Done();
}

}  // namespace

core::Result<Result> ReconcileAppClusterBinding(Context& ctx, const Request& request) {
  ObjectPtr acb = ctx.app_cluster_bindings->indexer().Get(request.Key());
  if (!acb) return Result::Done();
  reconcile::Committer committer(
      client::ResourceClient(ctx.rest, apis::klutch::kAppClusterBindings),
      std::string(kFieldManager));
  if (machinery::IsBeingDeleted(*acb)) return DeleteAppClusterBinding(ctx, *acb, committer);
  if (!machinery::HasFinalizer(*acb, apis::klutch::kAppClusterBindingFinalizer)) {
    Json modified = *acb;
    machinery::AddFinalizer(modified, apis::klutch::kAppClusterBindingFinalizer);
    auto committed = committer.Commit(*acb, modified);
    if (!committed.ok()) return committed.status();
    return Result::Done();
  }
  AcbPass p{.ctx = ctx, .acb = *acb, .modified = *acb, .name = machinery::Name(*acb)};
  p.root = apis::klutch::BindingRootNamespace(request.ns, p.name);
  p.labels = Labels(*acb);
  p.check = CheckSecret(ctx, *acb);
  bool secret_changed;
  if (!p.check.valid) {
    secret_changed = reconcile::MarkFalse(p.modified, kSecretValid, p.check.reason,
                                          reconcile::kSeverityError, p.check.message, ctx.clock);
  } else {
    secret_changed = reconcile::MarkTrue(p.modified, kSecretValid, ctx.clock);
    ProvisionAppCluster(p);
  }
  return ReportAppClusterBinding(p, committer, secret_changed);
}

}  // namespace klutch::bind::internal
