#include "bind/provision.h"

#include <algorithm>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/ids.h"
#include "apis/klutch/register.h"
#include "bind/object_writes.h"
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

// As object_writes.h's GetOrCreate, but written without the backend's field manager.
core::Result<Json> GetOrCreateWithoutFieldManager(const ResourceClient& rc, const Json& desired) {
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
  const std::string hash = apis::klutch::Sha224Base62(identity);
  KLUTCH_ASSIGN_OR_RETURN(
      Json list, namespaces.ListAll(
                     {.label_selector = std::string(apis::klutch::kIdentityHashLabel) + "=" + hash,
                      .skip_managed_fields = true}));
  std::vector<Json> out;
  for (Json& ns : Items(list)) {
    if (machinery::Annotation(ns, apis::klutch::kIdentityAnnotation) == identity)
      out.push_back(std::move(ns));
  }
  if (out.empty()) {
    KLUTCH_ASSIGN_OR_RETURN(Json all, namespaces.ListAll({.skip_managed_fields = true}));
    for (Json& ns : Items(all)) {
      if (machinery::Annotation(ns, apis::klutch::kIdentityAnnotation) != identity) continue;
      Json patch = {
          {"metadata", {{"labels", {{std::string(apis::klutch::kIdentityHashLabel), hash}}}}}};
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

constexpr std::string_view kClusterLimitCause = "ClusterLimitReached";

// The OIDC subject of an identity "<sub>#<clusterID>" (cluster IDs contain no '#').
std::string SubjectOf(std::string_view identity) {
  const size_t hash = identity.rfind('#');
  return std::string(hash == std::string_view::npos ? identity : identity.substr(0, hash));
}

// The live cluster namespaces of the user of `identity` (its subject, and its issuer when both
// sides record one), oldest first (name breaks ties). Every cluster namespace a backend of
// this version made carries the identity-hash label.
core::Result<std::vector<Json>> UserNamespaces(client::RestClient& admin,
                                               const std::string& identity,
                                               const std::string& issuer) {
  ResourceClient namespaces(admin, resources::kNamespaces);
  KLUTCH_ASSIGN_OR_RETURN(
      Json list,
      namespaces.ListAll({.label_selector = std::string(apis::klutch::kIdentityHashLabel),
                          .skip_managed_fields = true}));
  const std::string subject = SubjectOf(identity);
  std::vector<Json> out;
  for (Json& ns : Items(list)) {
    const std::string owner = machinery::Annotation(ns, apis::klutch::kIdentityAnnotation);
    if (owner.empty() || SubjectOf(owner) != subject || machinery::IsBeingDeleted(ns)) continue;
    const std::string recorded = machinery::Annotation(ns, apis::klutch::kIssuerAnnotation);
    if (!issuer.empty() && !recorded.empty() && recorded != issuer) continue;
    out.push_back(std::move(ns));
  }
  std::sort(out.begin(), out.end(), [](const Json& a, const Json& b) {
    const std::string ta = machinery::GetString(a, {"metadata", "creationTimestamp"});
    const std::string tb = machinery::GetString(b, {"metadata", "creationTimestamp"});
    return ta != tb ? ta < tb : machinery::Name(a) < machinery::Name(b);
  });
  return out;
}

core::Status ClusterLimitReached(const std::vector<Json>& mine, int max) {
  std::string clusters;
  for (const Json& ns : mine) {
    const std::string identity = machinery::Annotation(ns, apis::klutch::kIdentityAnnotation);
    const size_t hash = identity.rfind('#');
    if (!clusters.empty()) clusters += ", ";
    clusters += (hash == std::string::npos ? identity : identity.substr(hash + 1)) +
                " (namespace " + machinery::Name(ns) + ")";
  }
  std::string message = "you already have " + std::to_string(mine.size()) +
                        (mine.size() == 1 ? " cluster" : " clusters") +
                        " bound to this Control Plane, the most one user may have (" +
                        std::to_string(max) + "): " + clusters;
  core::Details details{.kind = "namespaces"};
  details.causes.push_back({.reason = std::string(kClusterLimitCause), .message = message});
  return core::Status(core::Reason::kForbidden, std::move(message), std::move(details));
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

  // A new cluster of this user: within the limit?
  const int max = options.max_clusters_per_user;
  if (max > 0) {
    KLUTCH_ASSIGN_OR_RETURN(std::vector<Json> mine, UserNamespaces(admin, identity, issuer));
    if (mine.size() >= static_cast<size_t>(max)) return ClusterLimitReached(mine, max);
  }
  // Concurrent first binds of several new clusters may all have passed the check above: after
  // creating, each counts again and gives its namespace up when the user has more than `max`.
  // The last of any set of kept namespaces to count saw them all, so more than `max` are
  // never kept (under a race, fewer may be: the user binds again).
  auto keep = [&](const Json& created) -> core::Result<std::string> {
    const std::string name = machinery::Name(created);
    if (max <= 0) return name;
    KLUTCH_ASSIGN_OR_RETURN(std::vector<Json> mine, UserNamespaces(admin, identity, issuer));
    auto at = std::find_if(mine.begin(), mine.end(),
                           [&](const Json& ns) { return machinery::Name(ns) == name; });
    if (at == mine.end() || mine.size() <= static_cast<size_t>(max)) return name;
    KLUTCH_LOG(kInfo, "bind", "identity {} raced past the limit of {} clusters; removing {}",
               core::GoQuote(identity), max, name);
    auto deleted = ResourceClient(admin, resources::kNamespaces)
                       .Delete(name, {.precondition_uid = machinery::Uid(created)});
    if (!deleted.ok() && !core::IsNotFound(deleted.status())) return deleted.status();
    mine.erase(at);
    mine.resize(std::min(mine.size(), static_cast<size_t>(max)));
    return ClusterLimitReached(mine, max);
  };

  const std::string prefix = Prefix(options);
  const std::string hash = apis::klutch::Sha224Base62(identity);
  Json ns = {{"apiVersion", "v1"},
             {"kind", "Namespace"},
             {"metadata",
              {{"name", prefix + core::ToLower(hash.substr(0, 12))},
               {"labels", {{std::string(apis::klutch::kIdentityHashLabel), hash}}},
               {"annotations", {{std::string(apis::klutch::kIdentityAnnotation), identity}}}}}};
  if (!issuer.empty())
    ns["metadata"]["annotations"][std::string(apis::klutch::kIssuerAnnotation)] = issuer;
  ResourceClient namespaces(admin, resources::kNamespaces);
  auto created = namespaces.Create(ns);
  if (created.ok()) return keep(*created);
  if (!core::IsAlreadyExists(created.status())) return created.status();
  const std::string name = machinery::Name(ns);
  KLUTCH_ASSIGN_OR_RETURN(Json existing, namespaces.Get(name));
  if (machinery::Annotation(existing, apis::klutch::kIdentityAnnotation) == identity) {
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
  return keep(generated);
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

bool IsClusterLimitReached(const core::Status& status) {
  if (status.reason() != core::Reason::kForbidden || !status.details()) return false;
  for (const core::Cause& c : status.details()->causes) {
    if (c.reason == kClusterLimitCause) return true;
  }
  return false;
}

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
                                                 apis::klutch::kBinderName, "token"),
                    .body = machinery::Dump(request)});
  if (!response.ok()) {
    return core::Status(response.status())
        .Annotate("requesting a token for ServiceAccount " + cluster_namespace + "/" +
                  std::string(apis::klutch::kBinderName));
  }
  const std::string token = machinery::GetString(*response, {"status", "token"});
  if (token.empty()) {
    return core::Internal("the TokenRequest for ServiceAccount " + cluster_namespace + "/" +
                          std::string(apis::klutch::kBinderName) + " returned no token");
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
  Json annotations = {
      {std::string(apis::klutch::kTokenIssuedAnnotation), core::FormatTime(issued.issued)},
      {std::string(apis::klutch::kTokenExpiresAnnotation), core::FormatTime(issued.expires)}};
  Json data = {{std::string(apis::klutch::kKubeconfigKey), core::Base64Encode(issued.kubeconfig)}};
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
  {
    Json patch = {{"metadata",
                   {{"annotations",
                     {{std::string(apis::klutch::kLastBoundAnnotation),
                       core::FormatTime(ClockOf(options).Now())}}}}}};
    auto marked = ResourceClient(admin, resources::kNamespaces)
                      .Patch(ns, client::PatchType::kMerge, machinery::Dump(patch));
    if (!marked.ok()) return marked.status();
  }

  // The kubeconfig Secret is written before a new ClusterBinding appears, so the token
  // refresh finds a fresh token there instead of issuing a second one.
  ResourceClient cluster_bindings(admin, apis::klutch::kClusterBindings, ns);
  auto existing = cluster_bindings.Get(apis::klutch::kClusterBindingName);
  if (!existing.ok() && !core::IsNotFound(existing.status())) return existing.status();
  std::string secret_name;
  if (existing.ok()) {
    secret_name = machinery::GetString(*existing, {"spec", "kubeconfigSecretRef", "name"});
  }
  if (secret_name.empty()) secret_name = apis::klutch::kKubeconfigSecretName;

  KLUTCH_ASSIGN_OR_RETURN(
      Json account, GetOrCreateWithoutFieldManager(
                        ResourceClient(admin, resources::kServiceAccounts, ns),
                        {{"apiVersion", "v1"},
                         {"kind", "ServiceAccount"},
                         {"metadata", {{"name", apis::klutch::kBinderName}, {"namespace", ns}}}}));
  (void)account;
  // The konnector may use its kubeconfig at once: the ClusterBinding controller would grant
  // this too, a moment later.
  KLUTCH_RETURN_IF_ERROR(EnsureRoleBinding(admin, ns, std::string(apis::klutch::kBinderName),
                                           "ClusterRole", std::string(apis::klutch::kBinderName),
                                           ns, std::string(apis::klutch::kBinderName)));
  KLUTCH_ASSIGN_OR_RETURN(IssuedKubeconfig issued, IssueKubeconfig(admin, options, ns));
  KLUTCH_ASSIGN_OR_RETURN(Json secret, WriteKubeconfigSecret(admin, ns, secret_name, issued));
  (void)secret;
  if (!existing.ok()) {
    KLUTCH_ASSIGN_OR_RETURN(
        Json created,
        GetOrCreateWithoutFieldManager(
            cluster_bindings,
            {{"apiVersion", apis::klutch::kApiVersion},
             {"kind", "ClusterBinding"},
             {"metadata", {{"name", apis::klutch::kClusterBindingName}, {"namespace", ns}}},
             {"spec",
              {{"kubeconfigSecretRef",
                {{"name", secret_name}, {"key", apis::klutch::kKubeconfigKey}}},
               {"providerPrettyName", options.pretty_name}}}}));
    (void)created;
  }
  out.kubeconfig = std::move(issued.kubeconfig);
  return out;
}

}  // namespace klutch::bind
