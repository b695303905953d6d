// Compilation (identifier/function resolution, constant regexes) and the tree-walking
// evaluator. The non-strict operators (&&, ||, ?:, @not_strictly_false), field selection,
// indexing, literals and comprehensions are evaluated here; every other function goes
// through the FunctionRegistry.

#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "cel/ast.h"
#include "cel/cel.h"
#include "cel/internal.h"
#include "cel/library_util.h"

namespace klutch::cel {
namespace {

enum Op {
  kOpNone = -1,
  kOpAnd,
  kOpOr,
  kOpCond,
  kOpNotStrictlyFalse,
  kOpIndex,
  kOpOptIndex,
  kOpEq,
  kOpNe,
  kOpIn,
  kOpNot,
  kOpType,
  kOpDyn,
  kOpOr_,      // optional.or
  kOpOrValue,  // optional.orValue
};

int OperatorCode(const std::string& name, bool member, size_t arity) {
  if (name == "_&&_") return kOpAnd;
  if (name == "_||_") return kOpOr;
  if (name == "_?_:_") return kOpCond;
  if (name == "@not_strictly_false") return kOpNotStrictlyFalse;
  if (name == "_[_]") return kOpIndex;
  if (name == "_[?_]") return kOpOptIndex;
  if (name == "_==_") return kOpEq;
  if (name == "_!=_") return kOpNe;
  if (name == "@in") return kOpIn;
  if (name == "!_") return kOpNot;
  if (name == "type" && !member && arity == 1) return kOpType;
  if (name == "dyn" && !member && arity == 1) return kOpDyn;
  if (name == "or" && member && arity == 2) return kOpOr_;
  if (name == "orValue" && member && arity == 2) return kOpOrValue;
  return kOpNone;
}

const std::set<std::string, std::less<>>& TypeIdentifiers() {
  static const std::set<std::string, std::less<>> kNames = {"int",
                                                            "uint",
                                                            "double",
                                                            "bool",
                                                            "string",
                                                            "bytes",
                                                            "list",
                                                            "map",
                                                            "null_type",
                                                            "type",
                                                            "google.protobuf.Timestamp",
                                                            "google.protobuf.Duration",
                                                            "optional_type"};
  return kNames;
}

struct CompileState {
  const FunctionRegistry* functions;
  const CompileOptions* options;
  std::vector<std::string> scope;
  std::string error;
  std::string_view source;

  void Fail(const Expr& e, const std::string& msg) {
    if (error.empty()) error = FormatError(source, e.offset, msg);
  }

  bool Declared(std::string_view name) const {
    for (const auto& s : scope) {
      if (s == name) return true;
    }
    for (const auto& v : options->variables) {
      if (v == name) return true;
    }
    if (!name.empty() && name[0] == '@') return true;
    return TypeIdentifiers().count(name) > 0;
  }

  static bool Qualified(const Expr& e, std::string& out) {
    if (e.type == Expr::Type::kIdent) {
      out = e.name;
      return true;
    }
    if (e.type == Expr::Type::kSelect && !e.optional && !e.quoted && Qualified(*e.args[0], out)) {
      out += "." + e.name;
      return true;
    }
    return false;
  }

  // The root identifier of a select chain.
  static const Expr* Root(const Expr& e) {
    const Expr* at = &e;
    while (at->type == Expr::Type::kSelect) at = at->args[0].get();
    return at;
  }

  bool InScope(std::string_view name) const {
    return std::find(scope.begin(), scope.end(), name) != scope.end();
  }

