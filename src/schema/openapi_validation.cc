#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "cel/regex.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "machinery/validation.h"
#include "schema/field_error.h"
#include "schema/formats.h"
#include "schema/structural.h"
#include "schema/structural_internal.h"

// structural.h's ValidateValue: kube-openapi's value validation.

namespace klutch::schema {
namespace {

using internal::Bool;
using internal::Get;
using internal::IsInt;

// ---------------------------------------------------------------------------------------
// Custom resources: kube-openapi's schema validator as apiextensions-apiserver runs it.
//
// Errors are collected as kube-openapi reports them (a path "name" in its own notation,
// a code, the bad value, a message) and converted to field causes at the end exactly as
// apiextensions' ValidateCustomResource does.

enum class Code {
  kInvalidType,
  kRequired,
  kTooLong,
  kEnum,
  kMaxItems,
  kTooManyProperties,
  kOther,      // every other *errors.Validation: reported as Invalid with its message
  kComposite,  // errors.New(...) of anyOf/oneOf/allOf/not: reported at the root path
};

struct VError {
  Code code = Code::kOther;
  std::string name;
  std::optional<Json> value;
  std::string message;
  std::vector<Json> enum_values;
  long long valid = -1;  // the limit for TooLong / MaxItems / TooManyProperties
};

struct Result {
  std::vector<VError> errors;
  int match_count = 0;

  bool valid() const { return errors.empty(); }
  // Result.AddErrors: a message already reported is not repeated.
  void Add(VError e) {
    for (const auto& r : errors) {
      if (r.message == e.message) return;
    }
    errors.push_back(std::move(e));
  }
  void Merge(Result&& other) {
    for (auto& e : other.errors) Add(std::move(e));
    match_count += other.match_count;
  }
};

// The JSON type kube-openapi infers from a decoded value (schemaInfoForType).
std::string KindOf(const Json& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number()) return IsInt(v) ? "integer" : "number";
  return "null";
}

// swag.IsFloat64AJSONInteger.
bool IsJsonInteger(double f) {
  constexpr double kMax = 9007199254740992.0;  // 2^53
  if (std::isnan(f) || std::isinf(f) || f < -kMax || f > kMax) return false;
  double g = std::trunc(f);
  if (f == g) return true;
  double diff = std::fabs(f - g);
  return diff / std::min(std::fabs(f) + std::fabs(g), std::numeric_limits<double>::max()) < 1e-9;
}

std::string GoQuotePath(const std::string& path) { return GoQuote(path); }

std::string Msg(const std::string& name, const std::string& rest) {
  return name + " in body " + rest;
}

class OpenApiValidator {
 public:
  Result Validate(const Json& data, const Json* s, const std::string& path, int depth) {
    Result result;
    if (s == nullptr || !s->is_object() || depth > kMaxDepth) return result;
    std::vector<std::string> types = Types(s);
    std::string format = EffectiveFormat(s, types);
    const bool nullable = Bool(s, "nullable");
    if (data.is_null()) {
      // Only the type and the enum validators look at null.
      if (!types.empty() && std::find(types.begin(), types.end(), "null") == types.end() &&
          !nullable) {
        result.Add(InvalidType(path, core::Join(types, ","), Json("null")));
      }
      CheckEnum(data, s, path, result);
      return result;
    }
    const std::string kind = KindOf(data);
    auto apply = [&](Result&& r) {
      result.Merge(std::move(r));
      ++result.match_count;
    };
    if (!types.empty() || !format.empty()) apply(TypeCheck(data, kind, types, format, path));
    apply(Composition(data, s, path, depth));
    if (kind == "string") apply(StringCheck(data.get_ref<const std::string&>(), s, path));
    if (kind == "string" && !format.empty() && IsValidatedFormat("", format)) {
      Result r;
      if (!MatchesFormat(format, data.get_ref<const std::string&>())) {
        r.Add(InvalidType(path, format, data));
      }
      apply(std::move(r));
    }
    if (kind == "integer" || kind == "number") apply(NumberCheck(data, s, path));
    if (kind == "array") apply(ArrayCheck(data, s, path, depth));
    {
      Result r;
      CheckEnum(data, s, path, r);
      apply(std::move(r));
    }
    if (kind == "object") apply(ObjectCheck(data, s, path, depth));
    ++result.match_count;
    return result;
  }

