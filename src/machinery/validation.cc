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
// validation.RegexError(qualifiedNameErrMsg, qualifiedNameFmt, ...), used with the prefixes
// "name part " and "a qualified name ".
constexpr const char* kQualifiedMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
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
  if (!MatchesLabel(value)) {
    // A valid subdomain that is not a valid label can only be at fault for its dots.
    errs.push_back(MatchesSubdomain(value) ? "must not contain dots" : kLabelMsg);
  }
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
      errs.push_back(std::string("a qualified name ") + kQualifiedMsg +
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
  } else if (name.size() > 63) {
    errs.push_back("name part must be no more than 63 characters");
  }
  // An empty name part also fails the pattern: kube-apiserver reports both.
  if (!MatchesQualifiedPart(name)) errs.push_back(std::string("name part ") + kQualifiedMsg);
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
  // At most one of these, as in validation.hasChDirPrefix.
  if (value == ".") {
    errs.push_back("must not be '.'");
  } else if (value == "..") {
    errs.push_back("must not be '..'");
  } else if (value.starts_with("..")) {
    errs.push_back("must not start with '..'");
  }
  return errs;
}

namespace {

// ValidateNameFunc: `prefix` is set for generateName, which gets random characters appended,
// so a trailing '-' is allowed there (maskTrailingDash, including its drop-two-add-one quirk).
std::vector<std::string> NameErrors(NameRule rule, std::string_view name, bool prefix) {
  std::string masked(name);
  if (prefix && masked.size() > 1 && masked.back() == '-') {
    masked.resize(masked.size() - 2);
    masked += 'a';
  }
  std::vector<std::string> errs;
  switch (rule) {
    case NameRule::kDns1123Subdomain:
      return IsDns1123Subdomain(masked);
    case NameRule::kDns1123Label:
      return IsDns1123Label(masked);
    case NameRule::kPathSegment:
      // path.ValidatePathSegmentName: '.' and '..' end the check; a prefix may be either.
      if (!prefix && (name == "." || name == "..")) {
        errs.push_back(fmt::format("may not be '{}'", name));
        return errs;
      }
      if (name.find('/') != std::string_view::npos) errs.push_back("may not contain '/'");
      if (name.find('%') != std::string_view::npos) errs.push_back("may not contain '%'");
      return errs;
  }
  return errs;
}

// Go's %#v of a *bool. A set pointer prints its heap address in kube-apiserver; a fixed one
// stands in for it here.
std::string GoBoolPointer(const Json* b) {
  return b == nullptr || !b->is_boolean() ? "(*bool)(nil)" : "(*bool)(0xc000000000)";
}

// Go's %#v of a metav1.OwnerReference, the bad value kube-apiserver prints for owner errors.
std::string GoOwnerReference(const Json& ref) {
  return fmt::format(
      "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, "
      "BlockOwnerDeletion:{}}}",
      core::GoQuote(GetString(ref, {"apiVersion"})), core::GoQuote(GetString(ref, {"kind"})),
      core::GoQuote(GetString(ref, {"name"})), core::GoQuote(GetString(ref, {"uid"})),
      GoBoolPointer(Find(ref, {"controller"})), GoBoolPointer(Find(ref, {"blockOwnerDeletion"})));
}

core::Cause InvalidGoValue(std::string field, const std::string& go_value,
                           const std::string& detail) {
  return {"FieldValueInvalid", "Invalid value: " + go_value + ": " + detail, std::move(field)};
}

// schema.FromAPIVersionAndKind(apiVersion, "").Version: empty when apiVersion does not parse.
std::string_view VersionOf(std::string_view api_version) {
  auto slash = api_version.find('/');
  if (slash == std::string_view::npos) return api_version;
  if (api_version.find('/', slash + 1) != std::string_view::npos) return {};
  return api_version.substr(slash + 1);
}

void ValidateOwnerReferences(const Json& owners, std::vector<core::Cause>& causes) {
  // Paths are not indexed: kube-apiserver reports every reference's fields under
  // metadata.ownerReferences.
  const std::string base = "metadata.ownerReferences";
  std::string first_controller;
  for (const Json& o : owners) {
    const std::string api_version = GetString(o, {"apiVersion"});
    const std::string kind = GetString(o, {"kind"});
    const std::string name = GetString(o, {"name"});
    const std::string uid = GetString(o, {"uid"});
    if (VersionOf(api_version).empty()) {
      causes.push_back(
          FieldInvalid(base + ".apiVersion", api_version, "version must not be empty"));
    }
    if (kind.empty()) causes.push_back(FieldInvalid(base + ".kind", kind, "must not be empty"));
    if (name.empty()) causes.push_back(FieldInvalid(base + ".name", name, "must not be empty"));
    if (uid.empty()) causes.push_back(FieldInvalid(base + ".uid", uid, "must not be empty"));
    if (api_version == "v1" && kind == "Event") {  // validation.BannedOwners
      causes.push_back(InvalidGoValue(base, GoOwnerReference(o),
                                      "/v1, Kind=Event is disallowed from being an owner"));
    }
    const Json* c = Find(o, {"controller"});
    if (c && c->is_boolean() && c->get<bool>()) {
      const std::string current = kind + "/" + name;
      if (first_controller.empty()) {
        first_controller = current;
      } else {
        std::string all = "[]v1.OwnerReference{";
        for (size_t i = 0; i < owners.size(); ++i) {
          if (i) all += ", ";
          all += GoOwnerReference(owners[i]);
        }
        all += "}";
        causes.push_back(InvalidGoValue(
            base, all,
            fmt::format("Only one reference can have Controller set to true. Found \"true\" in "
                        "references for {} and {}",
                        first_controller, current)));
      }
    }
  }
}

void ValidateFinalizers(const Json& fins, std::vector<core::Cause>& causes) {
  // As for owner references, one unindexed path for every finalizer.
  const std::string field = "metadata.finalizers";
  bool orphan = false;
  bool foreground = false;
  std::string all = "[]string{";
  for (size_t i = 0; i < fins.size(); ++i) {
    const Json& f = fins[i];
    if (!f.is_string()) {
      causes.push_back(FieldInvalid(field, f, "must be a string"));
      continue;
    }
    const std::string& s = f.get_ref<const std::string&>();
    for (const auto& e : IsQualifiedName(s)) causes.push_back(FieldInvalid(field, s, e));
    orphan = orphan || s == "orphan";
    foreground = foreground || s == "foregroundDeletion";
    if (i) all += ", ";
    all += core::GoQuote(s);
  }
  all += "}";
  if (orphan && foreground) {
    causes.push_back(
        InvalidGoValue(field, all, "finalizer orphan and foregroundDeletion cannot be both set"));
  }
}

}  // namespace