  void Resolve(Expr& e) {
    switch (e.type) {
      case Expr::Type::kSelect: {
        std::string q;
        const Expr* root = Root(e);
        if (!e.test_only && Qualified(e, q) && !InScope(root->name)) {
          // The evaluator tries a dotted name as a variable before selecting fields only
          // where that can succeed: a declared dotted variable or type name, or any name when
          // identifiers are not checked. `self.spec.plan` in a CRD rule never pays for it.
          if (!options->check_identifiers) e.qualified = q;
          // A declared dotted variable (or type name) makes the whole chain a reference.
          bool declared = TypeIdentifiers().count(q) > 0;
          for (const auto& v : options->variables) {
            if (v == q || (v.size() > q.size() && v.starts_with(q + "."))) declared = true;
            if (q.starts_with(v + ".")) declared = true;
          }
          if (declared) {
            e.qualified = q;
            for (Expr* at = e.args[0].get(); at->type == Expr::Type::kSelect;
                 at = at->args[0].get()) {
              Qualified(*at, at->qualified);
            }
            return;
          }
        }
        for (auto& a : e.args) Resolve(*a);
        return;
      }
      case Expr::Type::kIdent:
        if (options->check_identifiers && !Declared(e.name)) {
          Fail(e, "undeclared reference to '" + e.name + "' (in container '')");
        }
        return;
      case Expr::Type::kCall: {
        // `ns.f(x)` where `ns` is no variable but a function namespace: a global call.
        if (e.member && !e.args.empty() && e.args[0]->type == Expr::Type::kIdent &&
            !InScope(e.args[0]->name) &&
            std::find(options->variables.begin(), options->variables.end(), e.args[0]->name) ==
                options->variables.end()) {
          std::string qualified = e.args[0]->name + "." + e.name;
          if (functions->Find(qualified) != nullptr) {
            e.name = std::move(qualified);
            e.member = false;
            e.args.erase(e.args.begin());
          }
        }
        for (auto& a : e.args) Resolve(*a);
        e.op = OperatorCode(e.name, e.member, e.args.size());
        if (e.op == kOpNone) {
          e.overloads = functions->Find(e.name);
          if (e.overloads == nullptr && options->check_identifiers) {
            Fail(e, "undeclared reference to '" + e.name + "' (in container '')");
          }
        }
        if (e.name == "matches" && e.args.size() == 2 && e.args[1]->type == Expr::Type::kConst &&
            e.args[1]->constant.kind() == Kind::kString) {
          RE2::Options opts;
          opts.set_log_errors(false);
          auto re = std::make_shared<RE2>(e.args[1]->constant.string_value(), opts);
          if (!re->ok()) {
            Fail(*e.args[1], internal::GoRegexpErrorOf(*re));
          } else {
            e.regex = std::move(re);
          }
        }
        return;
      }
      case Expr::Type::kComprehension: {
        Resolve(*e.iter_range);
        Resolve(*e.accu_init);
        scope.push_back(e.accu_var);
        scope.push_back(e.iter_var);
        if (!e.iter_var2.empty()) scope.push_back(e.iter_var2);
        Resolve(*e.loop_condition);
        Resolve(*e.loop_step);
        scope.pop_back();
        if (!e.iter_var2.empty()) scope.pop_back();
        Resolve(*e.result);
        scope.pop_back();
        return;
      }
      default:
        for (auto& a : e.args) Resolve(*a);
        return;
    }
  }
};

Value NoSuchKey(const Value& key) {
  if (key.kind() == Kind::kString) return Value::MakeError("no such key: " + key.string_value());
  return Value::MakeError("no such key: " + key.DebugString());
}

// Index a list with an int, uint or integral double.
std::optional<int64_t> ListIndex(const Value& key, Value& error) {
  switch (key.kind()) {
    case Kind::kInt:
      return key.int_value();
    case Kind::kUint:
      if (key.uint_value() > static_cast<uint64_t>(INT64_MAX)) {
        error = Value::MakeError("index out of bounds");
        return std::nullopt;
      }
      return static_cast<int64_t>(key.uint_value());
    case Kind::kDouble: {
      double d = key.double_value();
      if (d != std::trunc(d) || d < -9.2e18 || d > 9.2e18) {
        error = Value::MakeError("unsupported index value");
        return std::nullopt;
      }
      return static_cast<int64_t>(d);
    }
    default:
      error = Value::MakeError("no such overload");
      return std::nullopt;
  }
}

class Evaluator {
 public:
  Evaluator(const Activation& vars, EvalContext& ctx) : vars_(vars), ctx_(ctx) {}

