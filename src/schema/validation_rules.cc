#include "schema/validation_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "cel/cel.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "schema/cel_value.h"
#include "schema/field_error.h"

namespace klutch::schema {

namespace {

struct Rule {
  std::string text;
  std::string message;
  std::string message_expression_text;
  std::string reason;      // FieldValueInvalid (default), Forbidden, Required, Duplicate
  std::string field_path;  // rendered suffix ("spec.x" style segments) or empty
  bool transition = false;
  bool optional_old_self = false;
  std::unique_ptr<cel::Program> program;
  std::unique_ptr<cel::Program> message_expression;
  // What the rule reads of self (field chains) and the constants it compares them with:
  // how a failure names the missing field or the values the rule accepts.
  std::vector<cel::FieldChain> self_chains;
  std::vector<cel::ComparedConstant> compared;
};

std::string RenderRule(const Json& rule) {
  auto str = [&](const char* k) { return GoQuote(machinery::GetString(rule, {k})); };
  const Json* reason = machinery::Find(rule, {"reason"});
  const Json* opt = machinery::Find(rule, {"optionalOldSelf"});
  std::string reason_s =
      reason && reason->is_string()
          ? "(*apiextensions.FieldValueErrorReason)(" + GoQuote(reason->get<std::string>()) + ")"
          : "(*apiextensions.FieldValueErrorReason)(nil)";
  std::string opt_s = opt && opt->is_boolean()
                          ? std::string("(*bool)(") + (opt->get<bool>() ? "true" : "false") + ")"
                          : "(*bool)(nil)";
  return fmt::format(
      "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, "
      "FieldPath:{}, OptionalOldSelf:{}}}",
      str("rule"), str("message"), str("messageExpression"), reason_s, str("fieldPath"), opt_s);
}

// The rule is printed as Go's %#v prints the apiextensions.ValidationRule struct (unquoted).
core::Cause InvalidRule(std::string field, const Json& rule, const std::string& detail) {
  return {"FieldValueInvalid", "Invalid value: " + RenderRule(rule) + ": " + detail,
          std::move(field)};
}

// Parses a rule's fieldPath (".a.b", ".a['x.y']", "['k']") into path segments; false when
// malformed.
bool ParseFieldPath(std::string_view fp, std::vector<std::string>& out) {
  size_t i = 0;
  if (fp.empty()) return false;
  while (i < fp.size()) {
    if (fp[i] == '.') {
      ++i;
      size_t start = i;
      while (i < fp.size() && fp[i] != '.' && fp[i] != '[') ++i;
      if (i == start) return false;
      out.emplace_back(fp.substr(start, i - start));
    } else if (fp[i] == '[') {
      if (i + 1 >= fp.size() || (fp[i + 1] != '\'' && fp[i + 1] != '"')) return false;
      char q = fp[i + 1];
      size_t end = fp.find(q, i + 2);
      if (end == std::string_view::npos || end + 1 >= fp.size() || fp[end + 1] != ']') {
        return false;
      }
      out.emplace_back(fp.substr(i + 2, end - i - 2));
      i = end + 2;
    } else {
      return false;
    }
  }
  return true;
}

std::string JoinPath(const std::string& base, std::string_view child) {
  return base.empty() ? std::string(child) : base + "." + std::string(child);
}

}  // namespace

struct ValidationRules::Node {
  const Json* schema = nullptr;
  std::string type;
  std::vector<Rule> rules;
  std::vector<std::pair<std::string, std::unique_ptr<Node>>> properties;
  std::unique_ptr<Node> additional;
  std::unique_ptr<Node> items;
  std::string list_type;
  std::vector<std::string> map_keys;
};

namespace {

using Node = ValidationRules::Node;

class Compiler {
 public:
  explicit Compiler(std::vector<core::Cause>& errors) : errors_(errors) {}

