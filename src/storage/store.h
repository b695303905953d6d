// Store: the storage contract every backend implements, modelled on etcd's (decision 0003).
//
// A Store is an ordered key-value space with one global revision counter. Every successful
// write increments the revision by one and stamps the written key with it (mod_revision);
// writes are compare-and-swap on a key's mod_revision. History of changes is retained from
// CompactedRevision() onward so watchers can resume from any retained revision; asking for an
// older one fails with Reason kExpired. Implementations are thread-safe: any number of
// threads may read, write and watch concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace klutch::storage {

struct KeyValue {
  std::string key;
  std::shared_ptr<const std::string> value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
};

// One change, as watchers see it. Immutable and shared between all watchers.
struct Event {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  std::string key;
  // kPut: the new value. kDelete: the tombstone value the deleter supplied (by default the
  // last value before the deletion).
  std::shared_ptr<const std::string> value;
  // The value before this change; null when the key did not exist (a create).
  std::shared_ptr<const std::string> prev_value;
  int64_t revision = 0;         // the revision of this change
  int64_t create_revision = 0;  // when the key was (last) created
  int64_t prev_revision = 0;    // mod_revision of prev_value (0 on create)
  bool IsCreate() const { return type == Type::kPut && prev_value == nullptr; }
};
using EventPtr = std::shared_ptr<const Event>;

// Expected mod_revision for conditional writes.
inline constexpr int64_t kAnyRevision = -1;  // unconditional
inline constexpr int64_t kMustNotExist = 0;  // create-only

struct WriteRequest {
  enum class Op { kPut, kDelete };
  Op op = Op::kPut;
  std::string key;
  // The write happens only if the key's current mod_revision equals this (kMustNotExist: the
  // key must be absent; kAnyRevision: any state, but a delete still needs the key to exist).
  int64_t expected_mod_revision = kAnyRevision;
  // Produces the value once the revision of the write is known, so that callers can stamp the
  // revision into the stored bytes. Called at most once, on the store's write path: keep it
  // cheap and non-blocking. For kPut it is required; for kDelete it is optional and produces
  // the tombstone value watchers see (default: the previous value).
  std::function<std::string(int64_t revision, int64_t create_revision)> make_value;
};

struct WriteResult {
  bool succeeded = false;
  // Success: the revision of this write. Failure: the store's revision when the condition
  // was evaluated.
  int64_t revision = 0;
  // Failure: the key's current state (nullopt when absent), so callers can report the
  // conflict without another read. Success of a put: the stored key-value.
  std::optional<KeyValue> current;
  // Success: the state before the write (nullopt on create).
  std::optional<KeyValue> previous;
};

struct ListRequest {
  std::string prefix;       // keys starting with this
  std::string start_after;  // exclusive lower bound inside the prefix ("" = from the start)
  int64_t limit = 0;        // 0 = no limit
  int64_t revision = 0;     // 0 = latest; otherwise the state at that revision
  // Only keys and revisions wanted (counting): a store may leave `value` null, sparing the
  // read and copy of every value.
  bool keys_only = false;
};

struct ListResult {
  std::vector<KeyValue> items;  // in key order
  int64_t revision = 0;         // the snapshot revision the items belong to
  bool more = false;            // more keys follow the last item at that revision
};

// Watch callbacks receive events in revision order, never concurrently for one watcher. They
// run on a store thread: they must not block and must not call back into the same watch.
using WatchCallback = std::function<void(const std::vector<EventPtr>& events)>;

// Handle for a running watch; destroying it stops delivery (and waits for an in-flight
// callback to return). Must not be destroyed from inside its own callback.
class WatchHandle {
 public:
  virtual ~WatchHandle() = default;
};

class Store {
 public:
  virtual ~Store() = default;

  // The key's latest state, nullopt when absent.
  virtual core::Result<std::optional<KeyValue>> Get(std::string_view key) = 0;
  // Keys under a prefix at the latest or a past revision. A past revision older than
  // CompactedRevision() -> kExpired; newer than Revision() -> kTimeout (too large).
  virtual core::Result<ListResult> List(const ListRequest& request) = 0;
  // A conditional put or delete. A failed condition is not an error: see WriteResult.
  // Errors are storage failures (kInternalError) or a bad request (kBadRequest).
  virtual core::Result<WriteResult> Write(WriteRequest request) = 0;
  // Delivers every change under `prefix` with revision > after_revision, then live changes.
  // after_revision < CompactedRevision() -> kExpired. A revision ahead of the store is
  // allowed: events simply start once the store gets there.
  virtual core::Result<std::unique_ptr<WatchHandle>> Watch(std::string prefix,
                                                           int64_t after_revision,
                                                           WatchCallback callback) = 0;
  // The revision of the latest committed write (0 for an empty store).
  virtual int64_t Revision() const = 0;
  // Waits until Revision() >= revision or the timeout passes; true when reached.
  virtual bool WaitForRevision(int64_t revision, std::chrono::milliseconds timeout) = 0;
  // Changes at or below this revision may be forgotten (only the latest state of each key
  // at that revision is kept).
  virtual int64_t CompactedRevision() const = 0;
  // Forgets history up to `revision` (clamped to Revision()).
  virtual core::Status Compact(int64_t revision) = 0;
};

// The first key after every key with this prefix ("" for an empty prefix: no bound).
std::string PrefixEnd(std::string_view prefix);

}  // namespace klutch::storage
