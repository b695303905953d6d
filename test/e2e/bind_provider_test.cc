// The provider fixture of the konnector tests (test/support/bind_provider.h) on the
// in-process test cluster: the kubeconfig it hands out reaches the bind objects of its cluster
// namespace and nothing else, the NamespaceMapper maps consumer namespaces as the backend's
// APIServiceNamespace controller does, and ExportFromCrd snapshots a CRD as §2.8 says.
#include "test/support/bind_provider.h"

#include <gtest/gtest.h>

#include "client/kubeconfig.h"
#include "core/strings.h"
#include "test/support/cluster_fixture.h"

namespace klutch::testing::bind {
namespace {

using client::ResourceClient;
namespace resources = client::resources;

const client::GroupVersionResource kInstances{"anynines.com", "v1", "postgresqlinstances"};

bool IsForbidden(const core::Status& s) { return s.reason() == core::Reason::kForbidden; }

class BindProviderTest : public ClusterTest {
 protected:
  // Real time: SetupProvider and the mapper wait on the token, namespace and CRD
  // controllers, which the fake clock would hold back.
  void SetUp() override { StartCluster({.clock = &core::RealClock::Get()}); }

  // CRDs, the claim CRD, a provider and the export with a secrets claim.
  void SetUpProvider() {
    ASSERT_TRUE(InstallBindCrds(cluster_->admin()).ok());
    crd_ = Crd("anynines.com", "postgresqlinstances", "PostgresqlInstance");
    Create(resources::kCustomResourceDefinitions, crd_);
    auto established = WaitForCrdEstablished(cluster_->admin(), "postgresqlinstances.anynines.com");
    ASSERT_TRUE(established.ok()) << established.ToString();
    auto binding = SetupProvider(cluster_->admin());
    ASSERT_TRUE(binding.ok()) << binding.status().ToString();
    binding_ = *binding;
    auto exported =
        CreateExport(cluster_->admin(), binding_.cluster_namespace,
                     ExportFromCrd(crd_, Json::array({PermissionClaim("secrets", "Provider")})));
    ASSERT_TRUE(exported.ok()) << exported.status().ToString();
    // The consumer's view: the kubeconfig over HTTPS, as the konnector reads it.
    auto parsed = client::ParseKubeconfig(binding_.kubeconfig, "provider kubeconfig", "/");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto config = client::ResolveKubeconfig(*parsed);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_EQ(config->namespace_, binding_.cluster_namespace);
    config->qps = 0;
    auto rest = client::RestClient::New(*config);
    ASSERT_TRUE(rest.ok()) << rest.status().ToString();
    consumer_ = std::move(*rest);
  }