  // `uncorrelatable` is the path of the nearest enclosing list whose items cannot be matched
  // with old items (any list but list-type=map), empty when there is none.
  std::unique_ptr<Node> Build(const Json& schema, const std::string& path, size_t& count,
                              bool root = false, const std::string& uncorrelatable = "") {
    if (!schema.is_object()) return nullptr;
    auto node = std::make_unique<Node>();
    node->schema = &schema;
    node->type = machinery::GetString(schema, {"type"});
    node->list_type = machinery::GetString(schema, {"x-kubernetes-list-type"});
    if (const Json* keys = machinery::Find(schema, {"x-kubernetes-list-map-keys"});
        keys && keys->is_array()) {
      for (const auto& k : *keys) {
        if (k.is_string()) node->map_keys.push_back(k.get<std::string>());
      }
    }
    bool any = false;
    if (const Json* rules = machinery::Find(schema, {"x-kubernetes-validations"})) {
      std::string base = path + ".x-kubernetes-validations";
      if (!rules->is_array()) {
        errors_.push_back(machinery::FieldInvalid(base, *rules, "must be a list"));
      } else {
        for (size_t i = 0; i < rules->size(); ++i) {
          CompileRule((*rules)[i], fmt::format("{}[{}]", base, i), *node, root, uncorrelatable);
        }
      }
      any = !node->rules.empty();
      count += node->rules.size();
    }
    if (const Json* props = machinery::Find(schema, {"properties"}); props && props->is_object()) {
      for (auto it = props->begin(); it != props->end(); ++it) {
        auto child = Build(it.value(), fmt::format("{}.properties[{}]", path, it.key()), count,
                           false, uncorrelatable);
        if (child) {
          node->properties.emplace_back(it.key(), std::move(child));
          any = true;
        }
      }
    }
    if (const Json* ap = machinery::Find(schema, {"additionalProperties"}); ap && ap->is_object()) {
      node->additional = Build(*ap, path + ".additionalProperties", count, false, uncorrelatable);
      any = any || node->additional != nullptr;
    }
    if (const Json* items = machinery::Find(schema, {"items"}); items && items->is_object()) {
      node->items =
          Build(*items, path + ".items", count, false,
                !uncorrelatable.empty() || node->list_type == "map" ? uncorrelatable : path);
      any = any || node->items != nullptr;
    }
    if (!any) return nullptr;
    return node;
  }

 private:
  // What kube-apiserver's type check of a rule against the schema reports for field
  // selections: fields an object schema does not declare, and selection on scalars.
  // Empty when the chain is fine (or leaves the typed part of the schema).
  static std::string CheckChain(const Json* at, bool root, const cel::FieldChain& chain,
                                int32_t& offset) {
    static const Json kString = {{"type", "string"}};
    static const Json kRootMeta = {{"type", "object"},
                                   {"properties", {{"name", kString}, {"generateName", kString}}}};
    bool embedded = root;
    for (size_t i = 0; i < chain.fields.size(); ++i) {
      if (at == nullptr || !at->is_object()) return "";
      const Json* ios = machinery::Find(*at, {"x-kubernetes-int-or-string"});
      if (ios && ios->is_boolean() && ios->get<bool>()) return "";
      std::string type = machinery::GetString(*at, {"type"});
      offset = chain.offsets[i];
      if (type == "string" || type == "integer" || type == "number" || type == "boolean") {
        static const std::map<std::string, std::string> kCelType = {
            {"string", "string"}, {"integer", "int"}, {"number", "double"}, {"boolean", "bool"}};
        return "type '" + kCelType.at(type) + "' does not support field selection";
      }
      if (type != "object") return "";
      const Json* emb = machinery::Find(*at, {"x-kubernetes-embedded-resource"});
      embedded = embedded || (emb && emb->is_boolean() && emb->get<bool>());
      std::string name = UnescapePropertyName(chain.fields[i]);
      const Json* props = machinery::Find(*at, {"properties"});
      const Json* ap = machinery::Find(*at, {"additionalProperties"});
      const Json* next = nullptr;
      if (root && i == 0 && name == "metadata") {
        next = &kRootMeta;
      } else if (props && props->is_object() && props->contains(name)) {
        next = &(*props)[name];
      } else if (ap && ap->is_object()) {
        next = ap;
      } else if (embedded && (name == "apiVersion" || name == "kind" || name == "metadata")) {
        next = name == "metadata" ? nullptr : &kString;
      } else {
        const Json* pu = machinery::Find(*at, {"x-kubernetes-preserve-unknown-fields"});
        if ((pu && pu->is_boolean() && pu->get<bool>()) || (ap && ap->is_boolean())) return "";
        return "undefined field '" + chain.fields[i] + "'";
      }
      at = next;
      root = false;
      embedded = false;
    }
    return "";
  }

