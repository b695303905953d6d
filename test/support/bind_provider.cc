#include "test/support/bind_provider.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/strings.h"
#include "serving/kubeconfig.h"
#include "test/support/process.h"

namespace klutch::testing::bind {
namespace {

namespace fs = std::filesystem;
using client::ResourceClient;
namespace resources = client::resources;

constexpr auto kPoll = std::chrono::milliseconds(50);
const std::vector<std::string> kAllVerbs = {"get",   "list",   "watch", "update",
                                            "patch", "delete", "create"};

core::Status Timeout(std::string message) {
  return core::Status(core::Reason::kTimeout, std::move(message));
}

// The single CustomResourceDefinition document of an upstream file.
core::Result<Json> ReadCrdFile(const fs::path& path) {
  if (!fs::exists(path)) return core::NotFound(path.string() + ": no such file");
  const std::vector<std::string> docs = SplitYamlDocuments(ReadFileOrEmpty(path));
  for (const auto& doc : docs) {
    if (doc.find("kind: CustomResourceDefinition") == std::string::npos) continue;
    auto parsed = machinery::ParseYaml(doc);
    if (!parsed.ok()) {
      return core::BadRequest(path.string() + ": " + parsed.status().message());
    }
    return *parsed;
  }
  return core::BadRequest(path.string() + ": no CustomResourceDefinition document");
}

// Creates `desired`; when it exists, replaces it (keeping nothing but its resourceVersion),
// retrying conflicts. Returns the stored object.
core::Result<Json> CreateOrReplace(const ResourceClient& rc, Json desired) {
  auto created = rc.Create(desired);
  if (created.ok() || !core::IsAlreadyExists(created.status())) return created;
  for (int attempt = 0;; ++attempt) {
    KLUTCH_ASSIGN_OR_RETURN(Json existing, rc.Get(machinery::Name(desired)));
    desired["metadata"]["resourceVersion"] = machinery::ResourceVersion(existing);
    auto updated = rc.Update(desired);
    if (updated.ok() || !core::IsConflict(updated.status()) || attempt >= 5) return updated;
  }
}

core::Result<Json> GetOrCreate(const ResourceClient& rc, const Json& desired) {
  auto created = rc.Create(desired);
  if (created.ok() || !core::IsAlreadyExists(created.status())) return created;
  return rc.Get(machinery::Name(desired));
}

Json Subject(const std::string& cluster_namespace) {
  return Json::array(
      {{{"kind", "ServiceAccount"}, {"name", kBinderName}, {"namespace", cluster_namespace}}});
}

// RoleBinding `klutch-binder` in `ns` for the binder of `cluster_namespace` to ClusterRole
// `role`; roleRef is immutable, so a binding with another one is deleted and made again.
core::Status EnsureBinderRoleBinding(client::RestClient& rest, const std::string& ns,
                                     const std::string& cluster_namespace,
                                     const std::string& role) {
  ResourceClient rc(rest, resources::kRoleBindings, ns);
  Json desired = {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "RoleBinding"},
      {"metadata", {{"name", kBinderName}, {"namespace", ns}}},
      {"subjects", Subject(cluster_namespace)},
      {"roleRef",
       {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role}}}};
  auto existing = rc.Get(kBinderName);
  if (existing.ok()) {
    if ((*existing)["roleRef"] == desired["roleRef"] &&
        (*existing)["subjects"] == desired["subjects"]) {
      return core::Status::Ok();
    }
    if ((*existing)["roleRef"] != desired["roleRef"]) {
      auto deleted = rc.Delete(kBinderName);
      if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
    }
  } else if (!core::IsNotFound(existing.status())) {
    return existing.status();
  }
  auto applied = CreateOrReplace(rc, desired);
  return applied.ok() ? core::Status::Ok() : applied.status();
}

