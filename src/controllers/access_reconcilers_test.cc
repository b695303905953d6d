// ClusterRole aggregation and legacy service-account token Secrets on the in-process test
// cluster.
#include "controllers/access_reconcilers.h"

#include <gtest/gtest.h>

#include "core/strings.h"
#include "test/support/cluster_fixture.h"

namespace klutch::controllers::access_reconcilers_test {
namespace {

using client::Json;
namespace resources = client::resources;

class AccessControllers : public testing::ClusterTest {};

Json ClusterRole(const std::string& name, Json labels, Json rules) {
  return Json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
              {"kind", "ClusterRole"},
              {"metadata", {{"name", name}, {"labels", std::move(labels)}}},
              {"rules", std::move(rules)}};
}

TEST_F(AccessControllers, AggregatedRolesFollowTheRolesTheirSelectorsMatch) {
  Json aggregate = ClusterRole("widget-admin", Json::object(), Json::array());
  aggregate["aggregationRule"] = {
      {"clusterRoleSelectors", {{{"matchLabels", {{"example.com/aggregate", "true"}}}}}}};
  Create(resources::kClusterRoles, aggregate);
  Create(resources::kClusterRoles, ClusterRole("widget-reader", {{"example.com/aggregate", "true"}},
                                               {{{"apiGroups", {"example.com"}},
                                                 {"resources", {"widgets"}},
                                                 {"verbs", {"get", "list"}}}}));
  auto rules = [&] {
    auto r = Resource(resources::kClusterRoles).Get("widget-admin");
    return r.ok() ? r->value("rules", Json::array()) : Json::array();
  };
  ASSERT_TRUE(AdvanceUntil([&] { return rules().size() == 1; })) << rules().dump();
  EXPECT_EQ(rules()[0]["resources"], Json::array({"widgets"}));
  // The selected role leaves the selection: its rules leave the aggregate.
  ASSERT_TRUE(Resource(resources::kClusterRoles)
                  .Patch("widget-reader", client::PatchType::kMerge,
                         R"({"metadata":{"labels":{"example.com/aggregate":null}}})")
                  .ok());
  EXPECT_TRUE(AdvanceUntil([&] { return rules().empty(); })) << rules().dump();
}

TEST_F(AccessControllers, ALegacyTokenSecretGetsAWorkingTokenAndGoesWithItsAccount) {
  Create(resources::kServiceAccounts,
         Json{{"apiVersion", "v1"},
              {"kind", "ServiceAccount"},
              {"metadata", {{"name", "robot"}, {"namespace", "default"}}}});
  Create(resources::kSecrets,
         Json{{"apiVersion", "v1"},
              {"kind", "Secret"},
              {"type", "kubernetes.io/service-account-token"},
              {"metadata",
               {{"name", "robot-token"},
                {"namespace", "default"},
                {"annotations", {{"kubernetes.io/service-account.name", "robot"}}}}}});
  client::ResourceClient secrets = Resource(resources::kSecrets, "default");
  std::string token;
  ASSERT_TRUE(AdvanceUntil([&] {
    auto s = secrets.Get("robot-token");
    if (!s.ok()) return false;
    auto decoded = core::Base64Decode(machinery::GetString(*s, {"data", "token"}));
    token = decoded ? *decoded : "";
    return !token.empty();
  }));
  auto secret = secrets.Get("robot-token");
  ASSERT_TRUE(secret.ok());
  EXPECT_EQ(*core::Base64Decode(machinery::GetString(*secret, {"data", "namespace"})), "default");
  EXPECT_NE(core::Base64Decode(machinery::GetString(*secret, {"data", "ca.crt"}))
                ->find("BEGIN CERTIFICATE"),
            std::string::npos);

  // The token authenticates as the account.
  auto robot = cluster_->ClientWithToken(token);
  ASSERT_TRUE(robot);
  client::Request review;
  review.verb = "POST";
  review.path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
  review.body = R"({"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"})";
  auto who = robot->DoJson(review);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(machinery::GetString(*who, {"status", "userInfo", "username"}),
            "system:serviceaccount:default:robot");

  // Deleting the account deletes its token Secret.
  ASSERT_TRUE(Resource(resources::kServiceAccounts, "default").Delete("robot").ok());
  EXPECT_TRUE(AdvanceUntil([&] { return !secrets.Get("robot-token").ok(); }));
}

}  // namespace
}  // namespace klutch::controllers::access_reconcilers_test
