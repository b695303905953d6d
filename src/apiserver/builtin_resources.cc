#include "apiserver/builtin_resources.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "apis/builtin_schemas.h"
#include "apiserver/crd.h"
#include "apiserver/quota.h"
#include "core/clock.h"
#include "core/random.h"
#include "core/status.h"
#include "core/strings.h"
#include "machinery/validation.h"

namespace klutch::apiserver {

using machinery::Find;
using machinery::GetString;

namespace {

const std::vector<std::string> kAllVerbs = {"create", "delete", "deletecollection", "get",
                                            "list",   "patch",  "update",           "watch"};

std::shared_ptr<const Json> Schemas() {
  // One shared copy of components.schemas for every built-in kind.
  static const auto schemas = std::make_shared<const Json>(apis::BuiltinSchemas());
  return schemas;
}

Column NameColumn() {
  return {"Name",
          "string",
          "name",
          "Name must be unique within a namespace.",
          0,
          "",
          [](const Json& o) { return Json(machinery::Name(o)); }};
}
Column AgeColumn() {
  return {"Age", "string", "", "Time since the object was created.", 0, "", nullptr};
}
Column CreatedAtColumn() {
  return {"Created At", "date", "", "When the object was created.", 0, "", [](const Json& o) {
            return Json(GetString(o, {"metadata", "creationTimestamp"}));
          }};
}

size_t CountOf(const Json& o, std::initializer_list<std::string_view> path) {
  const Json* v = Find(o, path);
  return v && (v->is_object() || v->is_array()) ? v->size() : 0;
}

std::string OrNone(const std::string& s) { return s.empty() ? "<none>" : s; }

// "requests.cpu: 0/1, ..." from status.used and status.hard, limits.* or the rest.
std::string QuotaSummary(const Json& o, bool limits) {
  std::vector<std::string> parts;
  const Json* hard = Find(o, {"status", "hard"});
  if (!hard || !hard->is_object()) hard = Find(o, {"spec", "hard"});
  if (!hard || !hard->is_object()) return "";
  const Json* used = Find(o, {"status", "used"});
  for (const auto& [k, v] : hard->items()) {
    if (k.starts_with("limits.") != limits) continue;
    std::string u =
        used && used->contains(k) && (*used)[k].is_string() ? (*used)[k].get<std::string>() : "0";
    parts.push_back(k + ": " + u + "/" +
                    (v.is_string() ? v.get<std::string>() : machinery::Dump(v)));
  }
  return core::Join(parts, ", ");
}

// The group, version and kind a built-in definition declares in its one
// x-kubernetes-group-version-kind entry. The schemas are build inputs and every server start
// reaches this, so a definition that is missing or declares no single kind aborts.
machinery::GroupVersionKind KindOf(std::string_view definition) {
  const Json& schemas = apis::BuiltinSchemas();
  auto it = schemas.find(definition);
  KLUTCH_CHECK(it != schemas.end());
  const Json* gvks = Find(*it, {"x-kubernetes-group-version-kind"});
  KLUTCH_CHECK(gvks != nullptr && gvks->is_array() && gvks->size() == 1);
  const Json& gvk = (*gvks)[0];
  return {gvk.value("group", ""), gvk.value("version", ""), gvk.value("kind", "")};
}

// A built-in resource serving `definition` (such as "io.k8s.api.core.v1.ConfigMap"): group,
// version, kind and list kind come from the schema; the REST names and scope, which OpenAPI does
// not carry, are given here.
struct Builder {
  ResourceInfo r;
  Builder(std::string_view definition, std::string plural, bool namespaced) {
    machinery::GroupVersionKind gvk = KindOf(definition);
    r.group = std::move(gvk.group);
    r.version = gvk.version;
    r.storage_version = std::move(gvk.version);
    r.kind = gvk.kind;
    r.list_kind = gvk.kind + "List";
    r.plural = std::move(plural);
    r.singular = core::ToLower(gvk.kind);
    r.namespaced = namespaced;
    r.verbs = kAllVerbs;
    r.strategic_merge = true;
    r.schemas = Schemas();
    r.schema_name = std::string(definition);
    r.columns = {NameColumn()};
  }
  Builder& Short(std::vector<std::string> s) {
    r.short_names = std::move(s);
    return *this;
  }
  Builder& Categories(std::vector<std::string> c) {
    r.categories = std::move(c);
    return *this;
  }
  Builder& Status() {
    r.has_status = true;
    r.subresources.push_back({"status", {r.group, r.version, r.kind}, {"get", "patch", "update"}});
    return *this;
  }
  Builder& Sub(SubresourceInfo s) {
    r.subresources.push_back(std::move(s));
    return *this;
  }
  Builder& Columns(std::vector<Column> cols) {
    r.columns.insert(r.columns.end(), cols.begin(), cols.end());
    return *this;
  }
  ResourcePtr Done() { return std::make_shared<const ResourceInfo>(std::move(r)); }
};

// --- data keys (ConfigMap, Secret) -------------------------------------------------------

void ValidateDataKeys(const Json& obj, const char* field, std::set<std::string>& seen,
                      std::vector<core::Cause>& causes) {
  const Json* data = Find(obj, {field});
  if (data == nullptr || data->is_null()) return;
  if (!data->is_object()) {
    causes.push_back(machinery::FieldInvalid(field, *data, "must be a map of strings"));
    return;
  }
  for (const auto& [k, v] : data->items()) {
    for (const auto& e : machinery::IsConfigMapKey(k)) {
      causes.push_back(machinery::FieldInvalid(fmt::format("{}[{}]", field, k), k, e));
    }
    if (!seen.insert(k).second) {
      causes.push_back(machinery::FieldInvalid(fmt::format("{}[{}]", field, k), k,
                                               "duplicate of key present in data"));
    }
    if (!v.is_string()) {
      causes.push_back(
          machinery::FieldInvalid(fmt::format("{}[{}]", field, k), v, "must be a string"));
    }
  }
}

bool IsImmutable(const Json& o) {
  const Json* i = Find(o, {"immutable"});
  return i && i->is_boolean() && i->get<bool>();
}

void CheckImmutableData(const Json& obj, const Json& old, std::vector<core::Cause>& causes) {
  if (!IsImmutable(old)) return;
  if (!IsImmutable(obj)) {
    causes.push_back(
        machinery::FieldForbidden("immutable", "field is immutable when `immutable` is set"));
  }
  for (const char* f : {"data", "binaryData", "stringData"}) {
    Json a = obj.contains(f) ? obj[f] : Json();
    Json b = old.contains(f) ? old[f] : Json();
    if (a != b) {
      causes.push_back(machinery::FieldForbidden(f, "field is immutable when `immutable` is set"));
    }
  }
}

void ValidateBase64Values(const Json& obj, const char* field, std::vector<core::Cause>& causes) {
  const Json* data = Find(obj, {field});
  if (!data || !data->is_object()) return;
  for (const auto& [k, v] : data->items()) {
    if (v.is_string() && !core::Base64Decode(v.get<std::string>())) {
      causes.push_back(machinery::FieldInvalid(fmt::format("{}[{}]", field, k), "<secret data>",
                                               "illegal base64 data"));
    }
  }
}

// ConfigMaps and Secrets hold at most 1 MiB of data (corev1.MaxSecretSize), counted as
// kube-apiserver counts it: the bytes of every value, binary ones decoded.
constexpr size_t kMaxDataBytes = 1024 * 1024;

size_t DataBytes(const Json& obj, const char* field, bool base64) {
  const Json* data = Find(obj, {field});
  if (!data || !data->is_object()) return 0;
  size_t total = 0;
  for (const auto& [k, v] : data->items()) {
    const std::string* value = v.get_ptr<const std::string*>();
    if (!value) continue;
    if (!base64) {
      total += value->size();
    } else if (auto decoded = core::Base64Decode(*value)) {
      total += decoded->size();
    }
  }
  return total;
}

// A ConfigMap's limit is on the object as a whole: kube-apiserver names the empty path ("[]").
void ValidateConfigMapSize(const Json& o, std::vector<core::Cause>& causes) {
  if (DataBytes(o, "data", false) + DataBytes(o, "binaryData", true) > kMaxDataBytes) {
    causes.push_back(machinery::FieldTooLong("[]", "", kMaxDataBytes));
  }
}

ResourcePtr ConfigMaps() {
  Builder b("io.k8s.api.core.v1.ConfigMap", "configmaps", true);
  b.Short({"cm"}).Columns(
      {{"Data", "integer", "", "Number of data entries.", 0, "",
        [](const Json& o) { return Json(CountOf(o, {"data"}) + CountOf(o, {"binaryData"})); }},
       AgeColumn()});
  b.r.strategy.prepare_create = [](Json& o, std::vector<core::Cause>& causes) {
    std::set<std::string> seen;
    ValidateDataKeys(o, "data", seen, causes);
    ValidateDataKeys(o, "binaryData", seen, causes);
    ValidateBase64Values(o, "binaryData", causes);
    ValidateConfigMapSize(o, causes);
  };
  b.r.strategy.prepare_update = [](Json& o, const Json& old, std::vector<core::Cause>& causes) {
    std::set<std::string> seen;
    ValidateDataKeys(o, "data", seen, causes);
    ValidateDataKeys(o, "binaryData", seen, causes);
    ValidateBase64Values(o, "binaryData", causes);
    ValidateConfigMapSize(o, causes);
    CheckImmutableData(o, old, causes);
  };
  return b.Done();
}

void PrepareSecret(Json& o, std::vector<core::Cause>& causes) {
  // stringData is write-only: merged into data (base64) and never stored.
  if (const Json* sd = Find(o, {"stringData"}); sd && sd->is_object()) {
    for (const auto& [k, v] : sd->items()) {
      if (!v.is_string()) {
        causes.push_back(
            machinery::FieldInvalid(fmt::format("stringData[{}]", k), v, "must be a string"));
        continue;
      }
      o["data"][k] = core::Base64Encode(v.get<std::string>());
    }
  }
  o.erase("stringData");
  if (GetString(o, {"type"}).empty()) o["type"] = "Opaque";
  std::set<std::string> seen;
  ValidateDataKeys(o, "data", seen, causes);
  ValidateBase64Values(o, "data", causes);
  // stringData is merged by now, so it counts too.
  if (DataBytes(o, "data", true) > kMaxDataBytes) {
    causes.push_back(machinery::FieldTooLong("data", "", kMaxDataBytes));
  }
  const std::string type = GetString(o, {"type"});
  auto require_key = [&](const char* key) {
    const Json* d = Find(o, {"data", key});
    if (!d) causes.push_back(machinery::FieldRequired(fmt::format("data[{}]", key)));
  };
  if (type == "kubernetes.io/service-account-token") {
    if (GetString(o, {"metadata", "annotations", "kubernetes.io/service-account.name"}).empty()) {
      causes.push_back(
          machinery::FieldRequired("metadata.annotations[kubernetes.io/service-account.name]"));
    }
  } else if (type == "kubernetes.io/dockerconfigjson") {
    require_key(".dockerconfigjson");
  } else if (type == "kubernetes.io/dockercfg") {
    require_key(".dockercfg");
  } else if (type == "kubernetes.io/tls") {
    require_key("tls.crt");
    require_key("tls.key");
  } else if (type == "kubernetes.io/ssh-auth") {
    require_key("ssh-privatekey");
  }
}

ResourcePtr Secrets() {
  Builder b("io.k8s.api.core.v1.Secret", "secrets", true);
  b.Columns({{"Type", "string", "", "The type of the secret.", 0, "",
              [](const Json& o) { return Json(GetString(o, {"type"})); }},
             {"Data", "integer", "", "Number of data entries.", 0, "",
              [](const Json& o) { return Json(CountOf(o, {"data"})); }},
             AgeColumn()});
  b.r.strategy.prepare_create = PrepareSecret;
  b.r.strategy.prepare_update = [](Json& o, const Json& old, std::vector<core::Cause>& causes) {
    PrepareSecret(o, causes);
    if (GetString(o, {"type"}) != GetString(old, {"type"})) {
      causes.push_back(
          machinery::FieldInvalid("type", GetString(o, {"type"}), "field is immutable"));
    }
    CheckImmutableData(o, old, causes);
  };
  b.r.strategy.fields = [](const Json& o, std::string_view f) -> std::optional<std::string> {
    if (f == "type") return GetString(o, {"type"});
    return std::nullopt;
  };
  return b.Done();
}

void PrepareNamespace(Json& o) {
  Json& m = machinery::MutableMetadata(o);
  m["labels"]["kubernetes.io/metadata.name"] = GetString(m, {"name"});
}

ResourcePtr Namespaces() {
  Builder b("io.k8s.api.core.v1.Namespace", "namespaces", false);
  b.Short({"ns"}).Status();
  b.r.verbs = {"create", "delete", "get", "list", "patch", "update", "watch"};
  b.r.name_rule = machinery::NameRule::kDns1123Label;
  b.Sub({"finalize", {b.r.group, b.r.version, b.r.kind}, {"update"}});
  b.Columns({{"Status", "string", "", "The lifecycle phase of the namespace.", 0, "",
              [](const Json& o) {
                return Json(GetString(o, {"status", "phase"}));
              }},
             AgeColumn()});
  b.r.strategy.prepare_create = [](Json& o, std::vector<core::Cause>&) {
    PrepareNamespace(o);
    const Json* f = Find(o, {"spec", "finalizers"});
    if (f == nullptr) o["spec"]["finalizers"] = Json::array({"kubernetes"});
    o["status"] = {{"phase", "Active"}};
  };
  b.r.strategy.prepare_update = [](Json& o, const Json& old, std::vector<core::Cause>&) {
    PrepareNamespace(o);
  };
  b.r.strategy.fields = [](const Json& o, std::string_view f) -> std::optional<std::string> {
    if (f == "status.phase") return GetString(o, {"status", "phase"});
    return std::nullopt;
  };
  return b.Done();
}

ResourcePtr ServiceAccounts() {
  Builder b("io.k8s.api.core.v1.ServiceAccount", "serviceaccounts", true);
  b.Short({"sa"});
  b.Sub({"token", KindOf("io.k8s.api.authentication.v1.TokenRequest"), {"create"}});
  b.Columns({{"Secrets", "string", "", "Number of secrets listed by the service account.", 0, "",
              [](const Json& o) { return Json(CountOf(o, {"secrets"})); }},
             AgeColumn()});
  return b.Done();
}

std::string EventObject(const Json& o, const char* ref) {
  std::string kind = core::ToLower(GetString(o, {ref, "kind"}));
  std::string name = GetString(o, {ref, "name"});
  return kind + "/" + name;
}

std::optional<std::string> CoreEventField(const Json& o, std::string_view f) {
  static const std::set<std::string, std::less<>> kInvolved = {
      "kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"};
  if (f.starts_with("involvedObject.")) {
    std::string_view k = f.substr(15);
    if (kInvolved.count(k)) return GetString(o, {"involvedObject", k});
    return std::nullopt;
  }
  if (f == "reason") return GetString(o, {"reason"});
  if (f == "reportingComponent") return GetString(o, {"reportingComponent"});
  if (f == "source") return GetString(o, {"source", "component"});
  if (f == "type") return GetString(o, {"type"});
  return std::nullopt;
}

std::vector<Column> EventColumns(const char* ref, const char* note) {
  return {
      {"Last Seen", "string", "", "Time since the event was last observed.", 0, "",
       [](const Json& o) {
         std::string t = GetString(o, {"lastTimestamp"});
         if (t.empty()) t = GetString(o, {"deprecatedLastTimestamp"});
         if (t.empty()) t = GetString(o, {"eventTime"});
         if (t.empty()) t = GetString(o, {"metadata", "creationTimestamp"});
         auto parsed = core::ParseTime(t);
         if (!parsed) return Json("<unknown>");
         return Json(core::HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now() - *parsed)));
       }},
      {"Type", "string", "", "Normal or Warning.", 0, "",
       [](const Json& o) { return Json(GetString(o, {"type"})); }},
      {"Reason", "string", "", "Short machine-readable reason.", 0, "",
       [](const Json& o) { return Json(GetString(o, {"reason"})); }},
      {"Object", "string", "", "The object the event is about.", 0, "",
       [ref](const Json& o) { return Json(EventObject(o, ref)); }},
      {"Message", "string", "", "Human-readable description.", 0, "",
       [note](const Json& o) { return Json(GetString(o, {note})); }},
  };
}

