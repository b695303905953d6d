#include "konnector/objects.h"

#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/register.h"
#include "core/strings.h"
#include "machinery/validation.h"

namespace klutch::konnector {
namespace {

const Json* Field(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  return it == obj.end() ? nullptr : &*it;
}

bool BoolField(const Json& obj, std::string_view key) {
  const Json* v = Field(obj, key);
  return v && v->is_boolean() && *v == true;
}

void TranslateStatus(Json& node, std::string_view from, std::string_view to, int depth) {
  if (depth > 32) return;
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it.key() == "namespace" && it->is_string() &&
          *it->get_ptr<const std::string*>() == from) {
        *it = std::string(to);  // a reference such as status.managed.secret {name, namespace}
      } else if (it.key() == "conditions" && it->is_array()) {
        for (Json& c : *it) {
          if (!c.is_object()) continue;
          auto m = c.find("message");
          if (m != c.end() && m->is_string()) {
            *m = machinery::ReplaceWholeName(*m->get_ptr<const std::string*>(), from, to);
          }
        }
      } else {
        TranslateStatus(*it, from, to, depth + 1);
      }
    }
  } else if (node.is_array()) {
    for (Json& e : node) TranslateStatus(e, from, to, depth + 1);
  }
}

}  // namespace

bool ClusterManaged(std::string_view group, std::string_view resource, const Json& object) {
  if (!group.empty()) return false;
  if (resource == "secrets") {
    return machinery::GetString(object, {"type"}) == "kubernetes.io/service-account-token";
  }
  const std::string name = machinery::Name(object);
  return (resource == "configmaps" && name == "kube-root-ca.crt") ||
         (resource == "serviceaccounts" && name == "default");
}

Json StatusInConsumerTerms(const Json& status, std::string_view provider_ns,
                           std::string_view consumer_ns) {
  Json out = status;
  if (provider_ns.empty() || consumer_ns.empty() || provider_ns == consumer_ns) return out;
  TranslateStatus(out, provider_ns, consumer_ns, 0);
  return out;
}

std::vector<ConditionNews> FalseConditionNews(const Json* before_status, const Json* after_status,
                                              std::string_view skip_type) {
  std::vector<ConditionNews> news;
  const Json* after = after_status ? Field(*after_status, "conditions") : nullptr;
  if (!after || !after->is_array()) return news;
  const Json* before = before_status ? Field(*before_status, "conditions") : nullptr;
  auto text = [](const Json& c, const char* key) {
    const Json* v = Field(c, key);
    return v && v->is_string() ? *v->get_ptr<const std::string*>() : std::string();
  };
  for (const Json& c : *after) {
    std::string type = text(c, "type");
    if (type.empty() || type == skip_type || text(c, "status") != "False") continue;
    std::string reason = text(c, "reason"), message = text(c, "message");
    bool seen = false;
    if (before && before->is_array()) {
      for (const Json& b : *before) {
        if (text(b, "type") == type && text(b, "status") == "False" &&
            text(b, "reason") == reason && text(b, "message") == message) {
          seen = true;
        }
      }
    }
    if (seen) continue;
    news.push_back(
        {.type = type,
         .event_type = reason == "Creating" || reason == "Deleting" ? "Normal" : "Warning",
         .reason = reason.empty() ? type + "False" : reason,
         .message = message.empty() ? type + " is False" : message});
  }
  return news;
}

Json ExportToCrd(const Json& export_object, const Json& binding) {
  const Json* spec = machinery::Find(export_object, {"spec"});
  Json crd_spec = Json::object();
  if (spec) {
    for (const char* key : {"group", "names", "scope"}) {
      if (const Json* v = Field(*spec, key)) crd_spec[key] = *v;
    }
    Json versions = Json::array();
    if (const Json* vs = Field(*spec, "versions"); vs && vs->is_array()) {
      for (const Json& v : *vs) {
        if (!v.is_object()) continue;
        Json out = Json::object();
        for (const char* key : {"name", "served", "storage", "deprecated", "deprecationWarning",
                                "additionalPrinterColumns"}) {
          if (const Json* f = Field(v, key)) out[key] = *f;
        }
        if (const Json* schema = machinery::Find(v, {"schema", "openAPIV3Schema"})) {
          out["schema"] = {{"openAPIV3Schema", *schema}};
        }
        const Json* sub = Field(v, "subresources");
        out["subresources"] = sub && sub->is_object() ? *sub : Json::object();
        versions.push_back(std::move(out));
      }
    }
    crd_spec["versions"] = std::move(versions);
  }
  Json owner = {{"apiVersion", std::string(apis::klutch::kApiVersion)},
                {"kind", "APIServiceBinding"},
                {"name", machinery::Name(binding)},
                {"uid", machinery::Uid(binding)},
                {"controller", true}};
  return Json{{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata",
               {{"name", machinery::Name(export_object)},
                {"ownerReferences", Json::array({std::move(owner)})}}},
              {"spec", std::move(crd_spec)}};
}