  void CompileRule(const Json& rule, const std::string& path, Node& node, bool root,
                   const std::string& uncorrelatable) {
    if (!rule.is_object()) {
      errors_.push_back(machinery::FieldInvalid(path, rule, "must be an object"));
      return;
    }
    Rule r;
    r.text = machinery::GetString(rule, {"rule"});
    r.message = machinery::GetString(rule, {"message"});
    r.message_expression_text = machinery::GetString(rule, {"messageExpression"});
    r.reason = machinery::GetString(rule, {"reason"});
    const Json* opt = machinery::Find(rule, {"optionalOldSelf"});
    r.optional_old_self = opt && opt->is_boolean() && opt->get<bool>();
    bool ok = true;
    if (r.text.find_first_not_of(" \t\r\n") == std::string::npos) {
      errors_.push_back(machinery::FieldRequired(path + ".rule", "rule is not specified"));
      return;
    }
    if (machinery::Find(rule, {"message"}) &&
        r.message.find_first_not_of(" \t\r\n") == std::string::npos) {
      errors_.push_back(
          machinery::FieldRequired(path + ".message", "message must be non-empty if specified"));
      ok = false;
    }
    if (r.message.find('\n') != std::string::npos) {
      errors_.push_back(machinery::FieldInvalid(path + ".message", r.message,
                                                "message must not contain line breaks"));
      ok = false;
    }
    if (const Json* reason = machinery::Find(rule, {"reason"})) {
      static const std::vector<std::string> kReasons = {
          "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"};
      if (!reason->is_string() ||
          std::find(kReasons.begin(), kReasons.end(), r.reason) == kReasons.end()) {
        errors_.push_back(machinery::FieldNotSupported(path + ".reason", *reason, kReasons));
        ok = false;
      }
    }
    if (const Json* fp = machinery::Find(rule, {"fieldPath"}); fp && fp->is_string()) {
      std::vector<std::string> segments;
      if (!ParseFieldPath(fp->get<std::string>(), segments)) {
        errors_.push_back(
            machinery::FieldInvalid(path + ".fieldPath", *fp, "fieldPath must be a valid path"));
        ok = false;
      } else {
        // The path must lead to a declared property.
        const Json* at = node.schema;
        for (const auto& seg : segments) {
          const Json* props = at ? machinery::Find(*at, {"properties"}) : nullptr;
          const Json* next =
              props && props->is_object() && props->contains(seg) ? &(*props)[seg] : nullptr;
          if (!next && at) {
            const Json* ap = machinery::Find(*at, {"additionalProperties"});
            if (ap && ap->is_object()) next = ap;
          }
          if (!next) {
            errors_.push_back(machinery::FieldInvalid(
                path + ".fieldPath", *fp,
                fmt::format("fieldPath must be a valid path: does not refer to a valid field "
                            "(`{}`)",
                            seg)));
            ok = false;
            break;
          }
          at = next;
        }
        for (const auto& seg : segments) r.field_path = JoinPath(r.field_path, seg);
      }
    }
    cel::CompileOptions options;
    options.variables = {"self", "oldSelf"};
    auto program = cel::Env::Kubernetes()->Compile(r.text, options);
    if (!program.ok()) {
      errors_.push_back(
          InvalidRule(path + ".rule", rule, "compilation failed: " + program.status().message()));
      return;
    }
    r.program = std::move(*program);
    bool not_bool = r.program->ObviouslyNotBool();
    if (auto whole = r.program->WholeChain(); whole && !not_bool) {
      // A rule that is just a field: its schema type must be boolean.
      const Json* at = node.schema;
      for (size_t i = 0; at && i < whole->fields.size(); ++i) {
        const Json* props = machinery::Find(*at, {"properties"});
        std::string name = UnescapePropertyName(whole->fields[i]);
        at = props && props->is_object() && props->contains(name) ? &(*props)[name] : nullptr;
      }
      std::string type = at ? machinery::GetString(*at, {"type"}) : "";
      not_bool = !type.empty() && type != "boolean";
    }
    if (not_bool) {
      errors_.push_back(
          InvalidRule(path + ".rule", rule, "cel expression must evaluate to a bool"));
      return;
    }
    for (const auto& chain : r.program->FieldChains()) {
      if (chain.variable != "self" && chain.variable != "oldSelf") continue;
      int32_t offset = 0;
      std::string problem = CheckChain(node.schema, root, chain, offset);
      if (!problem.empty()) {
        errors_.push_back(
            InvalidRule(path + ".rule", rule,
                        "compilation failed: " + cel::FormatError(r.text, offset, problem)));
        return;
      }
    }
    r.transition = r.program->References("oldSelf");
    for (auto& chain : r.program->FieldChains()) {
      if (chain.variable == "self") r.self_chains.push_back(std::move(chain));
    }
    for (auto& c : r.program->ComparedConstants()) {
      cel::Kind k = c.constant.kind();
      if (c.chain.variable == "self" &&
          (k == cel::Kind::kString || k == cel::Kind::kInt || k == cel::Kind::kUint ||
           k == cel::Kind::kDouble || k == cel::Kind::kBool)) {
        r.compared.push_back(std::move(c));
      }
    }
    if (r.transition && !uncorrelatable.empty()) {
      errors_.push_back(machinery::FieldInvalid(
          path + ".rule", r.text,
          "oldSelf cannot be used on the uncorrelatable portion of the schema within " +
              uncorrelatable));
      return;
    }
    if (r.optional_old_self && !r.transition) {
      errors_.push_back(machinery::FieldInvalid(path + ".optionalOldSelf", true,
                                                "may not be set if oldSelf is not used in rule"));
      ok = false;
    }
    if (!r.message_expression_text.empty()) {
      auto mp = cel::Env::Kubernetes()->Compile(r.message_expression_text, options);
      if (!mp.ok()) {
        errors_.push_back(machinery::FieldInvalid(
            path + ".messageExpression", r.message_expression_text,
            "messageExpression compilation failed: " + mp.status().message()));
        ok = false;
      } else {
        r.message_expression = std::move(*mp);
      }
    }
    if (ok) node.rules.push_back(std::move(r));
  }