ResourcePtr CoreEvents() {
  Builder b("io.k8s.api.core.v1.Event", "events", true);
  b.Short({"ev"});
  b.r.columns.clear();
  b.Columns(EventColumns("involvedObject", "message"));
  b.r.strategy.fields = CoreEventField;
  return b.Done();
}

ResourcePtr Events() {
  Builder b("io.k8s.api.events.v1.Event", "events", true);
  b.Short({"ev"});
  b.r.columns.clear();
  b.Columns(EventColumns("regarding", "note"));
  b.r.strategy.fields = [](const Json& o, std::string_view f) -> std::optional<std::string> {
    if (f.starts_with("regarding.")) return GetString(o, {"regarding", f.substr(10)});
    if (f == "reason" || f == "type" || f == "reportingController") {
      return GetString(o, {f});
    }
    return std::nullopt;
  };
  return b.Done();
}

// Limits are quantities no smaller than zero, as kube-apiserver validates spec.hard.
void ValidateQuotaHard(const Json& o, std::vector<core::Cause>& causes) {
  const Json* hard = Find(o, {"spec", "hard"});
  if (!hard || !hard->is_object()) return;
  for (const auto& [k, v] : hard->items()) {
    const std::string field = fmt::format("spec.hard[{}]", k);
    std::optional<double> value = QuantityValue(v);
    if (!value) {
      causes.push_back(machinery::FieldInvalid(field, QuantityText(v), "must be a quantity"));
    } else if (*value < 0) {
      causes.push_back(
          machinery::FieldInvalid(field, QuantityText(v), "must be greater than or equal to 0"));
    }
  }
}