  Value Eval(const Expr& e) {
    if (!ctx_.Charge(1)) return CostExceeded();
    switch (e.type) {
      case Expr::Type::kConst:
        return e.constant;
      case Expr::Type::kIdent:
        return Lookup(e.name);
      case Expr::Type::kSelect:
        return EvalSelect(e);
      case Expr::Type::kCall:
        return EvalCall(e);
      case Expr::Type::kList:
        return EvalList(e);
      case Expr::Type::kMap:
        return EvalMap(e);
      case Expr::Type::kStruct:
        return Value::MakeError("unknown type: " + e.name);
      case Expr::Type::kComprehension:
        return EvalComprehension(e);
    }
    return Value::MakeError("unknown expression");
  }

  bool cost_exceeded() const { return cost_exceeded_; }

 private:
  Value CostExceeded() {
    cost_exceeded_ = true;
    return Value::MakeError("operation cancelled: actual cost limit exceeded");
  }

  Value Lookup(std::string_view name) {
    for (auto it = locals_.rbegin(); it != locals_.rend(); ++it) {
      if (it->first == name) return it->second;
    }
    if (auto v = vars_.Find(name)) return *v;
    if (TypeIdentifiers().count(name)) return Value::Type(std::string(name));
    return Value::MakeError("undeclared reference to '" + std::string(name) + "'");
  }

  Value SelectField(const Value& target, const std::string& field, bool test_only, bool optional) {
    if (target.is_error()) return target;
    if (target.kind() == Kind::kOptional) {
      if (!target.has_optional_value()) return test_only ? Value::Bool(false) : target;
      return SelectField(target.optional_value(), field, test_only, !test_only);
    }
    if (target.kind() != Kind::kMap) {
      return Value::MakeError(test_only ? "invalid type for field selection."
                                        : "no such key: " + field);
    }
    auto found = target.map().FindField(field);
    if (test_only) return Value::Bool(found.has_value() && !found->is_error());
    if (optional) return found ? Value::OptionalOf(*found) : Value::OptionalNone();
    if (!found) return Value::MakeError("no such key: " + field);
    return *found;
  }

  bool IsLocal(std::string_view name) const {
    for (const auto& l : locals_) {
      if (l.first == name) return true;
    }
    return false;
  }

  Value EvalSelect(const Expr& e) {
    // A dotted name may be a variable ("a.b.c") or a type rather than field selection; the
    // longest name wins because the outermost select is tried first.
    if (!e.qualified.empty()) {
      const Expr* root = &e;
      while (root->type == Expr::Type::kSelect) root = root->args[0].get();
      if (!IsLocal(root->name)) {
        if (auto v = vars_.Find(e.qualified)) return *v;
        if (TypeIdentifiers().count(e.qualified)) return Value::Type(e.qualified);
      }
    }
    Value target = Eval(*e.args[0]);
    return SelectField(target, e.name, e.test_only, e.optional);
  }

  Value Index(const Value& target, const Value& key, bool optional) {
    if (target.is_error()) return target;
    if (key.is_error()) return key;
    if (target.kind() == Kind::kOptional) {
      if (!target.has_optional_value()) return target;
      return Index(target.optional_value(), key, true);
    }
    if (target.kind() == Kind::kList) {
      Value err;
      auto idx = ListIndex(key, err);
      if (!idx) return err;
      const ListValue& list = target.list();
      if (*idx < 0 || static_cast<size_t>(*idx) >= list.size()) {
        if (optional) return Value::OptionalNone();
        return Value::MakeError("index out of bounds: " + std::to_string(*idx));
      }
      Value v = list.Get(static_cast<size_t>(*idx));
      return optional ? Value::OptionalOf(std::move(v)) : v;
    }
    if (target.kind() == Kind::kMap) {
      auto found = target.map().Find(key);
      if (found && found->is_error()) return *found;
      if (!found) return optional ? Value::OptionalNone() : NoSuchKey(key);
      return optional ? Value::OptionalOf(*found) : *found;
    }
    return Value::MakeError("no such overload");
  }