 private:
  static constexpr int kMaxDepth = 256;

  static std::vector<std::string> Types(const Json* s) {
    if (Bool(s, "x-kubernetes-int-or-string")) return {"integer", "string"};
    std::vector<std::string> out;
    const Json* t = Get(s, "type");
    if (t == nullptr) return out;
    if (t->is_string()) {
      if (!t->get_ref<const std::string&>().empty()) out.push_back(t->get<std::string>());
    } else if (t->is_array()) {
      for (const auto& e : *t) {
        if (e.is_string()) out.push_back(e.get<std::string>());
      }
    }
    return out;
  }

  // The format after apiextensions' StripUnsupportedFormatsPostProcess.
  static std::string EffectiveFormat(const Json* s, const std::vector<std::string>& types) {
    const Json* f = Get(s, "format");
    if (f == nullptr || !f->is_string() || f->get_ref<const std::string&>().empty()) return "";
    const std::string& format = f->get_ref<const std::string&>();
    std::string type = types.size() == 1 ? types[0] : "";
    if (type.empty() || type == "string") return IsValidatedFormat("", format) ? format : "";
    if (type == "integer") return format == "int32" || format == "int64" ? format : "";
    if (type == "number") return format == "float" || format == "double" ? format : "";
    return "";
  }

  static VError InvalidType(const std::string& path, const std::string& type, const Json& value) {
    VError e;
    e.code = Code::kInvalidType;
    e.name = path;
    e.value = value;
    e.message = value.is_string()
                    ? Msg(path, fmt::format("must be of type {}: {}", type,
                                            GoQuote(value.get_ref<const std::string&>())))
                    : Msg(path, "must be of type " + type);
    return e;
  }

  static VError Other(const std::string& path, std::optional<Json> value, std::string message) {
    VError e;
    e.name = path;
    e.value = std::move(value);
    e.message = std::move(message);
    return e;
  }

  static VError Composite(std::string message) {
    VError e;
    e.code = Code::kComposite;
    e.message = std::move(message);
    return e;
  }

  static bool Contains(const std::vector<std::string>& v, const char* x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  }

  // typeValidator.Validate.
  static Result TypeCheck(const Json& data, const std::string& kind,
                          const std::vector<std::string>& types, const std::string& format,
                          const std::string& path) {
    Result r;
    ++r.match_count;
    std::string data_format = kind == "integer" ? "int64" : kind == "number" ? "float64" : "";
    const bool float_int =
        kind == "number" && IsJsonInteger(data.get<double>()) && Contains(types, "integer");
    const bool int_float = kind == "integer" && Contains(types, "number");
    const bool type_ok = Contains(types, kind.c_str()) || float_int || int_float;
    if (kind != "string" && kind != "array" && !format.empty() &&
        !(type_ok || data_format == format)) {
      r.Add(InvalidType(path, format, Json(data_format)));
      return r;
    }
    if (!Contains(types, "number") && !Contains(types, "integer") && !format.empty() &&
        (kind == "string" || kind == "array")) {
      return r;
    }
    if (!type_ok) r.Add(InvalidType(path, core::Join(types, ","), Json(kind)));
    return r;
  }

