// One behavioural suite for the Store contract, instantiated for every backend.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "storage/memory/memory_store.h"
#include "storage/sqlite/sqlite_store.h"

namespace klutch::storage::store_conformance_test {
namespace {

using std::chrono::seconds;

WriteRequest Put(std::string key, std::string value, int64_t expected = kAnyRevision) {
  WriteRequest w;
  w.op = WriteRequest::Op::kPut;
  w.key = std::move(key);
  w.expected_mod_revision = expected;
  w.make_value = [value](int64_t, int64_t) { return value; };
  return w;
}

WriteRequest Del(std::string key, int64_t expected = kAnyRevision) {
  WriteRequest w;
  w.op = WriteRequest::Op::kDelete;
  w.key = std::move(key);
  w.expected_mod_revision = expected;
  return w;
}

// Collects watch events; waits with a deadline instead of sleeping.
class Recorder {
 public:
  WatchCallback Callback() {
    return [this](const std::vector<EventPtr>& events) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.insert(events_.end(), events.begin(), events.end());
      cv_.notify_all();
    };
  }
  std::vector<EventPtr> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, seconds(10), [&] { return events_.size() >= n; });
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<EventPtr> events_;
};

class StoreFactory {
 public:
  virtual ~StoreFactory() = default;
  virtual std::unique_ptr<Store> Make() = 0;
};

struct MemoryFactory : StoreFactory {
  std::unique_ptr<Store> Make() override { return std::make_unique<MemoryStore>(); }
};

struct SqliteFactory : StoreFactory {
  std::filesystem::path dir;
  SqliteFactory() {
    dir = std::filesystem::temp_directory_path() /
          ("klutch-store-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(dir);
  }
  ~SqliteFactory() override { std::filesystem::remove_all(dir); }
  std::unique_ptr<Store> Make() override {
    auto s = SqliteStore::Open({.path = (dir / "db.sqlite").string(), .durable = false});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  static inline std::atomic<int> counter_{0};
};

template <typename F>
class StoreConformance : public ::testing::Test {
 protected:
  void SetUp() override { store_ = factory_.Make(); }
  F factory_;
  std::unique_ptr<Store> store_;
};

using Backends = ::testing::Types<MemoryFactory, SqliteFactory>;
TYPED_TEST_SUITE(StoreConformance, Backends);

TYPED_TEST(StoreConformance, EmptyStoreHasRevisionZero) {
  EXPECT_EQ(this->store_->Revision(), 0);
  auto got = this->store_->Get("/a");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
}

TYPED_TEST(StoreConformance, EveryWriteBumpsTheGlobalRevision) {
  auto& s = *this->store_;
  auto a = s.Write(Put("/a", "1"));
  ASSERT_TRUE(a.ok() && a->succeeded);
  EXPECT_EQ(a->revision, 1);
  auto b = s.Write(Put("/b", "1"));
  EXPECT_EQ(b->revision, 2);
  auto a2 = s.Write(Put("/a", "2"));
  EXPECT_EQ(a2->revision, 3);
  auto got = s.Get("/a");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(*(*got)->value, "2");
  EXPECT_EQ((*got)->create_revision, 1);
  EXPECT_EQ((*got)->mod_revision, 3);
  EXPECT_EQ(s.Revision(), 3);
}

TYPED_TEST(StoreConformance, MakeValueSeesTheRevisionOfTheWrite) {
  auto& s = *this->store_;
  ASSERT_TRUE(s.Write(Put("/x", "x")).ok());
  WriteRequest w;
  w.key = "/a";
  w.make_value = [](int64_t rev, int64_t create) {
    return std::to_string(rev) + "/" + std::to_string(create);
  };
  auto r = s.Write(std::move(w));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->current->value, "2/2");
}

// Quota counting lists keys only: the same keys, revisions and pages as a full list.
TYPED_TEST(StoreConformance, KeysOnlyListsTheSameKeysAndPages) {
  auto& s = *this->store_;
  for (const char* k : {"/p/a", "/p/b", "/p/c", "/q/a"}) {
    ASSERT_TRUE(s.Write(Put(k, std::string(100000, 'v'))).ok());
  }
  ListRequest full{.prefix = "/p/", .limit = 2};
  ListRequest keys = full;
  keys.keys_only = true;
  auto a = s.List(full);
  auto b = s.List(keys);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->items.size(), 2u);
  ASSERT_EQ(b->items.size(), 2u);
  EXPECT_EQ(a->more, b->more);
  EXPECT_TRUE(b->more);
  EXPECT_EQ(a->revision, b->revision);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a->items[i].key, b->items[i].key);
    EXPECT_EQ(a->items[i].mod_revision, b->items[i].mod_revision);
    EXPECT_EQ(a->items[i].create_revision, b->items[i].create_revision);
  }
  keys.start_after = b->items.back().key;
  auto rest = s.List(keys);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->items.size(), 1u);
  EXPECT_EQ(rest->items[0].key, "/p/c");
  EXPECT_FALSE(rest->more);
}