  Value EvalCall(const Expr& e) {
    switch (e.op) {
      case kOpAnd:
      case kOpOr: {
        bool is_and = e.op == kOpAnd;
        Value a = Eval(*e.args[0]);
        if (a.kind() == Kind::kBool && a.bool_value() != is_and) return a;
        Value b = Eval(*e.args[1]);
        if (b.kind() == Kind::kBool && b.bool_value() != is_and) return b;
        if (a.is_error()) return a;
        if (b.is_error()) return b;
        if (a.kind() == Kind::kBool && b.kind() == Kind::kBool) return Value::Bool(is_and);
        return Value::MakeError(std::string("no such overload: ") + (is_and ? "_&&_" : "_||_"));
      }
      case kOpCond: {
        Value c = Eval(*e.args[0]);
        if (c.is_error()) return c;
        if (c.kind() != Kind::kBool) return Value::MakeError("no such overload: _?_:_");
        return Eval(*e.args[c.bool_value() ? 1 : 2]);
      }
      case kOpNotStrictlyFalse: {
        Value v = Eval(*e.args[0]);
        if (v.kind() == Kind::kBool) return v;
        return Value::Bool(true);
      }
      case kOpIndex:
      case kOpOptIndex: {
        Value t = Eval(*e.args[0]);
        Value k = Eval(*e.args[1]);
        return Index(t, k, e.op == kOpOptIndex);
      }
      case kOpEq:
      case kOpNe: {
        Value a = Eval(*e.args[0]);
        if (a.is_error()) return a;
        Value b = Eval(*e.args[1]);
        if (b.is_error()) return b;
        Value r = Equal(a, b);
        if (r.is_error() || e.op == kOpEq) return r;
        return Value::Bool(!r.bool_value());
      }
      case kOpNot: {
        Value a = Eval(*e.args[0]);
        if (a.is_error()) return a;
        if (a.kind() != Kind::kBool) return Value::MakeError("no such overload: !_");
        return Value::Bool(!a.bool_value());
      }
      case kOpIn: {
        Value a = Eval(*e.args[0]);
        if (a.is_error()) return a;
        Value b = Eval(*e.args[1]);
        if (b.is_error()) return b;
        if (b.kind() == Kind::kList) {
          const ListValue& list = b.list();
          size_t n = list.size();
          if (!ctx_.Charge(n)) return CostExceeded();
          for (size_t i = 0; i < n; ++i) {
            Value r = Equal(a, list.Get(i));
            if (r.kind() == Kind::kBool && r.bool_value()) return r;
          }
          return Value::Bool(false);
        }
        if (b.kind() == Kind::kMap) {
          if (!IsValidMapKey(a) && a.kind() != Kind::kDouble) return Value::Bool(false);
          auto found = b.map().Find(a);
          return Value::Bool(found.has_value() && !found->is_error());
        }
        return Value::MakeError("no such overload: @in");
      }
      case kOpType: {
        Value a = Eval(*e.args[0]);
        if (a.is_error()) return a;
        return Value::Type(a.TypeName());
      }
      case kOpDyn:
        return Eval(*e.args[0]);
      case kOpOr_:
      case kOpOrValue: {
        Value a = Eval(*e.args[0]);
        if (a.is_error()) return a;
        if (a.kind() != Kind::kOptional) break;
        if (a.has_optional_value()) return e.op == kOpOr_ ? a : a.optional_value();
        Value b = Eval(*e.args[1]);
        if (e.op == kOpOr_ && !b.is_error() && b.kind() != Kind::kOptional) {
          return Value::MakeError("no such overload: or");
        }
        return b;
      }
      default:
        break;
    }
    // Strict function call: evaluate every argument; the first error wins.
    if (e.name == "matches" && e.regex && e.args.size() == 2) {
      Value s = Eval(*e.args[0]);
      if (s.is_error()) return s;
      if (s.kind() != Kind::kString) return Value::MakeError("no such overload: matches");
      if (!ctx_.Charge(1 + s.string_value().size() / 10)) return CostExceeded();
      return Value::Bool(RE2::PartialMatch(s.string_value(), *e.regex));
    }
    Value inline_args[4];
    std::vector<Value> heap_args;
    Value* args = inline_args;
    size_t n = e.args.size();
    if (n > 4) {
      heap_args.resize(n);
      args = heap_args.data();
    }
    for (size_t i = 0; i < n; ++i) {
      args[i] = Eval(*e.args[i]);
      if (args[i].is_error()) return args[i];
    }
    if (e.overloads == nullptr) {
      return Value::MakeError("no such overload: " + e.name);
    }
    std::span<const Value> span(args, n);
    for (const Overload& o : *e.overloads) {
      if (o.member != e.member || o.params.size() != n) continue;
      bool match = true;
      for (size_t i = 0; i < n && match; ++i) {
        const Param& p = o.params[i];
        if (p.any) continue;
        if (args[i].kind() != p.kind) {
          match = false;
        } else if (p.kind == Kind::kOpaque && !p.opaque_type.empty() &&
                   args[i].opaque().type_name() != p.opaque_type) {
          match = false;
        }
      }
      if (!match) continue;
      Value r = o.body(span, ctx_);
      if (ctx_.cost > ctx_.cost_limit) return CostExceeded();
      return r;
    }
    std::string sig;
    for (size_t i = 0; i < n; ++i) sig += (i ? ", " : "") + args[i].TypeName();
    // cel-go's runtime wording (kube-apiserver matches on the "no such overload" prefix).
    return Value::MakeError("no such overload: " + e.name + "(" + sig + ")");
  }