// The static ClusterRole `klutch-binder` (§2.6.1).
Json BinderClusterRole() {
  const std::string g = "klutch.anynines.com";
  auto rule = [](std::string group, std::vector<std::string> resources,
                 std::vector<std::string> verbs) {
    return Json{{"apiGroups", {group}}, {"resources", resources}, {"verbs", verbs}};
  };
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "ClusterRole"},
          {"metadata", {{"name", kBinderName}}},
          {"rules", Json::array({
                        rule(g, {"apiserviceexportrequests"},
                             {"create", "delete", "patch", "update", "get", "list", "watch"}),
                        rule(g, {"clusterbindings"}, {"get", "watch", "list"}),
                        rule(g, {"clusterbindings/status"}, {"get", "patch", "update"}),
                        rule(g, {"apiserviceexports"}, {"get", "watch", "list"}),
                        rule(g, {"apiserviceexports/status"}, {"get", "patch", "update"}),
                        rule(g, {"apiservicenamespaces"},
                             {"create", "delete", "patch", "update", "get", "list", "watch"}),
                        rule("", {"namespaces"}, {"get"}),
                        rule("", {"secrets"}, {"get", "watch", "list"}),
                    })}};
}

// SHA-224 of `data` as a base-62 big-endian integer, digits 0-9a-zA-Z, no padding (§2.8).
std::string SpecHash(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha224(), nullptr);
  std::vector<unsigned> n(digest, digest + len);
  static constexpr char kDigits[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string out;
  while (std::any_of(n.begin(), n.end(), [](unsigned d) { return d != 0; })) {
    unsigned rem = 0;
    for (unsigned& d : n) {
      unsigned cur = rem * 256 + d;
      d = cur / 62;
      rem = cur % 62;
    }
    out.push_back(kDigits[rem]);
  }
  std::reverse(out.begin(), out.end());
  return out.empty() ? "0" : out;
}

}  // namespace

Json ExampleClaimCrd() {
  Json spec_schema = {{"type", "object"},
                      {"x-kubernetes-preserve-unknown-fields", true},
                      {"properties", {{"version", {{"type", "string"}}}}}};
  Json status_schema = {{"type", "object"},
                        {"x-kubernetes-preserve-unknown-fields", true},
                        {"properties", {{"phase", {{"type", "string"}}}}}};
  return {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", "postgresqlinstances.anynines.com"}}},
      {"spec",
       {{"group", "anynines.com"},
        {"scope", "Namespaced"},
        {"names",
         {{"plural", "postgresqlinstances"},
          {"singular", "postgresqlinstance"},
          {"kind", "PostgresqlInstance"},
          {"listKind", "PostgresqlInstanceList"}}},
        {"versions",
         Json::array(
             {{{"name", "v1"},
               {"served", true},
               {"storage", true},
               {"subresources", {{"status", Json::object()}}},
               {"schema",
                {{"openAPIV3Schema",
                  {{"type", "object"},
                   {"properties", {{"spec", spec_schema}, {"status", status_schema}}}}}}}}})}}}};
}

