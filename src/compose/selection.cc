#include "compose/selection.h"

#include <algorithm>

#include "compose/names.h"
#include "compose/xrd.h"
#include "machinery/object.h"

namespace klutch::compose {
namespace {

using machinery::Find;
using machinery::GetString;

bool ForType(const Json& composition, std::string_view api_version, std::string_view kind) {
  return GetString(composition, {"spec", "compositeTypeRef", "apiVersion"}) == api_version &&
         GetString(composition, {"spec", "compositeTypeRef", "kind"}) == kind;
}

bool LabelsMatch(const Json& object, const Json& match_labels) {
  if (!match_labels.is_object()) return true;
  const Json* labels = Find(object, {"metadata", "labels"});
  for (auto it = match_labels.begin(); it != match_labels.end(); ++it) {
    if (!labels || !it->is_string() ||
        GetString(*labels, {it.key()}) != *it->get_ptr<const std::string*>()) {
      return false;
    }
  }
  return true;
}

// What a user can set instead: `; compositions for T: "a", "b"` (sorted), or that none
// exists yet.
std::string CompositionsFor(const std::vector<client::ObjectPtr>& compositions,
                            std::string_view api_version, std::string_view kind,
                            const std::string& type) {
  std::vector<std::string> names;
  for (const auto& c : compositions) {
    if (ForType(*c, api_version, kind)) names.push_back(machinery::Name(*c));
  }
  if (names.empty()) return "; no composition for " + type + " exists yet";
  std::sort(names.begin(), names.end());
  std::string out = "; compositions for " + type + ": ";
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i ? ", \"" : "\"") + names[i] + "\"";
  }
  return out;
}

const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";

}  // namespace

std::string DerivedName(std::string_view prefix, std::string_view seed, size_t max_len) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : seed) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  std::string suffix;
  for (int i = 0; i < 5; ++i) {
    suffix += kAlphabet[h % (sizeof(kAlphabet) - 1)];
    h /= (sizeof(kAlphabet) - 1);
  }
  std::string p(prefix);
  if (p.size() + 6 > max_len) p.resize(max_len - 6);
  while (!p.empty() && (p.back() == '-' || p.back() == '.')) p.pop_back();
  return p + "-" + suffix;
}

std::string ComposedName(std::string_view xr_name, std::string_view resource) {
  std::string seed(xr_name);
  seed += "/";
  seed += resource;
  return DerivedName(xr_name, seed, 63);
}

