#include "kubectl_bind/konnector_install.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <ostream>
#include <set>
#include <thread>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/register.h"
#include "apis/manifests.h"
#include "client/apply.h"
#include "client/dynamic.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::kubectl_bind {

using client::ResourceClient;
using machinery::Json;
namespace resources = client::resources;

namespace {

constexpr char kDefaultImageRepository[] = "klutch";
constexpr char kKonnectorName[] = "konnector";

// The image tag's version when the image is `kDefaultImageRepository:vX.Y.Z`.
std::optional<std::array<int64_t, 3>> OurImageVersion(std::string_view image) {
  std::string prefix = std::string(kDefaultImageRepository) + ":";
  if (!image.starts_with(prefix)) return std::nullopt;
  return ParseSemanticVersion(image.substr(prefix.size()));
}

std::string DefaultImage() { return fmt::format("{}:{}", kDefaultImageRepository, kCliVersion); }

bool RuleListHas(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end() ||
         std::find(list.begin(), list.end(), "*") != list.end();
}

// Whether one of `rules` grants every verb of `verbs` on group/resource.
bool RulesCover(const Json& rules, const std::string& group, const std::string& resource,
                const std::vector<std::string>& verbs) {
  if (!rules.is_array()) return false;
  for (const Json& rule : rules) {
    if (!rule.is_object()) continue;
    if (!RuleListHas(machinery::Strings(machinery::Find(rule, {"apiGroups"})), group)) continue;
    if (!RuleListHas(machinery::Strings(machinery::Find(rule, {"resources"})), resource)) continue;
    if (machinery::Find(rule, {"resourceNames"}) != nullptr &&
        !machinery::Strings(machinery::Find(rule, {"resourceNames"})).empty()) {
      continue;
    }
    auto have = machinery::Strings(machinery::Find(rule, {"verbs"}));
    if (std::all_of(verbs.begin(), verbs.end(),
                    [&](const std::string& v) { return RuleListHas(have, v); })) {
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
  if (!tag || !ParseSemanticVersion(version)) {
    return core::BadRequest(
        fmt::format("{} is not a version like {}", core::GoQuote(version), kCliVersion));
  }
  return fmt::format("{}:{}", kDefaultImageRepository, version);
}

core::Status InstallKonnector(client::RestClient& app, const KonnectorInstall& options,
                              const BindOutput& out) {
  std::string image = options.image.empty() ? DefaultImage() : options.image;
  if (!options.force) {
    auto live = ResourceClient(app, resources::kDeployments, apis::klutch::kBindNamespace)
                    .Get(kKonnectorName);
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
      auto want = ParseSemanticVersion(kCliVersion);
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
      if (RulesCover(role["rules"], w.group, w.resource, *w.verbs)) continue;
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
  Json binding = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                  {"kind", "ClusterRoleBinding"},
                  {"metadata", {{"name", kBoundResourcesRole}}},
                  {"roleRef",
                   {{"apiGroup", "rbac.authorization.k8s.io"},
                    {"kind", "ClusterRole"},
                    {"name", kBoundResourcesRole}}},
                  {"subjects",
                   {{{"kind", "ServiceAccount"},
                     {"name", kKonnectorName},
                     {"namespace", apis::klutch::kBindNamespace}}}}};
  auto created = ResourceClient(app, resources::kClusterRoleBindings).Create(binding);
  if (!created.ok() && !core::IsAlreadyExists(created.status())) {
    return WithHint(created.status(), "binding the konnector's role", "");
  }
  return core::Status::Ok();
}

core::Status WaitForBindingCrd(client::RestClient& app, std::chrono::milliseconds timeout,
                               const BindOutput& out) {
  ResourceClient bindings(app, apis::klutch::kApiServiceBindings, apis::klutch::kBindNamespace);
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
                      timeout.count() / 1000, apis::klutch::kBindNamespace,
                      apis::klutch::kBindNamespace));
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

}  // namespace klutch::kubectl_bind