std::string BindCrdDir() {
  return (fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/bind/deploy/crd").string();
}

core::Status WaitForCrdEstablished(client::RestClient& rest, const std::string& name,
                                   std::chrono::seconds timeout) {
  ResourceClient crds(rest, resources::kCustomResourceDefinitions);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (true) {
    auto crd = crds.Get(name);
    if (crd.ok()) {
      if (const Json* conditions = machinery::Find(*crd, {"status"})) {
        for (const auto& c : conditions->value("conditions", Json::array())) {
          if (c.value("type", "") == "Established" && c.value("status", "") == "True") {
            return core::Status::Ok();
          }
        }
      }
      last = "not Established yet";
    } else {
      last = crd.status().ToString();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Timeout("CRD " + name + " not Established within " + std::to_string(timeout.count()) +
                     "s: " + last);
    }
    std::this_thread::sleep_for(kPoll);
  }
}

core::Status InstallBindCrd(client::RestClient& rest, const std::string& file,
                            std::chrono::seconds timeout) {
  KLUTCH_ASSIGN_OR_RETURN(Json crd, ReadCrdFile(fs::path(BindCrdDir()) / file));
  ResourceClient crds(rest, resources::kCustomResourceDefinitions);
  auto created = crds.Create(crd);
  if (!created.ok()) {
    if (!core::IsAlreadyExists(created.status())) {
      return core::Status(created.status()).Annotate("creating " + file);
    }
    auto applied = CreateOrReplace(crds, crd);
    if (!applied.ok()) return core::Status(applied.status()).Annotate("updating " + file);
  }
  return WaitForCrdEstablished(rest, machinery::Name(crd), timeout);
}

core::Status InstallBindCrds(client::RestClient& rest, bool control_plane_mode,
                             std::chrono::seconds timeout) {
  std::vector<std::string> names = {"clusterbindings", "apiserviceexports", "apiservicenamespaces",
                                    "apiserviceexportrequests"};
  if (control_plane_mode) {
    names.push_back("apiservicebindings");
    names.push_back("appclusterbindings");
  }
  for (const auto& n : names) {
    KLUTCH_RETURN_IF_ERROR(InstallBindCrd(rest, "klutch.anynines.com_" + n + ".yaml", timeout));
  }
  return core::Status::Ok();
}

core::Result<ProviderBinding> SetupProvider(client::RestClient& rest,
                                            const ProviderOptions& options) {
  ProviderBinding out;
  // 1. The cluster namespace.
  ResourceClient namespaces(rest, resources::kNamespaces);
  if (options.cluster_namespace.empty()) {
    KLUTCH_ASSIGN_OR_RETURN(
        Json ns, namespaces.Create({{"apiVersion", "v1"},
                                    {"kind", "Namespace"},
                                    {"metadata", {{"generateName", options.generate_name}}}}));
    out.cluster_namespace = machinery::Name(ns);
  } else {
    KLUTCH_ASSIGN_OR_RETURN(
        Json ns, GetOrCreate(namespaces, {{"apiVersion", "v1"},
                                          {"kind", "Namespace"},
                                          {"metadata", {{"name", options.cluster_namespace}}}}));
    out.cluster_namespace = machinery::Name(ns);
  }
  const std::string& cns = out.cluster_namespace;

  // 2. ClusterBinding `cluster`.
  KLUTCH_ASSIGN_OR_RETURN(
      Json cluster_binding,
      GetOrCreate(ResourceClient(rest, kClusterBindings, cns),
                  {{"apiVersion", kBindApiVersion},
                   {"kind", "ClusterBinding"},
                   {"metadata", {{"name", "cluster"}, {"namespace", cns}}},
                   {"spec",
                    {{"kubeconfigSecretRef", {{"name", "kubeconfig"}, {"key", "kubeconfig"}}},
                     {"providerPrettyName", options.provider_pretty_name}}}}));
  std::string secret_name =
      machinery::GetString(cluster_binding, {"spec", "kubeconfigSecretRef", "name"});
  if (secret_name.empty()) secret_name = "kubeconfig";

  // 3.-5. ServiceAccount, its token Secret, and the token.
  KLUTCH_ASSIGN_OR_RETURN(Json sa,
                          GetOrCreate(ResourceClient(rest, resources::kServiceAccounts, cns),
                                      {{"apiVersion", "v1"},
                                       {"kind", "ServiceAccount"},
                                       {"metadata", {{"name", kBinderName}, {"namespace", cns}}}}));
  (void)sa;
  ResourceClient secrets(rest, resources::kSecrets, cns);
  KLUTCH_ASSIGN_OR_RETURN(
      Json token_secret,
      GetOrCreate(secrets,
                  {{"apiVersion", "v1"},
                   {"kind", "Secret"},
                   {"type", "kubernetes.io/service-account-token"},
                   {"metadata",
                    {{"name", kBinderName},
                     {"namespace", cns},
                     {"annotations", {{"kubernetes.io/service-account.name", kBinderName}}}}}}));
  const auto deadline = std::chrono::steady_clock::now() + options.token_timeout;
  std::string ca;
  while (true) {
    const std::string token_b64 = machinery::GetString(token_secret, {"data", "token"});
    const std::string ca_b64 = machinery::GetString(token_secret, {"data", "ca.crt"});
    if (!token_b64.empty() && !ca_b64.empty()) {
      out.token = core::Base64Decode(token_b64).value_or("");
      ca = core::Base64Decode(ca_b64).value_or("");
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Timeout("Secret " + cns + "/" + kBinderName + " got no token and ca.crt within " +
                     std::to_string(options.token_timeout.count()) + "s");
    }
    std::this_thread::sleep_for(kPoll);
    KLUTCH_ASSIGN_OR_RETURN(token_secret, secrets.Get(kBinderName));
  }

  // RBAC (§2.6.1, §2.7).
  KLUTCH_ASSIGN_OR_RETURN(Json role, CreateOrReplace(ResourceClient(rest, resources::kClusterRoles),
                                                     BinderClusterRole()));
  (void)role;
  KLUTCH_RETURN_IF_ERROR(EnsureBinderRoleBinding(rest, cns, cns, kBinderName));
  KLUTCH_RETURN_IF_ERROR(SyncBinderRole(rest, cns));

  // 6. The consumer's kubeconfig (§2.5).
  out.server = options.server_url.empty() ? rest.config().server : options.server_url;
  out.ca_pem = options.ca_pem.empty() ? ca : options.ca_pem;
  out.kubeconfig = serving::KubeconfigYaml({.name = "default",
                                            .server = out.server,
                                            .ca_pem = out.ca_pem,
                                            .token = out.token,
                                            .ns = cns});
  KLUTCH_ASSIGN_OR_RETURN(
      Json kubeconfig_secret,
      CreateOrReplace(secrets, {{"apiVersion", "v1"},
                                {"kind", "Secret"},
                                {"type", "Opaque"},
                                {"metadata", {{"name", secret_name}, {"namespace", cns}}},
                                {"data", {{"kubeconfig", core::Base64Encode(out.kubeconfig)}}}}));
  (void)kubeconfig_secret;
  return out;
}

Json PermissionClaim(const std::string& resource, const std::string& owner) {
  Json claim = {{"group", ""}, {"resource", resource}, {"version", "v1"}};
  claim["selector"] = Json::object();
  if (!owner.empty()) claim["selector"]["owner"] = owner;
  return claim;
}

Json ExportFromCrd(const Json& crd, const Json& permission_claims) {
  const Json& spec = crd.value("spec", Json::object());
  Json snapshot = {{"group", spec.value("group", "")},
                   {"names", spec.value("names", Json::object())},
                   {"scope", spec.value("scope", "Namespaced")},
                   {"versions", Json::array()}};
  const bool webhook = machinery::GetString(crd, {"spec", "conversion", "strategy"}) == "Webhook";
  for (const auto& v : spec.value("versions", Json::array())) {
    if (!v.value("served", false)) continue;
    if (webhook && !v.value("storage", false)) continue;
    Json out = {{"name", v.value("name", "")},
                {"served", true},
                {"storage", webhook ? true : v.value("storage", false)},
                {"subresources", v.value("subresources", Json::object())},
                {"schema",
                 {{"openAPIV3Schema",
                   v.value("schema", Json::object()).value("openAPIV3Schema", Json::object())}}}};
    if (v.contains("deprecated")) out["deprecated"] = v["deprecated"];
    if (v.contains("deprecationWarning")) out["deprecationWarning"] = v["deprecationWarning"];
    if (v.contains("additionalPrinterColumns")) {
      out["additionalPrinterColumns"] = v["additionalPrinterColumns"];
    }
    snapshot["versions"].push_back(std::move(out));
    if (webhook) break;
  }
  const std::string hash = SpecHash(machinery::Dump(snapshot));
  Json export_spec = snapshot;
  export_spec["permissionClaims"] = permission_claims;
  if (snapshot["scope"] == "Cluster") {
    export_spec["informerScope"] = "Cluster";
    export_spec["clusterScopedIsolation"] = "Prefixed";
  } else {
    export_spec["informerScope"] = "Namespaced";
  }
  const std::string name = machinery::GetString(snapshot, {"names", "plural"}) + "." +
                           machinery::GetString(snapshot, {"group"});
  return {{"apiVersion", kBindApiVersion},
          {"kind", "APIServiceExport"},
          {"metadata", {{"name", name}, {"annotations", {{kSourceSpecHashAnnotation, hash}}}}},
          {"spec", std::move(export_spec)}};
}

core::Result<Json> CreateExport(client::RestClient& rest, const std::string& cluster_namespace,
                                Json export_object) {
  export_object["metadata"]["namespace"] = cluster_namespace;
  ResourceClient exports(rest, kApiServiceExports, cluster_namespace);
  auto created = exports.Create(export_object);
  if (!created.ok() && !core::IsAlreadyExists(created.status())) return created;
  if (!created.ok()) {
    KLUTCH_ASSIGN_OR_RETURN(Json existing, exports.Get(machinery::Name(export_object)));
    existing["spec"] = export_object["spec"];
    existing["metadata"]["annotations"] = export_object["metadata"]["annotations"];
    created = exports.Update(existing);
    if (!created.ok()) return created;
  }
  KLUTCH_RETURN_IF_ERROR(SyncBinderRole(rest, cluster_namespace));
  return created;
}

core::Status SyncBinderRole(client::RestClient& rest, const std::string& cluster_namespace) {
  KLUTCH_ASSIGN_OR_RETURN(Json ns,
                          ResourceClient(rest, resources::kNamespaces).Get(cluster_namespace));
  KLUTCH_ASSIGN_OR_RETURN(Json exports,
                          ResourceClient(rest, kApiServiceExports, cluster_namespace).List());
  Json rules = Json::array();
  for (const auto& e : exports.value("items", Json::array())) {
    const Json& spec = e.value("spec", Json::object());
    rules.push_back({{"apiGroups", {spec.value("group", "")}},
                     {"resources", {spec.value("names", Json::object()).value("plural", "")}},
                     {"verbs", kAllVerbs}});
    for (const auto& claim : spec.value("permissionClaims", Json::array())) {
      rules.push_back({{"apiGroups", {claim.value("group", "")}},
                       {"resources", {claim.value("resource", "")}},
                       {"verbs", kAllVerbs}});
    }
  }
  Json role = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
               {"kind", "ClusterRole"},
               {"metadata",
                {{"name", std::string(kBinderName) + "-" + cluster_namespace},
                 {"ownerReferences", Json::array({{{"apiVersion", "v1"},
                                                   {"kind", "Namespace"},
                                                   {"name", cluster_namespace},
                                                   {"uid", machinery::Uid(ns)},
                                                   {"controller", true}}})}}},
               {"rules", std::move(rules)}};
  auto applied = CreateOrReplace(ResourceClient(rest, resources::kClusterRoles), role);
  return applied.ok() ? core::Status::Ok() : applied.status();
}

