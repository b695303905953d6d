// The client library's REST side against a real `klutch apiserver`: discovery and the
// RESTMapper (including a CRD created after the mapper loaded), every verb of the dynamic
// client with each patch type and the status subresource, chunked lists, preconditions,
// and a Committer refusing to write over a change it did not see.
#include <gtest/gtest.h>

#include <thread>

#include "client/discovery.h"
#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "http/certs.h"
#include "reconcile/committer.h"
#include "test/support/server_fixture.h"

namespace klutch::testing {
namespace {

using client::Json;

using ClientTest = ServerTest;

TEST_F(ClientTest, RestMapperResolvesKindsResourcesAndNewCrds) {
  client::RestMapper mapper(*rest_, std::chrono::milliseconds(0));
  auto deploy = mapper.ForKind("apps", "Deployment");
  ASSERT_TRUE(deploy.ok()) << deploy.status().ToString();
  EXPECT_EQ(deploy->gvr.resource, "deployments");
  EXPECT_EQ(deploy->gvr.version, "v1");
  EXPECT_TRUE(deploy->namespaced);
  auto cm = mapper.ForResource("cm");
  ASSERT_TRUE(cm.ok());
  EXPECT_EQ(cm->gvk.kind, "ConfigMap");
  auto ns = mapper.ForResource("namespaces");
  ASSERT_TRUE(ns.ok());
  EXPECT_FALSE(ns->namespaced);
  auto missing = mapper.ForKind("example.com", "Widget");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(core::IsNotFound(missing.status()));
  EXPECT_EQ(missing.status().message(), "no matches for kind \"Widget\" in group \"example.com\"");

  Json crd = {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", "widgets.example.com"}}},
      {"spec",
       {{"group", "example.com"},
        {"scope", "Cluster"},
        {"names", {{"plural", "widgets"}, {"kind", "Widget"}, {"shortNames", {"wd"}}}},
        {"versions", Json::array({{{"name", "v1"},
                                   {"served", true},
                                   {"storage", true},
                                   {"schema",
                                    {{"openAPIV3Schema",
                                      {{"type", "object"},
                                       {"x-kubernetes-preserve-unknown-fields", true}}}}}}})}}}};
  ASSERT_TRUE(client::ResourceClient(*rest_, client::resources::kCustomResourceDefinitions)
                  .Create(crd)
                  .ok());
  // Served once the CRD controller has seen it (as on any cluster, clients wait for
  // Established); the mapper refreshes on the unknown kind by itself.
  core::Result<client::ResourceMapping> widget = core::NotFound("not yet");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!widget.ok() && std::chrono::steady_clock::now() < deadline) {
    widget = mapper.ForKind("example.com", "Widget");
    if (!widget.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(widget.ok()) << widget.status().ToString();
  EXPECT_EQ(widget->gvr.resource, "widgets");
  EXPECT_FALSE(widget->namespaced);
  auto wd = mapper.ForResource("wd");
  ASSERT_TRUE(wd.ok());
  EXPECT_EQ(wd->gvk.kind, "Widget");
}

TEST_F(ClientTest, DynamicClientSpeaksEveryVerb) {
  client::ResourceClient cms(*rest_, client::resources::kConfigMaps, "default");
  for (int i = 0; i < 12; ++i) {
    Json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata",
                {{"name", "cm-" + std::to_string(i)},
                 {"labels", {{"batch", i % 2 == 0 ? "even" : "odd"}}}}},
               {"data", {{"i", std::to_string(i)}}}};
    auto r = cms.Create(cm, {.field_manager = "client-test"});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // Chunked listing returns everything from one snapshot.
  auto all = cms.ListAll({.label_selector = "batch=even", .limit = 2});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ((*all)["items"].size(), 6u);
  EXPECT_FALSE((*all)["metadata"].contains("continue"));

  // Each patch type.
  ASSERT_TRUE(cms.Patch("cm-0", client::PatchType::kMerge, R"({"data":{"m":"1"}})").ok());
  ASSERT_TRUE(cms.Patch("cm-0", client::PatchType::kStrategicMerge, R"({"data":{"s":"1"}})").ok());
  ASSERT_TRUE(cms.Patch("cm-0", client::PatchType::kJsonPatch,
                        R"([{"op":"add","path":"/data/j","value":"1"}])")
                  .ok());
  auto applied = cms.Patch("cm-0", client::PatchType::kApply,
                           R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-0"},)"
                           R"("data":{"a":"1"}})",
                           {.field_manager = "applier", .force = true});
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  for (const char* k : {"m", "s", "j", "a"}) EXPECT_EQ((*applied)["data"][k], "1") << k;

  // Update with a stale resourceVersion is a Conflict.
  Json stale = *applied;
  stale["metadata"]["resourceVersion"] = "1";
  auto conflict = cms.Update(stale);
  ASSERT_FALSE(conflict.ok());
  EXPECT_TRUE(core::IsConflict(conflict.status())) << conflict.status().ToString();

  // Delete with a wrong uid precondition is refused; delete collection by label works.
  auto refused = cms.Delete("cm-1", {.precondition_uid = std::string("not-the-uid")});
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(core::IsConflict(refused.status())) << refused.status().ToString();
  ASSERT_TRUE(cms.DeleteCollection({.label_selector = "batch=odd"}).ok());
  auto left = cms.List({.label_selector = "batch=odd"});
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE((*left)["items"].empty());

  // Status subresource on a namespace: spec stays, status written separately.
  client::ResourceClient deployments(*rest_, client::resources::kDeployments, "default");
  Json d = {{"apiVersion", "apps/v1"},
            {"kind", "Deployment"},
            {"metadata", {{"name", "web"}}},
            {"spec",
             {{"replicas", 1},
              {"selector", {{"matchLabels", {{"app", "web"}}}}},
              {"template",
               {{"metadata", {{"labels", {{"app", "web"}}}}},
                {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "x"}}})}}}}}}}};
  auto created = deployments.Create(d);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Json with_status = *created;
  with_status["status"] = {{"replicas", 1}, {"readyReplicas", 1}};
  with_status["spec"]["replicas"] = 5;  // ignored by the status subresource
  auto st = deployments.UpdateStatus(with_status);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ((*st)["status"]["readyReplicas"], 1);
  EXPECT_EQ((*st)["spec"]["replicas"], 1);
}

