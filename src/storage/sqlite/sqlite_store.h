// SqliteStore: the default durable Store, one SQLite file in WAL mode.
//
// Layout: `kv` holds the latest value of every key, `log` every change since the compacted
// revision (plus the latest change of each key at or below it), `meta` the revision counters.
// All writes go through one writer thread that commits whatever is queued as one SQLite
// transaction (group commit): N concurrent writers share one fsync, and each acknowledged
// write is durable (synchronous=FULL) before its caller returns. Reads use a pool of
// read-only connections and see committed snapshots. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "storage/store.h"

namespace klutch::storage {

struct SqliteOptions {
  std::string path;      // database file; created with its WAL beside it
  bool durable = true;   // synchronous=FULL (fsync per commit) vs NORMAL
  int max_batch = 1024;  // writes per group commit at most
};

class SqliteStore final : public Store {
 public:
  // Opens or creates the database; kInternalError naming the file when it cannot.
  static core::Result<std::unique_ptr<SqliteStore>> Open(const SqliteOptions& options);
  ~SqliteStore() override;

  core::Result<std::optional<KeyValue>> Get(std::string_view key) override;
  core::Result<ListResult> List(const ListRequest& request) override;
  core::Result<WriteResult> Write(WriteRequest request) override;
  core::Result<std::unique_ptr<WatchHandle>> Watch(std::string prefix, int64_t after_revision,
                                                   WatchCallback callback) override;
  int64_t Revision() const override;
  bool WaitForRevision(int64_t revision, std::chrono::milliseconds timeout) override;
  int64_t CompactedRevision() const override;
  core::Status Compact(int64_t revision) override;

  // Number of group commits so far (for tests and benchmarks).
  int64_t commit_count() const;

  class Impl;

 private:
  explicit SqliteStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::storage