// --- NamespaceMapper ---

NamespaceMapper::NamespaceMapper(client::RestClient& rest, std::string cluster_namespace)
    : rest_(rest), cluster_namespace_(std::move(cluster_namespace)) {}

NamespaceMapper::~NamespaceMapper() { Stop(); }

std::string NamespaceMapper::TargetNamespace(const std::string& name) const {
  return cluster_namespace_ + "-" + name;
}

std::string NamespaceMapper::LastError() const {
  core::MutexLock lock(mu_);
  return last_error_;
}

void NamespaceMapper::Start() {
  {
    core::MutexLock lock(mu_);
    if (started_) return;
    started_ = true;
    stopping_ = false;
  }
  informer_ = std::make_unique<client::Informer>(rest_, kApiServiceNamespaces,
                                                 client::InformerOptions{.ns = cluster_namespace_});
  informer_->AddEventHandler(
      {.on_add = [this](const client::ObjectPtr& o) { Enqueue(machinery::Name(*o)); },
       .on_update = [this](const client::ObjectPtr&,
                           const client::ObjectPtr& o) { Enqueue(machinery::Name(*o)); },
       .on_delete = [this](const client::ObjectPtr& o) { Enqueue(machinery::Name(*o)); }});
  informer_->Start();
  worker_ = std::thread([this] { Run(); });
  informer_->WaitForSync(std::chrono::seconds(30));
}

