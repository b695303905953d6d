#include "bind/provision.h"

#include <algorithm>

#include "bind/ids.h"
#include "bind/internal.h"
#include "bind/names.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "serving/kubeconfig.h"

namespace klutch::bind {
namespace {

using client::ResourceClient;
using machinery::Json;
namespace resources = client::resources;

const core::Clock& ClockOf(const ProvisionOptions& options) {
  return options.clock ? *options.clock : core::RealClock::Get();
}

core::Result<Json> GetOrCreate(const ResourceClient& rc, const Json& desired) {
  auto created = rc.Create(desired);
  if (created.ok() || !core::IsAlreadyExists(created.status())) return created;
  return rc.Get(machinery::Name(desired));
}

std::vector<Json> Items(const Json& list) {
  std::vector<Json> out;
  if (const Json* items = machinery::Find(list, {"items"}); items && items->is_array()) {
    out.assign(items->begin(), items->end());
  }
  return out;
}

// Namespaces carrying exactly `identity`, oldest first (name breaks ties). Found by the
// identity-hash label; namespaces made by another backend carry only the annotation, so
// when the label finds none every namespace is checked once (and labelled).
core::Result<std::vector<Json>> NamespacesOf(client::RestClient& admin,
                                             const std::string& identity) {
  ResourceClient namespaces(admin, resources::kNamespaces);
  const std::string hash = Sha224Base62(identity);
  KLUTCH_ASSIGN_OR_RETURN(
      Json list, namespaces.ListAll({.label_selector = std::string(kIdentityHashLabel) + "=" + hash,
                                     .skip_managed_fields = true}));
  std::vector<Json> out;
  for (Json& ns : Items(list)) {
    if (machinery::Annotation(ns, kIdentityAnnotation) == identity) out.push_back(std::move(ns));
  }
  if (out.empty()) {
    KLUTCH_ASSIGN_OR_RETURN(Json all, namespaces.ListAll({.skip_managed_fields = true}));
    for (Json& ns : Items(all)) {
      if (machinery::Annotation(ns, kIdentityAnnotation) != identity) continue;
      Json patch = {{"metadata", {{"labels", {{std::string(kIdentityHashLabel), hash}}}}}};
      auto labelled =
          namespaces.Patch(machinery::Name(ns), client::PatchType::kMerge, machinery::Dump(patch));
      out.push_back(labelled.ok() ? *std::move(labelled) : std::move(ns));
    }
  }
  std::sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
    const std::string ta = machinery::GetString(a, {"metadata", "creationTimestamp"});
    const std::string tb = machinery::GetString(b, {"metadata", "creationTimestamp"});
    return ta != tb ? ta < tb : machinery::Name(a) < machinery::Name(b);
  });
  // Namespaces on their way out are no home for a consumer.
  std::erase_if(out, [](const Json& ns) { return machinery::IsBeingDeleted(ns); });
  return out;
}

// The prefix with its trailing '-'.
std::string Prefix(const ProvisionOptions& options) {
  std::string prefix = options.namespace_prefix.empty() ? "cluster" : options.namespace_prefix;
  if (!prefix.ends_with('-')) prefix += '-';
  return prefix;
}