ResourcePtr ResourceQuotas() {
  Builder b("io.k8s.api.core.v1.ResourceQuota", "resourcequotas", true);
  b.Short({"quota"}).Status();
  b.Columns({AgeColumn(),
             {"Request", "string", "", "Requests in use against their limits.", 0, "",
              [](const Json& o) { return Json(QuotaSummary(o, false)); }},
             {"Limit", "string", "", "Limits in use against their limits.", 0, "",
              [](const Json& o) { return Json(QuotaSummary(o, true)); }}});
  // The status is the server's: set once the quota is stored (quota.h).
  b.r.strategy.prepare_create = [](Json& o, std::vector<core::Cause>& causes) {
    o.erase("status");
    ValidateQuotaHard(o, causes);
  };
  b.r.strategy.prepare_update = [](Json& o, const Json&, std::vector<core::Cause>& causes) {
    ValidateQuotaHard(o, causes);
  };
  return b.Done();
}

ResourcePtr LimitRanges() {
  Builder b("io.k8s.api.core.v1.LimitRange", "limitranges", true);
  b.Short({"limits"});
  b.Columns({{"Created At", "date", "", "When the object was created.", 0, "", [](const Json& o) {
                return Json(GetString(o, {"metadata", "creationTimestamp"}));
              }}});
  return b.Done();
}

