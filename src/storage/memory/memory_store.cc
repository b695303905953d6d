#include "storage/memory/memory_store.h"

#include <fmt/format.h>

#include "storage/revision_errors.h"

namespace klutch::storage {

core::Result<std::optional<KeyValue>> MemoryStore::Get(std::string_view key) {
  core::MutexLock lock(mu_);
  auto it = current_.find(key);
  if (it == current_.end()) return std::optional<KeyValue>();
  return std::optional<KeyValue>(it->second);
}

core::Result<ListResult> MemoryStore::List(const ListRequest& request) {
  core::MutexLock lock(mu_);
  int64_t at = request.revision == 0 ? revision_ : request.revision;
  if (at < compacted_) return TooOldRevision(at, compacted_);
  if (at > revision_) return TooLargeRevision(at, revision_);

  const std::string end = PrefixEnd(request.prefix);
  auto in_range = [&](const std::string& key) {
    return key.compare(0, request.prefix.size(), request.prefix) == 0 &&
           (request.start_after.empty() || key > request.start_after);
  };
  // Start from the latest state of the range and undo newer changes, newest first.
  std::map<std::string, KeyValue> state;
  auto lo = request.start_after.empty() ? current_.lower_bound(request.prefix)
                                        : current_.upper_bound(request.start_after);
  for (auto it = lo; it != current_.end() && (end.empty() || it->first < end); ++it) {
    if (in_range(it->first)) state.emplace(it->first, it->second);
  }
  for (auto it = log_.rbegin(); it != log_.rend() && it->first > at; ++it) {
    const Event& e = *it->second;
    if (!in_range(e.key)) continue;
    if (e.prev_value) {
      state[e.key] = KeyValue{e.key, e.prev_value, e.create_revision, e.prev_revision};
    } else {
      state.erase(e.key);
    }
  }
  ListResult out;
  out.revision = at;
  for (auto& [key, kv] : state) {
    if (request.limit > 0 && static_cast<int64_t>(out.items.size()) == request.limit) {
      out.more = true;
      break;
    }
    out.items.push_back(std::move(kv));
  }
  return out;
}

core::Result<WriteResult> MemoryStore::Write(WriteRequest request) {
  if (request.key.empty()) return core::BadRequest("empty key");
  if (request.op == WriteRequest::Op::kPut && !request.make_value) {
    return core::BadRequest("put without a value");
  }
  core::MutexLock lock(mu_);
  WriteResult result;
  auto it = current_.find(request.key);
  const bool exists = it != current_.end();
  const int64_t have = exists ? it->second.mod_revision : 0;
  bool ok = request.expected_mod_revision == kAnyRevision
                ? (request.op == WriteRequest::Op::kPut || exists)
                : request.expected_mod_revision == have;
  if (!ok) {
    result.revision = revision_;
    if (exists) result.current = it->second;
    return result;
  }
  const int64_t rev = revision_ + 1;
  auto event = std::make_shared<Event>();
  event->key = request.key;
  event->revision = rev;
  if (exists) {
    result.previous = it->second;
    event->prev_value = it->second.value;
    event->prev_revision = it->second.mod_revision;
  }
  if (request.op == WriteRequest::Op::kPut) {
    int64_t create_rev = exists ? it->second.create_revision : rev;
    KeyValue kv{request.key,
                std::make_shared<const std::string>(request.make_value(rev, create_rev)),
                create_rev, rev};
    event->type = Event::Type::kPut;
    event->value = kv.value;
    event->create_revision = create_rev;
    current_[request.key] = kv;
    result.current = std::move(kv);
  } else {
    event->type = Event::Type::kDelete;
    event->create_revision = it->second.create_revision;
    event->value = request.make_value ? std::make_shared<const std::string>(
                                            request.make_value(rev, it->second.create_revision))
                                      : it->second.value;
    current_.erase(it);
  }
  revision_ = rev;
  result.succeeded = true;
  result.revision = rev;
  EventPtr shared = event;
  log_.emplace(rev, shared);
  // Dispatch under mu_ so that concurrent writers reach watchers in revision order.
  hub_.Dispatch({shared});
  revision_cv_.SignalAll();
  return result;
}

core::Result<std::unique_ptr<WatchHandle>> MemoryStore::Watch(std::string prefix,
                                                              int64_t after_revision,
                                                              WatchCallback callback) {
  {
    core::MutexLock lock(mu_);
    if (after_revision < compacted_) return TooOldRevision(after_revision, compacted_);
  }
  std::string watch_prefix = prefix;
  auto reg = hub_.Register(std::move(prefix), after_revision, std::move(callback));
  std::vector<EventPtr> history;
  {
    core::MutexLock lock(mu_);
    if (after_revision < compacted_) {
      hub_.Unregister(reg.id);
      return TooOldRevision(after_revision, compacted_);
    }
    for (auto it = log_.upper_bound(after_revision);
         it != log_.end() && it->first <= reg.history_until; ++it) {
      if (it->second->key.compare(0, watch_prefix.size(), watch_prefix) == 0) {
        history.push_back(it->second);
      }
    }
  }
  hub_.FinishCatchUp(reg.id, history);
  return hub_.MakeHandle(reg.id);
}

int64_t MemoryStore::Revision() const {
  core::MutexLock lock(mu_);
  return revision_;
}

bool MemoryStore::WaitForRevision(int64_t revision, std::chrono::milliseconds timeout) {
  const auto deadline = core::CondVar::DeadlineAfter(timeout);
  core::MutexLock lock(mu_);
  while (revision_ < revision) {
    if (!revision_cv_.WaitUntil(mu_, deadline)) return revision_ >= revision;
  }
  return true;
}

int64_t MemoryStore::CompactedRevision() const {
  core::MutexLock lock(mu_);
  return compacted_;
}

core::Status MemoryStore::Compact(int64_t revision) {
  core::MutexLock lock(mu_);
  revision = std::min(revision, revision_);
  if (revision <= compacted_) return core::Status::Ok();
  log_.erase(log_.begin(), log_.upper_bound(revision));
  compacted_ = revision;
  return core::Status::Ok();
}

}  // namespace klutch::storage