namespace {

// The update policy, revision and spec `out` (whose composition is `chosen`) follows: the
// newest revision, or under Manual the pinned one; the Composition's own spec when it has no
// revision yet.
core::Status ChooseRevision(Selection& out, const Json& spec, const Json& xrd, const Json& chosen,
                            const std::vector<client::ObjectPtr>& revisions) {
  out.update_policy = GetString(spec, {"compositionUpdatePolicy"});
  if (out.update_policy.empty()) {
    out.update_policy = GetString(xrd, {"spec", "defaultCompositionUpdatePolicy"});
  }
  if (out.update_policy.empty()) out.update_policy = "Automatic";
  const Json* newest = nullptr;
  const Json* pinned = nullptr;
  std::string pinned_name = GetString(spec, {"compositionRevisionRef", "name"});
  for (const auto& r : revisions) {
    const Json* labels = Find(*r, {"metadata", "labels"});
    if (!labels || GetString(*labels, {kLabelCompositionName}) != out.composition) continue;
    if (!newest || RevisionNumber(*r) > RevisionNumber(*newest)) newest = r.get();
    if (machinery::Name(*r) == pinned_name) pinned = r.get();
  }
  if (out.update_policy == "Manual" && !pinned_name.empty() && !pinned) {
    // Crossplane does not fall back either: a pinned revision that is gone is an error.
    return core::NotFound("compositionRevisionRef \"" + pinned_name +
                          "\" is not a revision of composition \"" + out.composition +
                          "\": name an existing CompositionRevision (kubectl get "
                          "compositionrevisions -l crossplane.io/composition-name=" +
                          out.composition + ") or set compositionUpdatePolicy: Automatic");
  }
  const Json* use = out.update_policy == "Manual" && pinned ? pinned : newest;
  if (use) {
    out.revision = machinery::Name(*use);
    const Json* s = Find(*use, {"spec"});
    out.spec = s ? *s : Json::object();
  } else {
    const Json* s = Find(chosen, {"spec"});
    out.spec = s ? *s : Json::object();
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<Selection> SelectComposition(const Json& spec, std::string_view api_version,
                                          std::string_view kind, const Json& xrd,
                                          const std::vector<client::ObjectPtr>& compositions,
                                          const std::vector<client::ObjectPtr>& revisions) {
  std::string type = std::string(kind) + "." + std::string(api_version);
  auto available = [&] { return CompositionsFor(compositions, api_version, kind, type); };
  auto find = [&](const std::string& name) -> const Json* {
    for (const auto& c : compositions) {
      if (machinery::Name(*c) == name) return c.get();
    }
    return nullptr;
  };
  const Json* chosen = nullptr;
  std::string source;
  if (std::string enforced = GetString(xrd, {"spec", "enforcedCompositionRef", "name"});
      !enforced.empty()) {
    chosen = find(enforced);
    source = "the XRD's spec.enforcedCompositionRef";
    if (!chosen) {
      return core::NotFound("composition \"" + enforced + "\" (" + source +
                            ") not found: create it or change the XRD" + available());
    }
  } else if (std::string ref = GetString(spec, {"compositionRef", "name"}); !ref.empty()) {
    chosen = find(ref);
    source = "spec.compositionRef";
    if (!chosen) {
      return core::NotFound("composition \"" + ref +
                            "\" not found: create it or change spec.compositionRef.name" +
                            available());
    }
  } else if (const Json* selector = Find(spec, {"compositionSelector", "matchLabels"})) {
    std::vector<const Json*> matches;
    for (const auto& c : compositions) {
      if (ForType(*c, api_version, kind) && LabelsMatch(*c, *selector)) matches.push_back(c.get());
    }
    std::sort(matches.begin(), matches.end(), [](const Json* a, const Json* b) {
      return machinery::Name(*a) < machinery::Name(*b);
    });
    if (matches.empty()) {
      return core::NotFound("no composition for " + type +
                            " matches spec.compositionSelector.matchLabels " +
                            machinery::Dump(*selector) +
                            ": label a Composition or change the selector" + available());
    }
    chosen = matches.front();
    source = "spec.compositionSelector";
  } else if (std::string def = GetString(xrd, {"spec", "defaultCompositionRef", "name"});
             !def.empty()) {
    chosen = find(def);
    source = "the XRD's spec.defaultCompositionRef";
    if (!chosen) {
      return core::NotFound("composition \"" + def + "\" (" + source +
                            ") not found: create it or set spec.compositionRef.name" + available());
    }
  } else {
    std::vector<const Json*> matches;
    for (const auto& c : compositions) {
      if (ForType(*c, api_version, kind)) matches.push_back(c.get());
    }
    if (matches.size() != 1) {
      return core::NotFound(matches.empty() ? "no composition exists for " + type + ": create one"
                                            : "spec.compositionRef.name is not set and " + type +
                                                  " has no default composition (the XRD's "
                                                  "spec.defaultCompositionRef): choose one" +
                                                  available());
    }
    chosen = matches.front();
    source = "the only composition for the type";
  }
  if (!ForType(*chosen, api_version, kind)) {
    return core::BadRequest("composition \"" + machinery::Name(*chosen) + "\" (" + source +
                            ") composes " +
                            GetString(*chosen, {"spec", "compositeTypeRef", "kind"}) + "." +
                            GetString(*chosen, {"spec", "compositeTypeRef", "apiVersion"}) +
                            ", not " + type + ": choose a composition for " + type + available());
  }
  Selection out;
  out.composition = machinery::Name(*chosen);
  KLUTCH_RETURN_IF_ERROR(ChooseRevision(out, spec, xrd, *chosen, revisions));
  return out;
}

core::Result<std::vector<Json>> StepInputs(const Json& spec,
                                           const std::vector<client::ObjectPtr>& functions) {
  std::vector<Json> out;
  std::string mode = GetString(spec, {"mode"});
  const Json* pipeline = Find(spec, {"pipeline"});
  if (mode == "Pipeline" || (mode.empty() && pipeline)) {
    if (!pipeline || !pipeline->is_array() || pipeline->empty()) {
      return core::BadRequest("spec.pipeline: mode Pipeline needs at least one step");
    }
    size_t i = 0;
    for (const Json& step : *pipeline) {
      std::string fn = GetString(step, {"functionRef", "name"});
      bool builtin = fn == kPatchAndTransform;
      for (const auto& f : functions) {
        if (machinery::Name(*f) == fn &&
            GetString(*f, {"spec", "package"}).find(kPatchAndTransform) != std::string::npos) {
          builtin = true;
        }
      }
      if (!builtin) {
        return core::BadRequest("spec.pipeline[" + std::to_string(i) + "] (step \"" +
                                GetString(step, {"step"}) + "\"): function \"" + fn +
                                "\" is not available: klutch manager runs "
                                "function-patch-and-transform only");
      }
      const Json* input = Find(step, {"input"});
      if (!input) {
        return core::BadRequest("spec.pipeline[" + std::to_string(i) + "].input: Required value");
      }
      std::string input_kind = GetString(*input, {"kind"});
      if (!input_kind.empty() && input_kind != "Resources") {
        return core::BadRequest("spec.pipeline[" + std::to_string(i) + "].input.kind: \"" +
                                input_kind + "\" is not function-patch-and-transform's Resources");
      }
      out.push_back(*input);
      ++i;
    }
    return out;
  }
  if (mode.empty() || mode == "Resources") {
    Json input = Json::object();
    if (const Json* r = Find(spec, {"resources"})) input["resources"] = *r;
    if (const Json* p = Find(spec, {"patchSets"})) input["patchSets"] = *p;
    out.push_back(std::move(input));
    return out;
  }
  return core::BadRequest("spec.mode: Unsupported value: \"" + mode +
                          "\": supported values: \"Pipeline\", \"Resources\"");
}

Json PlannedResourceRefs(const std::vector<Json>& inputs, std::string_view xr_name) {
  Json refs = Json::array();
  for (const Json& input : inputs) {
    const Json* resources = Find(input, {"resources"});
    if (!resources || !resources->is_array()) continue;
    for (const Json& r : *resources) {
      std::string name = GetString(r, {"name"});
      const Json* base = Find(r, {"base"});
      if (name.empty() || !base) continue;
      std::string own_name = GetString(*base, {"metadata", "name"});
      refs.push_back(Json{{"apiVersion", GetString(*base, {"apiVersion"})},
                          {"kind", GetString(*base, {"kind"})},
                          {"name", own_name.empty() ? ComposedName(xr_name, name) : own_name}});
    }
  }
  return refs;
}

int64_t RevisionNumber(const Json& revision) {
  const Json* n = Find(revision, {"spec", "revision"});
  if (!n || !n->is_number_integer()) return 0;
  return n->is_number_unsigned()
             ? static_cast<int64_t>(*n->get_ptr<const Json::number_unsigned_t*>())
             : *n->get_ptr<const Json::number_integer_t*>();
}

}  // namespace klutch::compose
