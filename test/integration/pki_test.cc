// The generated PKI of `klutch apiserver`: the serving certificate names loopback, the
// in-cluster names and every --tls-san, clients verifying one of those names connect and
// others are refused, and a changed SAN set reissues the certificate under the same CA.
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <iterator>
#include <set>

#include "test/support/server_fixture.h"

namespace klutch::testing {
namespace {

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// "DNS:name" and "IP:a.b.c.d" entries of a PEM certificate's subjectAltName.
std::set<std::string> Sans(const std::string& pem) {
  std::set<std::string> out;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (!cert) return out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type == GEN_DNS) {
      const auto* s = n->d.dNSName;
      out.insert("DNS:" + std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                      ASN1_STRING_length(s)));
    } else if (n->type == GEN_IPADD && ASN1_STRING_length(n->d.iPAddress) == 4) {
      const unsigned char* b = ASN1_STRING_get0_data(n->d.iPAddress);
      out.insert("IP:" + std::to_string(b[0]) + "." + std::to_string(b[1]) + "." +
                 std::to_string(b[2]) + "." + std::to_string(b[3]));
    }
  }
  GENERAL_NAMES_free(names);
  X509_free(cert);
  return out;
}

class PkiTest : public ServerTest {
 protected:
  void SetUp() override { StartServer({"--tls-san", "api.example.test", "--tls-san", "10.1.2.3"}); }
  std::filesystem::path Pki() const { return dir_.path() / "data" / "pki"; }

  // GET /version verifying the server certificate against `name`.
  core::Result<http::ClientResponse> VersionAs(const std::string& name) {
    auto creds = ReadKubeconfig(server_->kubeconfig());
    if (!creds.ok()) return creds.status();
    http::ClientOptions o;
    o.host = creds->host;
    o.port = creds->port;
    o.tls = true;
    o.ca_pem = creds->ca_pem;
    o.server_name = name;
    http::Client client(o);
    return client.Do("GET", "/version");
  }
};

TEST_F(PkiTest, ServingCertificateNamesLoopbackClusterNamesAndExtraSans) {
  auto sans = Sans(Slurp(Pki() / "apiserver.crt"));
  for (const char* want :
       {"DNS:localhost", "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local",
        "DNS:api.example.test", "IP:127.0.0.1", "IP:10.1.2.3"}) {
    EXPECT_TRUE(sans.count(want)) << want;
  }
  auto good = VersionAs("api.example.test");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->status, 200);
  auto bad = VersionAs("elsewhere.example.test");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TLS handshake"), std::string::npos)
      << bad.status().ToString();
}

TEST_F(PkiTest, ChangedSansReissueTheCertificateUnderTheSameCa) {
  const std::string ca = Slurp(Pki() / "ca.crt");
  server_.reset();
  StartServer({"--tls-san", "other.example.test"});
  auto sans = Sans(Slurp(Pki() / "apiserver.crt"));
  EXPECT_TRUE(sans.count("DNS:other.example.test"));
  EXPECT_FALSE(sans.count("DNS:api.example.test"));
  EXPECT_FALSE(sans.count("IP:10.1.2.3"));
  EXPECT_EQ(Slurp(Pki() / "ca.crt"), ca);
  auto good = VersionAs("other.example.test");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  auto old_name = VersionAs("api.example.test");
  ASSERT_FALSE(old_name.ok());
  EXPECT_NE(old_name.status().message().find("TLS handshake"), std::string::npos)
      << old_name.status().ToString();
}

}  // namespace
}  // namespace klutch::testing
