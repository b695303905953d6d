#include "apiserver/scale.h"

#include <fmt/format.h>

#include "core/strings.h"
#include "machinery/json_patch.h"
#include "machinery/merge_patch.h"

namespace klutch::apiserver {

using machinery::Find;
using machinery::GetString;

namespace {

// ".spec.replicas" -> {"spec", "replicas"}
std::vector<std::string> Steps(std::string_view path) {
  std::vector<std::string> out;
  for (auto s : core::SplitNonEmpty(path, '.')) out.emplace_back(s);
  return out;
}

const Json* At(const Json& obj, const std::string& path) {
  const Json* cur = &obj;
  for (const auto& s : Steps(path)) {
    if (!cur->is_object() || !cur->contains(s)) return nullptr;
    cur = &(*cur)[s];
  }
  return cur;
}

void SetAt(Json& obj, const std::string& path, Json value) {
  Json* cur = &obj;
  for (const auto& s : Steps(path)) {
    if (!cur->is_object()) *cur = Json::object();
    cur = &(*cur)[s];
  }
  *cur = std::move(value);
}

std::string SelectorString(const Json& selector) {
  std::vector<std::string> parts;
  if (const Json* ml = Find(selector, {"matchLabels"}); ml && ml->is_object()) {
    // Objects are unvalidated custom resources: values that are not strings are skipped.
    for (const auto& [k, v] : ml->items()) {
      if (const auto* value = v.get_ptr<const std::string*>()) parts.push_back(k + "=" + *value);
    }
  }
  if (const Json* me = Find(selector, {"matchExpressions"}); me && me->is_array()) {
    for (const auto& e : *me) {
      std::string key = GetString(e, {"key"}), op = GetString(e, {"operator"});
      std::vector<std::string> values = machinery::Strings(Find(e, {"values"}));
      if (op == "In") parts.push_back(key + " in (" + core::Join(values, ",") + ")");
      if (op == "NotIn") parts.push_back(key + " notin (" + core::Join(values, ",") + ")");
      if (op == "Exists") parts.push_back(key);
      if (op == "DoesNotExist") parts.push_back("!" + key);
    }
  }
  return core::Join(parts, ",");
}

Json ToScale(const ResourceInfo& r, const ScalePaths& paths, const Json& obj) {
  Json meta = {{"name", machinery::Name(obj)},
               {"uid", machinery::Uid(obj)},
               {"resourceVersion", machinery::ResourceVersion(obj)},
               {"creationTimestamp", GetString(obj, {"metadata", "creationTimestamp"})}};
  if (r.namespaced) meta["namespace"] = machinery::Namespace(obj);
  const Json* spec = At(obj, paths.spec_replicas);
  const Json* status = At(obj, paths.status_replicas);
  Json scale = {{"kind", "Scale"},
                {"apiVersion", "autoscaling/v1"},
                {"metadata", meta},
                {"spec", {{"replicas", spec && spec->is_number() ? *spec : Json(0)}}},
                {"status", {{"replicas", status && status->is_number() ? *status : Json(0)}}}};
  if (!paths.label_selector.empty()) {
    const Json* sel = At(obj, paths.label_selector);
    if (sel && sel->is_string()) scale["status"]["selector"] = *sel;
    if (sel && sel->is_object()) scale["status"]["selector"] = SelectorString(*sel);
  }
  return scale;
}

}  // namespace

core::Result<ScalePaths> ScalePathsFor(const RestStorage& storage, const ResourceInfo& r) {
  if (!r.custom) return ScalePaths{".spec.replicas", ".status.replicas", ".spec.selector"};
  auto crd_r = storage.registry().Find("apiextensions.k8s.io", "v1", "customresourcedefinitions");
  auto crd = const_cast<RestStorage&>(storage).Get(*crd_r, "", r.crd_name);
  if (!crd.ok()) return crd.status();
  for (const auto& v : crd->value("spec", Json::object()).value("versions", Json::array())) {
    if (v.value("name", "") != r.version) continue;
    const Json* scale = Find(v, {"subresources", "scale"});
    if (!scale) break;
    return ScalePaths{GetString(*scale, {"specReplicasPath"}),
                      GetString(*scale, {"statusReplicasPath"}),
                      GetString(*scale, {"labelSelectorPath"})};
  }
  return core::NotFound("the scale subresource is not declared");
}

core::Result<Json> GetScale(RestStorage& storage, const ResourceInfo& r, std::string_view ns,
                            std::string_view name) {
  KLUTCH_ASSIGN_OR_RETURN(ScalePaths paths, ScalePathsFor(storage, r));
  KLUTCH_ASSIGN_OR_RETURN(Json obj, storage.Get(r, ns, name));
  return ToScale(r, paths, obj);
}

core::Result<Json> UpdateScale(RestStorage& storage, const ResourceInfo& r, std::string_view ns,
                               std::string_view name, const Json* body, const PatchRequest* patch,
                               const WriteOptions& options) {
  KLUTCH_ASSIGN_OR_RETURN(ScalePaths paths, ScalePathsFor(storage, r));
  WriteOptions o = options;
  o.subresource = "";
  Json result;
  auto out = storage.Mutate(
      r, ns, name,
      [&](Json& obj) -> core::Status {
        Json scale = ToScale(r, paths, obj);
        Json wanted;
        if (body) {
          wanted = *body;
          std::string rv = machinery::ResourceVersion(wanted);
          if (!rv.empty() && rv != machinery::ResourceVersion(obj)) {
            return ConflictError(r, name,
                                 "the object has been modified; please apply your changes to the "
                                 "latest version and try again");
          }
        } else if (patch->type == PatchType::kJson) {
          KLUTCH_ASSIGN_OR_RETURN(Json ops, machinery::ParseJson(patch->body));
          KLUTCH_ASSIGN_OR_RETURN(wanted, machinery::ApplyJsonPatch(scale, ops));
        } else {
          KLUTCH_ASSIGN_OR_RETURN(Json p, machinery::ParseJson(patch->body));
          wanted = machinery::ApplyMergePatch(scale, p);
        }
        const Json* replicas = Find(wanted, {"spec", "replicas"});
        if (!replicas || !replicas->is_number_integer() || replicas->get<int64_t>() < 0) {
          return machinery::InvalidObject(
              "autoscaling", "Scale", name,
              {machinery::FieldInvalid("spec.replicas", replicas ? *replicas : Json(nullptr),
                                       "must be greater than or equal to 0")});
        }
        SetAt(obj, paths.spec_replicas, *replicas);
        return core::Status::Ok();
      },
      o);
  if (!out.ok()) return out.status();
  return ToScale(r, paths, out->object);
}

}  // namespace klutch::apiserver
