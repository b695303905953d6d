// §4.5: heartbeat, version and kubeconfig mirroring.
#include "konnector/heartbeat_reconciler.h"

#include <algorithm>
#include <cstdio>

#include "apis/klutch/apiservicebinding.h"
#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "konnector/connection.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

std::string FormatGoDuration(std::chrono::milliseconds d) {
  int64_t total_ms = d.count();
  int64_t h = total_ms / 3600000, m = (total_ms / 60000) % 60, s = (total_ms / 1000) % 60,
          ms = total_ms % 1000;
  std::string sec = std::to_string(s);
  if (ms) {
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03lld", static_cast<long long>(ms));
    std::string f = frac;
    while (f.back() == '0') f.pop_back();
    sec += f;
  }
  if (h) return std::to_string(h) + "h" + std::to_string(m) + "m" + sec + "s";
  if (m) return std::to_string(m) + "m" + sec + "s";
  return sec + "s";
}

// "vA.B.C" out of our version string; "" when it has none (§4.5 version parsing).
std::string ParseKonnectorVersion(const std::string& v) {
  std::string s = v;
  if (auto p = s.find("+kube-bind-"); p != std::string::npos) s = s.substr(p + 11);
  if (s.size() < 6 || s[0] != 'v') return "";
  size_t i = 1;
  for (int part = 0; part < 3; ++part) {
    size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == start) return "";
    if (part < 2) {
      if (i >= s.size() || s[i] != '.') return "";
      ++i;
    }
  }
  return s.substr(0, i);
}

}  // namespace

HeartbeatReconciler::HeartbeatReconciler(Connection& connection)
    : connection_(connection), ctx_(connection.ctx()) {}

core::Status HeartbeatReconciler::MirrorKubeconfig(const Json& cluster_binding,
                                                   Json& status_object) {
  const std::string name =
      machinery::GetString(cluster_binding, {"spec", "kubeconfigSecretRef", "name"});
  std::string key = machinery::GetString(cluster_binding, {"spec", "kubeconfigSecretRef", "key"});
  if (key.empty()) key = apis::klutch::kKubeconfigKey;
  ObjectPtr secret =
      connection_.provider_secrets()->indexer().Get(connection_.provider_ns() + "/" + name);
  if (!secret) {
    reconcile::MarkFalse(status_object, "SecretValid", "ProviderSecretNotFound",
                         reconcile::kSeverityWarning,
                         "kubeconfig Secret " + connection_.provider_ns() + "/" + name +
                             " of the ClusterBinding not found on the provider",
                         ctx_.clock);
    return core::Status::Ok();
  }
  if (!SecretValue(*secret, key)) {
    reconcile::MarkFalse(
        status_object, "SecretValid", "ProviderSecretInvalid", reconcile::kSeverityWarning,
        "kubeconfig Secret " + connection_.provider_ns() + "/" + name + " has no key " + key,
        ctx_.clock);
    return core::Status::Ok();
  }
  reconcile::MarkTrue(status_object, "SecretValid", ctx_.clock);
  const Json* data = machinery::Find(*secret, {"data"});
  std::string type = machinery::GetString(*secret, {"type"});
  client::ResourceClient secrets(ctx_.binding, client::resources::kSecrets);
  core::Status result = core::Status::Ok();
  for (const auto& b : connection_.Bindings()) {
    ObjectPtr binding = ctx_.bindings.indexer().Get(b);
    if (!binding) continue;
    const std::string ns =
        machinery::GetString(*binding, {"spec", "kubeconfigSecretRef", "namespace"});
    const std::string sname =
        machinery::GetString(*binding, {"spec", "kubeconfigSecretRef", "name"});
    ObjectPtr current = ctx_.secrets.indexer().Get(ns + "/" + sname);
    if (current && machinery::Find(*current, {"data"}) &&
        *machinery::Find(*current, {"data"}) == (data ? *data : Json::object()) &&
        machinery::GetString(*current, {"type"}) == type) {
      continue;
    }
    Json desired = current ? *current
                           : Json{{"apiVersion", "v1"},
                                  {"kind", "Secret"},
                                  {"metadata", {{"name", sname}, {"namespace", ns}}}};
    desired["data"] = data ? *data : Json::object();
    if (!type.empty()) desired["type"] = type;
    auto r =
        current ? secrets.Namespace(ns).Update(desired) : secrets.Namespace(ns).Create(desired);
    ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", current ? "update" : "create"}});
    if (!r.ok()) result = r.status();
  }
  return result;
}

