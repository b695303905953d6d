#include "kubectl_bind/provider_kubeconfig.h"

#include <fmt/format.h>

#include "apis/klutch/apiservicebinding.h"
#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"

namespace klutch::kubectl_bind {

using client::ResourceClient;
using machinery::Json;
namespace resources = client::resources;

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
  ResourceClient secrets(app, resources::kSecrets, apis::klutch::kBindNamespace);
  auto list = secrets.List();
  if (!list.ok() && !core::IsNotFound(list.status())) return list.status();
  std::string encoded = core::Base64Encode(kubeconfig);
  if (list.ok()) {
    for (const Json& secret : (*list)["items"]) {
      auto existing =
          core::Base64Decode(machinery::GetString(secret, {"data", apis::klutch::kKubeconfigKey}));
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
        updated["data"][apis::klutch::kKubeconfigKey] = encoded;
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
      Say(out, fmt::format("Updated secret {}/{} with the provider kubeconfig.",
                           apis::klutch::kBindNamespace, name));
      return name;
    }
  }
  if (dry_run) return std::string();
  Json secret = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata", {{"generateName", "kubeconfig-"}, {"namespace", apis::klutch::kBindNamespace}}},
      {"type", "Opaque"},
      {"data", {{apis::klutch::kKubeconfigKey, encoded}}}};
  auto created = secrets.Create(secret);
  if (!created.ok()) {
    return WithHint(created.status(), "storing the provider kubeconfig",
                    "check that you may create Secrets in namespace klutch-bind");
  }
  std::string name = machinery::Name(*created);
  Say(out, fmt::format("Created secret {}/{} for the provider kubeconfig.",
                       apis::klutch::kBindNamespace, name));
  return name;
}
core::Result<std::unique_ptr<client::RestClient>> ProviderClient(const std::string& kubeconfig,
                                                                 const std::string& ns_override) {
  auto parsed = client::ParseKubeconfig(kubeconfig, "the provider kubeconfig", "/");
  if (!parsed.ok()) return parsed.status();
  client::KubeconfigOptions options;
  options.namespace_ = ns_override;
  auto config = client::ResolveKubeconfig(*parsed, options);
  if (!config.ok()) return config.status();
  config->user_agent = "kubectl-bind/" + std::string(kCliVersion);
  return client::RestClient::New(*config);
}

}  // namespace klutch::kubectl_bind