TEST_F(ClientTest, CommitterWritesOnlyTheDifferenceAndRefusesStaleReads) {
  client::ResourceClient cms(*rest_, client::resources::kConfigMaps, "default");
  Json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "c"}}},
             {"data", {{"a", "1"}}}};
  auto original = cms.Create(cm);
  ASSERT_TRUE(original.ok());
  reconcile::Committer committer(cms, "committer-test");
  // Nothing changed: nothing sent, the same object back.
  auto same = committer.Commit(*original, *original);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(machinery::ResourceVersion(*same), machinery::ResourceVersion(*original));

  Json modified = *original;
  modified["data"]["b"] = "2";
  auto written = committer.Commit(*original, modified);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ((*written)["data"]["b"], "2");
  // Based on the old read, the next write conflicts instead of undoing the change.
  Json other = *original;
  other["data"]["a"] = "changed";
  auto stale = committer.Commit(*original, other);
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(core::IsConflict(stale.status())) << stale.status().ToString();
  auto now = cms.Get("c");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ((*now)["data"]["a"], "1");
  EXPECT_EQ((*now)["data"]["b"], "2");
}

TEST_F(ClientTest, RefusesAServerItsCaDidNotSign) {
  auto config = client::LoadKubeconfig({.paths = {server_->kubeconfig()}});
  ASSERT_TRUE(config.ok());
  auto other = http::GenerateCertificateAuthority("someone-else", std::chrono::hours(1));
  ASSERT_TRUE(other.ok());
  config->ca_pem = other->certificate;
  auto rest = client::RestClient::New(
      *config, {.max_retries = 1, .initial_backoff = std::chrono::milliseconds(1)});
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  auto r = client::ResourceClient(**rest, client::resources::kNamespaces).List();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kServiceUnavailable);
  EXPECT_NE(r.status().message().find("TLS handshake"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("certificate verify failed"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace klutch::testing