TYPED_TEST(StoreConformance, CreateOnlyFailsWhenTheKeyExists) {
  auto& s = *this->store_;
  ASSERT_TRUE(s.Write(Put("/a", "1", kMustNotExist))->succeeded);
  auto again = s.Write(Put("/a", "2", kMustNotExist));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->succeeded);
  ASSERT_TRUE(again->current.has_value());
  EXPECT_EQ(*again->current->value, "1");
  EXPECT_EQ(s.Revision(), 1);
}

TYPED_TEST(StoreConformance, CompareAndSwapRejectsStaleRevision) {
  auto& s = *this->store_;
  auto first = s.Write(Put("/a", "1"));
  ASSERT_TRUE(s.Write(Put("/a", "2", first->revision))->succeeded);
  auto stale = s.Write(Put("/a", "3", first->revision));
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->succeeded);
  EXPECT_EQ(stale->current->mod_revision, 2);
  EXPECT_EQ(*s.Get("/a")->value().value, "2");
}

TYPED_TEST(StoreConformance, DeleteOfMissingKeyFailsWithoutError) {
  auto& s = *this->store_;
  auto r = s.Write(Del("/nope"));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->succeeded);
  EXPECT_FALSE(r->current.has_value());
  EXPECT_EQ(s.Revision(), 0);
}

TYPED_TEST(StoreConformance, DeleteRemovesAndRecreateGetsNewCreateRevision) {
  auto& s = *this->store_;
  ASSERT_TRUE(s.Write(Put("/a", "1"))->succeeded);
  auto d = s.Write(Del("/a", 1));
  ASSERT_TRUE(d->succeeded);
  EXPECT_EQ(d->previous->mod_revision, 1);
  EXPECT_FALSE(s.Get("/a")->has_value());
  auto again = s.Write(Put("/a", "2", kMustNotExist));
  ASSERT_TRUE(again->succeeded);
  EXPECT_EQ(again->current->create_revision, 3);
}

TYPED_TEST(StoreConformance, ListIsOrderedPrefixScopedAndPaged) {
  auto& s = *this->store_;
  for (const char* k : {"/r/cm/ns/b", "/r/cm/ns/a", "/r/cm/ns2/a", "/r/cm/ns/c", "/r/secrets/x"}) {
    ASSERT_TRUE(s.Write(Put(k, k))->succeeded);
  }
  auto all = s.List({.prefix = "/r/cm/ns/"});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->items.size(), 3u);
  EXPECT_EQ(all->items[0].key, "/r/cm/ns/a");
  EXPECT_EQ(all->items[2].key, "/r/cm/ns/c");
  EXPECT_EQ(all->revision, 5);
  EXPECT_FALSE(all->more);

  auto page1 = s.List({.prefix = "/r/cm/", .limit = 2});
  ASSERT_EQ(page1->items.size(), 2u);
  EXPECT_TRUE(page1->more);
  auto page2 = s.List({.prefix = "/r/cm/",
                       .start_after = page1->items.back().key,
                       .limit = 2,
                       .revision = page1->revision});
  ASSERT_EQ(page2->items.size(), 2u);
  EXPECT_EQ(page2->items[0].key, "/r/cm/ns/c");
  EXPECT_EQ(page2->items[1].key, "/r/cm/ns2/a");
  EXPECT_FALSE(page2->more);
}