  std::vector<core::Cause>& errors_;
};

std::string RuleErrorString(const Rule& r) {
  auto trim = [](const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n");
    size_t e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  if (!r.message.empty()) return trim(r.message);
  return trim(r.text);
}

// The JSON form of a constant a rule compares a field with (string, number or bool).
Json ConstantJson(const cel::Value& v) {
  switch (v.kind()) {
    case cel::Kind::kString:
      return v.string_value();
    case cel::Kind::kInt:
      return v.int_value();
    case cel::Kind::kUint:
      return v.uint_value();
    case cel::Kind::kDouble:
      return v.double_value();
    case cel::Kind::kBool:
      return v.bool_value();
    default:
      return nullptr;
  }
}

std::string RenderValues(const std::vector<Json>& values) {
  std::string out;
  for (const Json& v : values) {
    if (!out.empty()) out += ", ";
    out += v.is_string() ? GoQuote(*v.get_ptr<const std::string*>()) : machinery::Dump(v);
  }
  return out;
}

// The property path a chain of CEL field names stands for, under `path`.
std::string FieldPathOf(const std::string& path, const std::vector<std::string>& fields) {
  std::string out = path;
  for (const auto& f : fields) out = JoinPath(out, UnescapePropertyName(f));
  return out;
}

// The value at `fields` (CEL names) under `value`, nullptr when absent.
const Json* FieldAt(const Json& value, const std::vector<std::string>& fields) {
  const Json* at = &value;
  for (const auto& f : fields) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(UnescapePropertyName(f));
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

// `value` with the field at `fields` set to `leaf` (absent objects on the way created);
// false when a value that is not an object is in the way.
bool SetField(Json& value, const std::vector<std::string>& fields, const Json& leaf) {
  Json* at = &value;
  for (const auto& f : fields) {
    if (!at->is_object()) return false;
    at = &(*at)[UnescapePropertyName(f)];
    if (at->is_null()) *at = Json::object();
  }
  *at = leaf;
  return true;
}

bool SameFields(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  return a == b;
}

bool StartsWith(const std::vector<std::string>& fields, const std::vector<std::string>& prefix) {
  return fields.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), fields.begin());
}

// Rules on one object that failed because they read a field the object does not have
// (`no such key`): reported as one Required cause for that field.
struct MissingField {
  std::vector<std::string> fields;  // CEL names from self, up to the absent one
  size_t cause_index = 0;
  std::vector<const Rule*> rules;
};

class Walker {
 public:
  Walker(std::vector<core::Cause>& causes, std::vector<std::string>* warnings)
      : causes_(causes), warnings_(warnings) {}