  Value EvalList(const Expr& e) {
    std::vector<Value> items;
    items.reserve(e.args.size());
    for (size_t i = 0; i < e.args.size(); ++i) {
      Value v = Eval(*e.args[i]);
      if (v.is_error()) return v;
      if (std::find(e.optional_indices.begin(), e.optional_indices.end(), static_cast<int>(i)) !=
          e.optional_indices.end()) {
        if (v.kind() != Kind::kOptional) {
          return Value::MakeError("no such overload: optional list element");
        }
        if (!v.has_optional_value()) continue;
        items.push_back(v.optional_value());
        continue;
      }
      items.push_back(std::move(v));
    }
    return Value::List(std::move(items));
  }

  Value EvalMap(const Expr& e) {
    std::vector<std::pair<Value, Value>> entries;
    entries.reserve(e.args.size() / 2);
    for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
      Value k = Eval(*e.args[i]);
      if (k.is_error()) return k;
      Value v = Eval(*e.args[i + 1]);
      if (v.is_error()) return v;
      if (!IsValidMapKey(k)) return Value::MakeError("unsupported key type");
      for (const auto& [ek, ev] : entries) {
        Value same = Equal(ek, k);
        if (same.kind() == Kind::kBool && same.bool_value()) {
          return Value::MakeError("Failed with repeated key");
        }
      }
      if (std::find(e.optional_indices.begin(), e.optional_indices.end(),
                    static_cast<int>(i / 2)) != e.optional_indices.end()) {
        if (v.kind() != Kind::kOptional) {
          return Value::MakeError("no such overload: optional map entry");
        }
        if (!v.has_optional_value()) continue;
        entries.emplace_back(std::move(k), v.optional_value());
        continue;
      }
      entries.emplace_back(std::move(k), std::move(v));
    }
    return Value::Map(std::move(entries));
  }