void NamespaceMapper::Stop() {
  {
    core::MutexLock lock(mu_);
    if (!started_) return;
    started_ = false;
    stopping_ = true;
  }
  cv_.SignalAll();
  if (worker_.joinable()) worker_.join();
  if (informer_) informer_->Stop();
  informer_.reset();
}

void NamespaceMapper::Enqueue(const std::string& name) {
  {
    core::MutexLock lock(mu_);
    dirty_.insert(name);
  }
  cv_.SignalAll();
}

void NamespaceMapper::Run() {
  std::set<std::string> failed;
  auto next_full_pass = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (true) {
    std::set<std::string> batch;
    {
      core::MutexLock lock(mu_);
      const auto wake = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
      while (!stopping_ && dirty_.empty() && std::chrono::steady_clock::now() < wake) {
        cv_.WaitUntil(mu_, wake);
      }
      if (stopping_) return;
      batch.swap(dirty_);
    }
    batch.insert(failed.begin(), failed.end());
    failed.clear();
    if (std::chrono::steady_clock::now() >= next_full_pass) {
      for (const auto& o : informer_->indexer().List()) batch.insert(machinery::Name(*o));
      next_full_pass = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    }
    for (const auto& name : batch) {
      core::Status s = Reconcile(name);
      core::MutexLock lock(mu_);
      if (s.ok()) {
        last_error_.clear();
      } else {
        failed.insert(name);
        last_error_ = name + ": " + s.ToString();
      }
    }
  }
}

