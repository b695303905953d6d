// MemoryStore: the Store contract held entirely in memory, for unit tests and throwaway
// servers. Same semantics as the durable backends, nothing survives the process. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/sync.h"
#include "storage/store.h"
#include "storage/watch_hub.h"

namespace klutch::storage {

class MemoryStore final : public Store {
 public:
  MemoryStore() = default;

  core::Result<std::optional<KeyValue>> Get(std::string_view key) override;
  core::Result<ListResult> List(const ListRequest& request) override;
  core::Result<WriteResult> Write(WriteRequest request) override;
  core::Result<std::unique_ptr<WatchHandle>> Watch(std::string prefix, int64_t after_revision,
                                                   WatchCallback callback) override;
  int64_t Revision() const override;
  bool WaitForRevision(int64_t revision, std::chrono::milliseconds timeout) override;
  int64_t CompactedRevision() const override;
  core::Status Compact(int64_t revision) override;

 private:
  mutable core::Mutex mu_;
  core::CondVar revision_cv_;  // revision_ advanced
  std::map<std::string, KeyValue, std::less<>> current_ GUARDED_BY(mu_);
  std::map<int64_t, EventPtr> log_ GUARDED_BY(mu_);  // revisions > compacted_
  int64_t revision_ GUARDED_BY(mu_) = 0;
  int64_t compacted_ GUARDED_BY(mu_) = 0;
  WatchHub hub_;
};

}  // namespace klutch::storage
