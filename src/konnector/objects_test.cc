#include "konnector/objects.h"

#include <gtest/gtest.h>

#include "apis/klutch/apiserviceexport.h"
#include "core/strings.h"

namespace klutch::konnector::objects_test {
namespace {

Json Export() {
  return Json::parse(R"({
    "apiVersion": "klutch.anynines.com/v1alpha1", "kind": "APIServiceExport",
    "metadata": {"name": "widgets.example.com", "namespace": "klutch-bind-x", "generation": 3},
    "spec": {"group": "example.com", "scope": "Namespaced", "informerScope": "Namespaced",
             "names": {"plural": "widgets", "kind": "Widget"},
             "permissionClaims": [{"group": "", "resource": "secrets", "version": "v1"}],
             "versions": [
               {"name": "v1alpha1", "served": false, "storage": false,
                "schema": {"openAPIV3Schema": {"type": "object"}}},
               {"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                   "x-kubernetes-preserve-unknown-fields": true}},
                "additionalPrinterColumns": [{"name": "Phase", "type": "string",
                                              "jsonPath": ".status.phase"}]}]}})");
}

Json Binding() {
  return Json::parse(R"({"apiVersion": "klutch.anynines.com/v1alpha1",
    "kind": "APIServiceBinding", "metadata": {"name": "widgets.example.com",
    "namespace": "klutch-bind", "uid": "u-1"}})");
}

TEST(ExportToCrd, CopiesNamesScopeAndVersionsAndOwnsByBinding) {
  Json crd = ExportToCrd(Export(), Binding());
  EXPECT_EQ(crd["metadata"]["name"], "widgets.example.com");
  EXPECT_EQ(crd["spec"]["group"], "example.com");
  EXPECT_EQ(crd["spec"]["scope"], "Namespaced");
  EXPECT_EQ(crd["spec"]["names"]["kind"], "Widget");
  ASSERT_EQ(crd["spec"]["versions"].size(), 2u);
  EXPECT_EQ(crd["spec"]["versions"][1]["subresources"], Json::object());  // always present
  EXPECT_EQ(crd["spec"]["versions"][1]["additionalPrinterColumns"][0]["name"], "Phase");
  EXPECT_FALSE(crd["spec"].contains("informerScope"));
  EXPECT_FALSE(crd["spec"].contains("permissionClaims"));
  EXPECT_TRUE(CrdOwnedBy(crd, Binding()));
  Json other = Binding();
  other["metadata"]["uid"] = "u-2";
  EXPECT_FALSE(CrdOwnedBy(crd, other));
  EXPECT_EQ(FirstServedVersion(Export()), "v1");
  EXPECT_EQ(Generation(Export()), 3);
}

TEST(CleanCopy, DropsServerFieldsAndStatusKeepsLabels) {
  Json o = Json::parse(R"({"apiVersion": "v1", "kind": "Secret",
    "metadata": {"name": "s", "namespace": "a", "uid": "x", "resourceVersion": "5",
      "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["f"],
      "ownerReferences": [{"kind": "X"}], "managedFields": [], "labels": {"l": "1"}},
    "status": {"phase": "Ready"}, "data": {"k": "dg=="}})");
  Json c = CleanCopy(o, "b");
  EXPECT_EQ(c["metadata"], Json::parse(R"({"name": "s", "namespace": "b", "labels": {"l": "1"}})"));
  EXPECT_FALSE(c.contains("status"));
  EXPECT_EQ(c["data"]["k"], "dg==");
  EXPECT_FALSE(CleanCopy(o, "")["metadata"].contains("namespace"));
}

