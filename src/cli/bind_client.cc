#include "cli/bind_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <ostream>
#include <set>
#include <thread>

#include "apis/manifests.h"
#include "client/apply.h"
#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "core/clock.h"
#include "core/strings.h"
#include "http/url.h"
#include "machinery/object.h"
#include "reconcile/conditions.h"

namespace klutch::cli::bind {
namespace {

using client::ResourceClient;
namespace resources = client::resources;

const client::GroupVersionResource kBindings{"klutch.anynines.com", "v1alpha1",
                                             "apiservicebindings"};
const client::GroupVersionResource kExportRequests{"klutch.anynines.com", "v1alpha1",
                                                   "apiserviceexportrequests"};
constexpr char kDefaultImageRepository[] = "klutch";
constexpr char kKonnectorName[] = "konnector";
// The Ready message of a binding the konnector has not reported on yet (the CLI writes it).
constexpr char kPendingMessage[] = "Waiting for the konnector to pick this binding up";

void Say(const BindOutput& out, const std::string& line) {
  if (out.err != nullptr) *out.err << line << "\n" << std::flush;
}

// "v1.2.3" (optionally with -pre / +build suffixes) -> {1,2,3}; nullopt otherwise.
std::optional<std::array<int64_t, 3>> ParseVersion(std::string_view v) {
  if (!v.starts_with('v')) return std::nullopt;
  v.remove_prefix(1);
  size_t end = v.find_first_of("-+");
  auto parts = core::Split(v.substr(0, end), '.');
  if (parts.size() != 3) return std::nullopt;
  std::array<int64_t, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    auto n = core::ParseInt64(parts[i]);
    if (!n || *n < 0) return std::nullopt;
    out[i] = *n;
  }
  return out;
}

core::Status WithHint(const core::Status& st, const std::string& context, const std::string& hint) {
  return core::Status(st.reason(), fmt::format("{}: {}{}", context, st.message(),
                                               hint.empty() ? "" : "\n  " + hint));
}

bool IsDevelopmentVersion(std::string_view v) {
  return v == "v0.0.0" || v.starts_with("v0.0.0-master");
}

// The image tag's version when the image is `kDefaultImageRepository:vX.Y.Z`.
std::optional<std::array<int64_t, 3>> OurImageVersion(std::string_view image) {
  std::string prefix = std::string(kDefaultImageRepository) + ":";
  if (!image.starts_with(prefix)) return std::nullopt;
  return ParseVersion(image.substr(prefix.size()));
}

std::string DefaultImage() { return fmt::format("{}:{}", kDefaultImageRepository, kCliVersion); }

bool Contains(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end() ||
         std::find(list.begin(), list.end(), "*") != list.end();
}

// Whether one of `rules` grants every verb of `verbs` on group/resource.
bool Covered(const Json& rules, const std::string& group, const std::string& resource,
             const std::vector<std::string>& verbs) {
  if (!rules.is_array()) return false;
  for (const Json& rule : rules) {
    if (!rule.is_object()) continue;
    if (!Contains(machinery::Strings(machinery::Find(rule, {"apiGroups"})), group)) continue;
    if (!Contains(machinery::Strings(machinery::Find(rule, {"resources"})), resource)) continue;
    if (machinery::Find(rule, {"resourceNames"}) != nullptr &&
        !machinery::Strings(machinery::Find(rule, {"resourceNames"})).empty()) {
      continue;
    }
    auto have = machinery::Strings(machinery::Find(rule, {"verbs"}));
    if (std::all_of(verbs.begin(), verbs.end(),
                    [&](const std::string& v) { return Contains(have, v); })) {
      return true;
    }
  }
  return false;
}

const std::vector<std::string> kObjectVerbs = {"get",    "list",  "watch", "create",
                                               "update", "patch", "delete"};
const std::vector<std::string> kStatusVerbs = {"get", "update", "patch"};

}  // namespace

core::Result<std::string> KonnectorImageAt(std::string_view version) {
  // An image tag: at most 128 of [A-Za-z0-9_.-] ("+build" suffixes do not fit a tag).
  bool tag =
      !version.empty() && version.size() <= 128 &&
      std::all_of(version.begin(), version.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
      });
  if (!tag || !ParseVersion(version)) {
    return core::BadRequest(
        fmt::format("{} is not a version like {}", core::GoQuote(version), kCliVersion));
  }
  return fmt::format("{}:{}", kDefaultImageRepository, version);
}

