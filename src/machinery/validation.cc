#include "machinery/validation.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::machinery {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

bool MatchesLabel(std::string_view s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

bool MatchesSubdomain(std::string_view s) {
  if (s.empty()) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!MatchesLabel(s.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
bool MatchesQualifiedPart(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

constexpr const char* kLabelMsg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
constexpr const char* kSubdomainMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
constexpr const char* kQualifiedMsg =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
constexpr const char* kLabelValueMsg =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
constexpr const char* kConfigKeyMsg =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')";

constexpr size_t kTotalAnnotationBytes = 256 * 1024;

}  // namespace

std::vector<std::string> IsDns1123Label(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back("must be no more than 63 characters");
  if (!MatchesLabel(value)) errs.push_back(kLabelMsg);
  return errs;
}

std::vector<std::string> IsDns1123Subdomain(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 253) errs.push_back("must be no more than 253 characters");
  if (!MatchesSubdomain(value)) errs.push_back(kSubdomainMsg);
  return errs;
}

std::vector<std::string> IsQualifiedName(std::string_view value) {
  std::vector<std::string> errs;
  std::string_view name = value;
  auto slash = value.find('/');
  if (slash != std::string_view::npos) {
    if (value.find('/', slash + 1) != std::string_view::npos) {
      errs.push_back(std::string(kQualifiedMsg) +
                     " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')");
      return errs;
    }
    std::string_view prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (const auto& e : IsDns1123Subdomain(prefix)) errs.push_back("prefix part " + e);
    }
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else {
    if (name.size() > 63) errs.push_back("name part must be no more than 63 characters");
    if (!MatchesQualifiedPart(name)) errs.push_back(kQualifiedMsg);
  }
  return errs;
}

std::vector<std::string> IsValidLabelValue(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back("must be no more than 63 characters");
  if (!value.empty() && !MatchesQualifiedPart(value)) errs.push_back(kLabelValueMsg);
  return errs;
}

std::vector<std::string> IsConfigMapKey(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 253) errs.push_back("must be no more than 253 characters");
  bool ok = !value.empty();
  for (char c : value) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') ok = false;
  }
  if (!ok) errs.push_back(kConfigKeyMsg);
  if (value == ".") errs.push_back("must not be '.'");
  if (value == "..") errs.push_back("must not be '..'");
  if (value.starts_with("..")) errs.push_back("must not start with '..'");
  return errs;
}

void ValidateObjectMeta(const Json& metadata, bool namespaced, NameRule rule,
                        std::vector<core::Cause>& causes) {
  const std::string name = GetString(metadata, {"name"});
  const std::string generate = GetString(metadata, {"generateName"});
  if (name.empty()) {
    if (generate.empty()) {
      causes.push_back(FieldRequired("metadata.name", "name or generateName is required"));
    }
  } else {
    std::vector<std::string> errs;
    switch (rule) {
      case NameRule::kDns1123Subdomain:
        errs = IsDns1123Subdomain(name);
        break;
      case NameRule::kDns1123Label:
        errs = IsDns1123Label(name);
        break;
      case NameRule::kPathSegment:
        if (name == "." || name == "..") errs.push_back(fmt::format("may not be '{}'", name));
        if (name.find('/') != std::string::npos) errs.push_back("may not contain '/'");
        if (name.find('%') != std::string::npos) errs.push_back("may not contain '%'");
        break;
    }
    for (const auto& e : errs) causes.push_back(FieldInvalid("metadata.name", name, e));
  }
  if (namespaced) {
    const std::string ns = GetString(metadata, {"namespace"});
    if (ns.empty()) {
      causes.push_back(FieldRequired("metadata.namespace"));
    } else {
      for (const auto& e : IsDns1123Label(ns)) {
        causes.push_back(FieldInvalid("metadata.namespace", ns, e));
      }
    }
  }
  if (const Json* labels = Find(metadata, {"labels"}); labels && labels->is_object()) {
    for (const auto& [k, v] : labels->items()) {
      for (const auto& e : IsQualifiedName(k)) {
        causes.push_back(FieldInvalid("metadata.labels", k, e));
      }
      if (!v.is_string()) {
        causes.push_back(FieldInvalid("metadata.labels", v, "label values must be strings"));
        continue;
      }
      for (const auto& e : IsValidLabelValue(v.get<std::string>())) {
        causes.push_back(FieldInvalid("metadata.labels", v, e));
      }
    }
  }
  if (const Json* ann = Find(metadata, {"annotations"}); ann && ann->is_object()) {
    size_t total = 0;
    for (const auto& [k, v] : ann->items()) {
      for (const auto& e : IsQualifiedName(core::ToLower(k))) {
        causes.push_back(FieldInvalid("metadata.annotations", k, e));
      }
      total += k.size() + (v.is_string() ? v.get_ref<const std::string&>().size() : 0);
    }
    if (total > kTotalAnnotationBytes) {
      causes.push_back({"FieldValueTooLong",
                        fmt::format("Too long: must have at most {} bytes", kTotalAnnotationBytes),
                        "metadata.annotations"});
    }
  }
  if (const Json* fins = Find(metadata, {"finalizers"}); fins && fins->is_array()) {
    for (size_t i = 0; i < fins->size(); ++i) {
      const Json& f = (*fins)[i];
      std::string field = fmt::format("metadata.finalizers[{}]", i);
      if (!f.is_string()) {
        causes.push_back(FieldInvalid(field, f, "must be a string"));
        continue;
      }
      for (const auto& e : IsQualifiedName(f.get<std::string>())) {
        causes.push_back(FieldInvalid(field, f, e));
      }
    }
  }
  if (const Json* owners = Find(metadata, {"ownerReferences"}); owners && owners->is_array()) {
    int controllers = 0;
    for (size_t i = 0; i < owners->size(); ++i) {
      const Json& o = (*owners)[i];
      std::string base = fmt::format("metadata.ownerReferences[{}]", i);
      if (GetString(o, {"apiVersion"}).empty()) {
        causes.push_back(FieldInvalid(base + ".apiVersion", "", "version must not be empty"));
      }
      if (GetString(o, {"kind"}).empty()) {
        causes.push_back(FieldInvalid(base + ".kind", "", "kind must not be empty"));
      }
      if (GetString(o, {"name"}).empty()) {
        causes.push_back(FieldInvalid(base + ".name", "", "name must not be empty"));
      }
      if (GetString(o, {"uid"}).empty()) {
        causes.push_back(FieldInvalid(base + ".uid", "", "uid must not be empty"));
      }
      const Json* c = Find(o, {"controller"});
      if (c && c->is_boolean() && c->get<bool>()) ++controllers;
    }
    if (controllers > 1) {
      causes.push_back(FieldInvalid("metadata.ownerReferences", *owners,
                                    "Only one reference can have Controller set to true"));
    }
  }
}

}  // namespace klutch::machinery
