#include "machinery/validation.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace klutch::machinery::validation_test {
namespace {

// kube-apiserver's messages, spelled out once (apimachinery's util/validation).
const std::string kSubdomainMsg =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const std::string kLabelMsg =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const std::string kQualifiedMsg =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const std::string kLabelValueMsg =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const std::string kConfigKeyMsg =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')";

using Check = std::vector<std::string> (*)(std::string_view);

struct SyntaxCase {
  const char* name;
  Check check;
  std::string value;
  std::vector<std::string> want;
};

TEST(Validation, SyntaxChecksReturnKubeApiserverMessages) {
  const std::vector<SyntaxCase> cases = {
      {"label ok", IsDns1123Label, "my-name", {}},
      {"label with dots", IsDns1123Label, "a.b", {"must not contain dots"}},
      {"label bad characters", IsDns1123Label, "Bad_Name", {kLabelMsg}},
      {"label too long",
       IsDns1123Label,
       std::string(64, 'a'),
       {"must be no more than 63 characters"}},
      {"label too long with dots",
       IsDns1123Label,
       std::string(62, 'a') + ".b",
       {"must be no more than 63 characters", "must not contain dots"}},
      {"subdomain ok", IsDns1123Subdomain, "example.com", {}},
      {"subdomain bad characters", IsDns1123Subdomain, "Bad_Name", {kSubdomainMsg}},
      {"subdomain too long",
       IsDns1123Subdomain,
       std::string(254, 'a'),
       {"must be no more than 253 characters"}},
      {"qualified ok", IsQualifiedName, "example.com/App_1", {}},
      {"qualified bad name part", IsQualifiedName, "-bad", {"name part " + kQualifiedMsg}},
      {"qualified empty prefix", IsQualifiedName, "/app", {"prefix part must be non-empty"}},
      {"qualified bad prefix",
       IsQualifiedName,
       "Example.com/app",
       {"prefix part " + kSubdomainMsg}},
      {"qualified empty name part",
       IsQualifiedName,
       "example.com/",
       {"name part must be non-empty", "name part " + kQualifiedMsg}},
      {"qualified empty",
       IsQualifiedName,
       "",
       {"name part must be non-empty", "name part " + kQualifiedMsg}},
      {"qualified name part too long",
       IsQualifiedName,
       std::string(64, 'a'),
       {"name part must be no more than 63 characters"}},
      {"qualified two slashes",
       IsQualifiedName,
       "a/b/c",
       {"a qualified name " + kQualifiedMsg +
        " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"}},
      {"label value empty", IsValidLabelValue, "", {}},
      {"label value bad", IsValidLabelValue, "bad value", {kLabelValueMsg}},
      {"label value too long",
       IsValidLabelValue,
       std::string(64, 'a'),
       {"must be no more than 63 characters"}},
      {"config key ok", IsConfigMapKey, ".env", {}},
      {"config key bad", IsConfigMapKey, "bad key!", {kConfigKeyMsg}},
      {"config key dot", IsConfigMapKey, ".", {"must not be '.'"}},
      {"config key dot dot", IsConfigMapKey, "..", {"must not be '..'"}},
      {"config key dot dot prefix", IsConfigMapKey, "..a", {"must not start with '..'"}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.check(c.value), c.want) << c.name;
  }
}

struct MetaCase {
  const char* name;
  const char* metadata;
  bool namespaced;
  NameRule rule;
  std::vector<std::string> want;  // "field: message [reason]"
};

std::vector<std::string> Render(const std::vector<core::Cause>& causes) {
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(c.field + ": " + c.message + " [" + c.reason + "]");
  return out;
}

TEST(Validation, ObjectMetaMatchesKubeApiserver) {
  constexpr auto kSub = NameRule::kDns1123Subdomain;
  constexpr auto kLabel = NameRule::kDns1123Label;
  constexpr auto kPath = NameRule::kPathSegment;
  const std::vector<MetaCase> cases = {
      {"valid", R"({"name":"ok","namespace":"demo"})", true, kSub, {}},
      {"name missing",
       R"({"namespace":"demo"})",
       true,
       kSub,
       {"metadata.name: Required value: name or generateName is required [FieldValueRequired]"}},
      {"name not a subdomain",
       R"({"name":"Bad_Name"})",
       false,
       kSub,
       {"metadata.name: Invalid value: \"Bad_Name\": " + kSubdomainMsg + " [FieldValueInvalid]"}},
      {"name not a label",
       R"({"name":"a.b"})",
       false,
       kLabel,
       {"metadata.name: Invalid value: \"a.b\": must not contain dots [FieldValueInvalid]"}},
      {"name is a dot segment",
       R"({"name":".."})",
       false,
       kPath,
       {"metadata.name: Invalid value: \"..\": may not be '..' [FieldValueInvalid]"}},
      {"name with slash and percent",
       R"({"name":"a/b%c"})",
       false,
       kPath,
       {"metadata.name: Invalid value: \"a/b%c\": may not contain '/' [FieldValueInvalid]",
        "metadata.name: Invalid value: \"a/b%c\": may not contain '%' [FieldValueInvalid]"}},
      {"generateName with trailing dash",
       R"({"generateName":"gen-","name":"gen-x7k2p"})",
       false,
       kSub,
       {}},
      {"generateName invalid, before name",
       R"({"generateName":"Bad_","name":"Bad_x7k2p"})",
       false,
       kSub,
       {"metadata.generateName: Invalid value: \"Bad_\": " + kSubdomainMsg + " [FieldValueInvalid]",
        "metadata.name: Invalid value: \"Bad_x7k2p\": " + kSubdomainMsg + " [FieldValueInvalid]"}},
      {"generateName path segment prefix may be a dot",
       R"({"generateName":".","name":".abcde"})",
       false,
       kPath,
       {}},
      {"namespace missing",
       R"({"name":"ok"})",
       true,
       kSub,
       {"metadata.namespace: Required value [FieldValueRequired]"}},
      {"namespace not a label",
       R"({"name":"ok","namespace":"a.b"})",
       true,
       kSub,
       {"metadata.namespace: Invalid value: \"a.b\": must not contain dots [FieldValueInvalid]"}},
      {"namespace on a cluster-scoped kind",
       R"({"name":"ok","namespace":"demo"})",
       false,
       kSub,
       {"metadata.namespace: Forbidden: not allowed on this type [FieldValueForbidden]"}},
      {"negative generation",
       R"({"name":"ok","generation":-1})",
       false,
       kSub,
       {"metadata.generation: Invalid value: -1: must be greater than or equal to 0 "
        "[FieldValueInvalid]"}},
      {"label key and value",
       R"({"name":"ok","labels":{"bad key":"bad value"}})",
       false,
       kSub,
       {"metadata.labels: Invalid value: \"bad key\": name part " + kQualifiedMsg +
            " [FieldValueInvalid]",
        "metadata.labels: Invalid value: \"bad value\": " + kLabelValueMsg +
            " [FieldValueInvalid]"}},
      {"annotation keys ignore case",
       R"({"name":"ok","annotations":{"Example.com/Key":"v"}})",
       false,
       kSub,
       {}},
      {"annotation key",
       R"({"name":"ok","annotations":{"Bad Key":"v"}})",
       false,
       kSub,
       {"metadata.annotations: Invalid value: \"Bad Key\": name part " + kQualifiedMsg +
        " [FieldValueInvalid]"}},
      {"owner reference fields missing",
       R"({"name":"ok","ownerReferences":[{}]})",
       false,
       kSub,
       {"metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty "
        "[FieldValueInvalid]",
        "metadata.ownerReferences.kind: Invalid value: \"\": must not be empty "
        "[FieldValueInvalid]",
        "metadata.ownerReferences.name: Invalid value: \"\": must not be empty "
        "[FieldValueInvalid]",
        "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty "
        "[FieldValueInvalid]"}},
      {"owner reference apiVersion without version",
       R"({"name":"ok","ownerReferences":[{"apiVersion":"apps/","kind":"K","name":"n",
           "uid":"u"}]})",
       false,
       kSub,
       {"metadata.ownerReferences.apiVersion: Invalid value: \"apps/\": version must not be "
        "empty [FieldValueInvalid]"}},
      {"event as owner",
       R"({"name":"ok","ownerReferences":[{"apiVersion":"v1","kind":"Event","name":"e",
           "uid":"u"}]})",
       false,
       kSub,
       {"metadata.ownerReferences: Invalid value: v1.OwnerReference{APIVersion:\"v1\", "
        "Kind:\"Event\", Name:\"e\", UID:\"u\", Controller:(*bool)(nil), "
        "BlockOwnerDeletion:(*bool)(nil)}: /v1, Kind=Event is disallowed from being an owner "
        "[FieldValueInvalid]"}},
      {"two controllers",
       R"({"name":"ok","ownerReferences":[
           {"apiVersion":"v1","kind":"ConfigMap","name":"a","uid":"1","controller":true},
           {"apiVersion":"v1","kind":"Secret","name":"b","uid":"2","controller":true}]})",
       false,
       kSub,
       {"metadata.ownerReferences: Invalid value: []v1.OwnerReference{"
        "v1.OwnerReference{APIVersion:\"v1\", Kind:\"ConfigMap\", Name:\"a\", UID:\"1\", "
        "Controller:(*bool)(0xc000000000), BlockOwnerDeletion:(*bool)(nil)}, "
        "v1.OwnerReference{APIVersion:\"v1\", Kind:\"Secret\", Name:\"b\", UID:\"2\", "
        "Controller:(*bool)(0xc000000000), BlockOwnerDeletion:(*bool)(nil)}}: Only one "
        "reference can have Controller set to true. Found \"true\" in references for "
        "ConfigMap/a and Secret/b [FieldValueInvalid]"}},
      {"finalizer not qualified",
       R"({"name":"ok","finalizers":["example.com/f","bad f"]})",
       false,
       kSub,
       {"metadata.finalizers: Invalid value: \"bad f\": name part " + kQualifiedMsg +
        " [FieldValueInvalid]"}},
      {"orphan and foreground finalizers",
       R"({"name":"ok","finalizers":["orphan",
           "foregroundDeletion"]})",
       false,
       kSub,
       {"metadata.finalizers: Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: "
        "finalizer orphan and foregroundDeletion cannot be both set [FieldValueInvalid]"}},
      {"owner references before finalizers",
       R"({"name":"ok","finalizers":["bad f"],"ownerReferences":[{"apiVersion":"v1",
           "kind":"K","name":"n"}]})",
       false,
       kSub,
       {"metadata.ownerReferences.uid: Invalid value: \"\": must not be empty "
        "[FieldValueInvalid]",
        "metadata.finalizers: Invalid value: \"bad f\": name part " + kQualifiedMsg +
            " [FieldValueInvalid]"}},
  };
  for (const auto& c : cases) {
    std::vector<core::Cause> causes;
    ValidateObjectMeta(Json::parse(c.metadata), c.namespaced, c.rule, causes);
    EXPECT_EQ(Render(causes), c.want) << c.name;
  }
}