  // `correlatable`: whether `old` can exist for this node (false below items of lists other
  // than list-type=map); `ancestor_unchanged`: for uncorrelatable nodes, whether the nearest
  // correlatable ancestor equals its old value (kube-apiserver ratchets on that).
  void Walk(const Node& n, const Json& value, const Json* old, const std::string& path, bool root,
            bool correlatable = true, bool ancestor_unchanged = false) {
    // A null value has nothing to check (kube-apiserver returns early too).
    if (exhausted_ || value.is_null()) return;
    // Whether the value equals its old value: a deep comparison, so done only where a rule
    // or an uncorrelatable child needs it.
    std::optional<bool> equal;
    auto unchanged = [&] {
      if (!correlatable) return ancestor_unchanged;
      if (!equal) equal = old != nullptr && *old == value;
      return *equal;
    };
    if (!n.rules.empty()) EvaluateRules(n, value, old, path, root, unchanged());
    if (exhausted_) return;
    if (value.is_object()) {
      for (const auto& [name, child] : n.properties) {
        auto it = value.find(name);
        if (it == value.end()) continue;
        const Json* old_child = nullptr;
        if (old && old->is_object()) {
          auto oi = old->find(name);
          if (oi != old->end()) old_child = &*oi;
        }
        Walk(*child, *it, old_child, JoinPath(path, name), false, correlatable,
             !correlatable && ancestor_unchanged);
      }
      if (n.additional) {
        for (auto it = value.begin(); it != value.end(); ++it) {
          const Json* old_child = nullptr;
          if (old && old->is_object()) {
            auto oi = old->find(it.key());
            if (oi != old->end()) old_child = &*oi;
          }
          Walk(*n.additional, it.value(), old_child, path + "[" + it.key() + "]", false,
               correlatable, !correlatable && ancestor_unchanged);
        }
      }
    }
    if (value.is_array() && n.items) {
      const bool keyed = correlatable && n.list_type == "map";
      const bool list_unchanged = !keyed && unchanged();
      for (size_t i = 0; i < value.size(); ++i) {
        const Json& item = value[i];
        Walk(*n.items, item, keyed ? CorrelateItem(n, item, old) : nullptr,
             fmt::format("{}[{}]", path, i), false, keyed, list_unchanged);
      }
    }
  }

 private:
  // Old list items are correlated only for list-type=map, by their keys (kube-apiserver's
  // MakeMapList); items of other lists have no old value.
  static const Json* CorrelateItem(const Node& n, const Json& item, const Json* old) {
    if (!old || !old->is_array()) return nullptr;
    if (n.list_type != "map" || n.map_keys.empty() || !item.is_object()) return nullptr;
    for (const auto& o : *old) {
      if (!o.is_object()) continue;
      bool same = true;
      for (const auto& k : n.map_keys) {
        auto a = item.find(k);
        auto b = o.find(k);
        bool a_has = a != item.end(), b_has = b != o.end();
        if (a_has != b_has || (a_has && *a != *b)) {
          same = false;
          break;
        }
      }
      if (same) return &o;
    }
    return nullptr;
  }

  // Ratcheting: a rule (other than a transition rule) failing on a value that did not change
  // is a warning, not an error, as kube-apiserver reports it.
  void Fail(const Node& n, const Rule& r, const std::string& path, const std::string& message,
            bool unchanged) {
    size_t before = causes_.size();
    AddCause(n, r, path, message);
    if (unchanged && !r.transition && causes_.size() > before) {
      if (warnings_ != nullptr) {
        warnings_->push_back(causes_.back().field + ": " + causes_.back().message);
      }
      causes_.pop_back();
    }
  }

  void AddCause(const Node& n, const Rule& r, const std::string& path, const std::string& message) {
    std::string field = path;
    if (!r.field_path.empty()) field = JoinPath(path, r.field_path);
    if (field.empty()) field = "<nil>";
    if (r.reason == "FieldValueForbidden") {
      causes_.push_back(machinery::FieldForbidden(field, message));
    } else if (r.reason == "FieldValueRequired") {
      causes_.push_back(machinery::FieldRequired(field, message));
    } else if (r.reason == "FieldValueDuplicate") {
      causes_.push_back({"FieldValueDuplicate", "Duplicate value: " + GoQuote(message), field});
    } else {
      causes_.push_back(machinery::FieldInvalid(field, Json(n.type), message));
    }
  }