ResourcePtr Leases() {
  Builder b("io.k8s.api.coordination.v1.Lease", "leases", true);
  b.Columns({{"Holder", "string", "", "The current holder of the lease.", 0, "",
              [](const Json& o) {
                return Json(GetString(o, {"spec", "holderIdentity"}));
              }},
             AgeColumn()});
  return b.Done();
}

void ValidateRules(const Json& o, std::vector<core::Cause>& causes) {
  const Json* rules = Find(o, {"rules"});
  if (!rules || !rules->is_array()) return;
  for (size_t i = 0; i < rules->size(); ++i) {
    const Json& rule = (*rules)[i];
    const Json* verbs = Find(rule, {"verbs"});
    if (!verbs || !verbs->is_array() || verbs->empty()) {
      causes.push_back(machinery::FieldRequired(fmt::format("rules[{}].verbs", i),
                                                "verbs must contain at least one value"));
    }
    const Json* urls = Find(rule, {"nonResourceURLs"});
    const Json* resources = Find(rule, {"resources"});
    bool has_urls = urls && urls->is_array() && !urls->empty();
    bool has_resources = resources && resources->is_array() && !resources->empty();
    if (has_urls && has_resources) {
      causes.push_back(machinery::FieldInvalid(fmt::format("rules[{}].nonResourceURLs", i), *urls,
                                               "rules cannot apply to both regular resources "
                                               "and non-resource URLs"));
    }
    if (!has_urls && !has_resources && o.value("kind", "") == "Role") {
      causes.push_back(
          machinery::FieldRequired(fmt::format("rules[{}].resources", i),
                                   "resource rules must supply at least one resource"));
    }
  }
}