void ValidateObjectMeta(const Json& metadata, bool namespaced, NameRule rule,
                        std::vector<core::Cause>& causes) {
  // The order of apimachinery's ValidateObjectMetaAccessor: generateName, name, namespace,
  // generation, labels, annotations, ownerReferences, finalizers.
  const std::string name = GetString(metadata, {"name"});
  const std::string generate = GetString(metadata, {"generateName"});
  if (!generate.empty()) {
    for (const auto& e : NameErrors(rule, generate, /*prefix=*/true)) {
      causes.push_back(FieldInvalid("metadata.generateName", generate, e));
    }
  }
  if (name.empty()) {
    causes.push_back(FieldRequired("metadata.name", "name or generateName is required"));
  } else {
    for (const auto& e : NameErrors(rule, name, /*prefix=*/false)) {
      causes.push_back(FieldInvalid("metadata.name", name, e));
    }
  }
  const std::string ns = GetString(metadata, {"namespace"});
  if (namespaced) {
    if (ns.empty()) {
      causes.push_back(FieldRequired("metadata.namespace"));
    } else {
      for (const auto& e : IsDns1123Label(ns)) {
        causes.push_back(FieldInvalid("metadata.namespace", ns, e));
      }
    }
  } else if (!ns.empty()) {
    causes.push_back(FieldForbidden("metadata.namespace", "not allowed on this type"));
  }
  if (const Json* g = Find(metadata, {"generation"}); g && g->is_number() && g->get<double>() < 0) {
    causes.push_back(FieldInvalid("metadata.generation", *g, "must be greater than or equal to 0"));
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
      // A qualified name except that case does not matter; the message shows the key as sent.
      for (const auto& e : IsQualifiedName(core::ToLower(k))) {
        causes.push_back(FieldInvalid("metadata.annotations", k, e));
      }
      total += k.size() + (v.is_string() ? v.get_ref<const std::string&>().size() : 0);
    }
    if (total > kTotalAnnotationBytes) {
      causes.push_back(FieldTooLong("metadata.annotations", "", kTotalAnnotationBytes));
    }
  }
  if (const Json* owners = Find(metadata, {"ownerReferences"}); owners && owners->is_array()) {
    ValidateOwnerReferences(*owners, causes);
  }
  if (const Json* fins = Find(metadata, {"finalizers"}); fins && fins->is_array()) {
    ValidateFinalizers(*fins, causes);
  }
}

std::string ReplaceWholeName(const std::string& text, std::string_view name,
                             std::string_view with) {
  if (name.empty()) return text;
  auto name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  };
  std::string out;
  size_t copied = 0;
  for (size_t hit = text.find(name); hit != std::string::npos; hit = text.find(name, hit + 1)) {
    const size_t end = hit + name.size();
    if ((hit > 0 && name_char(text[hit - 1])) || (end < text.size() && name_char(text[end]))) {
      continue;
    }
    out.append(text, copied, hit - copied).append(with);
    copied = end;
    hit = end - 1;
  }
  if (copied == 0) return text;
  return out.append(text, copied);
}

}  // namespace klutch::machinery
