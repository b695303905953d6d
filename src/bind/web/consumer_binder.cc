#include "bind/web/consumer_binder.h"

#include <cctype>

#include "apis/klutch/binding_response.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/export_request.h"
#include "bind/catalog.h"
#include "bind/provision.h"
#include "bind/web/web_protocol.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::bind {

using machinery::Json;

namespace {

// "1h", "90m", "45s".
std::string ShortDuration(std::chrono::seconds d) {
  const int64_t s = d.count();
  if (s > 0 && s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s > 0 && s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

}  // namespace

std::variant<Json, BindError> ConsumerBinder::Bind(const BindRequest& request) const {
  const std::string& group = request.group;
  const std::string& resource = request.resource;
  if (resource.empty()) {
    return BindError{400, "Nothing to bind", "The request names no API (resource is empty).",
                     "Choose an API on the catalog page.", "invalid_request"};
  }
  if (!IsValidId(request.cid)) {
    return BindError{400, "Cannot bind", "The cluster ID of this session is malformed.",
                     "Run kubectl bind again.", "invalid_request"};
  }
  // Everything is checked before the Control Plane is written.
  auto api = FindOfferedApi(ctx_.admin, ctx_.options.consumer_scope, group, resource);
  if (!api.ok()) {
    if (core::IsNotFound(api.status())) {
      return BindError{404, "Not offered",
                       resource + "." + group + " is not offered by this Control Plane.",
                       "Choose an API from the catalog page.", "invalid_request"};
    }
    return BindError{
        500, "Catalog unavailable",
        "The catalog could not be read from the Control Plane: " + api.status().message(),
        "Try again in a minute; if it keeps failing, tell the platform team.", "server_error"};
  }
  auto access = ProvisionConsumer(ctx_.admin, ctx_.options.provision,
                                  request.subject + "#" + request.cid, request.issuer);
  if (!access.ok() && IsClusterLimitReached(access.status())) {
    return ClusterLimitReached(request, access.status());
  }
  if (!access.ok()) {
    KLUTCH_LOG(kWarn, "bind", "provisioning {}#{}: {}", core::GoQuote(request.subject), request.cid,
               access.status().message());
    ctx_.CountBind("error");
    return BindError{
        500, "Binding failed",
        "Your space on the Control Plane could not be prepared: " + access.status().message(),
        "Try again in a minute; if it keeps failing, tell the platform team.", "server_error"};
  }
  ctx_.CountBind("ok");
  KLUTCH_LOG(kInfo, "bind", "bound {}.{} for {} in {}", resource, group,
             core::GoQuote(request.subject), access->cluster_namespace);
  RecordClusterName(access->cluster_namespace, request.cluster_name);
  return apis::klutch::EncodeBindingResponse(
      {.session_id = request.sid,
       .id = request.issuer + "/" + request.subject,
       .display_name = request.display_name,
       .kubeconfig = access->kubeconfig,
       .requests = {apis::klutch::EncodeExportRequest(
           apis::klutch::ExportRequestFor(api->group, api->resource, api->permission_claims))}});
}

BindError ConsumerBinder::ClusterLimitReached(const BindRequest& request,
                                              const core::Status& refused) const {
  ctx_.CountBind("cluster_limit");
  KLUTCH_LOG(kInfo, "bind", "refused a new cluster {} of {}: {}", request.cid,
             core::GoQuote(request.subject), refused.message());
  std::string what = refused.message() + ". This cluster (" + request.cid + ") would be one more.";
  what[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(what[0])));
  std::string todo =
      "Remove a cluster you no longer use: ask the platform team to delete its namespace "
      "on the Control Plane";
  if (ctx_.options.unconnected_cluster_grace.count() > 0) {
    todo += " (a cluster whose konnector never connected is removed by itself " +
            ShortDuration(ctx_.options.unconnected_cluster_grace) + " after its last bind)";
  }
  todo +=
      ". Or ask the platform team to raise the limit (klutch backend "
      "--max-clusters-per-user).";
  return BindError{403,
                   "Too many clusters",
                   what,
                   todo,
                   "too_many_clusters",
                   /*todo_in_description=*/true};
}

void ConsumerBinder::RecordClusterName(const std::string& cluster_namespace,
                                       const std::string& name) const {
  if (name.empty()) return;
  client::ResourceClient namespaces(ctx_.admin, client::resources::kNamespaces);
  if (auto ns = namespaces.Get(cluster_namespace);
      ns.ok() && machinery::Annotation(*ns, apis::klutch::kClusterNameAnnotation) == name) {
    return;
  }
  Json patch = {
      {"metadata", {{"annotations", {{std::string(apis::klutch::kClusterNameAnnotation), name}}}}}};
  if (auto r =
          namespaces.Patch(cluster_namespace, client::PatchType::kMerge, machinery::Dump(patch));
      !r.ok()) {
    KLUTCH_LOG(kWarn, "bind", "recording the name of cluster namespace {}: {}", cluster_namespace,
               r.status().message());
  }
}

}  // namespace klutch::bind