  Json crd_;
  ProviderBinding binding_;
  std::unique_ptr<client::RestClient> consumer_;
};

TEST_F(BindProviderTest, KubeconfigReachesOnlyItsClusterNamespace) {
  ASSERT_NO_FATAL_FAILURE(SetUpProvider());
  const std::string& ns = binding_.cluster_namespace;
  EXPECT_TRUE(ns.starts_with("klutch-bind-")) << ns;

  // What the backend stores: the kubeconfig Secret and the ClusterBinding pointing at it.
  auto secret = Resource(resources::kSecrets, ns).Get("kubeconfig");
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  EXPECT_EQ(core::Base64Decode(machinery::GetString(*secret, {"data", "kubeconfig"})),
            binding_.kubeconfig);
  auto cb = Resource(kClusterBindings, ns).Get("cluster");
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  EXPECT_EQ((*cb)["spec"]["kubeconfigSecretRef"],
            (Json{{"name", "kubeconfig"}, {"key", "kubeconfig"}}));
  EXPECT_EQ(machinery::GetString(*cb, {"spec", "providerPrettyName"}), "klutch-test-provider");
  auto role = Resource(resources::kClusterRoles).Get("klutch-binder-" + ns);
  ASSERT_TRUE(role.ok()) << role.status().ToString();
  EXPECT_EQ((*role)["metadata"]["ownerReferences"][0]["name"], ns);
  EXPECT_EQ((*role)["rules"].size(), 2u) << role->dump();

  // Allowed: the bind objects, secrets and the namespace itself.
  auto exports = ResourceClient(*consumer_, kApiServiceExports, ns).List();
  ASSERT_TRUE(exports.ok()) << exports.status().ToString();
  ASSERT_EQ((*exports)["items"].size(), 1u);
  EXPECT_EQ(machinery::Name((*exports)["items"][0]), "postgresqlinstances.anynines.com");
  EXPECT_TRUE(ResourceClient(*consumer_, kClusterBindings, ns).Get("cluster").ok());
  auto heartbeat =
      ResourceClient(*consumer_, kClusterBindings, ns)
          .Patch("cluster", client::PatchType::kMerge,
                 R"({"status":{"lastHeartbeatTime":"2026-01-01T00:00:00Z"}})", {}, "status");
  EXPECT_TRUE(heartbeat.ok()) << heartbeat.status().ToString();
  EXPECT_TRUE(ResourceClient(*consumer_, resources::kSecrets, ns).Get("kubeconfig").ok());
  EXPECT_TRUE(ResourceClient(*consumer_, resources::kNamespaces).Get(ns).ok());

  // Forbidden: anything elsewhere.
  auto other_exports = ResourceClient(*consumer_, kApiServiceExports, "default").List();
  EXPECT_TRUE(IsForbidden(other_exports.status())) << other_exports.status().ToString();
  auto all_exports = ResourceClient(*consumer_, kApiServiceExports).List();
  EXPECT_TRUE(IsForbidden(all_exports.status())) << all_exports.status().ToString();
  auto other_secrets = ResourceClient(*consumer_, resources::kSecrets, "default").List();
  EXPECT_TRUE(IsForbidden(other_secrets.status())) << other_secrets.status().ToString();
  auto other_ns = ResourceClient(*consumer_, resources::kNamespaces).Get("default");
  EXPECT_TRUE(IsForbidden(other_ns.status())) << other_ns.status().ToString();
  auto instances = ResourceClient(*consumer_, kInstances, ns).List();
  EXPECT_TRUE(IsForbidden(instances.status())) << instances.status().ToString();
  auto crds = ResourceClient(*consumer_, resources::kCustomResourceDefinitions).List();
  EXPECT_TRUE(IsForbidden(crds.status())) << crds.status().ToString();

  // Setting up again is harmless and keeps the namespace.
  auto again = SetupProvider(cluster_->admin(), {.cluster_namespace = ns});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->cluster_namespace, ns);
}

TEST_F(BindProviderTest, NamespaceMapperMapsConsumerNamespaces) {
  ASSERT_NO_FATAL_FAILURE(SetUpProvider());
  const std::string& ns = binding_.cluster_namespace;
  NamespaceMapper mapper(cluster_->admin(), ns);
  mapper.Start();
  const std::string target = ns + "-team-a";
  EXPECT_EQ(mapper.TargetNamespace("team-a"), target);

  // The konnector's part: an APIServiceNamespace named like the consumer namespace.
  ResourceClient asns(*consumer_, kApiServiceNamespaces, ns);
  auto created = asns.Create({{"apiVersion", kBindApiVersion},
                              {"kind", "APIServiceNamespace"},
                              {"metadata", {{"name", "team-a"}}},
                              {"spec", Json::object()}});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(Eventually([&] {
    auto a = asns.Get("team-a");
    return a.ok() && machinery::GetString(*a, {"status", "namespace"}) == target;
  })) << mapper.LastError();
  auto mapped = Resource(resources::kNamespaces).Get(target);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  EXPECT_EQ(
      machinery::GetString(*mapped, {"metadata", "annotations", kApiServiceNamespaceAnnotation}),
      ns + "/team-a");

  // The binder may now work with exported and claimed resources there, and still not elsewhere.
  Json instance = {{"apiVersion", "anynines.com/v1"},
                   {"kind", "PostgresqlInstance"},
                   {"metadata", {{"name", "db"}}},
                   {"spec", {{"version", "15"}}}};
  auto made = ResourceClient(*consumer_, kInstances, target).Create(instance);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  auto secrets = ResourceClient(*consumer_, resources::kSecrets, target).List();
  EXPECT_TRUE(secrets.ok()) << secrets.status().ToString();
  auto elsewhere = ResourceClient(*consumer_, kInstances, "default").Create(instance);
  EXPECT_TRUE(IsForbidden(elsewhere.status())) << elsewhere.status().ToString();

  // A mapped Namespace deleted behind the mapper's back comes back.
  ASSERT_TRUE(Resource(resources::kNamespaces).Delete(target).ok());
  EXPECT_TRUE(Eventually([&] {
    auto n = Resource(resources::kNamespaces).Get(target);
    return n.ok() && !machinery::IsBeingDeleted(*n) &&
           Resource(resources::kRoleBindings, target).Get(kBinderName).ok();
  })) << mapper.LastError();

  // Deleting the APIServiceNamespace deletes the Namespace.
  ASSERT_TRUE(asns.Delete("team-a").ok());
  EXPECT_TRUE(Eventually([&] {
    auto n = Resource(resources::kNamespaces).Get(target);
    return core::IsNotFound(n.status()) || (n.ok() && machinery::IsBeingDeleted(*n));
  })) << mapper.LastError();
  mapper.Stop();
}

TEST(BindExportFromCrd, SnapshotsServedVersionsWithClaims) {
  Json schema = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  Json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", "widgets.example.com"}}},
              {"spec",
               {{"group", "example.com"},
                {"scope", "Namespaced"},
                {"names", {{"plural", "widgets"}, {"kind", "Widget"}}},
                {"versions", Json::array({{{"name", "v1"},
                                           {"served", true},
                                           {"storage", true},
                                           {"subresources", {{"status", Json::object()}}},
                                           {"schema", {{"openAPIV3Schema", schema}}}},
                                          {{"name", "v2"},
                                           {"served", false},
                                           {"storage", false},
                                           {"schema", {{"openAPIV3Schema", schema}}}},
                                          {{"name", "v3"},
                                           {"served", true},
                                           {"storage", false},
                                           {"deprecated", true},
                                           {"schema", {{"openAPIV3Schema", schema}}}}})}}}};
  Json claims = Json::array({PermissionClaim("secrets", "Provider")});
  Json e = ExportFromCrd(crd, claims);
  EXPECT_EQ(machinery::Name(e), "widgets.example.com");
  EXPECT_EQ(e["kind"], "APIServiceExport");
  EXPECT_EQ(e["spec"]["informerScope"], "Namespaced");
  EXPECT_FALSE(e["spec"].contains("clusterScopedIsolation"));
  EXPECT_EQ(e["spec"]["permissionClaims"], claims);
  ASSERT_EQ(e["spec"]["versions"].size(), 2u);
  EXPECT_EQ(e["spec"]["versions"][0]["subresources"], (Json{{"status", Json::object()}}));
  EXPECT_EQ(e["spec"]["versions"][1]["subresources"], Json::object());  // always present
  EXPECT_EQ(e["spec"]["versions"][1]["deprecated"], true);
  EXPECT_EQ(e["spec"]["versions"][0]["schema"]["openAPIV3Schema"], schema);
  const std::string hash =
      machinery::GetString(e, {"metadata", "annotations", kSourceSpecHashAnnotation});
  EXPECT_FALSE(hash.empty());
  EXPECT_EQ(machinery::GetString(ExportFromCrd(crd),
                                 {"metadata", "annotations", kSourceSpecHashAnnotation}),
            hash);  // claims are not part of the snapshot

  // Webhook conversion keeps only the storage version; cluster scope is prefixed.
  Json webhook = crd;
  webhook["spec"]["conversion"] = {{"strategy", "Webhook"}};
  webhook["spec"]["scope"] = "Cluster";
  Json w = ExportFromCrd(webhook);
  ASSERT_EQ(w["spec"]["versions"].size(), 1u);
  EXPECT_EQ(w["spec"]["versions"][0]["name"], "v1");
  EXPECT_EQ(w["spec"]["informerScope"], "Cluster");
  EXPECT_EQ(w["spec"]["clusterScopedIsolation"], "Prefixed");
  EXPECT_NE(machinery::GetString(w, {"metadata", "annotations", kSourceSpecHashAnnotation}), hash);
}

}  // namespace
}  // namespace klutch::testing::bind