ResourcePtr Roles(bool cluster) {
  Builder b(cluster ? "io.k8s.api.rbac.v1.ClusterRole" : "io.k8s.api.rbac.v1.Role",
            cluster ? "clusterroles" : "roles", !cluster);
  b.r.name_rule = machinery::NameRule::kPathSegment;
  b.Columns({CreatedAtColumn()});
  b.r.strategy.prepare_create = [](Json& o, std::vector<core::Cause>& causes) {
    ValidateRules(o, causes);
  };
  b.r.strategy.prepare_update = [](Json& o, const Json&, std::vector<core::Cause>& causes) {
    ValidateRules(o, causes);
  };
  return b.Done();
}

std::string Subjects(const Json& o, const char* kind) {
  std::vector<std::string> out;
  const Json* subjects = Find(o, {"subjects"});
  if (subjects && subjects->is_array()) {
    for (const auto& s : *subjects) {
      if (GetString(s, {"kind"}) != kind) continue;
      std::string ns = GetString(s, {"namespace"});
      std::string name = GetString(s, {"name"});
      out.push_back(std::string(kind) == "ServiceAccount" ? ns + "/" + name : name);
    }
  }
  return core::Join(out, ", ");
}

void ValidateBinding(const Json& o, std::vector<core::Cause>& causes) {
  if (GetString(o, {"roleRef", "name"}).empty())
    causes.push_back(machinery::FieldRequired("roleRef.name"));
  std::string kind = GetString(o, {"roleRef", "kind"});
  bool cluster = o.value("kind", "") == "ClusterRoleBinding";
  if (kind != "ClusterRole" && (cluster || kind != "Role")) {
    std::vector<std::string> supported = cluster ? std::vector<std::string>{"ClusterRole"}
                                                 : std::vector<std::string>{"Role", "ClusterRole"};
    causes.push_back(machinery::FieldNotSupported("roleRef.kind", kind, supported));
  }
  std::string group = GetString(o, {"roleRef", "apiGroup"});
  if (group != "rbac.authorization.k8s.io") {
    causes.push_back(
        machinery::FieldNotSupported("roleRef.apiGroup", group, {"rbac.authorization.k8s.io"}));
  }
  const Json* subjects = Find(o, {"subjects"});
  if (subjects && subjects->is_array()) {
    for (size_t i = 0; i < subjects->size(); ++i) {
      const Json& s = (*subjects)[i];
      std::string sk = GetString(s, {"kind"});
      if (sk != "User" && sk != "Group" && sk != "ServiceAccount") {
        causes.push_back(machinery::FieldNotSupported(fmt::format("subjects[{}].kind", i), sk,
                                                      {"ServiceAccount", "User", "Group"}));
      }
      if (GetString(s, {"name"}).empty()) {
        causes.push_back(machinery::FieldRequired(fmt::format("subjects[{}].name", i)));
      }
      if (sk == "ServiceAccount" && cluster && GetString(s, {"namespace"}).empty()) {
        causes.push_back(machinery::FieldRequired(fmt::format("subjects[{}].namespace", i)));
      }
    }
  }
}