core::Status NamespaceMapper::Reconcile(const std::string& name) {
  ResourceClient namespaces(rest_, resources::kNamespaces);
  client::ObjectPtr object = informer_->indexer().Get(cluster_namespace_ + "/" + name);
  if (!object) {
    auto deleted = namespaces.Delete(TargetNamespace(name));
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
    return core::Status::Ok();
  }
  std::string target = machinery::GetString(*object, {"status", "namespace"});
  if (target.empty()) target = TargetNamespace(name);
  auto ns = namespaces.Get(target);
  if (!ns.ok() && !core::IsNotFound(ns.status())) return ns.status();
  if (ns.ok() && machinery::IsBeingDeleted(*ns)) {
    // Still terminating after an earlier mapping went: wait until it is gone.
    return core::Unavailable("namespace " + target + " is terminating");
  }
  if (!ns.ok()) {
    auto created = namespaces.Create(
        {{"apiVersion", "v1"},
         {"kind", "Namespace"},
         {"metadata",
          {{"name", target},
           {"annotations", {{kApiServiceNamespaceAnnotation, cluster_namespace_ + "/" + name}}}}}});
    if (!created.ok() && !core::IsAlreadyExists(created.status())) return created.status();
  }
  KLUTCH_RETURN_IF_ERROR(EnsureBinderRoleBinding(
      rest_, target, cluster_namespace_, std::string(kBinderName) + "-" + cluster_namespace_));
  if (machinery::GetString(*object, {"status", "namespace"}) != target) {
    auto patched =
        ResourceClient(rest_, kApiServiceNamespaces, cluster_namespace_)
            .Patch(name, client::PatchType::kMerge,
                   machinery::Dump(Json{{"status", {{"namespace", target}}}}), {}, "status");
    if (!patched.ok() && !core::IsNotFound(patched.status())) return patched.status();
  }
  return core::Status::Ok();
}

}  // namespace klutch::testing::bind