TEST(ClusterScoped, PrefixRoundTrip) {
  Json o = {{"metadata", {{"name", "db"}}}};
  InjectClusterNamespace(o, "klutch-bind-x", "ns-uid");
  EXPECT_EQ(o["metadata"]["name"], "klutch-bind-x-db");
  EXPECT_EQ(Annotation(o, apis::klutch::kClusterNamespaceAnnotation), "klutch-bind-x");
  EXPECT_EQ(o["metadata"]["ownerReferences"][0]["uid"], "ns-uid");
  ClearClusterNamespace(o);
  EXPECT_EQ(o, Json({{"metadata", {{"name", "db"}}}}));
  EXPECT_EQ(UnprefixedName("klutch-bind-x", "klutch-bind-x-db"), "db");
  EXPECT_EQ(UnprefixedName("klutch-bind-x", "klutch-bind-xdb"), std::nullopt);
  EXPECT_EQ(UnprefixedName("klutch-bind-x", "klutch-bind-x-"), std::nullopt);
  EXPECT_EQ(UnprefixedName("klutch-bind-x", "other-db"), std::nullopt);
}

Json SecretWith(const std::string& kubeconfig) {
  return {{"metadata", {{"name", "kc"}, {"namespace", "klutch-bind"}}},
          {"data", {{"kubeconfig", core::Base64Encode(kubeconfig)}}}};
}

constexpr const char* kKubeconfig = R"(apiVersion: v1
kind: Config
clusters:
- name: p
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: abc}
contexts:
- name: c
  context: {cluster: p, user: u, namespace: klutch-bind-x}
current-context: c
)";

TEST(CheckKubeconfigSecret, ReportsWhatIsWrong) {
  auto missing = CheckKubeconfigSecret(nullptr, "klutch-bind/kc", "kubeconfig", true);
  EXPECT_FALSE(missing.valid);
  EXPECT_EQ(missing.reason, "KubeconfigSecretNotFound");
  EXPECT_NE(missing.message.find("kubectl bind"), std::string::npos);

  Json no_key = SecretWith(kKubeconfig);
  auto wrong_key = CheckKubeconfigSecret(&no_key, "klutch-bind/kc", "other", true);
  EXPECT_EQ(wrong_key.reason, "KubeconfigSecretInvalid");

  Json garbage = SecretWith("{{{ not yaml");
  EXPECT_EQ(CheckKubeconfigSecret(&garbage, "klutch-bind/kc", "kubeconfig", true).reason,
            "KubeconfigSecretInvalid");

  std::string no_ns = kKubeconfig;
  no_ns.replace(no_ns.find(", namespace: klutch-bind-x"), 26, "");
  Json without_ns = SecretWith(no_ns);
  auto ns_check = CheckKubeconfigSecret(&without_ns, "klutch-bind/kc", "kubeconfig", true);
  EXPECT_FALSE(ns_check.valid);
  EXPECT_NE(ns_check.message.find("namespace"), std::string::npos);
  EXPECT_TRUE(CheckKubeconfigSecret(&without_ns, "klutch-bind/kc", "kubeconfig", false).valid);

  Json good = SecretWith(kKubeconfig);
  auto ok = CheckKubeconfigSecret(&good, "klutch-bind/kc", "kubeconfig", true);
  ASSERT_TRUE(ok.valid) << ok.message;
  EXPECT_EQ(ok.ns, "klutch-bind-x");
  EXPECT_EQ(ok.config.server, "https://127.0.0.1:1");
  EXPECT_EQ(ok.config.bearer_token, "abc");
}

TEST(StatusInConsumerTerms, NamesTheDevelopersNamespaceInEveryConditionMessage) {
  Json status = Json::parse(R"({
    "conditions": [{"type": "Ready", "status": "False", "reason": "Unavailable",
      "message": "instance \"pg\" was not found in namespace \"cluster-ab12-default\""}],
    "managed": {"conditions": [{"type": "Synced", "status": "False",
      "message": "cluster-ab12-default/pg: see cluster-ab12-default"}]},
    "other": "cluster-ab12-default"})");
  Json out = StatusInConsumerTerms(status, "cluster-ab12-default", "default");
  EXPECT_EQ(out["conditions"][0]["message"],
            "instance \"pg\" was not found in namespace \"default\"");
  EXPECT_EQ(out["managed"]["conditions"][0]["message"], "default/pg: see default");
  EXPECT_EQ(out["other"], "cluster-ab12-default") << "only condition messages are prose";
}