// The cluster namespace of `identity`: the existing one, or a new one. A new one is named
// `<prefix><12 characters of the identity's hash>` rather than by generateName, so concurrent
// first binds of one identity (two browser tabs, two replicas) meet on one namespace through
// AlreadyExists; only when another identity holds that name (a hash collision) does the
// server pick a name.
core::Result<std::string> EnsureClusterNamespace(client::RestClient& admin,
                                                 const ProvisionOptions& options,
                                                 const std::string& identity,
                                                 const std::string& issuer) {
  KLUTCH_ASSIGN_OR_RETURN(std::vector<Json> found, NamespacesOf(admin, identity));
  if (found.size() > 1) {
    KLUTCH_LOG(kWarn, "bind", "identity {} has {} cluster namespaces; using the oldest, {}",
               core::GoQuote(identity), found.size(), machinery::Name(found.front()));
  }
  if (!found.empty()) return machinery::Name(found.front());

  const std::string prefix = Prefix(options);
  const std::string hash = Sha224Base62(identity);
  Json ns = {{"apiVersion", "v1"},
             {"kind", "Namespace"},
             {"metadata",
              {{"name", prefix + core::ToLower(hash.substr(0, 12))},
               {"labels", {{std::string(kIdentityHashLabel), hash}}},
               {"annotations", {{std::string(kIdentityAnnotation), identity}}}}}};
  if (!issuer.empty()) ns["metadata"]["annotations"][std::string(kIssuerAnnotation)] = issuer;
  ResourceClient namespaces(admin, resources::kNamespaces);
  auto created = namespaces.Create(ns);
  if (created.ok()) return machinery::Name(*created);
  if (!core::IsAlreadyExists(created.status())) return created.status();
  const std::string name = machinery::Name(ns);
  KLUTCH_ASSIGN_OR_RETURN(Json existing, namespaces.Get(name));
  if (machinery::Annotation(existing, kIdentityAnnotation) == identity) {
    if (machinery::IsBeingDeleted(existing)) {
      return core::Conflict("the cluster namespace " + name +
                            " of this identity is still being deleted; bind again once it is "
                            "gone (usually within a minute)");
    }
    return name;
  }
  KLUTCH_LOG(kWarn, "bind", "namespace {} belongs to another identity; using a generated name",
             name);
  ns["metadata"].erase("name");
  ns["metadata"]["generateName"] = prefix;
  KLUTCH_ASSIGN_OR_RETURN(Json generated, namespaces.Create(ns));
  return machinery::Name(generated);
}