ResourcePtr Bindings(bool cluster) {
  Builder b(cluster ? "io.k8s.api.rbac.v1.ClusterRoleBinding" : "io.k8s.api.rbac.v1.RoleBinding",
            cluster ? "clusterrolebindings" : "rolebindings", !cluster);
  b.r.name_rule = machinery::NameRule::kPathSegment;
  b.Columns(
      {{"Role", "string", "", "The role the binding grants.", 0, "",
        [](const Json& o) {
          return Json(GetString(o, {"roleRef", "kind"}) + "/" + GetString(o, {"roleRef", "name"}));
        }},
       AgeColumn(),
       {"Users", "string", "", "Users the binding applies to.", 1, "",
        [](const Json& o) { return Json(Subjects(o, "User")); }},
       {"Groups", "string", "", "Groups the binding applies to.", 1, "",
        [](const Json& o) { return Json(Subjects(o, "Group")); }},
       {"ServiceAccounts", "string", "", "Service accounts the binding applies to.", 1, "",
        [](const Json& o) { return Json(Subjects(o, "ServiceAccount")); }}});
  b.r.strategy.prepare_create = [](Json& o, std::vector<core::Cause>& causes) {
    ValidateBinding(o, causes);
  };
  b.r.strategy.prepare_update = [](Json& o, const Json& old, std::vector<core::Cause>& causes) {
    ValidateBinding(o, causes);
    if (o.value("roleRef", Json()) != old.value("roleRef", Json())) {
      causes.push_back(machinery::FieldInvalid("roleRef", o.value("roleRef", Json::object()),
                                               "cannot change roleRef"));
    }
  };
  return b.Done();
}