TYPED_TEST(StoreConformance, ListAtPastRevisionSeesThatSnapshot) {
  auto& s = *this->store_;
  ASSERT_TRUE(s.Write(Put("/p/a", "a1"))->succeeded);  // 1
  ASSERT_TRUE(s.Write(Put("/p/b", "b1"))->succeeded);  // 2
  ASSERT_TRUE(s.Write(Put("/p/a", "a2"))->succeeded);  // 3
  ASSERT_TRUE(s.Write(Del("/p/b"))->succeeded);        // 4
  ASSERT_TRUE(s.Write(Put("/p/c", "c1"))->succeeded);  // 5
  auto at2 = s.List({.prefix = "/p/", .revision = 2});
  ASSERT_TRUE(at2.ok()) << at2.status().ToString();
  ASSERT_EQ(at2->items.size(), 2u);
  EXPECT_EQ(*at2->items[0].value, "a1");
  EXPECT_EQ(at2->items[0].mod_revision, 1);
  EXPECT_EQ(*at2->items[1].value, "b1");
  auto at4 = s.List({.prefix = "/p/", .revision = 4});
  ASSERT_EQ(at4->items.size(), 1u);
  EXPECT_EQ(*at4->items[0].value, "a2");
  auto future = s.List({.prefix = "/p/", .revision = 99});
  ASSERT_FALSE(future.ok());
  EXPECT_EQ(future.status().reason(), core::Reason::kTimeout);
}

TYPED_TEST(StoreConformance, CompactionExpiresOldRevisionsButKeepsLatestState) {
  auto& s = *this->store_;
  ASSERT_TRUE(s.Write(Put("/p/a", "a1"))->succeeded);  // 1
  ASSERT_TRUE(s.Write(Put("/p/b", "b1"))->succeeded);  // 2
  ASSERT_TRUE(s.Write(Put("/p/a", "a2"))->succeeded);  // 3
  ASSERT_TRUE(s.Write(Put("/p/c", "c1"))->succeeded);  // 4
  ASSERT_TRUE(s.Compact(3).ok());
  EXPECT_EQ(s.CompactedRevision(), 3);
  auto old = s.List({.prefix = "/p/", .revision = 2});
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().reason(), core::Reason::kExpired);
  auto at3 = s.List({.prefix = "/p/", .revision = 3});
  ASSERT_TRUE(at3.ok()) << at3.status().ToString();
  ASSERT_EQ(at3->items.size(), 2u);
  EXPECT_EQ(*at3->items[0].value, "a2");
  EXPECT_EQ(*at3->items[1].value, "b1");
  Recorder rec;
  auto w = s.Watch("/p/", 1, rec.Callback());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().reason(), core::Reason::kExpired);
  EXPECT_EQ(w.status().message(), "too old resource version: 1 (3)");
}

TYPED_TEST(StoreConformance, WatchReplaysHistoryThenStreamsLiveInOrder) {
  auto& s = *this->store_;
  ASSERT_TRUE(s.Write(Put("/w/a", "1"))->succeeded);  // 1
  ASSERT_TRUE(s.Write(Put("/x/a", "1"))->succeeded);  // 2 (other prefix)
  ASSERT_TRUE(s.Write(Put("/w/a", "2"))->succeeded);  // 3
  Recorder rec;
  auto w = s.Watch("/w/", 1, rec.Callback());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(s.Write(Del("/w/a"))->succeeded);       // 4
  ASSERT_TRUE(s.Write(Put("/w/b", "1"))->succeeded);  // 5
  auto events = rec.WaitFor(3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]->revision, 3);
  EXPECT_EQ(events[0]->type, Event::Type::kPut);
  ASSERT_TRUE(events[0]->prev_value);
  EXPECT_EQ(*events[0]->prev_value, "1");
  EXPECT_EQ(events[0]->prev_revision, 1);
  EXPECT_EQ(events[1]->revision, 4);
  EXPECT_EQ(events[1]->type, Event::Type::kDelete);
  EXPECT_EQ(*events[1]->value, "2");
  EXPECT_EQ(events[2]->revision, 5);
  EXPECT_TRUE(events[2]->IsCreate());
}

