#include "machinery/strategic_merge_patch.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/support/json_text.h"

namespace klutch::machinery::strategic_merge_patch_test {
namespace {

using fixture::J;

// A trimmed OpenAPI v3 document in the shape kube-apiserver serves: extensions beside `items`
// or beside an allOf-wrapped $ref, types reached through components.schemas.
const Json& Document() {
  static const Json* doc = new Json(J(R"({"components":{"schemas":{
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta":{"type":"object","properties":{
      "name":{"type":"string"},
      "labels":{"type":"object","additionalProperties":{"type":"string"}},
      "annotations":{"type":"object","additionalProperties":{"type":"string"}},
      "finalizers":{"type":"array","items":{"type":"string","default":""},
                    "x-kubernetes-list-type":"set","x-kubernetes-patch-strategy":"merge"},
      "ownerReferences":{"type":"array",
        "items":{"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"}],"default":{}},
        "x-kubernetes-list-map-keys":["uid"],"x-kubernetes-list-type":"map",
        "x-kubernetes-patch-merge-key":"uid","x-kubernetes-patch-strategy":"merge"}}},
    "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference":{"type":"object","properties":{
      "apiVersion":{"type":"string"},"kind":{"type":"string"},"name":{"type":"string"},
      "uid":{"type":"string"},"controller":{"type":"boolean"}}},
    "io.k8s.api.core.v1.ObjectReference":{"type":"object","properties":{
      "name":{"type":"string"},"namespace":{"type":"string"},"kind":{"type":"string"}}},
    "io.k8s.api.core.v1.LocalObjectReference":{"type":"object","properties":{
      "name":{"type":"string"}}},
    "io.k8s.api.core.v1.ServiceAccount":{"type":"object","properties":{
      "apiVersion":{"type":"string"},"kind":{"type":"string"},
      "metadata":{"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],"default":{}},
      "secrets":{"type":"array",
        "items":{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.ObjectReference"}],"default":{}},
        "x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":"merge"},
      "imagePullSecrets":{"type":"array",
        "items":{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.LocalObjectReference"}],"default":{}}}}},
    "io.k8s.api.core.v1.ConfigMap":{"type":"object","properties":{
      "metadata":{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
      "data":{"type":"object","additionalProperties":{"type":"string"}},
      "immutable":{"type":"boolean"}}},
    "io.k8s.api.core.v1.Namespace":{"type":"object","properties":{
      "metadata":{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
      "status":{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.NamespaceStatus"}]}}},
    "io.k8s.api.core.v1.NamespaceStatus":{"type":"object","properties":{
      "phase":{"type":"string"},
      "conditions":{"type":"array",
        "items":{"$ref":"#/components/schemas/io.k8s.api.core.v1.NamespaceCondition"},
        "x-kubernetes-patch-merge-key":"type","x-kubernetes-patch-strategy":"merge"}}},
    "io.k8s.api.core.v1.NamespaceCondition":{"type":"object","properties":{
      "type":{"type":"string"},"status":{"type":"string"},"reason":{"type":"string"}}},
    "io.k8s.api.apps.v1.Deployment":{"type":"object","properties":{
      "metadata":{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
      "spec":{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}]}}},
    "io.k8s.api.apps.v1.DeploymentSpec":{"type":"object","properties":{
      "replicas":{"type":"integer"},
      "selector":{"type":"object","x-kubernetes-patch-strategy":"replace",
                  "additionalProperties":{"type":"string"}},
      "strategy":{"allOf":[{"$ref":"#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy"}],
                  "x-kubernetes-patch-strategy":"retainKeys"},
      "template":{"$ref":"#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec"}}},
    "io.k8s.api.apps.v1.DeploymentStrategy":{"type":"object","properties":{
      "type":{"type":"string"},"rollingUpdate":{"type":"object"}}},
    "io.k8s.api.core.v1.PodTemplateSpec":{"type":"object","properties":{
      "metadata":{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
      "spec":{"$ref":"#/components/schemas/io.k8s.api.core.v1.PodSpec"}}},
    "io.k8s.api.core.v1.PodSpec":{"type":"object","properties":{
      "containers":{"type":"array","items":{"$ref":"#/components/schemas/io.k8s.api.core.v1.Container"},
        "x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":"merge"},
      "tolerations":{"type":"array","items":{"type":"object"}},
      "volumes":{"type":"array","items":{"$ref":"#/components/schemas/io.k8s.api.core.v1.Volume"},
        "x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":"merge,retainKeys"}}},
    "io.k8s.api.core.v1.Container":{"type":"object","properties":{
      "name":{"type":"string"},"image":{"type":"string"},
      "args":{"type":"array","items":{"type":"string"}},
      "env":{"type":"array","items":{"$ref":"#/components/schemas/io.k8s.api.core.v1.EnvVar"},
        "x-kubernetes-patch-merge-key":"name","x-kubernetes-patch-strategy":"merge"}}},
    "io.k8s.api.core.v1.EnvVar":{"type":"object","properties":{
      "name":{"type":"string"},"value":{"type":"string"}}},
    "io.k8s.api.core.v1.Volume":{"type":"object","properties":{
      "name":{"type":"string"},"configMap":{"type":"object"},"secret":{"type":"object"}}}
  }}})"));
  return *doc;
}

SchemaCursor Kind(const std::string& name) {
  const Json& schemas = Document()["components"]["schemas"];
  if (name.empty()) return SchemaCursor();
  return SchemaCursor(&schemas.at(name), &schemas);
}

constexpr char kServiceAccount[] = "io.k8s.api.core.v1.ServiceAccount";
constexpr char kConfigMap[] = "io.k8s.api.core.v1.ConfigMap";
constexpr char kNamespace[] = "io.k8s.api.core.v1.Namespace";
constexpr char kDeployment[] = "io.k8s.api.apps.v1.Deployment";
constexpr char kNoSchema[] = "";

struct Case {
  const char* name;
  const char* kind;
  const char* original;
  std::vector<const char*> patches;  // applied one after the other
  const char* expected;
};

class StrategicMergePatchTable : public testing::TestWithParam<Case> {};

TEST_P(StrategicMergePatchTable, ProducesExpectedObject) {
  const Case& c = GetParam();
  Json object = J(c.original);
  for (const char* patch : c.patches) {
    Json before = object;
    auto r = ApplyStrategicMergePatch(object, J(patch), Kind(c.kind));
    ASSERT_TRUE(r.ok()) << patch << ": " << r.status().ToString();
    EXPECT_EQ(object, before);  // the input is never modified
    object = std::move(*r);
  }
  EXPECT_EQ(object, J(c.expected)) << Dump(object);
}

const Case kCases[] = {
    // Lists merged by key. Kubernetes places patch elements that are new to the list before the
    // original ones (the Kubernetes task "Update API Objects in Place Using kubectl patch" shows
    // a patched-in container listed before the existing one); kubectl apply pins the order with
    // $setElementOrder (see below).
    {"ServiceAccountSecretsMergeByName",
     kServiceAccount,
     R"({"metadata":{"name":"robot"}})",
     {R"({"secrets":[{"name":"s1"}]})", R"({"secrets":[{"name":"s2"}]})"},
     R"({"metadata":{"name":"robot"},"secrets":[{"name":"s2"},{"name":"s1"}]})"},
    {"SecretsPatchedElementKeepsItsPlace",
     kServiceAccount,
     R"({"secrets":[{"name":"a"},{"name":"b","namespace":"x"},{"name":"c"}]})",
     {R"({"secrets":[{"name":"b","namespace":"y","kind":"Secret"}]})"},
     R"({"secrets":[{"name":"a"},{"name":"b","namespace":"y","kind":"Secret"},{"name":"c"}]})"},
    {"SecretsSetElementOrderAppends",
     kServiceAccount,
     R"({"secrets":[{"name":"s1"}]})",
     {R"({"$setElementOrder/secrets":[{"name":"s1"},{"name":"s2"}],"secrets":[{"name":"s2"}]})"},
     R"({"secrets":[{"name":"s1"},{"name":"s2"}]})"},
    {"SecretsNullMemberInElementDeletes",
     kServiceAccount,
     R"({"secrets":[{"name":"a","namespace":"x"}]})",
     {R"({"secrets":[{"name":"a","namespace":null}]})"},
     R"({"secrets":[{"name":"a"}]})"},
    {"SecretsDeleteDirective",
     kServiceAccount,
     R"({"secrets":[{"name":"a"},{"name":"b"},{"name":"a","kind":"dup"}]})",
     {R"({"secrets":[{"name":"a","$patch":"delete"},{"name":"zz","$patch":"delete"}]})"},
     R"({"secrets":[{"name":"b"}]})"},
    {"SecretsReplaceDirective",
     kServiceAccount,
     R"({"secrets":[{"name":"a"},{"name":"b"}]})",
     {R"({"secrets":[{"name":"x","namespace":null},{"$patch":"replace"}]})"},
     R"({"secrets":[{"name":"x"}]})"},
    {"SecretsBareMergeDirectiveIsTheDefault",
     kServiceAccount,
     R"({"secrets":[{"name":"a"}]})",
     {R"({"secrets":[{"$patch":"merge"},{"name":"a","kind":"Secret"}]})"},
     R"({"secrets":[{"name":"a","kind":"Secret"}]})"},
    {"ImagePullSecretsHaveNoStrategyAndAreReplaced",
     kServiceAccount,
     R"({"imagePullSecrets":[{"name":"a"},{"name":"b"}]})",
     {R"({"imagePullSecrets":[{"name":"c"}]})"},
     R"({"imagePullSecrets":[{"name":"c"}]})"},
    {"NewMergeListTakesThePatchNormalized",
     kServiceAccount,
     R"({})",
     {R"({"secrets":[{"name":"a","kind":null},{"name":"b","$patch":"delete"}]})"},
     R"({"secrets":[{"name":"a"}]})"},

    // metadata: finalizers (set), ownerReferences (by uid), labels/annotations (maps).
    {"FinalizersSetMerge",
     kConfigMap,
     R"({"metadata":{"finalizers":["a","b"]}})",
     {R"({"metadata":{"finalizers":["b","c"]}})"},
     R"({"metadata":{"finalizers":["a","b","c"]}})"},
    {"FinalizersNewValueGoesFirst",
     kConfigMap,
     R"({"metadata":{"finalizers":["a","b"]}})",
     {R"({"metadata":{"finalizers":["c","c"]}})"},
     R"({"metadata":{"finalizers":["c","a","b"]}})"},
    {"FinalizersDeleteFromPrimitiveList",
     kConfigMap,
     R"({"metadata":{"finalizers":["a","b","c","b"]}})",
     {R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["b","x"]}})"},
     R"({"metadata":{"finalizers":["a","c"]}})"},
    {"FinalizersAddAndDeleteInOnePatch",
     kConfigMap,
     R"({"metadata":{"finalizers":["a","b"]}})",
     {R"({"metadata":{"$setElementOrder/finalizers":["b","c"],"finalizers":["c"],
                      "$deleteFromPrimitiveList/finalizers":["a"]}})"},
     R"({"metadata":{"finalizers":["b","c"]}})"},
    {"FinalizersSetElementOrder",
     kConfigMap,
     R"({"metadata":{"finalizers":["a","b","c"]}})",
     {R"({"metadata":{"$setElementOrder/finalizers":["b","c","a"]}})"},
     R"({"metadata":{"finalizers":["b","c","a"]}})"},
    {"FinalizersReplaceDirective",
     kConfigMap,
     R"({"metadata":{"finalizers":["a","b"]}})",
     {R"({"metadata":{"finalizers":["x",{"$patch":"replace"}]}})"},
     R"({"metadata":{"finalizers":["x"]}})"},
    {"OwnerReferencesMergeByUid",
     kConfigMap,
     R"({"metadata":{"ownerReferences":[{"uid":"1","name":"a","kind":"K"},{"uid":"2","name":"b","kind":"K"}]}})",
     {R"({"metadata":{"ownerReferences":[{"uid":"2","controller":true}]}})",
      R"({"metadata":{"ownerReferences":[{"uid":"1","$patch":"delete"}]}})"},
     R"({"metadata":{"ownerReferences":[{"uid":"2","name":"b","kind":"K","controller":true}]}})"},
    {"LabelsAndDataMerge",
     kConfigMap,
     R"({"metadata":{"labels":{"a":"1","b":"2"}},"data":{"x":"1","y":"2"}})",
     {R"({"metadata":{"labels":{"b":"3","c":"4"}},"data":{"z":"3"}})"},
     R"({"metadata":{"labels":{"a":"1","b":"3","c":"4"}},"data":{"x":"1","y":"2","z":"3"}})"},
    {"NullDeletesKeys",
     kConfigMap,
     R"({"metadata":{"labels":{"a":"1","b":"2"},"annotations":{"n":"1"}},"data":{"x":"1"}})",
     {R"({"metadata":{"labels":{"a":null,"zz":null},"annotations":null},"data":{"x":null}})"},
     R"({"metadata":{"labels":{"b":"2"}},"data":{}})"},
    {"MapReplaceDirective",
     kConfigMap,
     R"({"metadata":{"labels":{"a":"1","b":"2"}}})",
     {R"({"metadata":{"labels":{"$patch":"replace","c":"3","d":null}}})"},
     R"({"metadata":{"labels":{"c":"3"}}})"},
    {"MapDeleteDirective",
     kConfigMap,
     R"({"metadata":{"name":"n","labels":{"a":"1"}}})",
     {R"({"metadata":{"labels":{"$patch":"delete"}}})"},
     R"({"metadata":{"name":"n"}})"},
    {"MapMergeDirectiveIsTheDefault",
     kConfigMap,
     R"({"data":{"a":"1"}})",
     {R"({"data":{"$patch":"merge","b":"2"}})"},
     R"({"data":{"a":"1","b":"2"}})"},
    {"ScalarReplacesMapAndBack",
     kConfigMap,
     R"({"data":{"a":"1"},"immutable":true})",
     {R"({"data":"text","immutable":{"x":{"$patch":"delete"},"y":null,"z":1}})"},
     R"({"data":"text","immutable":{"z":1}})"},
    {"NamespaceConditionsMergeByType",
     kNamespace,
     R"({"status":{"phase":"Active","conditions":[{"type":"A","status":"False"}]}})",
     {R"({"status":{"conditions":[{"type":"A","status":"True"},{"type":"B","status":"True"}]}})"},
     R"({"status":{"phase":"Active","conditions":[{"type":"A","status":"True"},{"type":"B","status":"True"}]}})"},

    // Deeper structure: containers by name, env by name inside them, atomic tolerations.
    {"ContainersAndEnvMergeRecursively",
     kDeployment,
     R"({"spec":{"template":{"spec":{"containers":[
          {"name":"app","image":"v1","args":["a"],"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]},
          {"name":"side","image":"s1"}],
        "tolerations":[{"key":"k1"},{"key":"k2"}]}}}})",
     {R"({"spec":{"template":{"spec":{"containers":[
          {"name":"app","image":"v2","args":["b"],"env":[{"name":"B","value":"3"},{"name":"A","$patch":"delete"}]}],
        "tolerations":[{"key":"k3"}]}}}})"},
     R"({"spec":{"template":{"spec":{"containers":[
          {"name":"app","image":"v2","args":["b"],"env":[{"name":"B","value":"3"}]},
          {"name":"side","image":"s1"}],
        "tolerations":[{"key":"k3"}]}}}})"},
    {"ContainersSetElementOrderWithChange",
     kDeployment,
     R"({"spec":{"template":{"spec":{"containers":[{"name":"a"},{"name":"b"},{"name":"c"}]}}}})",
     {R"({"spec":{"template":{"spec":{
          "$setElementOrder/containers":[{"name":"c"},{"name":"a"},{"name":"b"}],
          "containers":[{"name":"a","image":"x"}]}}}})"},
     R"({"spec":{"template":{"spec":{"containers":[{"name":"c"},{"name":"a","image":"x"},{"name":"b"}]}}}})"},
    {"RetainKeysClearsOtherFields",
     kDeployment,
     R"({"spec":{"replicas":2,"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}}}})",
     {R"({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}})"},
     R"({"spec":{"replicas":2,"strategy":{"type":"Recreate"}}})"},
    {"RetainKeysInsideAMergedListElement",
     kDeployment,
     R"({"spec":{"template":{"spec":{"volumes":[{"name":"v","configMap":{"name":"c"}},{"name":"w"}]}}}})",
     {R"({"spec":{"template":{"spec":{"volumes":[
          {"name":"v","$retainKeys":["name","secret"],"secret":{"secretName":"s"}}]}}}})"},
     R"({"spec":{"template":{"spec":{"volumes":[{"name":"v","secret":{"secretName":"s"}},{"name":"w"}]}}}})"},
    {"ReplaceStrategyMapIsReplaced",
     kDeployment,
     R"({"spec":{"selector":{"a":"1","b":"2"}}})",
     {R"({"spec":{"selector":{"c":"3"}}})"},
     R"({"spec":{"selector":{"c":"3"}}})"},
    {"TopLevelReplace",
     kConfigMap,
     R"({"metadata":{"name":"n"},"data":{"a":"1"}})",
     {R"({"$patch":"replace","data":{"b":"2"}})"},
     R"({"data":{"b":"2"}})"},
    {"TopLevelDelete", kConfigMap, R"({"data":{"a":"1"}})", {R"({"$patch":"delete"})"}, R"({})"},

    // No schema: a JSON merge patch plus the directives.
    {"NoSchemaListsReplaceMapsMerge",
     kNoSchema,
     R"({"spec":{"list":[{"name":"a"},{"name":"b"}],"map":{"x":1,"y":2},"s":"v"},"keep":true})",
     {R"({"spec":{"list":[{"name":"c"}],"map":{"y":null,"z":3},"s":null}})"},
     R"({"spec":{"list":[{"name":"c"}],"map":{"x":1,"z":3}},"keep":true})"},
    {"NoSchemaDirectivesStillApply",
     kNoSchema,
     R"({"a":{"x":1,"y":2},"b":{"c":1},"l":[1,2]})",
     {R"({"a":{"$patch":"replace","z":3},"b":{"$patch":"delete"},
          "l":[3,{"$patch":"replace"}],"$retainKeys":["a","b","l"]})"},
     R"({"a":{"z":3},"l":[3]})"},
    {"UnknownDollarKeysAreData",
     kNoSchema,
     R"({"schema":{"type":"object"}})",
     {R"({"schema":{"$ref":"#/definitions/x","$schema":"http://json-schema.org"}})"},
     R"({"schema":{"type":"object","$ref":"#/definitions/x","$schema":"http://json-schema.org"}})"},
    {"FieldsUnknownToTheSchemaMergeLikeMergePatch",
     kConfigMap,
     R"({"extra":{"list":[1,2],"m":{"a":1}}})",
     {R"({"extra":{"list":[3],"m":{"b":2}}})"},
     R"({"extra":{"list":[3],"m":{"a":1,"b":2}}})"},
};

INSTANTIATE_TEST_SUITE_P(Cases, StrategicMergePatchTable, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

struct ErrorCase {
  const char* name;
  const char* kind;
  const char* original;
  const char* patch;
  const char* message;  // the whole message, or a part of it when `exact` is false
  bool exact;
};

class StrategicMergePatchErrors : public testing::TestWithParam<ErrorCase> {};

TEST_P(StrategicMergePatchErrors, RejectsWithBadRequest) {
  const ErrorCase& c = GetParam();
  auto r = ApplyStrategicMergePatch(J(c.original), J(c.patch), Kind(c.kind));
  ASSERT_FALSE(r.ok()) << Dump(*r);
  EXPECT_EQ(r.status().reason(), core::Reason::kBadRequest);
  if (c.exact) {
    EXPECT_EQ(r.status().message(), c.message);
  } else {
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
}

const ErrorCase kErrorCases[] = {
    {"PatchNotAnObject", kConfigMap, "{}", "[]",
     "strategic merge patch must be a JSON object, not array", true},
    {"OriginalNotAnObject", kConfigMap, "[]", "{}", "the object to patch must be a JSON object",
     false},
    {"UnknownPatchTypeInMap", kConfigMap, R"({"data":{}})", R"({"data":{"$patch":"frob"}})",
     R"(data: unknown patch type: frob in map: {"$patch":"frob"})", true},
    {"NonStringPatchType", kConfigMap, "{}", R"({"$patch":1})",
     R"(unknown patch type: 1 in map: {"$patch":1})", true},
    {"MergeKeyMissing", kServiceAccount, R"({"secrets":[{"name":"a"}]})",
     R"({"secrets":[{"name":"b"},{"namespace":"x"}]})",
     R"(secrets[1]: map: {"namespace":"x"} does not contain declared merge key: name)", true},
    {"MergeKeyMissingOnDelete", kServiceAccount, "{}", R"({"secrets":[{"$patch":"delete"}]})",
     R"(secrets[0]: map: {"$patch":"delete"} does not contain declared merge key: name)", true},
    {"NonObjectInKeyedList", kConfigMap, "{}", R"({"metadata":{"ownerReferences":["x"]}})",
     R"(metadata.ownerReferences[0]: expected an object in a list merged by key "uid", got string)",
     true},
    {"UnknownPatchTypeInList", kServiceAccount, "{}", R"({"secrets":[{"$patch":"frob"}]})",
     "secrets[0]: unknown patch type: frob", false},
    {"DeleteDirectiveInPrimitiveList", kConfigMap, "{}",
     R"({"metadata":{"finalizers":[{"$patch":"delete"}]}})",
     "metadata.finalizers[0]: $patch: delete needs a merge key", false},
    {"DeleteFromPrimitiveListNotAList", kConfigMap, "{}",
     R"({"metadata":{"$deleteFromPrimitiveList/finalizers":"a"}})",
     "metadata: invalid patch format of primitive list: $deleteFromPrimitiveList/finalizers must "
     "be a list",
     true},
    {"DeleteFromPrimitiveListWithoutField", kConfigMap, "{}",
     R"({"$deleteFromPrimitiveList":["a"]})", "invalid patch format of primitive list", false},
    {"SetElementOrderNotAList", kConfigMap, "{}",
     R"({"metadata":{"$setElementOrder/finalizers":{}}})",
     "metadata: invalid patch format of setElementOrder list", false},
    {"SetElementOrderBadPrefix", kConfigMap, "{}", R"({"$setElementOrderfinalizers":[]})",
     "invalid patch format of setElementOrder list", false},
    {"SetElementOrderElementWithoutKey", kServiceAccount, R"({"secrets":[{"name":"a"}]})",
     R"({"$setElementOrder/secrets":["a"]})", "has no merge key \"name\"", false},
    {"SetElementOrderContradictsPatchList", kServiceAccount, R"({"secrets":[{"name":"a"}]})",
     R"({"$setElementOrder/secrets":[{"name":"b"},{"name":"a"}],
         "secrets":[{"name":"a"},{"name":"b"}]})",
     "secrets: invalid patch format of setElementOrder list", false},
    {"SetElementOrderMissingPatchElement", kConfigMap, R"({"metadata":{}})",
     R"({"metadata":{"$setElementOrder/finalizers":["a"],"finalizers":["a","z"]}})",
     "metadata.finalizers: invalid patch format of setElementOrder list", false},
    {"RetainKeysNotAList", kDeployment, "{}", R"({"spec":{"strategy":{"$retainKeys":"type"}}})",
     "spec.strategy: invalid patch format of retainKeys", false},
    {"RetainKeysMissingAPatchedField", kDeployment, "{}",
     R"({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate","rollingUpdate":{}}}})",
     "spec.strategy: invalid patch format of retainKeys: field \"rollingUpdate\" is in the patch "
     "but not in $retainKeys",
     true},
};