std::string FirstServedVersion(const Json& export_object) {
  const Json* vs = machinery::Find(export_object, {"spec", "versions"});
  if (!vs || !vs->is_array()) return "";
  for (const Json& v : *vs) {
    if (BoolField(v, "served")) return machinery::GetString(v, {"name"});
  }
  return "";
}

bool CrdOwnedBy(const Json& crd, const Json& binding) {
  const Json* refs = machinery::Find(crd, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return false;
  for (const Json& ref : *refs) {
    if (!BoolField(ref, "controller")) continue;
    return machinery::ParseApiVersion(machinery::GetString(ref, {"apiVersion"})).group ==
               apis::klutch::kGroup &&
           machinery::GetString(ref, {"kind"}) == "APIServiceBinding" &&
           machinery::GetString(ref, {"name"}) == machinery::Name(binding) &&
           machinery::GetString(ref, {"uid"}) == machinery::Uid(binding);
  }
  return false;
}

std::string EarlierBindingUid(const Json& crd, const Json& binding) {
  const Json* refs = machinery::Find(crd, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return "";
  for (const Json& ref : *refs) {
    if (!BoolField(ref, "controller")) continue;
    std::string uid = machinery::GetString(ref, {"uid"});
    bool earlier = machinery::ParseApiVersion(machinery::GetString(ref, {"apiVersion"})).group ==
                       apis::klutch::kGroup &&
                   machinery::GetString(ref, {"kind"}) == "APIServiceBinding" &&
                   machinery::GetString(ref, {"name"}) == machinery::Name(binding) &&
                   !uid.empty() && uid != machinery::Uid(binding);
    return earlier ? uid : "";
  }
  return "";
}

int64_t Generation(const Json& object) {
  const Json* g = machinery::Find(object, {"metadata", "generation"});
  if (!g) return 0;
  if (const auto* i = g->get_ptr<const Json::number_integer_t*>()) return *i;
  if (const auto* u = g->get_ptr<const Json::number_unsigned_t*>()) return static_cast<int64_t>(*u);
  return 0;
}

Json AcceptedClaims(const Json& binding) {
  Json out = Json::array();
  if (const Json* claims = machinery::Find(binding, {"spec", "permissionClaims"});
      claims && claims->is_array()) {
    for (const Json& c : *claims) {
      if (machinery::GetString(c, {"state"}) == "Accepted") out.push_back(c);
    }
  }
  return out;
}

Json CleanCopy(const Json& object, const std::string& ns) {
  Json copy = object.is_object() ? object : Json::object();
  copy.erase("status");
  Json& meta = machinery::MutableMetadata(copy);
  for (const char* key : {"uid", "resourceVersion", "generation", "creationTimestamp",
                          "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds",
                          "selfLink", "ownerReferences", "finalizers"}) {
    meta.erase(key);
  }
  if (ns.empty()) {
    meta.erase("namespace");
  } else {
    meta["namespace"] = ns;
  }
  return copy;
}

bool HasBoundAnnotation(const Json& object) {
  return Annotation(object, apis::klutch::kBoundAnnotation) == "true";
}

std::string PrefixedName(std::string_view provider_ns, std::string_view name) {
  return std::string(provider_ns) + "-" + std::string(name);
}

std::optional<std::string> UnprefixedName(std::string_view provider_ns, std::string_view name) {
  if (name.size() <= provider_ns.size() + 1 || !name.starts_with(provider_ns) ||
      name[provider_ns.size()] != '-') {
    return std::nullopt;
  }
  return std::string(name.substr(provider_ns.size() + 1));
}

void InjectClusterNamespace(Json& object, const std::string& provider_ns,
                            const std::string& namespace_uid) {
  Json& meta = machinery::MutableMetadata(object);
  meta["name"] = PrefixedName(provider_ns, machinery::Name(object));
  SetAnnotation(object, apis::klutch::kClusterNamespaceAnnotation, provider_ns);
  auto it = meta.find("ownerReferences");
  if (it == meta.end() || !it->is_array()) meta["ownerReferences"] = Json::array();
  meta["ownerReferences"].push_back(
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"name", provider_ns}, {"uid", namespace_uid}});
}