  Value EvalComprehension(const Expr& e) {
    Value range = Eval(*e.iter_range);
    if (range.is_error()) return range;
    Value accu = Eval(*e.accu_init);
    if (accu.is_error() && e.iter_var == "#unused") {
      // cel.bind / optMap bind an error: only an error if used; keep it as the value.
    }
    std::vector<Value> keys;
    const ListValue* list = nullptr;
    const MapValue* map = nullptr;
    size_t n = 0;
    if (range.kind() == Kind::kList) {
      list = &range.list();
      n = list->size();
    } else if (range.kind() == Kind::kMap) {
      map = &range.map();
      keys = map->Keys();
      n = keys.size();
    } else {
      return Value::MakeError("expression does not evaluate to a list or map");
    }
    size_t base = locals_.size();
    locals_.emplace_back(e.accu_var, std::move(accu));
    bool two = !e.iter_var2.empty();
    if (n > 0) {
      locals_.emplace_back(e.iter_var, Value());
      if (two) locals_.emplace_back(e.iter_var2, Value());
    }
    for (size_t i = 0; i < n; ++i) {
      if (!ctx_.Charge(1)) {
        locals_.resize(base);
        return CostExceeded();
      }
      if (list) {
        if (two) {
          locals_[base + 1].second = Value::Int(static_cast<int64_t>(i));
          locals_[base + 2].second = list->Get(i);
        } else {
          locals_[base + 1].second = list->Get(i);
        }
      } else {
        locals_[base + 1].second = keys[i];
        if (two) {
          auto v = map->Find(keys[i]);
          locals_[base + 2].second = v ? *v : Value::MakeError("no such key");
        }
      }
      Value cond = Eval(*e.loop_condition);
      if (cond.kind() == Kind::kBool && !cond.bool_value()) break;
      if (cond.is_error()) {
        locals_.resize(base);
        return cond;
      }
      Value next = Eval(*e.loop_step);
      locals_[base].second = std::move(next);
      if (cost_exceeded_) {
        locals_.resize(base);
        return CostExceeded();
      }
    }
    locals_.resize(base + 1);
    Value result = Eval(*e.result);
    locals_.resize(base);
    return result;
  }

  const Activation& vars_;
  EvalContext& ctx_;
  std::vector<std::pair<std::string_view, Value>> locals_;
  bool cost_exceeded_ = false;
};

}  // namespace

// ------------------------------------------------------------------------------------------

void FunctionRegistry::Add(std::string_view name, bool member, std::vector<Param> params,
                           FunctionBody body) {
  auto it = functions_.find(name);
  if (it == functions_.end())
    it = functions_.emplace(std::string(name), std::vector<Overload>{}).first;
  it->second.push_back(Overload{member, std::move(params), std::move(body)});
}

void FunctionRegistry::AddBoth(std::string_view name, std::vector<Param> params,
                               const FunctionBody& body) {
  Add(name, false, params, body);
  Add(name, true, std::move(params), body);
}

const std::vector<Overload>* FunctionRegistry::Find(std::string_view name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : &it->second;
}