TEST(StatusInConsumerTerms, ReferencesToTheProviderNamespaceNameTheConsumers) {
  Json status = Json::parse(R"({"managed": {"secret": {"name": "s",
    "namespace": "cluster-ab12-default"}, "other": {"namespace": "kube-system"},
    "list": [{"namespace": "cluster-ab12-default"}]}})");
  Json out = StatusInConsumerTerms(status, "cluster-ab12-default", "default");
  EXPECT_EQ(out["managed"]["secret"], Json::parse(R"({"name": "s", "namespace": "default"})"));
  EXPECT_EQ(out["managed"]["other"]["namespace"], "kube-system");
  EXPECT_EQ(out["managed"]["list"][0]["namespace"], "default");
}

TEST(StatusInConsumerTerms, ReplacesWholeNamesOnly) {
  Json status = Json::parse(R"J({"conditions": [{"type": "Ready", "status": "False",
    "message": "ns-1 ns-10 xns-1 ns-1-a ns-1/b (ns-1)"}]})J");
  Json out = StatusInConsumerTerms(status, "ns-1", "team");
  EXPECT_EQ(out["conditions"][0]["message"], "team ns-10 xns-1 ns-1-a team/b (team)");
  EXPECT_EQ(StatusInConsumerTerms(status, "", "team"), status);
  EXPECT_EQ(StatusInConsumerTerms(Json("text"), "ns-1", "team"), Json("text"));
}

TEST(FalseConditionNews, TellsOfNewFalseConditionsOnce) {
  Json before = Json::parse(R"({"conditions": [
    {"type": "Ready", "status": "False", "reason": "Creating", "message": "waiting"},
    {"type": "ControlPlaneSynced", "status": "True", "reason": "Synced"}]})");
  Json after = Json::parse(R"({"conditions": [
    {"type": "Ready", "status": "False", "reason": "Unavailable", "message": "broker failed"},
    {"type": "Synced", "status": "False", "reason": "ReconcileError", "message": "no such key"},
    {"type": "ControlPlaneSynced", "status": "False", "reason": "Invalid", "message": "x"}]})");
  auto news = FalseConditionNews(&before, &after, apis::klutch::kControlPlaneSyncedCondition);
  ASSERT_EQ(news.size(), 2u);
  EXPECT_EQ(news[0].type, "Ready");
  EXPECT_EQ(news[0].event_type, "Warning");
  EXPECT_EQ(news[0].reason, "Unavailable");
  EXPECT_EQ(news[0].message, "broker failed");
  EXPECT_EQ(news[1].reason, "ReconcileError");
  EXPECT_TRUE(
      FalseConditionNews(&after, &after, apis::klutch::kControlPlaneSyncedCondition).empty());
  // Progress is Normal; a condition that is True or absent says nothing.
  auto progress = FalseConditionNews(nullptr, &before, apis::klutch::kControlPlaneSyncedCondition);
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_EQ(progress[0].event_type, "Normal");
  EXPECT_TRUE(
      FalseConditionNews(&after, nullptr, apis::klutch::kControlPlaneSyncedCondition).empty());
}

TEST(ClusterManaged, WhatEachClusterMakesForItselfIsNeverClaimed) {
  auto object = [](const char* name, const char* type = "") {
    Json o = {{"metadata", {{"name", name}, {"namespace", "dev"}}}};
    if (*type) o["type"] = type;
    return o;
  };
  EXPECT_TRUE(ClusterManaged("", "configmaps", object("kube-root-ca.crt")));
  EXPECT_FALSE(ClusterManaged("", "configmaps", object("app-config")));
  EXPECT_FALSE(ClusterManaged("example.com", "configmaps", object("kube-root-ca.crt")));
  EXPECT_TRUE(ClusterManaged("", "secrets", object("t", "kubernetes.io/service-account-token")));
  EXPECT_FALSE(ClusterManaged("", "secrets", object("kube-root-ca.crt", "Opaque")));
  EXPECT_TRUE(ClusterManaged("", "serviceaccounts", object("default")));
  EXPECT_FALSE(ClusterManaged("", "serviceaccounts", object("builder")));
}

}  // namespace
}  // namespace klutch::konnector::objects_test
