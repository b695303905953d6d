#include "bind/web/consumer_clusters.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "bind/web/web_responses.h"
#include "client/dynamic.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "machinery/validation.h"

namespace klutch::bind {

using machinery::Json;

namespace {

// The condition of `type` in obj.status.conditions: {status, reason, message}.
struct ObjectCondition {
  std::string status, reason, message;
};
ObjectCondition ReadCondition(const Json& obj, std::string_view type) {
  const Json* conditions = machinery::Find(obj, {"status", "conditions"});
  if (conditions == nullptr || !conditions->is_array()) return {};
  for (const auto& c : *conditions) {
    if (StringMember(c, "type") == type) {
      return {StringMember(c, "status"), StringMember(c, "reason"), StringMember(c, "message")};
    }
  }
  return {};
}

// "42s ago", "5m ago", "3h ago", "2d ago"; "" when `rfc3339` is not a time.
std::string HeartbeatAge(core::SystemTime now, const std::string& rfc3339) {
  auto t = core::ParseTime(rfc3339);
  if (!t) return "";
  auto s = std::chrono::duration_cast<std::chrono::seconds>(now - *t).count();
  if (s < 0) s = 0;
  if (s < 120) return std::to_string(s) + "s ago";
  if (s < 7200) return std::to_string(s / 60) + "m ago";
  if (s < 172800) return std::to_string(s / 3600) + "h ago";
  return std::to_string(s / 86400) + "d ago";
}

// The items of a list answer, or none.
const Json* ListItems(const Json& list) {
  const Json* items = machinery::Find(list, {"items"});
  return items != nullptr && items->is_array() ? items : nullptr;
}

// The claims of export `ex` of cluster namespace `cluster_ns` into `e`, named as in the App
// Cluster.
void GatherClaims(client::RestClient& admin, const Json& ex, const std::string& cluster_ns,
                  const std::vector<NamespaceView>& namespaces, ExportView& e) {
  const std::string group = machinery::GetString(ex, {"spec", "group"});
  const std::string plural = machinery::GetString(ex, {"spec", "names", "plural"});
  const std::string kind = machinery::GetString(ex, {"spec", "names", "kind"});
  std::string version;
  if (const Json* versions = machinery::Find(ex, {"spec", "versions"});
      versions && versions->is_array()) {
    for (const auto& v : *versions) {
      const Json* storage = v.is_object() ? machinery::Find(v, {"storage"}) : nullptr;
      if (version.empty() || (storage && storage->is_boolean() && *storage == true)) {
        version = StringMember(v, "name");
      }
    }
  }
  if (plural.empty() || version.empty()) return;
  const machinery::GroupVersionResource gvr{group, version, plural};
  auto add = [&](const Json& obj, const std::string& app_ns) {
    ObjectCondition ready = ReadCondition(obj, "Ready");
    // The reason in the developer's names, as the konnector copies it to their cluster.
    const std::string provider_ns = machinery::Namespace(obj);
    std::string message = ready.message;
    if (!app_ns.empty() && !provider_ns.empty()) {
      message = machinery::ReplaceWholeName(message, provider_ns, app_ns);
    }
    e.claims.push_back(ClaimView{.kind = kind,
                                 .ns = app_ns,
                                 .provider_ns = provider_ns,
                                 .name = machinery::Name(obj),
                                 .ready = ready.status,
                                 .reason = ready.reason,
                                 .message = std::move(message)});
  };
  const bool cluster_scoped = machinery::GetString(ex, {"spec", "scope"}) == "Cluster";
  if (cluster_scoped) {
    auto l = client::ResourceClient(admin, gvr).ListAll();
    if (!l.ok()) return;
    if (const Json* items = ListItems(*l)) {
      for (const auto& obj : *items) {
        if (machinery::Annotation(obj, apis::klutch::kClusterNamespaceAnnotation) == cluster_ns) {
          add(obj, "");
        }
      }
    }
    return;
  }
  for (const auto& n : namespaces) {
    auto l = client::ResourceClient(admin, gvr, n.provider).ListAll();
    if (!l.ok()) continue;
    if (const Json* items = ListItems(*l)) {
      for (const auto& obj : *items) add(obj, n.app);
    }
  }
}

// Heartbeat, Ready, namespaces and exports (with their claims) of cluster `c`.
void GatherCluster(client::RestClient& admin, const core::Clock& clock, ClusterView& c) {
  const std::string& ns = c.cluster_namespace;
  if (auto cb = client::ResourceClient(admin, apis::klutch::kClusterBindings, ns)
                    .Get(apis::klutch::kClusterBindingName);
      cb.ok()) {
    c.last_heartbeat = machinery::GetString(*cb, {"status", "lastHeartbeatTime"});
    c.heartbeat_age = HeartbeatAge(clock.Now(), c.last_heartbeat);
    c.konnector_version = machinery::GetString(*cb, {"status", "konnectorVersion"});
    ObjectCondition ready = ReadCondition(*cb, "Ready");
    c.ready = ready.status;
    c.ready_message = ready.message;
  }
  // APIServiceNamespaces are named after the App Cluster namespace; their status names the
  // Control Plane namespace made for it.
  if (auto l = client::ResourceClient(admin, apis::klutch::kApiServiceNamespaces, ns).ListAll();
      l.ok()) {
    if (const Json* items = ListItems(*l)) {
      for (const auto& asn : *items) {
        std::string provider = machinery::GetString(asn, {"status", "namespace"});
        if (provider.empty()) continue;
        c.namespaces.push_back({machinery::Name(asn), provider});
      }
    }
  }
  std::sort(c.namespaces.begin(), c.namespaces.end(),
            [](const NamespaceView& a, const NamespaceView& b) { return a.app < b.app; });
  auto exports = client::ResourceClient(admin, apis::klutch::kApiServiceExports, ns).ListAll();
  if (!exports.ok()) return;
  const Json* items = ListItems(*exports);
  if (items == nullptr) return;
  for (const auto& ex : *items) {
    ExportView e;
    e.name = machinery::Name(ex);
    // Served to the consumer once its konnector is connected and the CRD established; the
    // export's Ready summary also waits for a schema-conformance report no konnector sends (an
    // upstream quirk), so it would read "Not ready" for a working binding.
    ObjectCondition connected = ReadCondition(ex, "Connected");
    ObjectCondition established = ReadCondition(ex, "Established");
    const ObjectCondition& worse = connected.status != "True" ? connected : established;
    e.ready = worse.status;
    e.message = worse.status == "True" ? "" : worse.message;
    GatherClaims(admin, ex, ns, c.namespaces, e);
    c.exports.push_back(std::move(e));
  }
}

}  // namespace

core::Result<std::vector<ClusterView>> ConsumerClusters(client::RestClient& admin,
                                                        const std::string& subject,
                                                        const std::string& issuer,
                                                        const core::Clock& clock) {
  std::vector<ClusterView> clusters;
  client::ResourceClient namespaces(admin, client::resources::kNamespaces);
  KLUTCH_ASSIGN_OR_RETURN(Json list, namespaces.ListAll());
  const Json* items = ListItems(list);
  if (items == nullptr) return clusters;
  for (const auto& ns : *items) {
    const std::string identity = machinery::Annotation(ns, apis::klutch::kIdentityAnnotation);
    const size_t hash = identity.rfind('#');
    if (hash == std::string::npos || identity.substr(0, hash) != subject) continue;
    const std::string ns_issuer = machinery::Annotation(ns, apis::klutch::kIssuerAnnotation);
    if (!ns_issuer.empty() && ns_issuer != issuer) continue;
    ClusterView c;
    c.name = machinery::Annotation(ns, apis::klutch::kClusterNameAnnotation);
    c.cluster_namespace = machinery::Name(ns);
    c.cluster_id = identity.substr(hash + 1);
    GatherCluster(admin, clock, c);
    clusters.push_back(std::move(c));
  }
  std::sort(clusters.begin(), clusters.end(), [](const ClusterView& a, const ClusterView& b) {
    // By the user's names; clusters without one after, by ID.
    return std::make_tuple(a.name.empty(), a.name, a.cluster_id) <
           std::make_tuple(b.name.empty(), b.name, b.cluster_id);
  });
  return clusters;
}

}  // namespace klutch::bind
