#include "core/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

namespace klutch::core::file_test {
namespace {

namespace fs = std::filesystem;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/klutch-file-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(FileTest, WritesAtomicallyWithTheRequestedMode) {
  const fs::path p = dir_ / "key.pem";
  ASSERT_TRUE(WriteFileAtomic(p, "secret").ok());
  EXPECT_EQ(*ReadFile(p), "secret");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_TRUE(WriteFileAtomic(p, "replaced",
                              fs::perms::owner_read | fs::perms::owner_write |
                                  fs::perms::group_read | fs::perms::others_read)
                  .ok());
  EXPECT_EQ(*ReadFile(p), "replaced");
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // No temporary file is left behind.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);
}

// Under umask 077 (the broker's, klutch up's) create_directories made parents of a new state
// directory 0700, so the instances' account could not reach it; a trailing slash named the
// directory itself as its parent.
TEST_F(FileTest, CreateTraversableDirectoriesOpensWhatItCreatesOnly) {
  fs::create_directories(dir_ / "old");
  fs::permissions(dir_ / "old", fs::perms::owner_all);
  const mode_t before = ::umask(077);
  Status s = CreateTraversableDirectories((dir_ / "old" / "a" / "b").string() + "/");
  ::umask(before);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto mode = [](const fs::path& p) {
    struct stat st {};
    ::stat(p.c_str(), &st);
    return st.st_mode & 0777;
  };
  EXPECT_EQ(mode(dir_ / "old"), 0700u);  // existed: left alone
  EXPECT_EQ(mode(dir_ / "old" / "a"), 0711u);
  EXPECT_EQ(mode(dir_ / "old" / "a" / "b"), 0711u);
  EXPECT_TRUE(CreateTraversableDirectories(dir_ / "old" / "a").ok());  // exists already
  ASSERT_TRUE(WriteFileAtomic(dir_ / "file", "x").ok());
  Status below_file = CreateTraversableDirectories(dir_ / "file" / "x");
  EXPECT_FALSE(below_file.ok());
  EXPECT_NE(below_file.message().find((dir_ / "file" / "x").string()), std::string::npos);
}

TEST_F(FileTest, ErrorsNameThePath) {
  auto missing = ReadFile(dir_ / "missing");
  EXPECT_TRUE(IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
  Status st = WriteFileAtomic(dir_ / "no-such-dir" / "f", "x");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no-such-dir"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace klutch::core::file_test
