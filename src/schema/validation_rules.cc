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
          return;
        }
        causes_.push_back(machinery::FieldInvalid(
            path.empty() ? "<nil>" : path, Json(n.type),
            "'operation cancelled: actual cost limit exceeded': no further validation rules "
            "will be run due to call cost exceeds limit for rule: " +
                RuleErrorString(r)));
        exhausted_ = true;
        return;
      }
      remaining_ -= std::min(remaining_, result.cost);
      const cel::Value& v = result.value;
      if (v.is_error()) {
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
          return;
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
      Fail(n, r, path, message, unchanged);
    }
  }

  std::vector<core::Cause>& causes_;
  std::vector<std::string>* warnings_;
  uint64_t remaining_ = kRuntimeCostBudget;
  bool exhausted_ = false;
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