  void EvaluateRules(const Node& n, const Json& value, const Json* old, const std::string& path,
                     bool root, bool unchanged) {
    cel::MapActivation vars;
    vars.Bind("self", ToCelValue(value, n.schema, root));
    std::optional<cel::Value> old_value;
    std::vector<MissingField> missing;
    held_.clear();
    for (const Rule& r : n.rules) {
      if (r.transition) {
        if (old == nullptr && !r.optional_old_self) continue;
        if (old != nullptr && !old_value) old_value = ToCelValue(*old, n.schema, root);
        if (r.optional_old_self) {
          vars.Bind("oldSelf",
                    old ? cel::Value::OptionalOf(*old_value) : cel::Value::OptionalNone());
        } else {
          vars.Bind("oldSelf", *old_value);
        }
      }
      cel::EvalOptions options;
      options.cost_limit = std::min(kPerCallCostLimit, remaining_);
      cel::EvalResult result = r.program->Evaluate(vars, options);
      if (result.cost_exceeded) {
        if (remaining_ < kPerCallCostLimit) {
          std::string field = path.empty() ? "<nil>" : path;
          causes_.push_back(machinery::FieldInvalid(
              field, Json(n.type),
              "validation failed due to running out of cost budget, no further validation "
              "rules will be run"));
          exhausted_ = true;
          break;
        }
        causes_.push_back(machinery::FieldInvalid(
            path.empty() ? "<nil>" : path, Json(n.type),
            "'operation cancelled: actual cost limit exceeded': no further validation rules "
            "will be run due to call cost exceeds limit for rule: " +
                RuleErrorString(r)));
        exhausted_ = true;
        break;
      }
      remaining_ -= std::min(remaining_, result.cost);
      const cel::Value& v = result.value;
      if (v.is_error()) {
        if (auto absent = AbsentField(r, value, v.error_message()); absent && !r.transition) {
          auto it = std::find_if(missing.begin(), missing.end(), [&](const MissingField& m) {
            return SameFields(m.fields, *absent);
          });
          if (it == missing.end()) {
            missing.push_back({*absent, causes_.size(), {}});
            causes_.emplace_back();  // filled once every rule has run
            it = missing.end() - 1;
          }
          it->rules.push_back(&r);
          continue;
        }
        std::string field = path.empty() ? "<nil>" : path;
        std::string detail =
            v.error_message().starts_with("no such overload")
                ? "'no such overload': call arguments did not match a supported operator, "
                  "function or macro signature for rule: " +
                      RuleErrorString(r)
                : v.error_message() + " evaluating rule: " + RuleErrorString(r);
        causes_.push_back(machinery::FieldInvalid(field, Json(n.type), detail));
        continue;
      }
      if (v.kind() != cel::Kind::kBool) {
        std::string field = path.empty() ? "<nil>" : path;
        causes_.push_back(machinery::FieldInvalid(
            field, Json(n.type), "rule did not evaluate to a bool: " + RuleErrorString(r)));
        continue;
      }
      if (v.bool_value()) continue;
      std::string message;
      if (r.message_expression) {
        cel::EvalOptions mopts;
        mopts.cost_limit = std::min(kPerCallCostLimit, remaining_);
        cel::EvalResult m = r.message_expression->Evaluate(vars, mopts);
        if (m.cost_exceeded) {
          causes_.push_back(machinery::FieldInvalid(
              path.empty() ? "<nil>" : path, Json(n.type),
              remaining_ < kPerCallCostLimit
                  ? "messageExpression evaluation failed due to running out of cost budget, no "
                    "further validation rules will be run"
                  : "no further validation rules will be run due to call cost exceeds limit "
                    "for messageExpression: " +
                        GoQuote(r.message_expression_text)));
          exhausted_ = true;
          break;
        }
        remaining_ -= std::min(remaining_, m.cost);
        if (m.value.kind() == cel::Kind::kString) {
          std::string trimmed(core::Trim(m.value.string_value()));
          // Kubernetes falls back to the static message for empty, multi-line or overlong
          // (over 5 KiB) results.
          if (!trimmed.empty() && trimmed.find('\n') == std::string::npos &&
              trimmed.size() <= 5 * 1024) {
            message = std::move(trimmed);
          }
        }
      }
      if (message.empty()) {
        message = r.message.empty() ? "failed rule: " + RuleErrorString(r)
                                    : std::string(core::Trim(r.message));
      }
      if (!r.transition) message += AcceptedValues(n, r, value, path, root, message);
      Fail(n, r, path, message, unchanged);
    }
    for (const MissingField& m : missing) {
      causes_[m.cause_index] = RequiredByRules(n, m, value, path, root);
    }
  }

  // The field (CEL names from self, ending with the absent one) whose absence made rule `r`
  // fail with `error` ("no such key: K"), when one of the rule's chains reaches it.
  static std::optional<std::vector<std::string>> AbsentField(const Rule& r, const Json& value,
                                                             const std::string& error) {
    static constexpr std::string_view kNoSuchKey = "no such key: ";
    if (!error.starts_with(kNoSuchKey)) return std::nullopt;
    const std::string key = error.substr(kNoSuchKey.size());
    for (const auto& chain : r.self_chains) {
      const Json* at = &value;
      for (size_t i = 0; i < chain.fields.size() && at->is_object(); ++i) {
        auto it = at->find(UnescapePropertyName(chain.fields[i]));
        if (it == at->end()) {
          if (chain.fields[i] != key && UnescapePropertyName(chain.fields[i]) != key) break;
          return std::vector<std::string>(chain.fields.begin(), chain.fields.begin() + i + 1);
        }
        at = &*it;
      }
    }
    return std::nullopt;
  }