core::Result<BindingProvider> ParseBindingProvider(std::string_view body, const std::string& url) {
  auto doc = machinery::ParseJson(body);
  if (!doc.ok() || !doc->is_object()) {
    return core::BadRequest(fmt::format(
        "{} did not answer with a BindingProvider document (is it the backend's /export "
        "URL?)",
        url));
  }
  if (machinery::Kind(*doc) != "BindingProvider") {
    return core::BadRequest(fmt::format("{} answered kind {} instead of BindingProvider", url,
                                        core::GoQuote(machinery::Kind(*doc))));
  }
  std::string api_version = machinery::ApiVersionOf(*doc);
  if (api_version != "v1alpha1") {
    return core::BadRequest(fmt::format(
        "{} speaks binding provider API {}; this kubectl-bind ({}) speaks v1alpha1 — use a "
        "kubectl-bind release matching the backend",
        url, core::GoQuote(api_version), kCliVersion));
  }
  BindingProvider p;
  p.pretty_name = machinery::GetString(*doc, {"providerPrettyName"});
  p.version = machinery::GetString(*doc, {"version"});
  if (p.version.empty()) {
    return core::BadRequest(fmt::format("{} does not say which version it is", url));
  }
  if (!IsDevelopmentVersion(p.version)) {
    auto v = ParseVersion(p.version);
    if (!v) {
      return core::BadRequest(fmt::format("{}: backend version {} is not a semantic version", url,
                                          core::GoQuote(p.version)));
    }
    if ((*v)[0] == 0 && (*v)[1] < 3) {
      return core::BadRequest(
          fmt::format("{}: backend version {} is older than v0.3.0, which this kubectl-bind needs",
                      url, p.version));
    }
  }
  const Json* methods = machinery::Find(*doc, {"authenticationMethods"});
  if (methods != nullptr && methods->is_array()) {
    for (const Json& m : *methods) {
      std::string method = machinery::GetString(m, {"method"});
      if (method == "OAuth2CodeGrant" && p.authenticated_url.empty()) {
        p.authenticated_url = machinery::GetString(m, {"oauth2CodeGrant", "authenticatedURL"});
      } else if (method == "OAuth2DeviceGrant" && p.device_authorization_url.empty()) {
        p.device_authorization_url =
            machinery::GetString(m, {"oauth2DeviceGrant", "deviceAuthorizationURL"});
        p.device_token_url = machinery::GetString(m, {"oauth2DeviceGrant", "tokenURL"});
        p.device_bind_url = machinery::GetString(m, {"oauth2DeviceGrant", "bindURL"});
      }
    }
  }
  if (p.authenticated_url.empty() && p.device_authorization_url.empty()) {
    return core::BadRequest(
        fmt::format("{} offers no authentication method this kubectl-bind knows "
                    "(OAuth2CodeGrant or OAuth2DeviceGrant)",
                    url));
  }
  return p;
}

core::Result<BindingResponse> ParseBindingResponse(std::string_view json,
                                                   const std::string& session_id) {
  auto doc = machinery::ParseJson(json);
  if (!doc.ok() || !doc->is_object()) {
    return core::BadRequest("the backend's response is not a JSON object");
  }
  if (machinery::Kind(*doc) != "BindingResponse" ||
      machinery::ApiVersionOf(*doc) != kBindApiVersion) {
    return core::BadRequest(fmt::format("the backend answered {} {} instead of {} BindingResponse",
                                        core::GoQuote(machinery::ApiVersionOf(*doc)),
                                        core::GoQuote(machinery::Kind(*doc)), kBindApiVersion));
  }
  const Json* grant = machinery::Find(*doc, {"authentication", "oauth2CodeGrant"});
  if (grant == nullptr || !grant->is_object()) {
    return core::BadRequest("the backend's response has no authentication.oauth2CodeGrant");
  }
  if (machinery::GetString(*grant, {"sid"}) != session_id) {
    return core::BadRequest(
        "the backend's response belongs to another login session; run kubectl bind again and "
        "finish the login it prints");
  }
  BindingResponse r;
  r.id = machinery::GetString(*grant, {"id"});
  r.display_name = machinery::GetString(*grant, {"displayName"});
  auto kubeconfig = core::Base64Decode(machinery::GetString(*doc, {"kubeconfig"}));
  if (!kubeconfig || kubeconfig->empty()) {
    return core::BadRequest("the backend's response holds no kubeconfig");
  }
  r.kubeconfig = std::move(*kubeconfig);
  const Json* requests = machinery::Find(*doc, {"requests"});
  if (requests == nullptr || !requests->is_array() || requests->empty()) {
    return core::BadRequest("the backend's response names no API to bind");
  }
  for (const Json& request : *requests) {
    if (machinery::ApiVersionOf(request) != kBindApiVersion ||
        machinery::Kind(request) != "APIServiceExportRequest") {
      return core::BadRequest(
          fmt::format("the backend's response holds a {} {} instead of an "
                      "APIServiceExportRequest of {}",
                      core::GoQuote(machinery::ApiVersionOf(request)),
                      core::GoQuote(machinery::Kind(request)), kBindApiVersion));
    }
    r.requests.push_back(request);
  }
  return r;
}

std::string DisplayName(const BindingResponse& response) {
  if (!response.display_name.empty()) return response.display_name;
  // "<issuer>/<subject>": the issuer is a URL with slashes of its own, the subject is last.
  size_t slash = response.id.rfind('/');
  return slash == std::string::npos ? response.id : response.id.substr(slash + 1);
}

core::Result<BindingResponse> DecodeCallbackResponse(std::string_view response,
                                                     const std::string& session_id) {
  std::string text(response);
  // Either alphabet, padded or not: map the URL alphabet onto the standard one.
  std::replace(text.begin(), text.end(), '-', '+');
  std::replace(text.begin(), text.end(), '_', '/');
  auto decoded = core::Base64Decode(text);
  if (!decoded) return core::BadRequest("the response parameter is not base64");
  return ParseBindingResponse(*decoded, session_id);
}

core::Result<std::string> AuthorizeUrl(const std::string& authenticated_url, int port,
                                       const std::string& session_id, const std::string& cluster_id,
                                       const std::string& cluster_name) {
  auto url = http::ParseUrl(authenticated_url);
  if (!url.ok()) {
    return core::BadRequest("the backend advertises a bad login URL: " + url.status().message());
  }
  // `u` with the loopback address rather than `p` (which backends expand to localhost): a
  // browser resolving localhost to ::1 first could reach another local user's listener there.
  std::vector<std::pair<std::string, std::string>> query = {{"c", cluster_id}};
  if (!cluster_name.empty()) query.emplace_back("n", cluster_name);
  query.emplace_back("s", session_id);
  query.emplace_back("u", fmt::format("http://127.0.0.1:{}/callback", port));
  return http::AddQuery(*url, query);
}

std::vector<std::pair<std::string, std::string>> DeviceAuthorizeForm(
    const std::string& session_id, const std::string& cluster_id, const std::string& cluster_name) {
  std::vector<std::pair<std::string, std::string>> form = {{"s", session_id}, {"c", cluster_id}};
  if (!cluster_name.empty()) form.emplace_back("n", cluster_name);
  return form;
}