std::string ServicePorts(const Json& o) {
  std::vector<std::string> out;
  const Json* ports = Find(o, {"spec", "ports"});
  if (ports && ports->is_array()) {
    for (const auto& p : *ports) {
      std::string s = std::to_string(p.value("port", 0));
      if (p.contains("nodePort")) s += ":" + std::to_string(p.value("nodePort", 0));
      s += "/" + p.value("protocol", std::string("TCP"));
      out.push_back(s);
    }
  }
  return out.empty() ? "<none>" : core::Join(out, ",");
}

std::string SelectorString(const Json* sel) {
  if (!sel || !sel->is_object() || sel->empty()) return "<none>";
  std::vector<std::string> parts;
  for (const auto& [k, v] : sel->items()) {
    parts.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : machinery::Dump(v)));
  }
  return core::Join(parts, ",");
}

ResourcePtr Services() {
  Builder b("io.k8s.api.core.v1.Service", "services", true);
  b.Short({"svc"}).Categories({"all"}).Status();
  b.Columns({{"Type", "string", "", "How the service is exposed.", 0, "",
              [](const Json& o) {
                return Json(GetString(o, {"spec", "type"}));
              }},
             {"Cluster-IP", "string", "", "The virtual address inside the cluster.", 0, "",
              [](const Json& o) {
                return Json(OrNone(GetString(o, {"spec", "clusterIP"})));
              }},
             {"External-IP", "string", "", "Addresses reachable from outside.", 0, "",
              [](const Json& o) {
                const Json* ips = Find(o, {"spec", "externalIPs"});
                if (ips && ips->is_array() && !ips->empty()) {
                  std::vector<std::string> v;
                  for (const auto& ip : *ips) v.push_back(ip.get<std::string>());
                  return Json(core::Join(v, ","));
                }
                if (GetString(o, {"spec", "type"}) == "ExternalName") {
                  return Json(GetString(o, {"spec", "externalName"}));
                }
                if (GetString(o, {"spec", "type"}) == "LoadBalancer") return Json("<pending>");
                return Json("<none>");
              }},
             {"Port(s)", "string", "", "The ports the service exposes.", 0, "",
              [](const Json& o) { return Json(ServicePorts(o)); }},
             AgeColumn(),
             {"Selector", "string", "", "Labels of the pods behind the service.", 1, "",
              [](const Json& o) {
                return Json(SelectorString(Find(o, {"spec", "selector"})));
              }}});
  b.r.strategy.prepare_create = [](Json& o, std::vector<core::Cause>& causes) {
    // Nothing routes traffic here, but clients expect an allocated address.
    std::string type = GetString(o, {"spec", "type"});
    if (type.empty()) o["spec"]["type"] = type = "ClusterIP";
    if (type != "ExternalName" && GetString(o, {"spec", "clusterIP"}).empty()) {
      std::string r = core::RandomBytes(2);
      std::string ip = fmt::format("10.96.{}.{}", static_cast<unsigned char>(r[0]),
                                   1 + static_cast<unsigned char>(r[1]) % 254);
      o["spec"]["clusterIP"] = ip;
      o["spec"]["clusterIPs"] = Json::array({ip});
    }
  };
  return b.Done();
}