INSTANTIATE_TEST_SUITE_P(Cases, StrategicMergePatchErrors, testing::ValuesIn(kErrorCases),
                         [](const testing::TestParamInfo<ErrorCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(ApplyStrategicMergePatch, RejectsPathologicalNesting) {
  std::string deep;
  for (int i = 0; i < 1500; ++i) deep += R"({"a":)";
  deep += "1";
  for (int i = 0; i < 1500; ++i) deep += "}";
  // Json::parse, not J: ParseJson itself refuses nesting past 512 levels.
  auto r = ApplyStrategicMergePatch(Json::object(), Json::parse(deep), SchemaCursor());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kBadRequest);
  EXPECT_NE(r.status().message().find("nested more than 1000 levels"), std::string::npos);
}

TEST(ApplyStrategicMergePatch, NoDirectiveReachesTheResult) {
  // Every directive, in positions where nothing merges with it.
  Json patch = J(R"({"metadata":{"labels":{"$patch":"replace","a":"1"},
                    "$setElementOrder/finalizers":["x"],"finalizers":["x"],
                    "$deleteFromPrimitiveList/finalizers":["y"],
                    "ownerReferences":[{"uid":"1","$retainKeys":["uid"]},{"uid":"2","$patch":"delete"}]},
                    "data":{"$retainKeys":["k"],"k":"v"},
                    "other":[{"x":{"$patch":"delete"},"y":{"$patch":"merge","z":1}}]})");
  auto r = ApplyStrategicMergePatch(Json::object(), patch, Kind(kConfigMap));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, J(R"({"metadata":{"labels":{"a":"1"},"finalizers":["x"],
                      "ownerReferences":[{"uid":"1"}]},"data":{"k":"v"},
                      "other":[{"y":{"z":1}}]})"));
}

}  // namespace
}  // namespace klutch::machinery::strategic_merge_patch_test