namespace {
// What the backend refuses in `n` (web_protocol.h ClusterNameParameter), "" when it takes it.
std::string ClusterNameProblem(std::string_view name) {
  if (name.size() > 253) return fmt::format("is {} bytes long; at most 253 fit", name.size());
  if (std::any_of(name.begin(), name.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return "holds control characters";
  }
  return "";
}
}  // namespace

core::Result<std::string> ClusterNameToSend(const std::optional<std::string>& flag,
                                            const std::string& context_name) {
  if (flag) {
    const std::string_view name = core::Trim(*flag);
    if (std::string problem = ClusterNameProblem(name); !problem.empty()) {
      return core::BadRequest("--cluster-name " + problem +
                              ": give the name you know this App Cluster by (it titles the "
                              "cluster on the backend's /consumer page), or --cluster-name \"\" "
                              "to send none");
    }
    return std::string(name);
  }
  const std::string_view name = core::Trim(context_name);
  return ClusterNameProblem(name).empty() ? std::string(name) : std::string();
}

core::Result<std::string> EnsureBindNamespace(client::RestClient& app) {
  ResourceClient ns(app, resources::kNamespaces);
  auto got = ns.Get(kBindNamespace);
  if (core::IsNotFound(got.status())) {
    Json object = {
        {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kBindNamespace}}}};
    got = ns.Create(object);
    if (core::IsAlreadyExists(got.status())) got = ns.Get(kBindNamespace);
  }
  if (!got.ok()) {
    return WithHint(got.status(), fmt::format("namespace {} in the App Cluster", kBindNamespace),
                    "check that your kubeconfig reaches the App Cluster and may create "
                    "namespaces");
  }
  std::string uid = machinery::Uid(*got);
  if (uid.empty()) return core::Internal("namespace klutch-bind has no UID");
  return uid;
}

core::Result<ProviderTarget> ReadProviderKubeconfig(const std::string& kubeconfig) {
  auto parsed = client::ParseKubeconfig(kubeconfig, "the provider kubeconfig", "/");
  if (!parsed.ok()) return parsed.status();
  auto context = parsed->contexts.find(parsed->current_context);
  if (context == parsed->contexts.end()) {
    return core::BadRequest("the provider kubeconfig has no current context");
  }
  auto cluster = parsed->clusters.find(context->second.cluster);
  if (cluster == parsed->clusters.end() || cluster->second.server.empty()) {
    return core::BadRequest("the provider kubeconfig's current context names no server");
  }
  if (context->second.namespace_.empty()) {
    return core::BadRequest(
        "the provider kubeconfig's current context has no namespace (the consumer's cluster "
        "namespace on the provider)");
  }
  return ProviderTarget{cluster->second.server, context->second.namespace_};
}

core::Result<std::string> StoreProviderKubeconfig(client::RestClient& app,
                                                  const std::string& kubeconfig, bool dry_run,
                                                  const BindOutput& out) {
  KLUTCH_ASSIGN_OR_RETURN(ProviderTarget target, ReadProviderKubeconfig(kubeconfig));
  ResourceClient secrets(app, resources::kSecrets, kBindNamespace);
  auto list = secrets.List();
  if (!list.ok() && !core::IsNotFound(list.status())) return list.status();
  std::string encoded = core::Base64Encode(kubeconfig);
  if (list.ok()) {
    for (const Json& secret : (*list)["items"]) {
      auto existing = core::Base64Decode(machinery::GetString(secret, {"data", "kubeconfig"}));
      if (!existing) continue;
      auto other = ReadProviderKubeconfig(*existing);
      if (!other.ok() || other->server != target.server ||
          other->cluster_namespace != target.cluster_namespace) {
        continue;
      }
      std::string name = machinery::Name(secret);
      if (dry_run) return name;
      // The konnector mirrors this Secret too (renewed credentials): retry on conflicts.
      Json updated = secret;
      core::Status written = core::Status::Ok();
      for (int attempt = 0; attempt < 5; ++attempt) {
        updated["data"]["kubeconfig"] = encoded;
        auto put = secrets.Update(updated);
        written = put.status();
        if (put.ok() || !core::IsConflict(put.status())) break;
        auto fresh = secrets.Get(name);
        if (!fresh.ok()) {
          written = fresh.status();
          break;
        }
        updated = *fresh;
      }
      if (!written.ok()) return WithHint(written, "updating secret " + name, "");
      Say(out,
          fmt::format("Updated secret {}/{} with the provider kubeconfig.", kBindNamespace, name));
      return name;
    }
  }
  if (dry_run) return std::string();
  Json secret = {{"apiVersion", "v1"},
                 {"kind", "Secret"},
                 {"metadata", {{"generateName", "kubeconfig-"}, {"namespace", kBindNamespace}}},
                 {"type", "Opaque"},
                 {"data", {{"kubeconfig", encoded}}}};
  auto created = secrets.Create(secret);
  if (!created.ok()) {
    return WithHint(created.status(), "storing the provider kubeconfig",
                    "check that you may create Secrets in namespace klutch-bind");
  }
  std::string name = machinery::Name(*created);
  Say(out, fmt::format("Created secret {}/{} for the provider kubeconfig.", kBindNamespace, name));
  return name;
}

core::Result<Json> ParseExportRequest(std::string_view text, const std::string& source) {
  auto doc = machinery::ParseYaml(text);
  if (!doc.ok()) return core::BadRequest(source + ": " + doc.status().message());
  if (!doc->is_object() || machinery::ApiVersionOf(*doc) != kBindApiVersion ||
      machinery::Kind(*doc) != "APIServiceExportRequest") {
    return core::BadRequest(fmt::format(
        "{}: expected an APIServiceExportRequest of {}, found {} {}", source, kBindApiVersion,
        core::GoQuote(machinery::ApiVersionOf(*doc)), core::GoQuote(machinery::Kind(*doc))));
  }
  const Json* list = machinery::Find(*doc, {"spec", "resources"});
  if (list == nullptr || !list->is_array() || list->empty()) {
    return core::BadRequest(source + ": spec.resources names no resource to bind");
  }
  for (const Json& r : *list) {
    if (machinery::GetString(r, {"resource"}).empty()) {
      return core::BadRequest(source + ": every spec.resources entry needs a resource");
    }
  }
  return *doc;
}