  // schemaPropsValidator.Validate: anyOf, oneOf, allOf, not.
  Result Composition(const Json& data, const Json* s, const std::string& path, int depth) {
    Result main;
    if (const Json* any = Get(s, "anyOf"); any && any->is_array() && !any->empty()) {
      std::optional<Result> best;
      std::optional<Result> first_success;
      bool succeeded = false;
      for (const auto& sub : *any) {
        Result r = Validate(data, &sub, path, depth + 1);
        if (r.valid()) {
          best.reset();
          succeeded = true;
          first_success = std::move(r);
          break;
        }
        if (!best || r.match_count > best->match_count) best = std::move(r);
      }
      if (!succeeded) {
        main.Add(Composite(GoQuotePath(path) + " must validate at least one schema (anyOf)"));
      }
      if (best) {
        main.Merge(std::move(*best));
      } else if (first_success) {
        main.Merge(std::move(*first_success));
      }
    }
    if (const Json* one = Get(s, "oneOf"); one && one->is_array() && !one->empty()) {
      std::optional<Result> best;
      std::optional<Result> first_success;
      int validated = 0;
      for (const auto& sub : *one) {
        Result r = Validate(data, &sub, path, depth + 1);
        if (r.valid()) {
          ++validated;
          best.reset();
          if (!first_success) first_success = std::move(r);
          continue;
        }
        if (validated == 0 && (!best || r.match_count > best->match_count)) best = std::move(r);
      }
      if (validated != 1) {
        std::string more = validated == 0 ? "Found none valid"
                                          : fmt::format("Found {} valid alternatives", validated);
        main.Add(Composite(GoQuotePath(path) + " must validate one and only one schema (oneOf). " +
                           more));
        if (best) main.Merge(std::move(*best));
      } else if (first_success) {
        main.Merge(std::move(*first_success));
      }
    }
    if (const Json* all = Get(s, "allOf"); all && all->is_array() && !all->empty()) {
      size_t validated = 0;
      for (const auto& sub : *all) {
        Result r = Validate(data, &sub, path, depth + 1);
        if (r.valid()) ++validated;
        main.Merge(std::move(r));
      }
      if (validated != all->size()) {
        main.Add(Composite(GoQuotePath(path) + " must validate all the schemas (allOf)" +
                           (validated == 0 ? ". None validated" : "")));
      }
    }
    if (const Json* no = Get(s, "not"); no && no->is_object()) {
      if (Validate(data, no, path, depth + 1).valid()) {
        main.Add(Composite(GoQuotePath(path) + " must not validate the schema (not)"));
      }
    }
    ++main.match_count;
    return main;
  }

  static std::optional<long long> Int(const Json* s, const char* key) {
    const Json* v = Get(s, key);
    if (v == nullptr || !v->is_number()) return std::nullopt;
    return static_cast<long long>(v->get<double>());
  }

  // stringValidator.Validate: the first failing check only.
  Result StringCheck(const std::string& str, const Json* s, const std::string& path) {
    Result r;
    long long runes = 0;
    for (unsigned char c : str) runes += (c & 0xC0) != 0x80;
    if (auto max = Int(s, "maxLength"); max && runes > *max) {
      VError e =
          Other(path, Json(str), Msg(path, fmt::format("should be at most {} chars long", *max)));
      e.code = Code::kTooLong;
      e.valid = *max;
      r.Add(std::move(e));
      return r;
    }
    if (auto min = Int(s, "minLength"); min && runes < *min) {
      r.Add(
          Other(path, Json(str), Msg(path, fmt::format("should be at least {} chars long", *min))));
      return r;
    }
    if (const Json* p = Get(s, "pattern");
        p && p->is_string() && !p->get_ref<const std::string&>().empty()) {
      const std::string& pattern = p->get_ref<const std::string&>();
      const RE2& re = Regex(pattern);
      if (!re.ok()) {
        r.Add(Other(path, Json(str),
                    Msg(path, fmt::format("should match '{}, but pattern is invalid: {}'", pattern,
                                          cel::GoRegexpError(pattern)))));
      } else if (!RE2::PartialMatch(str, re)) {
        r.Add(Other(path, Json(str), Msg(path, fmt::format("should match '{}'", pattern))));
      }
    }
    return r;
  }