void ClearClusterNamespace(Json& object) {
  Json& meta = machinery::MutableMetadata(object);
  const std::string provider_ns = Annotation(object, apis::klutch::kClusterNamespaceAnnotation);
  if (auto a = meta.find("annotations"); a != meta.end() && a->is_object()) {
    a->erase(std::string(apis::klutch::kClusterNamespaceAnnotation));
    if (a->empty()) meta.erase("annotations");
  }
  if (auto refs = meta.find("ownerReferences"); refs != meta.end() && refs->is_array()) {
    Json kept = Json::array();
    for (const Json& ref : *refs) {
      bool is_ns = machinery::GetString(ref, {"kind"}) == "Namespace" &&
                   machinery::GetString(ref, {"apiVersion"}) == "v1" &&
                   machinery::GetString(ref, {"name"}) == provider_ns;
      if (!is_ns) kept.push_back(ref);
    }
    if (kept.empty()) {
      meta.erase("ownerReferences");
    } else {
      *refs = std::move(kept);
    }
  }
  if (auto name = UnprefixedName(provider_ns, machinery::Name(object))) meta["name"] = *name;
}

std::optional<std::string> SecretValue(const Json& secret, std::string_view key) {
  const Json* data = machinery::Find(secret, {"data"});
  const Json* value = data ? Field(*data, key) : nullptr;
  const std::string* text = value ? value->get_ptr<const std::string*>() : nullptr;
  if (!text) return std::nullopt;
  return core::Base64Decode(*text);
}

KubeconfigCheck CheckKubeconfigSecret(const Json* secret, std::string_view secret_ref,
                                      std::string_view key, bool require_namespace) {
  KubeconfigCheck check;
  auto invalid = [&](std::string message) {
    check.reason = "KubeconfigSecretInvalid";
    check.message = std::move(message);
    return check;
  };
  if (!secret) {
    check.reason = "KubeconfigSecretNotFound";
    check.message = "kubeconfig Secret " + std::string(secret_ref) +
                    " not found; run kubectl bind again to recreate it";
    return check;
  }
  std::optional<std::string> text = SecretValue(*secret, key);
  if (!text) {
    return invalid("kubeconfig Secret " + std::string(secret_ref) + " has no valid key \"" +
                   std::string(key) + "\"; run kubectl bind again to recreate it");
  }
  auto parsed = client::ParseKubeconfig(*text, std::string(secret_ref), ".");
  if (!parsed.ok()) {
    return invalid("kubeconfig in Secret " + std::string(secret_ref) + " does not parse: " +
                   parsed.status().message() + "; run kubectl bind again to recreate it");
  }
  auto ctx = parsed->contexts.find(parsed->current_context);
  if (parsed->current_context.empty() || ctx == parsed->contexts.end()) {
    return invalid("kubeconfig in Secret " + std::string(secret_ref) +
                   " has no current context; run kubectl bind again to recreate it");
  }
  if (require_namespace && ctx->second.namespace_.empty()) {
    return invalid("the current context of the kubeconfig in Secret " + std::string(secret_ref) +
                   " names no namespace (the cluster namespace on the provider); run kubectl "
                   "bind again to recreate it");
  }
  auto config = client::ResolveKubeconfig(*parsed);
  if (!config.ok()) {
    return invalid("kubeconfig in Secret " + std::string(secret_ref) +
                   " is not usable: " + config.status().message());
  }
  check.valid = true;
  check.kubeconfig = std::move(*text);
  check.config = std::move(*config);
  check.ns = ctx->second.namespace_;
  return check;
}

}  // namespace klutch::konnector