  // Whether rule `r` holds on `value` changed to have `candidate` at `fields`, and so do the
  // node's other rules that read that field and held on `value` (so a suggested value does
  // not trade one refusal for another). Bounded: a request evaluates at most kMaxTries
  // rules for this, each under the per-call cost limit; past that no values are named.
  bool HoldsWith(const Node& n, const Rule& r, const Json& value, bool root,
                 const std::vector<std::string>& fields, const Json& candidate) {
    Json changed = value;
    if (!SetField(changed, fields, candidate)) return false;
    cel::MapActivation vars;
    vars.Bind("self", ToCelValue(changed, n.schema, root));
    if (!Holds(r, vars)) return false;
    for (const Rule& other : n.rules) {
      if (&other == &r || other.transition) continue;
      bool reads = std::any_of(
          other.self_chains.begin(), other.self_chains.end(), [&](const cel::FieldChain& c) {
            return StartsWith(c.fields, fields) || StartsWith(fields, c.fields);
          });
      if (!reads) continue;
      auto held = held_.find(&other);
      if (held == held_.end()) {
        cel::MapActivation original;
        original.Bind("self", ToCelValue(value, n.schema, root));
        held = held_.emplace(&other, Holds(other, original)).first;
      }
      if (held->second && !Holds(other, vars)) return false;
    }
    return true;
  }

  bool Holds(const Rule& r, const cel::Activation& vars) {
    static constexpr int kMaxTries = 256;
    if (tries_ >= kMaxTries) {
      out_of_tries_ = true;
      return false;
    }
    ++tries_;
    cel::EvalOptions options;
    options.cost_limit = kPerCallCostLimit;
    cel::EvalResult result = r.program->Evaluate(vars, options);
    return !result.cost_exceeded && result.value.kind() == cel::Kind::kBool &&
           result.value.bool_value();
  }

  // The constants rule `r` compares the field at `fields` with, distinct, in source order.
  static std::vector<Json> ConstantsFor(const Rule& r, const std::vector<std::string>& fields) {
    std::vector<Json> out;
    for (const auto& c : r.compared) {
      if (!SameFields(c.chain.fields, fields)) continue;
      Json j = ConstantJson(c.constant);
      if (std::find(out.begin(), out.end(), j) == out.end()) out.push_back(std::move(j));
    }
    return out;
  }

  // For a failed rule that compares fields of self with constants (`self.plan == 'a' ||
  // self.plan in ['b', 'c']`): "; supported values for spec.plan: "a", "b"" (a sentence of
  // its own after a `message` ending with a period) listing the
  // constants with which the rule holds, the rest of the object as it is, and " (or
  // spec.x: ...)" for other fields that would make it hold. The field whose value is none
  // of the rule's constants (a typo) comes first, then the one the rule compares most
  // often (its subject). Empty when no single change helps.
  std::string AcceptedValues(const Node& n, const Rule& r, const Json& value,
                             const std::string& path, bool root, const std::string& message) {
    struct Alternative {
      std::vector<std::string> fields;
      std::vector<Json> accepted;
      bool current_named = false;
      size_t comparisons = 0;  // how often the rule compares this field: its subject's weight
    };
    std::vector<Alternative> alternatives;
    for (const auto& c : r.compared) {
      const auto& fields = c.chain.fields;
      if (std::any_of(alternatives.begin(), alternatives.end(),
                      [&](const Alternative& a) { return SameFields(a.fields, fields); })) {
        continue;
      }
      const Json* current = FieldAt(value, fields);
      if (current == nullptr) continue;  // only present values are corrected
      Alternative a{fields, {}, false, 0};
      a.comparisons = std::count_if(r.compared.begin(), r.compared.end(), [&](const auto& o) {
        return SameFields(o.chain.fields, fields);
      });
      for (const Json& candidate : ConstantsFor(r, fields)) {
        if (candidate == *current) {
          a.current_named = true;
        } else if (HoldsWith(n, r, value, root, fields, candidate)) {
          a.accepted.push_back(candidate);
        }
      }
      if (!a.accepted.empty()) alternatives.push_back(std::move(a));
    }
    if (alternatives.empty() || out_of_tries_) return "";
    std::stable_sort(alternatives.begin(), alternatives.end(),
                     [](const Alternative& a, const Alternative& b) {
                       if (a.current_named != b.current_named) return !a.current_named;
                       if (a.comparisons != b.comparisons) return a.comparisons > b.comparisons;
                       return a.accepted.size() > b.accepted.size();
                     });
    std::string out =
        (message.ends_with('.') ? " Supported values for " : "; supported values for ") +
        FieldPathOf(path, alternatives[0].fields) + ": " + RenderValues(alternatives[0].accepted);
    for (size_t i = 1; i < alternatives.size(); ++i) {
      out += (i == 1 ? " (or " : "; or ") + FieldPathOf(path, alternatives[i].fields) + ": " +
             RenderValues(alternatives[i].accepted);
    }
    if (alternatives.size() > 1) out += ")";
    return out;
  }