std::optional<Value> MapActivation::Find(std::string_view name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

Program::Program(std::string source, std::unique_ptr<Expr> root)
    : source_(std::move(source)), root_(std::move(root)) {}

Program::~Program() = default;

namespace {
bool ReferencesIn(const Expr& e, std::string_view name, std::vector<std::string_view>& bound) {
  auto shadowed = [&] { return std::find(bound.begin(), bound.end(), name) != bound.end(); };
  if (e.type == Expr::Type::kIdent) return e.name == name && !shadowed();
  if (e.type == Expr::Type::kComprehension) {
    if (ReferencesIn(*e.iter_range, name, bound) || ReferencesIn(*e.accu_init, name, bound)) {
      return true;
    }
    bound.push_back(e.accu_var);
    bound.push_back(e.iter_var);
    bound.push_back(e.iter_var2);
    bool found =
        ReferencesIn(*e.loop_condition, name, bound) || ReferencesIn(*e.loop_step, name, bound);
    bound.resize(bound.size() - 2);
    found = found || ReferencesIn(*e.result, name, bound);
    bound.pop_back();
    return found;
  }
  for (const auto& a : e.args) {
    if (ReferencesIn(*a, name, bound)) return true;
  }
  return false;
}
}  // namespace

namespace {
// Calls `visit(child, bound)` for each child of `e`, with the comprehension's variables bound
// where they are in scope (accu_var in the loop and the result, the iteration variables in the
// loop only).
template <typename Visit>
void VisitChildren(const Expr& e, std::vector<std::string_view>& bound, Visit&& visit) {
  if (e.type != Expr::Type::kComprehension) {
    for (const auto& a : e.args) visit(*a, bound);
    return;
  }
  visit(*e.iter_range, bound);
  visit(*e.accu_init, bound);
  bound.push_back(e.accu_var);
  bound.push_back(e.iter_var);
  bound.push_back(e.iter_var2);
  visit(*e.loop_condition, bound);
  visit(*e.loop_step, bound);
  bound.resize(bound.size() - 2);
  visit(*e.result, bound);
  bound.pop_back();
}

// The selects of `e` down to what they select from (outermost first), and that operand.
const Expr* SelectOperand(const Expr& e, std::vector<const Expr*>& selects) {
  const Expr* at = &e;
  while (at->type == Expr::Type::kSelect) {
    selects.push_back(at);
    at = at->args[0].get();
  }
  return at;
}

FieldChain ChainOf(const Expr& ident, const std::vector<const Expr*>& selects) {
  FieldChain chain;
  chain.variable = ident.name;
  for (auto it = selects.rbegin(); it != selects.rend(); ++it) {
    chain.fields.push_back((*it)->name);
    chain.offsets.push_back((*it)->offset);
  }
  return chain;
}

bool IsFree(const Expr& ident, const std::vector<std::string_view>& bound) {
  return ident.type == Expr::Type::kIdent &&
         std::find(bound.begin(), bound.end(), ident.name) == bound.end();
}

void CollectChains(const Expr& e, std::vector<std::string_view>& bound,
                   std::vector<FieldChain>& out) {
  if (e.type == Expr::Type::kSelect) {
    std::vector<const Expr*> selects;
    const Expr* at = SelectOperand(e, selects);
    if (IsFree(*at, bound)) {
      out.push_back(ChainOf(*at, selects));
    } else {
      CollectChains(*at, bound, out);
    }
    return;
  }
  VisitChildren(e, bound, [&](const Expr& child, std::vector<std::string_view>& b) {
    CollectChains(child, b, out);
  });
}

// `e` as a plain field chain on a free variable (`self.a.b`), else nullopt.
std::optional<FieldChain> PlainChain(const Expr& e, const std::vector<std::string_view>& bound) {
  std::vector<const Expr*> selects;
  const Expr* at = SelectOperand(e, selects);
  if (selects.empty() || !IsFree(*at, bound)) return std::nullopt;
  for (const Expr* s : selects) {
    if (s->test_only || s->optional) return std::nullopt;
  }
  return ChainOf(*at, selects);
}

void CollectComparisons(const Expr& e, std::vector<std::string_view>& bound,
                        std::vector<ComparedConstant>& out) {
  if (e.type == Expr::Type::kCall && e.args.size() == 2) {
    const Expr& left = *e.args[0];
    const Expr& right = *e.args[1];
    if (e.name == "_==_") {
      if (right.type == Expr::Type::kConst) {
        if (auto chain = PlainChain(left, bound))
          out.push_back({*std::move(chain), right.constant});
      } else if (left.type == Expr::Type::kConst) {
        if (auto chain = PlainChain(right, bound))
          out.push_back({*std::move(chain), left.constant});
      }
    } else if (e.name == "@in" && right.type == Expr::Type::kList) {
      if (auto chain = PlainChain(left, bound)) {
        for (const auto& item : right.args) {
          if (item->type == Expr::Type::kConst) out.push_back({*chain, item->constant});
        }
      }
    }
  }
  VisitChildren(e, bound, [&](const Expr& child, std::vector<std::string_view>& b) {
    CollectComparisons(child, b, out);
  });
}
}  // namespace

std::vector<ComparedConstant> Program::ComparedConstants() const {
  std::vector<std::string_view> bound;
  std::vector<ComparedConstant> out;
  CollectComparisons(*root_, bound, out);
  return out;
}

std::vector<FieldChain> Program::FieldChains() const {
  std::vector<std::string_view> bound;
  std::vector<FieldChain> out;
  CollectChains(*root_, bound, out);
  return out;
}

std::optional<FieldChain> Program::WholeChain() const {
  if (root_->type != Expr::Type::kSelect || root_->test_only) return std::nullopt;
  auto chains = FieldChains();
  if (chains.size() != 1) return std::nullopt;
  return chains[0];
}

bool Program::ObviouslyNotBool() const {
  const Expr& e = *root_;
  switch (e.type) {
    case Expr::Type::kConst:
      return e.constant.kind() != Kind::kBool;
    case Expr::Type::kList:
    case Expr::Type::kMap:
    case Expr::Type::kStruct:
      return true;
    case Expr::Type::kCall: {
      static const std::set<std::string, std::less<>> kNonBool = {
          "_+_",  "_-_",    "_*_",    "_/_",   "_%_",       "-_",       "size", "int",
          "uint", "double", "string", "bytes", "timestamp", "duration", "type"};
      return kNonBool.count(e.name) > 0;
    }
    default:
      return false;
  }
}

bool Program::References(std::string_view name) const {
  std::vector<std::string_view> bound;
  return ReferencesIn(*root_, name, bound);
}

EvalResult Program::Evaluate(const Activation& vars, const EvalOptions& options) const {
  EvalContext ctx;
  ctx.cost_limit = options.cost_limit;
  Evaluator ev(vars, ctx);
  EvalResult out;
  out.value = ev.Eval(*root_);
  out.cost = ctx.cost;
  out.cost_exceeded = ev.cost_exceeded() || ctx.cost > ctx.cost_limit;
  if (out.cost_exceeded) {
    out.value = Value::MakeError("operation cancelled: actual cost limit exceeded");
  }
  return out;
}

core::Result<std::unique_ptr<Program>> Env::Compile(std::string_view source,
                                                    const CompileOptions& options) const {
  std::string error;
  auto root = ParseExpr(source, options.max_recursion_depth, error);
  if (!root) return core::BadRequest(error);
  CompileState state{&functions_, &options, {}, {}, source};
  state.Resolve(*root);
  if (!state.error.empty()) return core::BadRequest(state.error);
  return std::unique_ptr<Program>(new Program(std::string(source), std::move(root)));
}

std::shared_ptr<const Env> Env::Standard() {
  static const std::shared_ptr<const Env> kEnv = [] {
    auto env = std::make_shared<Env>();
    InstallStandardLibrary(env->functions_);
    InstallStringsExtension(env->functions_);
    InstallOptionalLibrary(env->functions_);
    return env;
  }();
  return kEnv;
}

std::shared_ptr<const Env> Env::Kubernetes() {
  static const std::shared_ptr<const Env> kEnv = [] {
    auto env = std::make_shared<Env>();
    InstallStandardLibrary(env->functions_);
    InstallStringsExtension(env->functions_);
    InstallOptionalLibrary(env->functions_);
    InstallKubernetesLibraries(env->functions_);
    return env;
  }();
  return kEnv;
}

}  // namespace klutch::cel
