// SQLite-specific behaviour: durability across reopen and group commit.
#include "storage/sqlite/sqlite_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

namespace klutch::storage::sqlite_store_test {
namespace {

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("klutch-sqlite-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  SqliteOptions Options() { return {.path = (dir_ / "db").string()}; }
  std::filesystem::path dir_;
};

WriteRequest Put(std::string key, std::string value) {
  WriteRequest w;
  w.key = std::move(key);
  w.make_value = [value](int64_t, int64_t) { return value; };
  return w;
}

TEST_F(SqliteStoreTest, ReopenKeepsDataRevisionAndHistory) {
  {
    auto s = SqliteStore::Open(Options());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (int i = 0; i < 10; ++i) ASSERT_TRUE((*s)->Write(Put("/k/" + std::to_string(i), "v")).ok());
    ASSERT_TRUE((*s)->Compact(4).ok());
  }
  auto s = SqliteStore::Open(Options());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Revision(), 10);
  EXPECT_EQ((*s)->CompactedRevision(), 4);
  auto list = (*s)->List({.prefix = "/k/"});
  EXPECT_EQ(list->items.size(), 10u);
  auto r = (*s)->Write(Put("/k/new", "v"));
  EXPECT_EQ(r->revision, 11);
  auto at5 = (*s)->List({.prefix = "/k/", .revision = 5});
  ASSERT_TRUE(at5.ok());
  EXPECT_EQ(at5->items.size(), 5u);
}

TEST_F(SqliteStoreTest, RevisionSurvivesReopenWhenTheLastWritesWereCompactedDeletes) {
  {
    auto s = SqliteStore::Open(Options());
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Write(Put("/k/a", "v")).ok());  // 1
    WriteRequest del;
    del.op = WriteRequest::Op::kDelete;
    del.key = "/k/a";
    ASSERT_TRUE((*s)->Write(std::move(del))->succeeded);  // 2
    ASSERT_TRUE((*s)->Compact(2).ok());                   // removes both rows
  }
  auto s = SqliteStore::Open(Options());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Revision(), 2);
  EXPECT_EQ((*s)->Write(Put("/k/b", "v"))->revision, 3);
}

TEST_F(SqliteStoreTest, ConcurrentWritersShareCommits) {
  auto s = SqliteStore::Open(Options());
  ASSERT_TRUE(s.ok());
  constexpr int kThreads = 16, kPerThread = 20;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto r = (*s)->Write(Put("/g/" + std::to_string(t) + "/" + std::to_string(i), "v"));
        ASSERT_TRUE(r.ok() && r->succeeded);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ((*s)->Revision(), kThreads * kPerThread);
  // Group commit: with 16 writers queued behind each fsync, commits are fewer than writes.
  EXPECT_LT((*s)->commit_count(), kThreads * kPerThread);
}

TEST_F(SqliteStoreTest, OpenFailsClearlyOnUnwritablePath) {
  auto s = SqliteStore::Open({.path = "/proc/definitely/not/here.db"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/proc/definitely/not/here.db"), std::string::npos);
}

}  // namespace
}  // namespace klutch::storage::sqlite_store_test
