#include "apiserver/builtin_resources.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "apis/builtin_schemas.h"
#include "codec/protobuf.h"

namespace klutch::apiserver {
namespace {

TEST(BuiltinResources, EveryResourceServesTheSchemaThatDeclaresItsKind) {
  const machinery::Json& schemas = apis::BuiltinSchemas();
  std::set<std::string> seen;
  for (const ResourcePtr& r : BuiltinResources()) {
    SCOPED_TRACE(r->GroupResource());
    EXPECT_TRUE(seen.insert(r->GroupResource()).second) << "served twice";
    ASSERT_FALSE(r->schema_name.empty());
    ASSERT_TRUE(schemas.contains(r->schema_name)) << r->schema_name;
    EXPECT_TRUE(r->Schema().known());
    // Group, version and kind are read from the schema, never restated.
    EXPECT_EQ(apis::SchemaNameFor(r->group, r->version, r->kind), r->schema_name);
    EXPECT_EQ(r->list_kind, r->kind + "List");
    EXPECT_EQ(r->storage_version, r->version);
  }
  EXPECT_EQ(seen.size(), 22u);
}

// kubectl's typed commands (create namespace, configmap, secret, serviceaccount, service,
// deployment, role, clusterrole, rolebinding, clusterrolebinding, quota; create token; auth can-i
// and whoami) send protobuf bodies, as do client-go's typed clients for what controllers and
// tokens write (events, leases, token and access reviews). CRDs and LimitRanges are written as
// JSON by kubectl.
TEST(BuiltinResources, KindsSentAsProtobufHaveTablesDerivedFromTheirSchema) {
  const std::set<std::string> protobuf = {
      "namespaces",
      "configmaps",
      "secrets",
      "serviceaccounts",
      "services",
      "events",
      "resourcequotas",
      "deployments.apps",
      "events.events.k8s.io",
      "leases.coordination.k8s.io",
      "roles.rbac.authorization.k8s.io",
      "clusterroles.rbac.authorization.k8s.io",
      "rolebindings.rbac.authorization.k8s.io",
      "clusterrolebindings.rbac.authorization.k8s.io",
      "tokenreviews.authentication.k8s.io",
      "selfsubjectreviews.authentication.k8s.io",
      "subjectaccessreviews.authorization.k8s.io",
      "selfsubjectaccessreviews.authorization.k8s.io",
      "localsubjectaccessreviews.authorization.k8s.io",
      "selfsubjectrulesreviews.authorization.k8s.io",
  };
  const codec::ProtobufTypes& types = codec::ProtobufTypes::Builtin();
  std::set<std::string> served;
  for (const ResourcePtr& r : BuiltinResources()) {
    SCOPED_TRACE(r->GroupResource());
    served.insert(r->ApiVersion() + " " + r->kind);
    std::string want = protobuf.contains(r->GroupResource()) ? r->schema_name : "";
    EXPECT_EQ(types.SchemaFor(r->ApiVersion(), r->kind), want);
  }
  // The token subresource of service accounts takes a TokenRequest.
  EXPECT_EQ(types.SchemaFor("authentication.k8s.io/v1", "TokenRequest"),
            "io.k8s.api.authentication.v1.TokenRequest");
  // Nothing decodes that the server does not serve, but for DeleteOptions and TokenRequest.
  for (const auto& [api_version, kind] : types.Kinds()) {
    if (kind == "DeleteOptions" || kind == "TokenRequest") continue;
    EXPECT_TRUE(served.contains(api_version + " " + kind)) << api_version << " " << kind;
  }
}

}  // namespace
}  // namespace klutch::apiserver