  // numberValidator.Validate: multipleOf, minimum, maximum, each on the value's Go type.
  Result NumberCheck(const Json& data, const Json* s, const std::string& path) {
    Result r;
    const bool is_int = IsInt(data);
    const double d = data.get<double>();
    auto limit = [&](const Json& l) -> std::string {
      return is_int ? std::to_string(static_cast<int64_t>(l.get<double>()))
                    : GoFloat(l.get<double>());
    };
    if (const Json* m = Get(s, "multipleOf"); m && m->is_number()) {
      double factor = m->get<double>();
      if (factor < 0) {
        r.Add(Other(path, *m,
                    fmt::format("factor MultipleOf declared for {} must be positive: {}", path,
                                GoFloat(factor))));
      } else {
        bool ok;
        int64_t int_factor = static_cast<int64_t>(factor);
        if (is_int && int_factor != 0) {
          ok = data.get<int64_t>() % int_factor == 0;
        } else {
          double mult = factor < 1 ? 1 / factor * d : d / factor;
          ok = IsJsonInteger(mult);
          int_factor = 0;
        }
        if (!ok) {
          std::string shown =
              is_int && int_factor != 0 ? std::to_string(int_factor) : GoFloat(factor);
          r.Add(Other(path, data, Msg(path, "should be a multiple of " + shown)));
        }
      }
    }
    if (const Json* m = Get(s, "minimum"); m && m->is_number()) {
      bool excl = Bool(s, "exclusiveMinimum");
      bool fail = is_int ? (excl ? data.get<int64_t>() <= static_cast<int64_t>(m->get<double>())
                                 : data.get<int64_t>() < static_cast<int64_t>(m->get<double>()))
                         : (excl ? d <= m->get<double>() : d < m->get<double>());
      if (fail) {
        r.Add(Other(path, data,
                    Msg(path, fmt::format("should be greater than {}{}", excl ? "" : "or equal to ",
                                          limit(*m)))));
      }
    }
    if (const Json* m = Get(s, "maximum"); m && m->is_number()) {
      bool excl = Bool(s, "exclusiveMaximum");
      bool fail = is_int ? (excl ? data.get<int64_t>() >= static_cast<int64_t>(m->get<double>())
                                 : data.get<int64_t>() > static_cast<int64_t>(m->get<double>()))
                         : (excl ? d >= m->get<double>() : d > m->get<double>());
      if (fail) {
        r.Add(Other(path, data,
                    Msg(path, fmt::format("should be less than {}{}", excl ? "" : "or equal to ",
                                          limit(*m)))));
      }
    }
    ++r.match_count;
    return r;
  }

  // schemaSliceValidator.Validate: items, then minItems, maxItems, uniqueItems.
  Result ArrayCheck(const Json& data, const Json* s, const std::string& path, int depth) {
    Result r;
    const long long size = static_cast<long long>(data.size());
    if (const Json* items = Get(s, "items"); items && items->is_object()) {
      for (size_t i = 0; i < data.size(); ++i) {
        r.Merge(Validate(data[i], items, fmt::format("{}[{}]", path, i), depth + 1));
      }
    } else if (items && items->is_array()) {
      for (size_t i = 0; i < items->size() && i < data.size(); ++i) {
        r.Merge(Validate(data[i], &(*items)[i], fmt::format("{}[{}]", path, i), depth + 1));
      }
    }
    if (auto min = Int(s, "minItems"); min && size < *min) {
      r.Add(Other(path, Json(size), Msg(path, fmt::format("should have at least {} items", *min))));
    }
    if (auto max = Int(s, "maxItems"); max && size > *max) {
      VError e =
          Other(path, Json(size), Msg(path, fmt::format("should have at most {} items", *max)));
      e.code = Code::kMaxItems;
      e.valid = *max;
      r.Add(std::move(e));
    }
    if (Bool(s, "uniqueItems")) {
      std::set<std::string> seen;
      for (const auto& e : data) {
        if (!seen.insert(DeepKey(e)).second) {
          r.Add(Other(path, std::nullopt, Msg(path, "shouldn't contain duplicates")));
          break;
        }
      }
    }
    ++r.match_count;
    return r;
  }