TEST(Validation, AnnotationsOverTheTotalSizeAreTooLong) {
  Json meta = {{"name", "ok"}, {"annotations", {{"a", std::string(262144, 'x')}}}};
  std::vector<core::Cause> causes;
  ValidateObjectMeta(meta, false, NameRule::kDns1123Subdomain, causes);
  EXPECT_EQ(Render(causes), std::vector<std::string>{"metadata.annotations: Too long: may not be "
                                                     "more than 262144 bytes [FieldValueTooLong]"});
  causes.clear();
  meta["annotations"]["a"] = std::string(262143, 'x');  // key and value together: the limit
  ValidateObjectMeta(meta, false, NameRule::kDns1123Subdomain, causes);
  EXPECT_TRUE(causes.empty());
}

TEST(ReplaceWholeName, ReplacesTheNameNotWordsThatContainIt) {
  EXPECT_EQ(ReplaceWholeName("ns-1 ns-10 xns-1 ns-1-a ns-1/b (ns-1) \"ns-1\"", "ns-1", "team"),
            "team ns-10 xns-1 ns-1-a team/b (team) \"team\"");
  EXPECT_EQ(ReplaceWholeName("ns-1", "ns-1", ""), "");
  EXPECT_EQ(ReplaceWholeName("nothing here", "ns-1", "team"), "nothing here");
  EXPECT_EQ(ReplaceWholeName("abc", "", "team"), "abc");
}

}  // namespace
}  // namespace klutch::machinery::validation_test