core::Result<Json> CreateExportRequest(client::RestClient& provider,
                                       const std::string& cluster_namespace, Json request,
                                       std::chrono::milliseconds timeout, const BindOutput& out) {
  ResourceClient sers(provider, kExportRequests, cluster_namespace);
  Json& meta = machinery::MutableMetadata(request);
  meta["namespace"] = cluster_namespace;
  meta.erase("resourceVersion");
  meta.erase("uid");
  request.erase("status");
  std::string name = machinery::Name(request);
  if (name.empty()) meta["generateName"] = "export-";
  auto created = sers.Create(request);
  if (core::IsAlreadyExists(created.status()) && !name.empty()) {
    meta.erase("name");
    meta["generateName"] = name + "-";
    created = sers.Create(request);
  }
  if (!created.ok()) {
    return WithHint(created.status(), "creating the APIServiceExportRequest on the provider",
                    created.status().reason() == core::Reason::kForbidden
                        ? "the provider kubeconfig may no longer be valid; run kubectl bind "
                          "<backend URL> again to log in anew"
                        : "");
  }
  name = machinery::Name(*created);
  Say(out, fmt::format("Waiting for the provider to accept export request {}...", name));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Json current = *created;
  while (true) {
    std::string phase = machinery::GetString(current, {"status", "phase"});
    if (phase == "Succeeded") return current;
    if (phase == "Failed") {
      return core::Invalid(
          fmt::format("the provider refused export request {}: {}", name,
                      machinery::GetString(current, {"status", "terminalMessage"})));
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return core::Status(core::Reason::kTimeout,
                          fmt::format("export request {} was not accepted within {} s; ask the "
                                      "provider's operator to check the bind backend",
                                      name, timeout.count() / 1000));
    }
    // Watch from the version we hold until the phase changes or a second passes.
    auto remaining = std::chrono::duration_cast<std::chrono::seconds>(deadline - now);
    bool deleted = false;
    auto watched = sers.Watch(
        {.field_selector = "metadata.name=" + name,
         .resource_version = machinery::ResourceVersion(current),
         .timeout_seconds = static_cast<int>(std::clamp<int64_t>(remaining.count(), 1, 5))},
        [&](const client::WatchEvent& event) {
          if (event.type == client::EventType::kDeleted) {
            deleted = true;
            return false;
          }
          if ((event.type == client::EventType::kAdded ||
               event.type == client::EventType::kModified) &&
              event.object) {
            current = *event.object;
            std::string p = machinery::GetString(current, {"status", "phase"});
            return p != "Succeeded" && p != "Failed";
          }
          return true;
        });
    if (deleted) {
      return core::NotFound(fmt::format(
          "export request {} was deleted on the provider before it was accepted", name));
    }
    if (!watched.ok() || watched->gone) {
      auto fresh = sers.Get(name);
      if (core::IsNotFound(fresh.status())) {
        return core::NotFound(fmt::format(
            "export request {} was deleted on the provider before it was accepted", name));
      }
      if (fresh.ok()) current = *fresh;
      if (!watched.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
}

core::Status InstallKonnector(client::RestClient& app, const KonnectorInstall& options,
                              const BindOutput& out) {
  std::string image = options.image.empty() ? DefaultImage() : options.image;
  if (!options.force) {
    auto live = ResourceClient(app, resources::kDeployments, kBindNamespace).Get(kKonnectorName);
    if (live.ok()) {
      std::string installed;
      const Json* containers = machinery::Find(*live, {"spec", "template", "spec", "containers"});
      if (containers != nullptr && containers->is_array()) {
        for (const Json& c : *containers) {
          if (machinery::GetString(c, {"name"}) == kKonnectorName) {
            installed = machinery::GetString(c, {"image"});
          }
        }
      }
      auto have = OurImageVersion(installed);
      auto want = ParseVersion(kCliVersion);
      if (!have || installed.ends_with(":latest")) {
        Say(out, fmt::format("A konnector ({}) is installed; leaving it as it is.",
                             installed.empty() ? "unknown image" : installed));
        return core::Status::Ok();
      }
      if (want && *have >= *want) {
        if (*have > *want) {
          Say(out, fmt::format("Warning: the installed konnector ({}) is newer than this "
                               "kubectl-bind ({}); consider upgrading kubectl-bind.",
                               installed, kCliVersion));
        }
        return core::Status::Ok();
      }
      Say(out, fmt::format("Upgrading the konnector from {} to {}.", installed, image));
    } else if (!core::IsNotFound(live.status())) {
      return WithHint(live.status(), "reading the konnector Deployment", "");
    } else {
      Say(out, fmt::format("Installing the konnector ({}).", image));
    }
  }
  client::Applier applier(app);
  for (const apis::ManifestFile& file : apis::KonnectorManifests()) {
    auto docs = machinery::ParseYamlDocuments(file.text);
    if (!docs.ok()) return core::Internal("embedded " + file.name + ": " + docs.status().message());
    for (Json& object : *docs) {
      // The bound-resources role grows with every bind (GrantBoundResource); applying the
      // shipped rules again would take the added ones away, so it is only created.
      if (machinery::Kind(object) == "ClusterRole" &&
          machinery::Name(object) == kBoundResourcesRole &&
          ResourceClient(app, resources::kClusterRoles).Get(kBoundResourcesRole).ok()) {
        continue;
      }
      if (machinery::Kind(object) == "Deployment") {
        Json* containers = nullptr;
        if (object.contains("spec") && object["spec"].contains("template")) {
          containers = &object["spec"]["template"]["spec"]["containers"];
        }
        if (containers != nullptr && containers->is_array()) {
          for (Json& c : *containers) {
            if (machinery::GetString(c, {"name"}) == kKonnectorName) c["image"] = image;
          }
        }
      }
      if (options.dry_run) {
        if (options.printed != nullptr) options.printed->push_back(object);
        continue;
      }
      core::Status st = applier.Apply(object, {.field_manager = "kubectl-bind"}).status();
      if (!st.ok()) {
        return WithHint(st,
                        fmt::format("installing the konnector ({} {})", machinery::Kind(object),
                                    machinery::Name(object)),
                        st.reason() == core::Reason::kForbidden
                            ? "installing the konnector needs cluster-admin "
                              "rights in the App Cluster; ask its admin, or "
                              "pass --skip-konnector if it is installed"
                            : "");
      }
    }
  }
  return core::Status::Ok();
}

namespace {

// The konnector acts on the provider's word: never let a provider hand it rights over the
// cluster's own machinery (RBAC, tokens, workloads, admission) or wildcards.
core::Status RefuseGrant(const std::string& g, const std::string& r) {
  static const std::set<std::string> kBuiltinGroups = {"rbac.authorization.k8s.io",
                                                       "admissionregistration.k8s.io",
                                                       "apiextensions.k8s.io",
                                                       "apiregistration.k8s.io",
                                                       "authentication.k8s.io",
                                                       "authorization.k8s.io",
                                                       "certificates.k8s.io",
                                                       "apps",
                                                       "batch",
                                                       "policy",
                                                       "coordination.k8s.io",
                                                       "storage.k8s.io",
                                                       "networking.k8s.io",
                                                       "node.k8s.io",
                                                       "scheduling.k8s.io",
                                                       "flowcontrol.apiserver.k8s.io",
                                                       "events.k8s.io",
                                                       "discovery.k8s.io"};
  bool wildcard = r.find('*') != std::string::npos || g.find('*') != std::string::npos ||
                  r.find('/') != std::string::npos;
  bool builtin = kBuiltinGroups.count(g) > 0 || g.ends_with(".k8s.io") ||
                 (g.empty() && r != "secrets" && r != "configmaps");
  if (!wildcard && !builtin && !r.empty()) return core::Status::Ok();
  return core::Forbidden(fmt::format(
      "the provider asks the konnector to manage {}{}{}; kubectl bind grants it custom "
      "resources and claimed Secrets/ConfigMaps only. Ask the provider to fix its export "
      "template",
      r.empty() ? "<nothing>" : r, g.empty() ? "" : ".", g));
}

}  // namespace

core::Status CheckGrantable(const std::string& group, const std::string& resource,
                            const Json& claims) {
  KLUTCH_RETURN_IF_ERROR(RefuseGrant(group, resource));
  if (claims.is_array()) {
    for (const Json& claim : claims) {
      KLUTCH_RETURN_IF_ERROR(RefuseGrant(machinery::GetString(claim, {"group"}),
                                         machinery::GetString(claim, {"resource"})));
    }
  }
  return core::Status::Ok();
}

core::Status GrantBoundResource(client::RestClient& app, const std::string& group,
                                const std::string& resource, const Json& claims, bool dry_run,
                                const BindOutput& out) {
  KLUTCH_RETURN_IF_ERROR(CheckGrantable(group, resource, claims));
  struct Want {
    std::string group, resource;
    const std::vector<std::string>* verbs;
  };
  std::vector<Want> wants = {{group, resource, &kObjectVerbs},
                             {group, resource + "/status", &kStatusVerbs}};
  if (claims.is_array()) {
    for (const Json& claim : claims) {
      std::string g = machinery::GetString(claim, {"group"});
      std::string r = machinery::GetString(claim, {"resource"});
      if (r.empty() || (g.empty() && (r == "secrets" || r == "configmaps"))) continue;
      wants.push_back({g, r, &kObjectVerbs});
    }
  }
  ResourceClient roles(app, resources::kClusterRoles);
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto live = roles.Get(kBoundResourcesRole);
    Json role;
    if (core::IsNotFound(live.status())) {
      role = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
              {"kind", "ClusterRole"},
              {"metadata", {{"name", kBoundResourcesRole}}},
              {"rules", Json::array()}};
    } else if (!live.ok()) {
      return WithHint(live.status(), "reading ClusterRole " + std::string(kBoundResourcesRole), "");
    } else {
      role = *live;
    }
    if (!role.contains("rules") || !role["rules"].is_array()) role["rules"] = Json::array();
    bool changed = false;
    for (const Want& w : wants) {
      if (Covered(role["rules"], w.group, w.resource, *w.verbs)) continue;
      role["rules"].push_back(
          {{"apiGroups", {w.group}}, {"resources", {w.resource}}, {"verbs", *w.verbs}});
      changed = true;
    }
    if (!changed) return core::Status::Ok();
    if (dry_run) return core::Status::Ok();
    auto written = live.ok() ? roles.Update(role) : roles.Create(role);
    if (written.ok()) {
      Say(out, fmt::format("Allowed the konnector to sync {}{}{}.", resource,
                           group.empty() ? "" : ".", group));
      break;
    }
    if (core::IsConflict(written.status()) || core::IsAlreadyExists(written.status())) continue;
    return WithHint(written.status(), "granting the konnector access to " + resource,
                    "binding needs the right to edit ClusterRole " +
                        std::string(kBoundResourcesRole) + " in the App Cluster");
  }
  // The role is useless without its binding to the konnector's service account.
  Json binding = {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "ClusterRoleBinding"},
      {"metadata", {{"name", kBoundResourcesRole}}},
      {"roleRef",
       {{"apiGroup", "rbac.authorization.k8s.io"},
        {"kind", "ClusterRole"},
        {"name", kBoundResourcesRole}}},
      {"subjects",
       {{{"kind", "ServiceAccount"}, {"name", kKonnectorName}, {"namespace", kBindNamespace}}}}};
  auto created = ResourceClient(app, resources::kClusterRoleBindings).Create(binding);
  if (!created.ok() && !core::IsAlreadyExists(created.status())) {
    return WithHint(created.status(), "binding the konnector's role", "");
  }
  return core::Status::Ok();
}