core::Result<Result> HeartbeatReconciler::Reconcile(const Request&) {
  if (!connection_.CachesSynced()) return Result::Done();
  ObjectPtr cb = connection_.cluster_bindings().indexer().Get(
      connection_.provider_ns() + "/" + std::string(apis::klutch::kClusterBindingName));
  if (!cb) return Result::Done();  // the backend creates it; its add event brings us back
  Json modified = *cb;
  core::Status mirror = core::Status::Ok();
  if (!ctx_.options.control_plane_mode) mirror = MirrorKubeconfig(*cb, modified);

  const auto interval = ctx_.options.heartbeat_interval;
  const auto now = ctx_.clock.Now();
  std::string last = machinery::GetString(*cb, {"status", "lastHeartbeatTime"});
  auto last_time = core::ParseTime(last);
  // Timestamps have whole seconds: renew when less than half a second of the interval is left.
  auto due = last_time ? *last_time + interval - std::chrono::milliseconds(500) : now;
  if (!last_time || now >= due) {
    modified["status"]["lastHeartbeatTime"] = core::FormatTime(now);
    last_time = now;
  }
  modified["status"]["heartbeatInterval"] = FormatGoDuration(interval);
  std::string version = ParseKonnectorVersion(ctx_.options.version);
  if (version.empty()) {
    modified["status"]["konnectorVersion"] = "unknown";
    reconcile::MarkFalse(modified, "ValidVersion", "ParseError", reconcile::kSeverityWarning,
                         "could not parse konnector version " + ctx_.options.version, ctx_.clock);
  } else {
    modified["status"]["konnectorVersion"] = version;
    reconcile::MarkTrue(modified, "ValidVersion", ctx_.clock);
  }
  reconcile::SetSummary(modified, ctx_.clock);
  auto committed = reconcile::Committer(client::ResourceClient(connection_.provider(),
                                                               apis::klutch::kClusterBindings),
                                        std::string(apis::klutch::kKonnectorFieldManager))
                       .CommitStatus(*cb, modified);
  ctx_.metrics.heartbeats.Increment({{"result", committed.ok() ? "ok" : "error"}});
  reconcile::SeverityCondition heartbeating{.type = "Heartbeating", .status = "True"};
  if (!committed.ok() && !core::IsConflict(committed.status())) {
    heartbeating = {.type = "Heartbeating",
                    .status = "False",
                    .severity = std::string(reconcile::kSeverityWarning),
                    .reason = "ClusterBindingUpdateFailed",
                    .message = "updating ClusterBinding " + connection_.provider_ns() +
                               "/cluster on the provider failed: " + committed.status().message()};
  }
  if (committed.ok() || !core::IsConflict(committed.status())) {
    for (const auto& b : connection_.Bindings()) SetBindingCondition(b, heartbeating);
  }
  // A failed heartbeat is retried within the interval, not after the controller's backoff
  // (up to 1000 s), so the provider sees the konnector again as soon as it is reachable.
  if (!committed.ok() || !mirror.ok()) {
    const core::Status& failed = committed.ok() ? mirror : committed.status();
    KLUTCH_LOG(kWarn, "konnector", "heartbeat of {}: {}", connection_.provider_ns(),
               failed.message());
    return Result::RequeueAfter(std::min(interval, std::chrono::milliseconds(5000)));
  }
  auto wait = *last_time + interval - ctx_.clock.Now();
  return Result::RequeueAfter(std::max(std::chrono::duration_cast<std::chrono::milliseconds>(wait),
                                       std::chrono::milliseconds(100)));
}

void HeartbeatReconciler::SetBindingCondition(const std::string& binding_key,
                                              const reconcile::SeverityCondition& c) {
  ObjectPtr binding = ctx_.bindings.indexer().Get(binding_key);
  if (!binding) return;
  Json modified = *binding;
  if (!reconcile::SetSeverityCondition(modified, c, ctx_.clock)) return;
  reconcile::SetSummary(modified, ctx_.clock);
  auto r =
      reconcile::Committer(client::ResourceClient(ctx_.binding, apis::klutch::kApiServiceBindings),
                           std::string(apis::klutch::kKonnectorFieldManager))
          .CommitStatus(*binding, modified);
  if (!r.ok() && !core::IsConflict(r.status())) {
    KLUTCH_LOG(kWarn, "konnector", "updating status of APIServiceBinding {}: {}", binding_key,
               r.status().message());
  }
}

}  // namespace klutch::konnector::internal
