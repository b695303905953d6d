#include "bind/konnector_deployment.h"

#include <map>

#include "apis/klutch/appclusterbinding.h"
#include "apis/klutch/clusterbinding.h"
#include "machinery/object.h"

namespace klutch::bind {

using client::Json;

namespace {

// Drops ""/0/false/null/[]/{} recursively (so an override never clears a default by accident).
Json DropEmpty(const Json& v) {
  if (v.is_object()) {
    Json out = Json::object();
    for (auto it = v.begin(); it != v.end(); ++it) {
      Json child = DropEmpty(it.value());
      if (!child.is_null()) out[it.key()] = std::move(child);
    }
    return out.empty() ? Json() : out;
  }
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& e : v) {
      Json child = DropEmpty(e);
      if (!child.is_null()) out.push_back(std::move(child));
    }
    return out.empty() ? Json() : out;
  }
  if ((v.is_string() && v.get_ref<const std::string&>().empty()) ||  // json-ok: type checked
      (v.is_boolean() && v == false) || (v.is_number() && v == 0)) {
    return Json();
  }
  return v;
}

// Strategic-merge style: lists of env/ports/volumeMounts/volumeDevices merge by their key,
// other lists replace, objects merge recursively.
void MergeContainer(Json& base, const Json& overrides) {
  static const std::map<std::string, std::string> kMergeKeys = {{"env", "name"},
                                                                {"ports", "containerPort"},
                                                                {"volumeMounts", "mountPath"},
                                                                {"volumeDevices", "devicePath"}};
  for (auto it = overrides.begin(); it != overrides.end(); ++it) {
    const std::string& key = it.key();
    auto merge_key = kMergeKeys.find(key);
    if (merge_key != kMergeKeys.end() && it->is_array()) {
      Json& list = base[key];
      if (!list.is_array()) list = Json::array();
      for (const Json& item : *it) {
        const Json* id = item.is_object() ? machinery::Find(item, {merge_key->second}) : nullptr;
        bool merged = false;
        for (Json& existing : list) {
          const Json* have = machinery::Find(existing, {merge_key->second});
          if (id != nullptr && have != nullptr && *have == *id) {
            existing.merge_patch(item);
            merged = true;
            break;
          }
        }
        if (!merged) list.push_back(item);
      }
    } else if (it->is_object() && base.contains(key) && base[key].is_object()) {
      MergeContainer(base[key], *it);
    } else {
      base[key] = *it;
    }
  }
}

}  // namespace

Json KonnectorDeployment(const Json& acb, const std::string& image, const std::string& root,
                         const std::string& secret_name, const std::string& key,
                         const Json& binding_labels) {
  Json container = {
      {"name", "konnector"},
      {"image", image},
      {"command", {"klutch", "konnector"}},
      {"args",
       {"--control-plane-mode", "--app-cluster-kubeconfig-secret-name=" + secret_name,
        "--app-cluster-kubeconfig-secret-namespace=" + root,
        "--app-cluster-kubeconfig-secret-key=" + key, "--binding-root-namespace=" + root,
        "--lease-namespace=$(POD_NAMESPACE)", "--health-probe-bind-address=:8080",
        "--metrics-bind-address=:8081"}},
      {"env",
       Json::array(
           {{{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
            {{"name", "POD_NAMESPACE"},
             {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}}})},
      {"ports", Json::array({{{"name", "health"}, {"containerPort", 8080}, {"protocol", "TCP"}},
                             {{"name", "metrics"}, {"containerPort", 8081}, {"protocol", "TCP"}}})},
      {"readinessProbe",
       {{"httpGet", {{"path", "/readyz"}, {"port", 8080}}}, {"periodSeconds", 10}}},
      {"livenessProbe",
       {{"httpGet", {{"path", "/healthz"}, {"port", 8080}}},
        {"initialDelaySeconds", 15},
        {"periodSeconds", 20}}},
      {"resources",
       {{"requests", {{"cpu", "50m"}, {"memory", "64Mi"}}}, {"limits", {{"memory", "512Mi"}}}}},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", {{"drop", {"ALL"}}}}}},
      {"volumeMounts", Json::array({{{"name", "tmp"}, {"mountPath", "/tmp"}}})}};
  if (const Json* overrides = machinery::Find(acb, {"spec", "konnector", "overrides"})) {
    Json cleaned = DropEmpty(*overrides);
    if (cleaned.is_object()) MergeContainer(container, cleaned);
  }
  Json labels = binding_labels;
  labels["app"] = "konnector";
  Json selector = {{"app", "konnector"},
                   {std::string(apis::klutch::kAppClusterBindingNameLabel), machinery::Name(acb)}};
  Json spec = {{"replicas", 1},
               {"selector", {{"matchLabels", selector}}},
               {"template",
                {{"metadata", {{"labels", labels}}},
                 {"spec",
                  {{"serviceAccountName", apis::klutch::kBinderName},
                   {"restartPolicy", "Always"},
                   {"securityContext",
                    {{"runAsNonRoot", true},
                     {"runAsUser", 65532},
                     {"runAsGroup", 65532},
                     {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
                   {"containers", Json::array({container})},
                   {"volumes", Json::array({{{"name", "tmp"}, {"emptyDir", Json::object()}}})}}}}}};
  return {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata",
       {{"name", "konnector-" + machinery::Name(acb)},
        {"namespace", root},
        {"labels", labels},
        {"annotations", {{std::string(kKonnectorSpecHashAnnotation), machinery::JsonHash(spec)}}}}},
      {"spec", spec}};
}

}  // namespace klutch::bind
