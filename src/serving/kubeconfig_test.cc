#include "serving/kubeconfig.h"

#include <gtest/gtest.h>

#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"

namespace klutch::serving::kubeconfig_test {
namespace {

using machinery::GetString;

TEST(Kubeconfig, CertificateUserWithNamespace) {
  auto parsed = machinery::ParseYaml(KubeconfigYaml({.name = "klutch",
                                                     .server = "https://127.0.0.1:6443",
                                                     .ca_pem = "CA",
                                                     .client_certificate_pem = "CERT",
                                                     .client_key_pem = "KEY",
                                                     .ns = "default"}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const machinery::Json& c = *parsed;
  EXPECT_EQ(GetString(c, {"current-context"}), "klutch");
  EXPECT_EQ(GetString(c["clusters"][0], {"cluster", "server"}), "https://127.0.0.1:6443");
  EXPECT_EQ(
      *core::Base64Decode(GetString(c["clusters"][0], {"cluster", "certificate-authority-data"})),
      "CA");
  EXPECT_EQ(*core::Base64Decode(GetString(c["users"][0], {"user", "client-certificate-data"})),
            "CERT");
  EXPECT_EQ(*core::Base64Decode(GetString(c["users"][0], {"user", "client-key-data"})), "KEY");
  EXPECT_EQ(GetString(c["contexts"][0], {"context", "namespace"}), "default");
}

TEST(Kubeconfig, TokenUserAndQuotedNames) {
  auto parsed = machinery::ParseYaml(
      KubeconfigYaml({.name = "team: a", .server = "https://h:1", .token = "abc.def-ghi"}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(GetString((*parsed)["users"][0], {"user", "token"}), "abc.def-ghi");
  EXPECT_EQ(GetString((*parsed)["users"][0], {"name"}), "team: a");
  EXPECT_EQ(GetString((*parsed)["contexts"][0], {"context", "user"}), "team: a");
  EXPECT_FALSE(machinery::Find((*parsed)["contexts"][0], {"context", "namespace"}));
}

}  // namespace
}  // namespace klutch::serving::kubeconfig_test