core::Status WaitForBindingCrd(client::RestClient& app, std::chrono::milliseconds timeout,
                               const BindOutput& out) {
  ResourceClient bindings(app, kBindings, kBindNamespace);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool waited = false;
  int polls = 0;
  while (true) {
    auto list = bindings.List({.limit = 1});
    if (list.ok()) break;
    if (!core::IsNotFound(list.status())) {
      return WithHint(list.status(), "listing APIServiceBindings in the App Cluster", "");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      if (waited && out.err != nullptr) *out.err << "\n";
      return core::Status(
          core::Reason::kTimeout,
          fmt::format("the konnector did not install the APIServiceBinding CRD within {} s; "
                      "check it with: kubectl -n {} get deployment konnector; kubectl -n {} logs "
                      "deployment/konnector",
                      timeout.count() / 1000, kBindNamespace, kBindNamespace));
    }
    if (!waited && out.err != nullptr)
      *out.err << "Waiting for the konnector to be ready" << std::flush;
    waited = true;
    // Polled every 200 ms (a konnector is ready within a second or two), a dot a second.
    if (out.err != nullptr && polls++ % 5 == 0) *out.err << "." << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (waited && out.err != nullptr) *out.err << " ready.\n" << std::flush;
  return core::Status::Ok();
}

namespace {

// "secrets", "widgets.example.com": the claimed resource as kubectl names it.
std::string ClaimTarget(const ClaimQuestion& q) {
  return q.group.empty() ? q.resource : q.resource + "." + q.group;
}

ClaimQuestion QuestionOf(const std::string& binding, const Json& claim) {
  ClaimQuestion q;
  q.binding = binding;
  q.group = machinery::GetString(claim, {"group"});
  q.resource = machinery::GetString(claim, {"resource"});
  q.owner = machinery::GetString(claim, {"selector", "owner"});
  if (const Json* req = machinery::Find(claim, {"required"}); req != nullptr) {
    const bool* b = req->get_ptr<const bool*>();
    q.required = b != nullptr && *b;
  }
  return q;
}

// y/yes -> true, n/no -> false (any case, surrounding blanks ignored), else nullopt.
std::optional<bool> ParseYesNo(const std::string& answer) {
  std::string a = core::ToLower(core::Trim(answer));
  if (a == "y" || a == "yes") return true;
  if (a == "n" || a == "no") return false;
  return std::nullopt;
}

std::string BindingName(const Json& api) {
  std::string group = machinery::GetString(api, {"group"});
  std::string resource = machinery::GetString(api, {"resource"});
  return group.empty() ? resource : resource + "." + group;
}

}  // namespace

std::string ClaimQuestion::Text() const {
  return fmt::format("The provider wants to {} {} {} in your cluster{}",
                     owner == "Consumer" ? "read and update" : "create and update",
                     ClaimTarget(*this),
                     owner == "Consumer" ? "objects you create" : "objects it provides",
                     required ? " (required for the API to work)" : "");
}

std::string ClaimAnswers::Key(const std::string& binding, const std::string& group,
                              const std::string& resource) {
  return binding + "|" + group + "|" + resource;
}

std::optional<bool> ClaimAnswers::Find(const std::string& binding, const std::string& group,
                                       const std::string& resource) const {
  if (accept_all) return true;
  auto it = given.find(Key(binding, group, resource));
  if (it == given.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> RequestedApis(const std::vector<Json>& requests) {
  std::vector<Json> apis;
  for (const Json& request : requests) {
    const Json* list = machinery::Find(request, {"spec", "resources"});
    if (list == nullptr || !list->is_array()) continue;
    for (const Json& r : *list) apis.push_back(r);
  }
  return apis;
}

core::Result<std::vector<ClaimQuestion>> ClaimQuestions(client::RestClient& app,
                                                        const std::vector<Json>& apis) {
  ResourceClient bindings(app, kBindings, kBindNamespace);
  std::vector<ClaimQuestion> questions;
  std::set<std::string> seen;
  for (const Json& api : apis) {
    std::string name = BindingName(api);
    const Json* claims = machinery::Find(api, {"permissionClaims"});
    if (claims == nullptr || !claims->is_array() || claims->empty()) continue;
    auto existing = bindings.Get(name);
    if (existing.ok()) continue;
    // NotFound covers a missing CRD too (nothing bound in this cluster yet).
    if (!core::IsNotFound(existing.status())) {
      return WithHint(existing.status(), "reading APIServiceBinding " + name, "");
    }
    for (const Json& claim : *claims) {
      ClaimQuestion q = QuestionOf(name, claim);
      if (seen.insert(ClaimAnswers::Key(q.binding, q.group, q.resource)).second) {
        questions.push_back(std::move(q));
      }
    }
  }
  return questions;
}

core::Result<ClaimAnswers> DecideClaims(const std::vector<ClaimQuestion>& questions,
                                        bool accept_all, const BindOutput& out) {
  ClaimAnswers answers;
  answers.accept_all = accept_all;
  if (accept_all) return answers;
  for (size_t i = 0; i < questions.size(); ++i) {
    const ClaimQuestion& q = questions[i];
    std::optional<bool> yes;
    while (!yes) {
      std::optional<std::string> answer =
          out.ask ? out.ask(fmt::format("{}: {}. Accept? [y/n]: ", q.binding, q.Text()))
                  : std::nullopt;
      if (!answer) {
        std::string list;
        for (size_t j = 0; j < questions.size(); ++j) {
          list += fmt::format("\n  {}. {}: {}", j + 1, questions[j].binding, questions[j].Text());
        }
        return core::BadRequest(fmt::format(
            "kubectl bind needs your answer to {} permission claim{}, and there is no "
            "terminal to ask; nothing was bound:{}\n  re-run with --accept-permission-claims "
            "to accept them all, or in a terminal to answer each",
            questions.size(), questions.size() == 1 ? "" : "s", list));
      }
      yes = ParseYesNo(*answer);
    }
    answers.given[ClaimAnswers::Key(q.binding, q.group, q.resource)] = *yes;
  }
  return answers;
}

core::Status CheckBindable(client::RestClient& app, const std::vector<Json>& apis,
                           const std::string& secret_name) {
  ResourceClient bindings(app, kBindings, kBindNamespace);
  std::vector<std::string> problems;
  for (const Json& api : apis) {
    std::string name = BindingName(api);
    const Json* claims = machinery::Find(api, {"permissionClaims"});
    core::Status grantable = CheckGrantable(machinery::GetString(api, {"group"}),
                                            machinery::GetString(api, {"resource"}),
                                            claims != nullptr ? *claims : Json::array());
    if (!grantable.ok()) problems.push_back(name + ": " + grantable.message());
    auto existing = bindings.Get(name);
    if (!existing.ok()) {
      if (!core::IsNotFound(existing.status())) {
        return WithHint(existing.status(), "reading APIServiceBinding " + name, "");
      }
      continue;
    }
    std::string ref_name = machinery::GetString(*existing, {"spec", "kubeconfigSecretRef", "name"});
    std::string ref_ns =
        machinery::GetString(*existing, {"spec", "kubeconfigSecretRef", "namespace"});
    if (secret_name.empty() || ref_name != secret_name || ref_ns != kBindNamespace) {
      problems.push_back(
          fmt::format("{}: already bound from another service provider (secret {}/{}); delete "
                      "APIServiceBinding {} first if you mean to switch providers",
                      name, ref_ns, ref_name, name));
    }
  }
  if (problems.empty()) return core::Status::Ok();
  std::string list;
  for (size_t i = 0; i < problems.size(); ++i) {
    list += fmt::format("\n  {}. {}", i + 1, problems[i]);
  }
  bool forbidden = std::any_of(problems.begin(), problems.end(), [](const std::string& p) {
    return p.find("grants it custom resources") != std::string::npos;
  });
  return core::Status(forbidden ? core::Reason::kForbidden : core::Reason::kAlreadyExists,
                      "kubectl bind cannot bind every API asked for, so it binds none:" + list);
}

core::Result<std::vector<std::string>> CreateBindings(
    client::RestClient& app, const Json& export_request, const std::string& secret_name,
    const ClaimAnswers& answers, bool dry_run, std::vector<Json>* printed, const BindOutput& out) {
  ResourceClient bindings(app, kBindings, kBindNamespace);
  ResourceClient crds(app, resources::kCustomResourceDefinitions);
  std::vector<std::string> names;
  const Json* list = machinery::Find(export_request, {"spec", "resources"});
  if (list == nullptr || !list->is_array()) return names;
  for (const Json& r : *list) {
    std::string group = machinery::GetString(r, {"group"});
    std::string resource = machinery::GetString(r, {"resource"});
    std::string name = group.empty() ? resource : resource + "." + group;
    Json claims = r.contains("permissionClaims") && r["permissionClaims"].is_array()
                      ? r["permissionClaims"]
                      : Json::array();
    auto existing = bindings.Get(name);
    if (existing.ok()) {
      std::string ref_name =
          machinery::GetString(*existing, {"spec", "kubeconfigSecretRef", "name"});
      std::string ref_ns =
          machinery::GetString(*existing, {"spec", "kubeconfigSecretRef", "namespace"});
      if (ref_name != secret_name || ref_ns != kBindNamespace) {
        return core::AlreadyExists(fmt::format(
            "APIServiceBinding {} already binds {} from another service provider (secret "
            "{}/{}); delete it first if you mean to switch providers",
            name, name, ref_ns, ref_name));
      }
      auto crd = crds.Get(name);
      if (crd.ok()) {
        bool owned = false;
        const Json* owners = machinery::Find(*crd, {"metadata", "ownerReferences"});
        if (owners != nullptr && owners->is_array()) {
          for (const Json& o : *owners) {
            if (machinery::GetString(o, {"kind"}) == "APIServiceBinding" &&
                machinery::GetString(o, {"name"}) == name &&
                machinery::GetString(o, {"uid"}) == machinery::Uid(*existing)) {
              owned = true;
            }
          }
        }
        if (!owned) {
          return core::AlreadyExists(fmt::format(
              "CustomResourceDefinition {} exists in the App Cluster but was not created by "
              "binding {}; remove it (and its objects) before binding this API",
              name, name));
        }
      }
      Say(out, fmt::format("Updating APIServiceBinding {}.", name));
      names.push_back(name);
      continue;
    }
    if (!core::IsNotFound(existing.status())) {
      return WithHint(existing.status(), "reading APIServiceBinding " + name, "");
    }
    Json accepted = Json::array();
    for (const Json& claim : claims) {
      Json c = claim;
      ClaimQuestion question = QuestionOf(name, claim);
      std::optional<bool> yes = answers.Find(name, question.group, question.resource);
      while (!yes) {
        // Not decided beforehand (the provider's answer added a claim): ask now.
        std::optional<std::string> answer =
            out.ask ? out.ask(question.Text() + ". Accept? [y/n]: ") : std::nullopt;
        if (!answer) {
          return core::BadRequest(fmt::format(
              "binding {} asks to accept a permission claim on {}, and there is no terminal "
              "to ask; re-run with --accept-permission-claims to accept them",
              name, ClaimTarget(question)));
        }
        yes = ParseYesNo(*answer);
      }
      c["state"] = *yes ? "Accepted" : "Rejected";
      accepted.push_back(std::move(c));
    }
    Json binding = {
        {"apiVersion", kBindApiVersion},
        {"kind", "APIServiceBinding"},
        {"metadata", {{"name", name}, {"namespace", kBindNamespace}}},
        {"spec",
         {{"kubeconfigSecretRef",
           {{"name", secret_name}, {"key", "kubeconfig"}, {"namespace", kBindNamespace}}},
          {"permissionClaims", accepted}}}};
    if (dry_run) {
      if (printed != nullptr) printed->push_back(binding);
      names.push_back(name);
      continue;
    }
    auto created = bindings.Create(binding);
    if (!created.ok()) return WithHint(created.status(), "creating APIServiceBinding " + name, "");
    // Best effort, as upstream: shows Pending until the konnector's first pass replaces it.
    Json status = *created;
    reconcile::MarkFalse(status, "Ready", "Pending", "Info", kPendingMessage,
                         core::RealClock::Get());
    (void)bindings.UpdateStatus(status);
    Say(out, fmt::format("Created APIServiceBinding {}.", name));
    names.push_back(name);
  }
  return names;
}

core::Result<std::vector<std::string>> WaitForBindingsReady(client::RestClient& app,
                                                            const std::vector<std::string>& names,
                                                            std::chrono::milliseconds timeout,
                                                            const BindOutput& out) {
  ResourceClient bindings(app, kBindings, kBindNamespace);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool waited = false;
  int polls = 0;
  while (true) {
    std::vector<std::string> waiting;
    for (const std::string& name : names) {
      auto binding = bindings.Get(name);
      if (!binding.ok()) {
        waiting.push_back(
            fmt::format("APIServiceBinding {}: {}", name, binding.status().message()));
        continue;
      }
      auto ready = reconcile::FindCondition(*binding, "Ready");
      std::string provider = machinery::GetString(*binding, {"status", "providerPrettyName"});
      if (ready && ready->status == "True") {
        if (!provider.empty()) continue;
        waiting.push_back(fmt::format(
            "APIServiceBinding {} is Ready; the konnector has not reported its provider's name "
            "yet",
            name));
        continue;
      }
      if (!ready || ready->message == kPendingMessage) {
        waiting.push_back(fmt::format(
            "APIServiceBinding {} waits for the konnector to pick it up; check the konnector "
            "with: kubectl -n {} get deployment konnector; kubectl -n {} logs "
            "deployment/konnector",
            name, kBindNamespace, kBindNamespace));
        continue;
      }
      waiting.push_back(fmt::format(
          "APIServiceBinding {} is not Ready yet: {}; follow it with: kubectl -n {} get "
          "apiservicebindings -w",
          name, ready->message.empty() ? "the konnector gives no reason" : ready->message,
          kBindNamespace));
    }
    if (waiting.empty() || std::chrono::steady_clock::now() >= deadline) {
      if (waited && out.err != nullptr) *out.err << (waiting.empty() ? " ready.\n" : "\n");
      return waiting;
    }
    if (!waited && out.err != nullptr) {
      *out.err << "Waiting for the konnector to report the bindings Ready" << std::flush;
    }
    waited = true;
    if (out.err != nullptr && polls++ % 5 == 0) *out.err << "." << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

core::Result<std::string> BindingsTable(client::RestClient& app,
                                        const std::vector<std::string>& names) {
  client::Request request;
  request.path = client::ResourcePath(kBindings, kBindNamespace);
  request.accept = "application/json;as=Table;v=v1;g=meta.k8s.io";
  KLUTCH_ASSIGN_OR_RETURN(Json table, app.DoJson(request));
  std::vector<size_t> columns;
  std::vector<std::string> headers;
  const Json* defs = machinery::Find(table, {"columnDefinitions"});
  if (defs != nullptr && defs->is_array()) {
    for (size_t i = 0; i < defs->size(); ++i) {
      const Json& d = (*defs)[i];
      const Json* priority = machinery::Find(d, {"priority"});
      const int64_t* level = priority != nullptr ? priority->get_ptr<const int64_t*>() : nullptr;
      if (level != nullptr && *level != 0) {
        continue;
      }
      columns.push_back(i);
      headers.push_back(core::ToUpper(machinery::GetString(d, {"name"})));
    }
  }
  std::vector<std::vector<std::string>> rows = {headers};
  std::set<std::string> wanted(names.begin(), names.end());
  const Json* items = machinery::Find(table, {"rows"});
  if (items != nullptr && items->is_array()) {
    for (const Json& row : *items) {
      std::string name = machinery::GetString(row, {"object", "metadata", "name"});
      const Json* cells = machinery::Find(row, {"cells"});
      if (cells == nullptr || !cells->is_array()) continue;
      if (const std::string* first =
              cells->empty() ? nullptr : (*cells)[0].get_ptr<const std::string*>();
          name.empty() && first != nullptr) {
        name = *first;
      }
      if (!wanted.empty() && !wanted.count(name)) continue;
      std::vector<std::string> line;
      for (size_t i : columns) {
        const Json& cell = i < cells->size() ? (*cells)[i] : Json();
        const std::string* text = cell.get_ptr<const std::string*>();
        line.push_back(text != nullptr ? *text : cell.is_null() ? "<none>" : machinery::Dump(cell));
      }
      rows.push_back(std::move(line));
    }
  }
  std::vector<size_t> widths(headers.size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 3, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace klutch::cli::bind
