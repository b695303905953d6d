#include "serving/pki.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

#include "core/file.h"

namespace klutch::serving::pki_test {
namespace {

namespace fs = std::filesystem;

class PkiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/klutch-pki-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  static unsigned Mode(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0;
  }
  PkiSpec Spec(std::vector<std::string> names) {
    PkiSpec s;
    s.serving_file = "apiserver";
    s.serving_common_name = "klutch-apiserver";
    s.serving_names = std::move(names);
    s.clients = {{"admin", "kubernetes-admin", {"system:masters"}}};
    return s;
  }
  fs::path dir_;
};

TEST_F(PkiTest, GeneratesOnceAndReusesWhatIsThere) {
  auto first = EnsurePki(dir_, Spec({"example.test"}));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->clients.size(), 1u);
  EXPECT_EQ(Mode(dir_ / "ca.key"), 0600u);
  EXPECT_EQ(Mode(dir_ / "apiserver.key"), 0600u);
  EXPECT_EQ(Mode(dir_ / "admin.key"), 0600u);
  EXPECT_EQ(Mode(dir_ / "ca.crt"), 0644u);
  auto second = EnsurePki(dir_, Spec({"example.test"}));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->ca.certificate, first->ca.certificate);
  EXPECT_EQ(second->clients[0].certificate, first->clients[0].certificate);
  EXPECT_EQ(*core::ReadFile(second->serving_cert_file), *core::ReadFile(first->serving_cert_file));
}

TEST_F(PkiTest, ReissuesTheServingCertificateWhenItsNamesChangeUnderTheSameCa) {
  auto first = EnsurePki(dir_, Spec({"one.test"}));
  ASSERT_TRUE(first.ok());
  const std::string cert = *core::ReadFile(first->serving_cert_file);
  auto second = EnsurePki(dir_, Spec({"one.test", "10.1.2.3"}));
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*core::ReadFile(second->serving_cert_file), cert);
  EXPECT_EQ(second->ca.certificate, first->ca.certificate);
  EXPECT_EQ(second->clients[0].certificate, first->clients[0].certificate);
  EXPECT_NE(core::ReadFile(dir_ / "apiserver.sans")->find("10.1.2.3"), std::string::npos);
  // Wildcard listen addresses name nothing: no reissue.
  auto third = EnsurePki(dir_, Spec({"one.test", "10.1.2.3", "0.0.0.0"}));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*core::ReadFile(third->serving_cert_file), *core::ReadFile(second->serving_cert_file));
}

TEST_F(PkiTest, AnUnwritableDirectoryIsAnErrorNamingIt) {
  auto r = EnsurePki("/proc/klutch-no-such-dir", Spec({}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/proc/klutch-no-such-dir"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace klutch::serving::pki_test