ResourcePtr Deployments() {
  Builder b("io.k8s.api.apps.v1.Deployment", "deployments", true);
  b.Short({"deploy"}).Categories({"all"}).Status();
  b.r.tracks_generation = true;
  b.Sub({"scale", {"autoscaling", "v1", "Scale"}, {"get", "patch", "update"}});
  auto containers = [](const Json& o, const char* field) {
    std::vector<std::string> v;
    const Json* cs = Find(o, {"spec", "template", "spec", "containers"});
    if (cs && cs->is_array()) {
      for (const auto& c : *cs) v.push_back(GetString(c, {field}));
    }
    return core::Join(v, ",");
  };
  b.Columns({{"Ready", "string", "", "Ready replicas out of desired.", 0, "",
              [](const Json& o) {
                return Json(fmt::format("{}/{}",
                                        o.value("status", Json::object()).value("readyReplicas", 0),
                                        o.value("spec", Json::object()).value("replicas", 1)));
              }},
             {"Up-to-date", "integer", "", "Replicas running the latest template.", 0, "",
              [](const Json& o) {
                return Json(o.value("status", Json::object()).value("updatedReplicas", 0));
              }},
             {"Available", "integer", "", "Replicas available to users.", 0, "",
              [](const Json& o) {
                return Json(o.value("status", Json::object()).value("availableReplicas", 0));
              }},
             AgeColumn(),
             {"Containers", "string", "", "Names of the containers.", 1, "",
              [containers](const Json& o) { return Json(containers(o, "name")); }},
             {"Images", "string", "", "Images of the containers.", 1, "",
              [containers](const Json& o) { return Json(containers(o, "image")); }},
             {"Selector", "string", "", "Labels selecting the deployment's pods.", 1, "",
              [](const Json& o) {
                return Json(SelectorString(Find(o, {"spec", "selector", "matchLabels"})));
              }}});
  auto validate = [](Json& o, std::vector<core::Cause>& causes) {
    const Json* sel = Find(o, {"spec", "selector"});
    if (!sel || !sel->is_object() || sel->empty()) {
      causes.push_back(machinery::FieldRequired("spec.selector"));
    }
    const Json* cs = Find(o, {"spec", "template", "spec", "containers"});
    if (!cs || !cs->is_array() || cs->empty()) {
      causes.push_back(machinery::FieldRequired("spec.template.spec.containers"));
    }
  };
  b.r.strategy.prepare_create = [validate](Json& o, std::vector<core::Cause>& causes) {
    o.erase("status");
    validate(o, causes);
  };
  b.r.strategy.prepare_update = [validate](Json& o, const Json& old,
                                           std::vector<core::Cause>& causes) {
    validate(o, causes);
    if (o.value("spec", Json::object()).value("selector", Json()) !=
        old.value("spec", Json::object()).value("selector", Json())) {
      causes.push_back(machinery::FieldInvalid(
          "spec.selector", o.value("spec", Json::object()).value("selector", Json()),
          "field is immutable"));
    }
  };
  return b.Done();
}

ResourcePtr CustomResourceDefinitions() {
  Builder b("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
            "customresourcedefinitions", false);
  b.Short({"crd", "crds"}).Categories({"api-extensions"}).Status();
  b.r.tracks_generation = true;
  b.r.columns = {NameColumn(), CreatedAtColumn()};
  b.r.strategy.prepare_create = [](Json& o, std::vector<core::Cause>& causes) {
    ValidateCrdSpec(o, nullptr, causes);
    o.erase("status");
    // Instances are removed before the CRD goes away (see CrdController).
    Json& m = machinery::MutableMetadata(o);
    if (!machinery::HasFinalizer(o, kCrdCleanupFinalizer)) {
      if (!m.contains("finalizers") || !m["finalizers"].is_array()) m["finalizers"] = Json::array();
      m["finalizers"].push_back(kCrdCleanupFinalizer);
    }
  };
  b.r.strategy.prepare_update = [](Json& o, const Json& old, std::vector<core::Cause>& causes) {
    ValidateCrdSpec(o, &old, causes);
  };
  return b.Done();
}

// Access reviews: create-only kinds answered from the request's user and the authorizer.
ResourcePtr Review(const char* definition, const char* plural, bool namespaced) {
  Builder b(definition, plural, namespaced);
  b.r.verbs = {"create"};
  b.r.create_only = true;
  b.r.strategic_merge = false;
  return b.Done();
}

}  // namespace

std::vector<ResourcePtr> BuiltinResources() {
  return {Namespaces(),
          ConfigMaps(),
          Secrets(),
          ServiceAccounts(),
          CoreEvents(),
          Services(),
          ResourceQuotas(),
          LimitRanges(),
          Events(),
          Leases(),
          Roles(false),
          Roles(true),
          Bindings(false),
          Bindings(true),
          CustomResourceDefinitions(),
          Deployments(),
          Review("io.k8s.api.authentication.v1.TokenReview", "tokenreviews", false),
          Review("io.k8s.api.authentication.v1.SelfSubjectReview", "selfsubjectreviews", false),
          Review("io.k8s.api.authorization.v1.SubjectAccessReview", "subjectaccessreviews", false),
          Review("io.k8s.api.authorization.v1.SelfSubjectAccessReview", "selfsubjectaccessreviews",
                 false),
          Review("io.k8s.api.authorization.v1.LocalSubjectAccessReview",
                 "localsubjectaccessreviews", true),
          Review("io.k8s.api.authorization.v1.SelfSubjectRulesReview", "selfsubjectrulesreviews",
                 false)};
}

}  // namespace klutch::apiserver
