#include "kubectl_bind/session.h"

#include <fmt/format.h>

#include <algorithm>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/ids.h"
#include "client/dynamic.h"
#include "core/strings.h"
#include "kubectl_bind/output.h"
#include "machinery/json.h"
#include "machinery/object.h"

namespace klutch::kubectl_bind {

using machinery::Json;

core::Result<BindingResponse> ParseBindingResponse(std::string_view json,
                                                   const std::string& session_id) {
  auto doc = machinery::ParseJson(json);
  if (!doc.ok() || !doc->is_object()) {
    return core::BadRequest("the backend's response is not a JSON object");
  }
  KLUTCH_ASSIGN_OR_RETURN(BindingResponse response, apis::klutch::DecodeBindingResponse(*doc));
  if (response.session_id != session_id) {
    return core::BadRequest(
        "the backend's response belongs to another login session; run kubectl bind again and "
        "finish the login it prints");
  }
  return response;
}

std::string DisplayName(const BindingResponse& response) {
  if (!response.display_name.empty()) return response.display_name;
  // "<issuer>/<subject>": the issuer is a URL with slashes of its own, the subject is last.
  size_t slash = response.id.rfind('/');
  return slash == std::string::npos ? response.id : response.id.substr(slash + 1);
}

namespace {
// What the backend refuses in `n` (bind/web/web_protocol.h ClusterNameParameter), "" when it
// takes it.
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
  const std::string bind_namespace(apis::klutch::kBindNamespace);
  client::ResourceClient ns(app, client::resources::kNamespaces);
  auto got = ns.Get(bind_namespace);
  if (core::IsNotFound(got.status())) {
    Json object = {
        {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", bind_namespace}}}};
    got = ns.Create(object);
    if (core::IsAlreadyExists(got.status())) got = ns.Get(bind_namespace);
  }
  if (!got.ok()) {
    return WithHint(got.status(), fmt::format("namespace {} in the App Cluster", bind_namespace),
                    "check that your kubeconfig reaches the App Cluster and may create "
                    "namespaces");
  }
  std::string uid = machinery::Uid(*got);
  if (uid.empty()) return core::Internal("namespace klutch-bind has no UID");
  return uid;
}

core::Result<std::string> ClusterId(client::RestClient& app, bool dry_run) {
  if (dry_run) {
    auto ns = client::ResourceClient(app, client::resources::kNamespaces)
                  .Get(std::string(apis::klutch::kBindNamespace));
    std::string id = ns.ok() ? apis::klutch::ClusterIdFromNamespaceUid(machinery::Uid(*ns)) : "";
    if (id.empty()) {
      return core::BadRequest(
          "--dry-run needs namespace klutch-bind in the App Cluster (it identifies the cluster "
          "to the provider); run once without --dry-run, or create it");
    }
    return id;
  }
  KLUTCH_ASSIGN_OR_RETURN(std::string uid, EnsureBindNamespace(app));
  return apis::klutch::ClusterIdFromNamespaceUid(uid);
}

}  // namespace klutch::kubectl_bind