  // One cause for rules that could not run because they read an absent field: `spec.x:
  // Required value: rules "A" and "B" read spec.x.name: set it (supported values: "a")`,
  // the values being the constants the rules compare that field with under which every
  // one of them holds.
  core::Cause RequiredByRules(const Node& n, const MissingField& m, const Json& value,
                              const std::string& path, bool root) {
    // The field the rules read through the absent one: the first compared with a constant,
    // else the first read.
    std::optional<std::vector<std::string>> leaf;
    for (const Rule* r : m.rules) {
      for (const auto& c : r->compared) {
        if (!leaf && StartsWith(c.chain.fields, m.fields)) leaf = c.chain.fields;
      }
    }
    for (const Rule* r : m.rules) {
      for (const auto& chain : r->self_chains) {
        if (!leaf && StartsWith(chain.fields, m.fields)) leaf = chain.fields;
      }
    }
    if (!leaf) leaf = m.fields;
    std::vector<Json> candidates;
    for (const Rule* r : m.rules) {
      for (Json& c : ConstantsFor(*r, *leaf)) {
        if (std::find(candidates.begin(), candidates.end(), c) == candidates.end()) {
          candidates.push_back(std::move(c));
        }
      }
    }
    std::vector<Json> accepted;
    for (const Json& c : candidates) {
      bool all = std::all_of(m.rules.begin(), m.rules.end(), [&](const Rule* r) {
        return HoldsWith(n, *r, value, root, *leaf, c);
      });
      if (all) accepted.push_back(c);
    }
    std::string names;
    for (size_t i = 0; i < m.rules.size(); ++i) {
      if (i > 0) names += i + 1 == m.rules.size() ? " and " : ", ";
      names += GoQuote(RuleErrorString(*m.rules[i]));
    }
    std::string message =
        (m.rules.size() == 1 ? "rule " + names + " reads " : "rules " + names + " read ") +
        FieldPathOf(path, *leaf) + ": set it";
    if (!accepted.empty() && !out_of_tries_) {
      message += " (supported values: " + RenderValues(accepted) + ")";
    }
    return machinery::FieldRequired(FieldPathOf(path, m.fields), message);
  }

  std::vector<core::Cause>& causes_;
  std::vector<std::string>* warnings_;
  uint64_t remaining_ = kRuntimeCostBudget;
  bool exhausted_ = false;
  int tries_ = 0;              // rules evaluated on changed objects to name accepted values (Holds)
  bool out_of_tries_ = false;  // then values are not named: a partial list would mislead
  std::map<const Rule*, bool> held_;  // whether a rule held on the node's value (HoldsWith)
};

}  // namespace

ValidationRules::ValidationRules() = default;
ValidationRules::~ValidationRules() = default;

std::shared_ptr<const ValidationRules> ValidationRules::Compile(std::shared_ptr<const Json> owner,
                                                                const Json& schema,
                                                                std::string_view path,
                                                                std::vector<core::Cause>& errors) {
  std::shared_ptr<ValidationRules> rules(new ValidationRules());
  rules->owner_ = std::move(owner);
  Compiler compiler(errors);
  rules->root_ = compiler.Build(schema, std::string(path), rules->count_, /*root=*/true);
  return rules;
}

bool ValidationRules::empty() const { return root_ == nullptr || count_ == 0; }

size_t ValidationRules::size() const { return count_; }

void ValidationRules::Validate(const Json& object, const Json* old,
                               std::vector<core::Cause>& causes,
                               std::vector<std::string>* warnings) const {
  if (empty()) return;
  Walker walker(causes, warnings);
  walker.Walk(*root_, object, old, "", true);
}

bool HasBlockingError(const std::vector<core::Cause>& causes) {
  return std::any_of(causes.begin(), causes.end(), IsBlocking);
}

core::Cause RulesNotCheckedCause() {
  return {"FieldValueInvalid",
          "Invalid value: \"null\": some validation rules were not checked because the object "
          "was invalid; correct the existing errors to complete validation",
          "<nil>"};
}

}  // namespace klutch::schema