TYPED_TEST(StoreConformance, DeleteTombstoneCarriesTheSuppliedValue) {
  auto& s = *this->store_;
  ASSERT_TRUE(s.Write(Put("/t/a", "live"))->succeeded);
  Recorder rec;
  auto w = s.Watch("/t/", s.Revision(), rec.Callback());
  ASSERT_TRUE(w.ok());
  WriteRequest d = Del("/t/a");
  d.make_value = [](int64_t rev, int64_t) { return "gone@" + std::to_string(rev); };
  ASSERT_TRUE(s.Write(std::move(d))->succeeded);
  auto events = rec.WaitFor(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(*events[0]->value, "gone@2");
}

TYPED_TEST(StoreConformance, StoppedWatchReceivesNothingMore) {
  auto& s = *this->store_;
  Recorder rec;
  {
    auto w = s.Watch("/s/", 0, rec.Callback());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(s.Write(Put("/s/a", "1"))->succeeded);
    EXPECT_EQ(rec.WaitFor(1).size(), 1u);
  }
  ASSERT_TRUE(s.Write(Put("/s/b", "1"))->succeeded);
  Recorder probe;  // a second watch proves the write was dispatched
  auto w2 = s.Watch("/s/", 1, probe.Callback());
  EXPECT_EQ(probe.WaitFor(1).size(), 1u);
  EXPECT_EQ(rec.WaitFor(1).size(), 1u);
}

TYPED_TEST(StoreConformance, ConcurrentWritersSeeEveryEventOnceInOrder) {
  auto& s = *this->store_;
  Recorder rec;
  auto w = s.Watch("/c/", 0, rec.Callback());
  ASSERT_TRUE(w.ok());
  constexpr int kThreads = 8, kPerThread = 50;
  std::vector<std::thread> threads;
  std::atomic<int> conflicts{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Half the writes are CAS increments on one shared key; the rest are distinct keys.
        if (i % 2 == 0) {
          while (true) {
            auto cur = s.Get("/c/counter");
            int64_t rev = cur->has_value() ? (*cur)->mod_revision : kMustNotExist;
            int v = cur->has_value() ? std::stoi(*(*cur)->value) : 0;
            auto r = s.Write(Put("/c/counter", std::to_string(v + 1), rev));
            if (r->succeeded) break;
            ++conflicts;
          }
        } else {
          ASSERT_TRUE(
              s.Write(Put("/c/k" + std::to_string(t) + "-" + std::to_string(i), "v"))->succeeded);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const int total = kThreads * kPerThread;
  EXPECT_EQ(std::stoi(*s.Get("/c/counter")->value().value), total / 2);
  EXPECT_EQ(s.Revision(), total);
  auto events = rec.WaitFor(total);
  ASSERT_EQ(static_cast<int>(events.size()), total);
  for (int i = 0; i < total; ++i) EXPECT_EQ(events[i]->revision, i + 1);
}

// A watcher registered while writes are in flight gets history and live events with no gap
// and no duplicate.
TYPED_TEST(StoreConformance, WatchStartedDuringWritesHasNoGap) {
  auto& s = *this->store_;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; i < 400 && !stop; ++i)
      ASSERT_TRUE(s.Write(Put("/g/k", std::to_string(i))).ok());
  });
  while (s.Revision() < 50) std::this_thread::yield();
  Recorder rec;
  auto w = s.Watch("/g/", 10, rec.Callback());
  ASSERT_TRUE(w.ok());
  writer.join();
  auto events = rec.WaitFor(390);
  ASSERT_EQ(events.size(), 390u);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i]->revision, 11 + int64_t(i));
}

}  // namespace
}  // namespace klutch::storage::store_conformance_test