  // A key equal for values Go's reflect.DeepEqual finds equal (int64 1 and float64 1 differ).
  static std::string DeepKey(const Json& v) {
    if (v.is_number()) return (IsInt(v) ? "i" : "f") + GoJson(v);
    if (v.is_object()) {
      std::string out = "{";
      for (const auto& [k, e] : v.items()) out += Json(k).dump() + ":" + DeepKey(e) + ",";
      return out + "}";
    }
    if (v.is_array()) {
      std::string out = "[";
      for (const auto& e : v) out += DeepKey(e) + ",";
      return out + "]";
    }
    return v.dump();
  }

  // basicCommonValidator: data converted to each enum value's Go type, then DeepEqual.
  static bool EnumMatches(const Json& data, const Json& allowed) {
    if (data.is_null() || allowed.is_null()) return false;
    if (allowed.is_number() && data.is_number()) {
      if (IsInt(allowed)) {
        double d = data.get<double>();
        int64_t converted = IsInt(data) ? data.get<int64_t>() : static_cast<int64_t>(d);
        return converted == allowed.get<int64_t>();
      }
      return data.get<double>() == allowed.get<double>();
    }
    if (allowed.is_string() && IsInt(data)) {
      // Go converts an integer to the string of that rune.
      int64_t cp = data.get<int64_t>();
      std::string utf8;
      core::AppendUtf8(utf8, cp < 0 || cp > 0x10FFFF ? 0xFFFD : static_cast<uint32_t>(cp));
      return utf8 == allowed.get_ref<const std::string&>();
    }
    if (KindOf(data) != KindOf(allowed)) return false;
    return DeepKey(data) == DeepKey(allowed);
  }

  static void CheckEnum(const Json& data, const Json* s, const std::string& path, Result& r) {
    const Json* e = Get(s, "enum");
    if (e == nullptr || !e->is_array() || e->empty()) return;
    for (const auto& allowed : *e) {
      if (EnumMatches(data, allowed)) return;
    }
    VError err = Other(path, data, Msg(path, "should be one of " + e->dump()));
    err.code = Code::kEnum;
    err.enum_values.assign(e->begin(), e->end());
    r.Add(std::move(err));
  }

  // objectValidator.Validate.
  Result ObjectCheck(const Json& data, const Json* s, const std::string& path, int depth) {
    Result r;
    const long long n = static_cast<long long>(data.size());
    if (auto min = Int(s, "minProperties"); min && n < *min) {
      r.Add(
          Other(path, Json(n), Msg(path, fmt::format("should have at least {} properties", *min))));
      return r;
    }
    if (auto max = Int(s, "maxProperties"); max && n > *max) {
      VError e =
          Other(path, Json(n), Msg(path, fmt::format("should have at most {} properties", *max)));
      e.code = Code::kTooManyProperties;
      e.valid = *max;
      r.Add(std::move(e));
      return r;
    }
    const Json* props = Get(s, "properties");
    if (props != nullptr && !props->is_object()) props = nullptr;
    const Json* additional = Get(s, "additionalProperties");
    const Json* patterns = Get(s, "patternProperties");
    auto regular = [&](const std::string& k) { return props != nullptr && props->contains(k); };
    auto child = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
    // Pattern properties validate matching keys; returns whether any matched.
    auto pattern_match = [&](const std::string& k, const Json& v) {
      bool matched = false;
      if (patterns == nullptr || !patterns->is_object()) return false;
      for (const auto& [pattern, sub] : patterns->items()) {
        const RE2& re = Regex(pattern);
        if (re.ok() && RE2::PartialMatch(k, re)) {
          matched = true;
          r.Merge(Validate(v, &sub, path + "." + k, depth + 1));
        }
      }
      return matched;
    };
    if (additional != nullptr && additional->is_boolean() && !additional->get<bool>()) {
      for (const auto& [k, v] : data.items()) {
        bool matched = false;
        if (patterns != nullptr && patterns->is_object()) {
          for (const auto& [pattern, sub] : patterns->items()) {
            const RE2& re = Regex(pattern);
            if (re.ok() && RE2::PartialMatch(k, re)) matched = true;
          }
        }
        if (!regular(k) && !matched) {
          r.Add(Other(path, Json(k), path + "." + k + " in body is a forbidden property"));
        }
      }
    } else {
      for (const auto& [k, v] : data.items()) {
        bool matched = pattern_match(k, v);
        if (!regular(k) && !matched && additional != nullptr && additional->is_object()) {
          r.Merge(Validate(v, additional, path + "." + k, depth + 1));
        }
      }
    }
    if (props != nullptr) {
      for (const auto& [k, sub] : props->items()) {
        auto it = data.find(k);
        if (it != data.end()) r.Merge(Validate(*it, &sub, child(k), depth + 1));
      }
    }
    if (const Json* req = Get(s, "required"); req && req->is_array()) {
      for (const auto& k : *req) {
        if (!k.is_string() || data.contains(k.get<std::string>())) continue;
        VError e = Other(path + "." + k.get<std::string>(), std::nullopt,
                         Msg(path + "." + k.get<std::string>(), "is required"));
        e.code = Code::kRequired;
        r.Add(std::move(e));
      }
    }
    if (additional != nullptr && additional->is_boolean() && !additional->get<bool>()) {
      for (const auto& [k, v] : data.items()) {
        if (!regular(k)) pattern_match(k, v);
      }
    }
    return r;
  }

