#include "compose/function.h"

#include <string>
#include <vector>

#include "compose/fieldpath.h"
#include "compose/json_fields.h"
#include "compose/transforms.h"
#include "machinery/gofmt.h"
#include "machinery/object.h"

namespace klutch::compose {
namespace {

const Json kEmpty = Json::object();

core::Result<MergePolicy> ToPolicy(const Json& patch) {
  const Json* policy = Member(patch, "policy");
  if (!policy) return MergePolicy::kReplace;
  std::string to = Str(*policy, "toFieldPath");
  if (to.empty()) {
    // Legacy mergeOptions: keepMapValues keeps existing values, appendSlice appends.
    const Json* m = Member(*policy, "mergeOptions");
    if (!m) return MergePolicy::kReplace;
    const Json* keep = Member(*m, "keepMapValues");
    const Json* append = Member(*m, "appendSlice");
    bool k = keep && keep->is_boolean() && *keep->get_ptr<const Json::boolean_t*>();
    bool a = append && append->is_boolean() && *append->get_ptr<const Json::boolean_t*>();
    if (k) return a ? MergePolicy::kMergeObjectsAppendArrays : MergePolicy::kMergeObjects;
    return a ? MergePolicy::kForceMergeObjectsAppendArrays : MergePolicy::kForceMergeObjects;
  }
  if (to == "Replace") return MergePolicy::kReplace;
  if (to == "MergeObjects") return MergePolicy::kMergeObjects;
  if (to == "MergeObjectsAppendArrays") return MergePolicy::kMergeObjectsAppendArrays;
  if (to == "ForceMergeObjects") return MergePolicy::kForceMergeObjects;
  if (to == "ForceMergeObjectsAppendArrays") return MergePolicy::kForceMergeObjectsAppendArrays;
  return core::BadRequest("unknown policy.toFieldPath \"" + to +
                          "\" (Replace, MergeObjects, MergeObjectsAppendArrays, "
                          "ForceMergeObjects or ForceMergeObjectsAppendArrays)");
}

bool Required(const Json& patch) {
  const Json* policy = Member(patch, "policy");
  return policy && Str(*policy, "fromFieldPath") == "Required";
}

enum class Direction { kFromComposite, kToComposite, kFromEnvironment, kToEnvironment };

struct PatchKind {
  Direction direction;
  bool combine;
};

core::Result<PatchKind> KindOf(const std::string& type) {
  if (type.empty() || type == "FromCompositeFieldPath") {
    return PatchKind{Direction::kFromComposite, false};
  }
  if (type == "ToCompositeFieldPath") return PatchKind{Direction::kToComposite, false};
  if (type == "CombineFromComposite") return PatchKind{Direction::kFromComposite, true};
  if (type == "CombineToComposite") return PatchKind{Direction::kToComposite, true};
  if (type == "FromEnvironmentFieldPath") return PatchKind{Direction::kFromEnvironment, false};
  if (type == "ToEnvironmentFieldPath") return PatchKind{Direction::kToEnvironment, false};
  if (type == "CombineFromEnvironment") return PatchKind{Direction::kFromEnvironment, true};
  if (type == "CombineToEnvironment") return PatchKind{Direction::kToEnvironment, true};
  return core::BadRequest("unknown patch type \"" + type +
                          "\" (FromCompositeFieldPath, ToCompositeFieldPath, "
                          "CombineFromComposite, CombineToComposite, PatchSet, or an "
                          "Environment variant)");
}

// Applies one (non-PatchSet) patch from `from` into `to`. A missing source skips the patch
// unless it is Required.
core::Status ApplyPatch(const Json& patch, const Json& from, Json& to) {
  auto kind = KindOf(Str(patch, "type"));
  if (!kind.ok()) return kind.status();
  auto policy = ToPolicy(patch);
  if (!policy.ok()) return policy.status();
  Json value;
  std::string to_text = Str(patch, "toFieldPath");
  if (kind->combine) {
    const Json* combine = Member(patch, "combine");
    if (!combine) return core::BadRequest("combine is required for a Combine patch");
    const Json* variables = Member(*combine, "variables");
    if (!variables || !variables->is_array() || variables->empty()) {
      return core::BadRequest("combine.variables must list at least one fromFieldPath");
    }
    std::vector<Json> values;
    for (const Json& v : *variables) {
      std::string path_text = Str(v, "fromFieldPath");
      auto path = ParseFieldPath(path_text);
      if (!path.ok()) return path.status();
      const Json* got = GetPath(from, *path);
      if (!got) {
        if (Required(patch)) {
          return core::BadRequest("required field " + path_text + " is not set");
        }
        return core::Status::Ok();  // any missing variable skips the patch
      }
      values.push_back(*got);
    }
    std::string strategy = Str(*combine, "strategy");
    if (strategy != "string") {
      return core::BadRequest("unknown combine.strategy \"" + strategy + "\" (string)");
    }
    const Json* s = Member(*combine, "string");
    std::string fmt = s ? Str(*s, "fmt") : "";
    if (fmt.empty()) return core::BadRequest("combine.string.fmt is required");
    value = machinery::GoSprintf(fmt, values);
  } else {
    std::string from_text = Str(patch, "fromFieldPath");
    if (from_text.empty()) return core::BadRequest("fromFieldPath is required");
    auto path = ParseFieldPath(from_text);
    if (!path.ok()) return path.status();
    const Json* got = GetPath(from, *path);
    if (!got) {
      if (Required(patch)) return core::BadRequest("required field " + from_text + " is not set");
      return core::Status::Ok();
    }
    value = *got;
    if (to_text.empty()) to_text = from_text;
  }
  if (to_text.empty()) return core::BadRequest("toFieldPath is required");
  auto transformed = ApplyTransforms(patch.contains("transforms") ? patch["transforms"] : Json(),
                                     std::move(value));
  if (!transformed.ok()) return transformed.status();
  auto to_path = ParseFieldPath(to_text);
  if (!to_path.ok()) return to_path.status();
  return SetPath(to, *to_path, *std::move(transformed), *policy);
}

std::string Describe(const Json& patch) {
  std::string type = Str(patch, "type");
  if (type.empty()) type = "FromCompositeFieldPath";
  std::string from = Str(patch, "fromFieldPath");
  std::string to = Str(patch, "toFieldPath");
  if (type == "PatchSet") return "PatchSet " + Str(patch, "patchSetName");
  if (from.empty() && to.empty()) return type;
  return type + " " + (from.empty() ? "(combine)" : from) + " -> " + (to.empty() ? from : to);
}

// Expands PatchSet references into their patches (one level, as Crossplane allows).
core::Result<std::vector<Json>> Expand(const Json& patches, const Json& patch_sets) {
  std::vector<Json> out;
  if (!patches.is_array()) return out;
  size_t i = 0;
  for (const Json& p : patches) {
    if (Str(p, "type") == "PatchSet") {
      std::string name = Str(p, "patchSetName");
      const Json* found = nullptr;
      if (patch_sets.is_array()) {
        for (const Json& set : patch_sets) {
          if (Str(set, "name") == name) found = &set;
        }
      }
      if (!found) {
        return core::BadRequest("patches[" + std::to_string(i) + "]: PatchSet \"" + name +
                                "\" is not defined in patchSets");
      }
      const Json* inner = Member(*found, "patches");
      if (inner && inner->is_array()) {
        for (const Json& q : *inner) {
          if (Str(q, "type") == "PatchSet") {
            return core::BadRequest("PatchSet \"" + name +
                                    "\" must not reference another PatchSet");
          }
          out.push_back(q);
        }
      }
    } else {
      out.push_back(p);
    }
    ++i;
  }
  return out;
}

std::string ConnectionValue(const Json& v) {
  if (v.is_string()) return *v.get_ptr<const std::string*>();
  return machinery::Dump(v);
}

}  // namespace

std::string CheckReadiness(const Json& checks, const Json& object) {
  if (!checks.is_array() || checks.empty()) {
    Json ready{{"type", "MatchCondition"},
               {"matchCondition", Json{{"type", "Ready"}, {"status", "True"}}}};
    return CheckReadiness(Json::array({ready}), object);
  }
  for (const Json& c : checks) {
    std::string type = Str(c, "type");
    if (type == "None") continue;
    if (type == "MatchCondition") {
      const Json* m = Member(c, "matchCondition");
      std::string want_type = m ? Str(*m, "type") : "Ready";
      std::string want_status = m ? Str(*m, "status") : "True";
      if (want_type.empty()) want_type = "Ready";
      if (want_status.empty()) want_status = "True";
      std::string have;
      const Json* conditions = machinery::Find(object, {"status", "conditions"});
      if (conditions && conditions->is_array()) {
        for (const Json& cond : *conditions) {
          if (Str(cond, "type") == want_type) have = Str(cond, "status");
        }
      }
      // Crossplane reports an absent condition as status Unknown.
      if ((have.empty() ? "Unknown" : have) != want_status) {
        return "condition " + want_type + " is " + (have.empty() ? "not set" : have) + ", want " +
               want_status;
      }
      continue;
    }
    std::string path_text = Str(c, "fieldPath");
    auto path = ParseFieldPath(path_text);
    if (!path.ok()) return "readiness check " + type + ": " + path.status().message();
    const Json* v = GetPath(object, *path);
    if (type == "NonEmpty") {
      // As function-patch-and-transform checks it: the field exists (whatever its value).
      if (!v) return path_text + " is not set";
    } else if (type == "MatchString") {
      const Json* want = Member(c, "matchString");
      if (!v || !want || *v != *want) {
        return path_text + " is " + (v ? machinery::GoSprint(*v) : "not set") + ", want " +
               (want ? machinery::GoSprint(*want) : "");
      }
    } else if (type == "MatchInteger") {
      const Json* want = Member(c, "matchInteger");
      if (!v || !want || !v->is_number() || *v != *want) {
        return path_text + " is " + (v ? machinery::GoSprint(*v) : "not set") + ", want " +
               (want ? machinery::GoSprint(*want) : "");
      }
    } else if (type == "MatchTrue" || type == "MatchFalse") {
      bool want = type == "MatchTrue";
      if (!v || !v->is_boolean() || *v->get_ptr<const Json::boolean_t*>() != want) {
        return path_text + " is not " + (want ? "true" : "false");
      }
    } else {
      return "unknown readiness check type \"" + type + "\"";
    }
  }
  return "";
}

core::Result<StepResult> RunPatchAndTransform(
    const Json& input, const Json& composite,
    const std::map<std::string, ObservedResource>& observed) {
  StepResult result;
  result.composite = composite;
  const Json* resources = Member(input, "resources");
  const Json& patch_sets = input.contains("patchSets") ? input["patchSets"] : kEmpty;
  if (!resources) return result;
  if (!resources->is_array()) return core::BadRequest("resources must be a list");
  Json environment = Json::object();
  size_t index = 0;
  for (const Json& r : *resources) {
    std::string name = Str(r, "name");
    const std::string where =
        "resources[" + std::to_string(index) + "]" + (name.empty() ? "" : " \"" + name + "\"");
    ++index;
    if (name.empty()) return core::BadRequest(where + ": name is required");
    const Json* base = Member(r, "base");
    if (!base || !base->is_object()) return core::BadRequest(where + ": base is required");
    auto patches = Expand(r.contains("patches") ? r["patches"] : Json(), patch_sets);
    if (!patches.ok()) return core::BadRequest(where + ": " + patches.status().message());

    DesiredResource desired{.name = name, .object = *base};
    auto seen = observed.find(name);
    const ObservedResource* obs = seen == observed.end() ? nullptr : &seen->second;
    size_t p = 0;
    for (const Json& patch : *patches) {
      auto kind = KindOf(Str(patch, "type"));
      core::Status s = kind.status();
      if (s.ok()) {
        switch (kind->direction) {
          case Direction::kFromComposite:
            s = ApplyPatch(patch, composite, desired.object);
            break;
          case Direction::kFromEnvironment:
            s = ApplyPatch(patch, environment, desired.object);
            break;
          case Direction::kToComposite:
            if (obs) s = ApplyPatch(patch, obs->object, result.composite);
            break;
          case Direction::kToEnvironment:
            if (obs) s = ApplyPatch(patch, obs->object, environment);
            break;
        }
      }
      if (!s.ok()) {
        return core::BadRequest(where + " patches[" + std::to_string(p) + "] (" + Describe(patch) +
                                "): " + s.message());
      }
      ++p;
    }
    if (!desired.object.contains("apiVersion") || !desired.object.contains("kind")) {
      return core::BadRequest(where + ": base needs apiVersion and kind");
    }
    if (obs) {
      desired.unready_reason = CheckReadiness(
          r.contains("readinessChecks") ? r["readinessChecks"] : Json(), obs->object);
      desired.ready = desired.unready_reason.empty();
    } else {
      desired.unready_reason = "not created yet";
    }
    // Connection details from the observed resource.
    const Json* details = Member(r, "connectionDetails");
    if (details && details->is_array() && obs) {
      for (const Json& d : *details) {
        std::string type = Str(d, "type");
        std::string key = Str(d, "name");
        if (type.empty()) {
          type = d.contains("value")           ? "FromValue"
                 : d.contains("fromFieldPath") ? "FromFieldPath"
                                               : "FromConnectionSecretKey";
        }
        if (type == "FromValue") {
          result.connection_details[key] = Str(d, "value");
        } else if (type == "FromFieldPath") {
          auto path = ParseFieldPath(Str(d, "fromFieldPath"));
          if (!path.ok()) {
            return core::BadRequest(where + " connectionDetails \"" + key +
                                    "\": " + path.status().message());
          }
          if (key.empty()) key = Str(d, "fromFieldPath");
          if (const Json* v = GetPath(obs->object, *path)) {
            result.connection_details[key] = ConnectionValue(*v);
          }
        } else if (type == "FromConnectionSecretKey") {
          std::string from = Str(d, "fromConnectionSecretKey");
          if (key.empty()) key = from;
          auto it = obs->connection.find(from);
          if (it != obs->connection.end()) result.connection_details[key] = it->second;
        } else {
          return core::BadRequest(where + " connectionDetails \"" + key + "\": unknown type \"" +
                                  type + "\"");
        }
      }
    }
    result.resources.push_back(std::move(desired));
  }
  return result;
}

}  // namespace klutch::compose