core::Status Validate(const ProvisionOptions& options, const std::string& identity) {
  if (identity.empty()) return core::Invalid("the consumer identity is empty");
  if (!options.external_address.empty() && !options.external_address.starts_with("https://")) {
    return core::Invalid("the external address " + core::GoQuote(options.external_address) +
                         " must start with https://");
  }
  if (options.token_ttl.count() <= 0) return core::Invalid("the token lifetime must be positive");
  const std::string prefix = Prefix(options);
  const bool dns_label = std::all_of(prefix.begin(), prefix.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
  if (!dns_label || prefix.front() == '-' || prefix.size() > 50) {
    return core::Invalid("the namespace prefix " + core::GoQuote(options.namespace_prefix) +
                         " must be at most 49 lowercase letters, digits and '-', starting "
                         "with a letter or digit");
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<IssuedKubeconfig> IssueKubeconfig(client::RestClient& admin,
                                               const ProvisionOptions& options,
                                               const std::string& cluster_namespace) {
  Json request = {{"apiVersion", "authentication.k8s.io/v1"},
                  {"kind", "TokenRequest"},
                  {"spec", {{"expirationSeconds", options.token_ttl.count()}}}};
  const auto issued_at = ClockOf(options).Now();
  auto response =
      admin.DoJson({.verb = "POST",
                    .path = client::ResourcePath(resources::kServiceAccounts, cluster_namespace,
                                                 kBinderName, "token"),
                    .body = machinery::Dump(request)});
  if (!response.ok()) {
    return core::Status(response.status())
        .Annotate("requesting a token for ServiceAccount " + cluster_namespace + "/" +
                  std::string(kBinderName));
  }
  const std::string token = machinery::GetString(*response, {"status", "token"});
  if (token.empty()) {
    return core::Internal("the TokenRequest for ServiceAccount " + cluster_namespace + "/" +
                          std::string(kBinderName) + " returned no token");
  }
  // The lifetime granted (servers cap it); the request's when the answer does not say.
  std::chrono::seconds granted = options.token_ttl;
  if (const Json* s = machinery::Find(*response, {"spec", "expirationSeconds"});
      s != nullptr && s->is_number_integer() && *s > 0) {
    granted = std::chrono::seconds(s->get<int64_t>());  // json-ok: type checked
  }
  IssuedKubeconfig out;
  out.issued = issued_at;
  out.expires = issued_at + granted;
  out.kubeconfig = serving::KubeconfigYaml(
      {.name = "default",
       .server =
           options.external_address.empty() ? admin.config().server : options.external_address,
       .ca_pem = options.external_ca_pem.empty() ? admin.config().ca_pem : options.external_ca_pem,
       .tls_server_name = options.external_server_name,
       .token = token,
       .ns = cluster_namespace});
  return out;
}

core::Result<Json> WriteKubeconfigSecret(client::RestClient& admin,
                                         const std::string& cluster_namespace,
                                         const std::string& secret_name,
                                         const IssuedKubeconfig& issued) {
  ResourceClient secrets(admin, resources::kSecrets, cluster_namespace);
  Json annotations = {{std::string(kTokenIssuedAnnotation), core::FormatTime(issued.issued)},
                      {std::string(kTokenExpiresAnnotation), core::FormatTime(issued.expires)}};
  Json data = {{std::string(kKubeconfigKey), core::Base64Encode(issued.kubeconfig)}};
  Json desired = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"type", "Opaque"},
      {"metadata",
       {{"name", secret_name}, {"namespace", cluster_namespace}, {"annotations", annotations}}},
      {"data", data}};
  auto created = secrets.Create(desired);
  if (created.ok() || !core::IsAlreadyExists(created.status())) return created;
  for (int attempt = 0;; ++attempt) {
    KLUTCH_ASSIGN_OR_RETURN(Json existing, secrets.Get(secret_name));
    for (auto it = annotations.begin(); it != annotations.end(); ++it) {
      machinery::SetAnnotation(existing, it.key(), it.value().get<std::string>());  // json-ok: ours
    }
    existing["data"] = data;
    auto updated = secrets.Update(existing);
    if (updated.ok() || !core::IsConflict(updated.status()) || attempt >= 5) return updated;
  }
}

core::Result<ConsumerAccess> ProvisionConsumer(client::RestClient& admin,
                                               const ProvisionOptions& options,
                                               const std::string& identity,
                                               const std::string& issuer) {
  KLUTCH_RETURN_IF_ERROR(Validate(options, identity));
  ConsumerAccess out;
  KLUTCH_ASSIGN_OR_RETURN(out.cluster_namespace,
                          EnsureClusterNamespace(admin, options, identity, issuer));
  const std::string& ns = out.cluster_namespace;

  // The kubeconfig Secret is written before a new ClusterBinding appears, so the token
  // refresh finds a fresh token there instead of issuing a second one.
  ResourceClient cluster_bindings(admin, kClusterBindings, ns);
  auto existing = cluster_bindings.Get(kClusterBindingName);
  if (!existing.ok() && !core::IsNotFound(existing.status())) return existing.status();
  std::string secret_name;
  if (existing.ok()) {
    secret_name = machinery::GetString(*existing, {"spec", "kubeconfigSecretRef", "name"});
  }
  if (secret_name.empty()) secret_name = kKubeconfigSecretName;

  KLUTCH_ASSIGN_OR_RETURN(Json account,
                          GetOrCreate(ResourceClient(admin, resources::kServiceAccounts, ns),
                                      {{"apiVersion", "v1"},
                                       {"kind", "ServiceAccount"},
                                       {"metadata", {{"name", kBinderName}, {"namespace", ns}}}}));
  (void)account;
  // The konnector may use its kubeconfig at once: the ClusterBinding controller would grant
  // this too, a moment later.
  KLUTCH_RETURN_IF_ERROR(internal::EnsureRoleBinding(admin, ns, std::string(kBinderName),
                                                     "ClusterRole", std::string(kBinderName), ns,
                                                     std::string(kBinderName)));
  KLUTCH_ASSIGN_OR_RETURN(IssuedKubeconfig issued, IssueKubeconfig(admin, options, ns));
  KLUTCH_ASSIGN_OR_RETURN(Json secret, WriteKubeconfigSecret(admin, ns, secret_name, issued));
  (void)secret;
  if (!existing.ok()) {
    KLUTCH_ASSIGN_OR_RETURN(
        Json created,
        GetOrCreate(cluster_bindings,
                    {{"apiVersion", kApiVersion},
                     {"kind", "ClusterBinding"},
                     {"metadata", {{"name", kClusterBindingName}, {"namespace", ns}}},
                     {"spec",
                      {{"kubeconfigSecretRef", {{"name", secret_name}, {"key", kKubeconfigKey}}},
                       {"providerPrettyName", options.pretty_name}}}}));
    (void)created;
  }
  out.kubeconfig = std::move(issued.kubeconfig);
  return out;
}

}  // namespace klutch::bind