  const RE2& Regex(const std::string& pattern) {
    auto it = regexes_.find(pattern);
    if (it == regexes_.end()) {
      RE2::Options options;
      options.set_log_errors(false);
      it = regexes_.emplace(pattern, std::make_unique<RE2>(pattern, options)).first;
    }
    return *it->second;
  }

  std::map<std::string, std::unique_ptr<RE2>> regexes_;
};

std::string ChildPath(const std::optional<std::string>& base, const std::string& name) {
  return base ? *base + "." + name : name;
}

// apiextensions' ValidateCustomResource: kube-openapi errors to field causes.
void ToCauses(const Result& result, const std::optional<std::string>& fld_path,
              std::vector<core::Cause>& causes) {
  const std::string root = fld_path ? *fld_path : "<nil>";
  for (const auto& e : result.errors) {
    if (e.code == Code::kComposite) {
      causes.push_back(Invalid(root, Json(""), e.message));
      continue;
    }
    std::string field = root;
    if (!e.name.empty() && e.name != ".") {
      std::string name = e.name[0] == '.' ? e.name.substr(1) : e.name;
      field = ChildPath(fld_path, name);
    }
    const Json value = e.value ? *e.value : Json("");
    switch (e.code) {
      case Code::kRequired:
        causes.push_back(Required(field));
        break;
      case Code::kEnum: {
        std::vector<std::string> values;
        for (const auto& v : e.enum_values) {
          values.push_back(v.is_string() ? v.get<std::string>() : GoJson(v));
        }
        causes.push_back(NotSupported(field, value, values));
        break;
      }
      case Code::kTooLong:
        causes.push_back(TooLong(field, e.valid));
        break;
      case Code::kMaxItems:
      case Code::kTooManyProperties:
        causes.push_back(TooMany(
            field, e.value && e.value->is_number() ? e.value->get<long long>() : -1, e.valid));
        break;
      case Code::kInvalidType:
        causes.push_back(TypeInvalid(field, value, e.message));
        break;
      default:
        causes.push_back(Invalid(field, value, e.message));
    }
  }
}

}  // namespace

void ValidateValue(const Json& value, const Json& schema,
                   const std::optional<std::string>& fld_path, std::vector<core::Cause>& causes) {
  OpenApiValidator validator;
  ToCauses(validator.Validate(value, &schema, "", 0), fld_path, causes);
}

}  // namespace klutch::schema
