#include "storage/sqlite/sqlite_store.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <atomic>
#include <deque>
#include <future>
#include <thread>
#include <variant>

#include "core/log.h"
#include "core/sync.h"
#include "storage/revision_errors.h"
#include "storage/watch_hub.h"

namespace klutch::storage {
namespace {

// Upper bound used when a prefix has no PrefixEnd: larger than any UTF-8 key.
const std::string kKeyMax = "\xf4\x8f\xbf\xbf";

core::Status SqliteError(sqlite3* db, std::string_view what) {
  return core::Internal(fmt::format("storage: {}: {}", what, sqlite3_errmsg(db)));
}

// A prepared statement, reset on every use. Not thread-safe (owned by one connection).
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(stmt_); }

  core::Status Prepare(sqlite3* db, const char* sql) {
    db_ = db;
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK) {
      return SqliteError(db, fmt::format("prepare \"{}\"", sql));
    }
    return core::Status::Ok();
  }
  Stmt& Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return *this;
  }
  Stmt& Bind(int i, std::string_view text) {
    sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindStatic(int i, std::string_view text) {
    sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
    return *this;
  }
  Stmt& BindBlob(int i, const std::string& data) {
    sqlite3_bind_blob(stmt_, i, data.data(), static_cast<int>(data.size()), SQLITE_STATIC);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  // SQLITE_ROW -> true, SQLITE_DONE -> false, else error.
  core::Result<bool> Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, "step");
  }
  core::Status Run() {
    auto r = Step();
    if (!r.ok()) return r.status();
    return core::Status::Ok();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) const {
    auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, col));
    int n = sqlite3_column_bytes(stmt_, col);
    return p ? std::string(p, static_cast<size_t>(n)) : std::string();
  }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::shared_ptr<const std::string> Value(int col) const {
    if (IsNull(col)) return nullptr;
    return std::make_shared<const std::string>(Text(col));
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

// Values live once, in `log`; `kv` maps each live key to the log row of its latest change
// (compaction always keeps that row), so a write stores its bytes once.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS kv (
  key TEXT PRIMARY KEY, create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log (
  rev INTEGER PRIMARY KEY, key TEXT NOT NULL, value BLOB, create_rev INTEGER NOT NULL,
  prev_rev INTEGER NOT NULL, deleted INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS log_key_rev ON log(key, rev);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO meta VALUES ('revision', 0), ('compacted', 0), ('schema', 2);
)sql";

// Closes the connection last: declared before the statements, so destroyed after them.
struct DbHandle {
  sqlite3* db = nullptr;
  DbHandle() = default;
  DbHandle(const DbHandle&) = delete;
  DbHandle& operator=(const DbHandle&) = delete;
  ~DbHandle() {
    if (db) sqlite3_close_v2(db);
  }
};

// One SQLite connection with its statements.
struct Conn {
  DbHandle handle;
  Stmt get, list, meta, begin, commit, rollback;
  Stmt history, changed_since, list_at;
  // Writer-only statements.
  Stmt put_kv, del_kv, put_log, set_meta;
  Stmt compact_log;
};

core::Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return core::Internal(fmt::format("storage: {}", msg));
  }
  return core::Status::Ok();
}

core::Result<std::unique_ptr<Conn>> OpenConn(const SqliteOptions& options, bool writer) {
  auto conn = std::make_unique<Conn>();
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (writer ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(options.path.c_str(), &conn->handle.db, flags, nullptr) != SQLITE_OK) {
    std::string msg = conn->handle.db ? sqlite3_errmsg(conn->handle.db) : "out of memory";
    return core::Internal(fmt::format("storage: cannot open {}: {}", options.path, msg));
  }
  sqlite3_busy_timeout(conn->handle.db, 10000);
  if (writer) {
    KLUTCH_RETURN_IF_ERROR(Exec(conn->handle.db, "PRAGMA journal_mode=WAL"));
    KLUTCH_RETURN_IF_ERROR(Exec(conn->handle.db, options.durable ? "PRAGMA synchronous=FULL"
                                                                 : "PRAGMA synchronous=NORMAL"));
    KLUTCH_RETURN_IF_ERROR(Exec(conn->handle.db, kSchema));
    // Checkpoints run on their own connection and thread, not inside commits.
    KLUTCH_RETURN_IF_ERROR(Exec(conn->handle.db, "PRAGMA wal_autocheckpoint=0"));
  }
  KLUTCH_RETURN_IF_ERROR(Exec(conn->handle.db, "PRAGMA cache_size=-8192"));
  Conn& c = *conn;
  sqlite3* db = c.handle.db;
  KLUTCH_RETURN_IF_ERROR(c.get.Prepare(
      db,
      "SELECT l.value, kv.create_rev, kv.mod_rev FROM kv JOIN log l ON l.rev = kv.mod_rev "
      "WHERE kv.key = ?1"));
  KLUTCH_RETURN_IF_ERROR(c.list.Prepare(
      db,
      "SELECT kv.key, l.value, kv.create_rev, kv.mod_rev FROM kv "
      "JOIN log l ON l.rev = kv.mod_rev "
      "WHERE kv.key >= ?1 AND kv.key < ?2 AND kv.key > ?3 ORDER BY kv.key LIMIT ?4"));
  KLUTCH_RETURN_IF_ERROR(
      c.meta.Prepare(db,
                     "SELECT max((SELECT value FROM meta WHERE name='revision'), "
                     "coalesce((SELECT max(rev) FROM log), 0)), "
                     "(SELECT value FROM meta WHERE name='compacted')"));
  KLUTCH_RETURN_IF_ERROR(c.begin.Prepare(db, writer ? "BEGIN IMMEDIATE" : "BEGIN"));
  KLUTCH_RETURN_IF_ERROR(c.commit.Prepare(db, "COMMIT"));
  KLUTCH_RETURN_IF_ERROR(c.rollback.Prepare(db, "ROLLBACK"));
  KLUTCH_RETURN_IF_ERROR(c.history.Prepare(
      db,
      "SELECT l.rev, l.key, l.value, l.create_rev, l.prev_rev, l.deleted, p.value "
      "FROM log l LEFT JOIN log p ON p.key = l.key AND p.rev = l.prev_rev "
      "WHERE l.rev > ?1 AND l.rev <= ?2 AND l.key >= ?3 AND l.key < ?4 ORDER BY l.rev"));
  KLUTCH_RETURN_IF_ERROR(c.changed_since.Prepare(
      db, "SELECT 1 FROM log WHERE rev > ?1 AND key >= ?2 AND key < ?3 LIMIT 1"));
  KLUTCH_RETURN_IF_ERROR(c.list_at.Prepare(
      db,
      "SELECT l.key, l.value, l.create_rev, l.rev FROM log l "
      "WHERE l.key >= ?1 AND l.key < ?2 AND l.key > ?3 AND l.rev <= ?4 AND l.deleted = 0 "
      "AND l.rev = (SELECT MAX(m.rev) FROM log m WHERE m.key = l.key AND m.rev <= ?4) "
      "ORDER BY l.key LIMIT ?5"));
  if (writer) {
    KLUTCH_RETURN_IF_ERROR(c.put_kv.Prepare(
        db, "INSERT OR REPLACE INTO kv (key, create_rev, mod_rev) VALUES (?1, ?2, ?3)"));
    KLUTCH_RETURN_IF_ERROR(c.del_kv.Prepare(db, "DELETE FROM kv WHERE key = ?1"));
    KLUTCH_RETURN_IF_ERROR(
        c.put_log.Prepare(db,
                          "INSERT INTO log (rev, key, value, create_rev, prev_rev, deleted) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
    KLUTCH_RETURN_IF_ERROR(c.set_meta.Prepare(db, "UPDATE meta SET value = ?2 WHERE name = ?1"));
    // Keeps, for each key, its newest change at or below the compaction point (unless that is
    // a deletion), so reads at any retained revision stay answerable.
    KLUTCH_RETURN_IF_ERROR(c.compact_log.Prepare(
        db,
        "DELETE FROM log WHERE rev <= ?1 AND (deleted = 1 OR rev < "
        "(SELECT MAX(m.rev) FROM log m WHERE m.key = log.key AND m.rev <= ?1))"));
  }
  return conn;
}

// A read transaction on a pooled connection; rolls back on destruction.
class ReadTxn {
 public:
  explicit ReadTxn(Conn* c) : c_(c) {}
  ~ReadTxn() {
    if (open_) (void)c_->rollback.Reset().Run();
  }
  core::Status Begin() {
    KLUTCH_RETURN_IF_ERROR(c_->begin.Reset().Run());
    open_ = true;
    return core::Status::Ok();
  }

 private:
  Conn* c_;
  bool open_ = false;
};

}  // namespace

class SqliteStore::Impl {
 public:
  explicit Impl(SqliteOptions options) : options_(std::move(options)) {}

  ~Impl() {
    {
      core::MutexLock lock(queue_mu_);
      stopping_ = true;
    }
    queue_cv_.SignalAll();
    checkpoint_cv_.SignalAll();
    if (writer_thread_.joinable()) writer_thread_.join();
    if (checkpoint_thread_.joinable()) checkpoint_thread_.join();
  }

  core::Status Init() {
    KLUTCH_ASSIGN_OR_RETURN(writer_, OpenConn(options_, /*writer=*/true));
    {
      // Databases of the first format kept values in kv; refuse them rather than misread.
      sqlite3_stmt* probe = nullptr;
      if (sqlite3_prepare_v2(writer_->handle.db, "SELECT value FROM kv LIMIT 0", -1, &probe,
                             nullptr) == SQLITE_OK) {
        sqlite3_finalize(probe);
        return core::Internal(fmt::format(
            "storage: {} was written by an older klutch (schema 1); remove it to start afresh",
            options_.path));
      }
      sqlite3_finalize(probe);
    }
    sqlite3_wal_hook(
        writer_->handle.db,
        [](void* self, sqlite3*, const char*, int frames) {
          static_cast<Impl*>(self)->wal_frames_.store(frames);
          return SQLITE_OK;
        },
        this);
    KLUTCH_ASSIGN_OR_RETURN(checkpointer_, OpenConn(options_, /*writer=*/false));
    KLUTCH_RETURN_IF_ERROR(writer_->meta.Reset().Step().status());
    revision_ = writer_->meta.Int(0);
    compacted_ = writer_->meta.Int(1);
    writer_->meta.Reset();
    hub_ = std::make_unique<WatchHub>(revision_.load());
    writer_thread_ = std::thread([this] { WriterLoop(); });
    checkpoint_thread_ = std::thread([this] { CheckpointLoop(); });
    return core::Status::Ok();
  }

  // Copies WAL frames into the database file in the background (PASSIVE: never waits for
  // readers or the writer), so commits only append to the WAL and fsync it.
  void CheckpointLoop() EXCLUDES(queue_mu_) {
    while (true) {
      {
        core::MutexLock lock(queue_mu_);
        if (stopping_) return;
        checkpoint_cv_.WaitFor(queue_mu_, std::chrono::seconds(1));
        if (stopping_) return;
      }
      if (wal_frames_.load() == 0) continue;
      int log = 0, done = 0;
      int rc = sqlite3_wal_checkpoint_v2(checkpointer_->handle.db, nullptr,
                                         SQLITE_CHECKPOINT_PASSIVE, &log, &done);
      if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
        KLUTCH_LOG(kWarn, "storage", "checkpoint failed: {}",
                   sqlite3_errmsg(checkpointer_->handle.db));
      }
    }
  }

  // Borrowed reader connection, returned to the pool on destruction.
  class Lease {
   public:
    Lease(Impl* impl, std::unique_ptr<Conn> conn) : impl_(impl), conn_(std::move(conn)) {}
    Lease(Lease&&) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_) impl_->ReturnReader(std::move(conn_));
    }
    Conn* operator->() { return conn_.get(); }
    Conn* get() { return conn_.get(); }

   private:
    Impl* impl_;
    std::unique_ptr<Conn> conn_;
  };

  core::Result<Lease> Reader() {
    {
      core::MutexLock lock(pool_mu_);
      if (!readers_.empty()) {
        auto c = std::move(readers_.back());
        readers_.pop_back();
        return Lease(this, std::move(c));
      }
    }
    KLUTCH_ASSIGN_OR_RETURN(auto c, OpenConn(options_, /*writer=*/false));
    return Lease(this, std::move(c));
  }

  void ReturnReader(std::unique_ptr<Conn> c) EXCLUDES(pool_mu_) {
    core::MutexLock lock(pool_mu_);
    if (readers_.size() < 16) readers_.push_back(std::move(c));
  }

  core::Result<std::optional<KeyValue>> Get(std::string_view key) {
    KLUTCH_ASSIGN_OR_RETURN(Lease r, Reader());
    Stmt& s = r->get.Reset().BindStatic(1, key);
    KLUTCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<KeyValue>();
    KeyValue kv{std::string(key), s.Value(0), s.Int(1), s.Int(2)};
    s.Reset();
    return std::optional<KeyValue>(std::move(kv));
  }

  core::Result<ListResult> List(const ListRequest& req) {
    KLUTCH_ASSIGN_OR_RETURN(Lease r, Reader());
    ReadTxn txn(r.get());
    KLUTCH_RETURN_IF_ERROR(txn.Begin());
    KLUTCH_ASSIGN_OR_RETURN(bool meta_row, r->meta.Reset().Step());
    if (!meta_row) return core::Internal("storage: meta table is empty");
    const int64_t latest = r->meta.Int(0);
    const int64_t compacted = r->meta.Int(1);
    r->meta.Reset();
    const int64_t at = req.revision == 0 ? latest : req.revision;
    if (at < compacted) return TooOldRevision(at, compacted);
    if (at > latest) return TooLargeRevision(at, latest);

    std::string hi = PrefixEnd(req.prefix);
    if (hi.empty()) hi = kKeyMax;
    const int64_t fetch = req.limit > 0 ? req.limit + 1 : -1;

    bool historic = false;
    if (at < latest) {
      Stmt& c = r->changed_since.Reset().Bind(1, at).BindStatic(2, req.prefix).BindStatic(3, hi);
      KLUTCH_ASSIGN_OR_RETURN(historic, c.Step());
      c.Reset();
    }
    ListResult out;
    out.revision = at;
    Stmt& s = historic ? r->list_at.Reset()
                             .BindStatic(1, req.prefix)
                             .BindStatic(2, hi)
                             .BindStatic(3, req.start_after)
                             .Bind(4, at)
                             .Bind(5, fetch)
                       : r->list.Reset()
                             .BindStatic(1, req.prefix)
                             .BindStatic(2, hi)
                             .BindStatic(3, req.start_after)
                             .Bind(4, fetch);
    while (true) {
      KLUTCH_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      if (req.limit > 0 && static_cast<int64_t>(out.items.size()) == req.limit) {
        out.more = true;
        break;
      }
      // SQLite reads a value's overflow pages only when the column is fetched.
      out.items.push_back(
          KeyValue{s.Text(0), req.keys_only ? nullptr : s.Value(1), s.Int(2), s.Int(3)});
    }
    s.Reset();
    return out;
  }

  core::Result<WriteResult> Write(WriteRequest request) {
    if (request.key.empty()) return core::BadRequest("empty key");
    if (request.op == WriteRequest::Op::kPut && !request.make_value) {
      return core::BadRequest("put without a value");
    }
    auto job = std::make_unique<Job>();
    job->write = std::move(request);
    auto future = job->promise.get_future();
    Enqueue(std::move(job));
    return future.get();
  }

  core::Status Compact(int64_t revision) {
    auto job = std::make_unique<Job>();
    job->compact_to = revision;
    auto future = job->promise.get_future();
    Enqueue(std::move(job));
    return future.get().status();
  }

  core::Result<std::unique_ptr<WatchHandle>> Watch(std::string prefix, int64_t after,
                                                   WatchCallback callback) {
    if (after < compacted_.load()) return TooOldRevision(after, compacted_.load());
    std::string hi = PrefixEnd(prefix);
    if (hi.empty()) hi = kKeyMax;
    std::string lo = prefix;
    auto reg = hub_->Register(std::move(prefix), after, std::move(callback));
    auto history = ReadHistory(lo, hi, after, reg.history_until);
    if (!history.ok()) {
      hub_->Unregister(reg.id);
      return history.status();
    }
    hub_->FinishCatchUp(reg.id, *history);
    return hub_->MakeHandle(reg.id);
  }

  core::Result<std::vector<EventPtr>> ReadHistory(const std::string& lo, const std::string& hi,
                                                  int64_t after, int64_t until) {
    std::vector<EventPtr> out;
    if (after >= until) return out;
    KLUTCH_ASSIGN_OR_RETURN(Lease r, Reader());
    ReadTxn txn(r.get());
    KLUTCH_RETURN_IF_ERROR(txn.Begin());
    KLUTCH_ASSIGN_OR_RETURN(bool meta_row, r->meta.Reset().Step());
    if (!meta_row) return core::Internal("storage: meta table is empty");
    const int64_t compacted = r->meta.Int(1);
    r->meta.Reset();
    // Checked inside the snapshot: a compaction that committed first removed the rows.
    if (after < compacted) return TooOldRevision(after, compacted);
    Stmt& s = r->history.Reset().Bind(1, after).Bind(2, until).BindStatic(3, lo).BindStatic(4, hi);
    while (true) {
      KLUTCH_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      auto e = std::make_shared<Event>();
      e->revision = s.Int(0);
      e->key = s.Text(1);
      e->value = s.Value(2);
      e->create_revision = s.Int(3);
      e->prev_revision = s.Int(4);
      e->type = s.Int(5) ? Event::Type::kDelete : Event::Type::kPut;
      e->prev_value = e->prev_revision ? s.Value(6) : nullptr;
      out.push_back(std::move(e));
    }
    s.Reset();
    return out;
  }

  int64_t Revision() const { return revision_.load(); }
  bool WaitForRevision(int64_t revision, std::chrono::milliseconds timeout) {
    const auto deadline = core::CondVar::DeadlineAfter(timeout);
    core::MutexLock lock(revision_mu_);
    while (revision_.load() < revision) {
      if (!revision_cv_.WaitUntil(revision_mu_, deadline)) return revision_.load() >= revision;
    }
    return true;
  }
  int64_t Compacted() const { return compacted_.load(); }
  int64_t commits() const { return commits_.load(); }

 private:
  struct Job {
    WriteRequest write;
    int64_t compact_to = -1;  // >= 0: a compaction job
    std::promise<core::Result<WriteResult>> promise;
  };

  void Enqueue(std::unique_ptr<Job> job) EXCLUDES(queue_mu_) {
    {
      core::MutexLock lock(queue_mu_);
      queue_.push_back(std::move(job));
    }
    queue_cv_.Signal();
  }

  void WriterLoop() EXCLUDES(queue_mu_) {
    while (true) {
      std::vector<std::unique_ptr<Job>> batch;
      {
        core::MutexLock lock(queue_mu_);
        while (!stopping_ && queue_.empty()) queue_cv_.Wait(queue_mu_);
        if (queue_.empty() && stopping_) return;
        while (!queue_.empty() && static_cast<int>(batch.size()) < options_.max_batch) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      CommitBatch(batch);
    }
  }

  // Evaluates one write inside the open transaction; appends its event on success.
  core::Result<WriteResult> Apply(WriteRequest& w, int64_t& rev, std::vector<EventPtr>& events) {
    Conn& c = *writer_;
    WriteResult result;
    Stmt& g = c.get.Reset().BindStatic(1, w.key);
    KLUTCH_ASSIGN_OR_RETURN(bool exists, g.Step());
    std::optional<KeyValue> cur;
    if (exists) cur = KeyValue{w.key, g.Value(0), g.Int(1), g.Int(2)};
    g.Reset();
    const int64_t have = cur ? cur->mod_revision : 0;
    bool ok = w.expected_mod_revision == kAnyRevision ? (w.op == WriteRequest::Op::kPut || exists)
                                                      : w.expected_mod_revision == have;
    if (!ok) {
      result.revision = rev;
      result.current = std::move(cur);
      return result;
    }
    const int64_t new_rev = rev + 1;
    auto e = std::make_shared<Event>();
    e->key = w.key;
    e->revision = new_rev;
    if (cur) {
      e->prev_value = cur->value;
      e->prev_revision = cur->mod_revision;
    }
    if (w.op == WriteRequest::Op::kPut) {
      const int64_t create_rev = cur ? cur->create_revision : new_rev;
      auto value = std::make_shared<const std::string>(w.make_value(new_rev, create_rev));
      KLUTCH_RETURN_IF_ERROR(
          c.put_kv.Reset().BindStatic(1, w.key).Bind(2, create_rev).Bind(3, new_rev).Run());
      KLUTCH_RETURN_IF_ERROR(c.put_log.Reset()
                                 .Bind(1, new_rev)
                                 .BindStatic(2, w.key)
                                 .BindBlob(3, *value)
                                 .Bind(4, create_rev)
                                 .Bind(5, have)
                                 .Bind(6, int64_t{0})
                                 .Run());
      e->type = Event::Type::kPut;
      e->value = value;
      e->create_revision = create_rev;
      result.current = KeyValue{w.key, value, create_rev, new_rev};
    } else {
      auto tomb =
          w.make_value
              ? std::make_shared<const std::string>(w.make_value(new_rev, cur->create_revision))
              : cur->value;
      KLUTCH_RETURN_IF_ERROR(c.del_kv.Reset().BindStatic(1, w.key).Run());
      KLUTCH_RETURN_IF_ERROR(c.put_log.Reset()
                                 .Bind(1, new_rev)
                                 .BindStatic(2, w.key)
                                 .BindBlob(3, *tomb)
                                 .Bind(4, cur->create_revision)
                                 .Bind(5, have)
                                 .Bind(6, int64_t{1})
                                 .Run());
      e->type = Event::Type::kDelete;
      e->value = tomb;
      e->create_revision = cur->create_revision;
    }
    result.previous = std::move(cur);
    result.succeeded = true;
    result.revision = new_rev;
    rev = new_rev;
    events.push_back(std::move(e));
    return result;
  }

  void CommitBatch(std::vector<std::unique_ptr<Job>>& batch) {
    Conn& c = *writer_;
    std::vector<core::Result<WriteResult>> results;
    std::vector<EventPtr> events;
    int64_t rev = revision_.load();
    int64_t compacted = compacted_.load();
    core::Status failure = c.begin.Reset().Run();
    for (auto& job : batch) {
      if (!failure.ok()) break;
      if (job->compact_to >= 0) {
        int64_t to = std::min(job->compact_to, rev);
        if (to > compacted) {
          failure = c.compact_log.Reset().Bind(1, to).Run();
          if (failure.ok())
            failure = c.set_meta.Reset().BindStatic(1, "compacted").Bind(2, to).Run();
          // The revision floor survives compaction even when the newest rows were removed.
          if (failure.ok())
            failure = c.set_meta.Reset().BindStatic(1, "revision").Bind(2, rev).Run();
          if (failure.ok()) compacted = to;
        }
        results.emplace_back(WriteResult{});
        continue;
      }
      auto r = Apply(job->write, rev, events);
      if (!r.ok() && r.status().reason() == core::Reason::kInternalError) {
        failure = r.status();
        break;
      }
      results.push_back(std::move(r));
    }
    if (failure.ok()) failure = c.commit.Reset().Run();
    if (!failure.ok()) {
      (void)c.rollback.Reset().Run();
      KLUTCH_LOG(kError, "storage", "group commit of {} writes failed: {}", batch.size(),
                 failure.message());
      for (auto& job : batch) job->promise.set_value(failure);
      return;
    }
    ++commits_;
    if (wal_frames_.load() > kCheckpointFrames) checkpoint_cv_.Signal();
    {
      core::MutexLock lock(revision_mu_);
      revision_.store(rev);
    }
    revision_cv_.SignalAll();
    compacted_.store(compacted);
    for (size_t i = 0; i < batch.size(); ++i) batch[i]->promise.set_value(std::move(results[i]));
    hub_->Dispatch(events);
  }

  SqliteOptions options_;
  std::unique_ptr<Conn> writer_;  // used only by the writer thread after Init()
  std::atomic<int64_t> revision_{0};
  std::atomic<int64_t> compacted_{0};
  std::atomic<int64_t> commits_{0};
  // revision_ is atomic; revision_mu_ orders its store against WaitForRevision's check.
  core::Mutex revision_mu_;
  core::CondVar revision_cv_;  // revision_ advanced
  std::unique_ptr<WatchHub> hub_;

  core::Mutex pool_mu_;
  std::vector<std::unique_ptr<Conn>> readers_ GUARDED_BY(pool_mu_);

  core::Mutex queue_mu_;
  core::CondVar queue_cv_;  // a job was queued, or stopping_
  std::deque<std::unique_ptr<Job>> queue_ GUARDED_BY(queue_mu_);
  bool stopping_ GUARDED_BY(queue_mu_) = false;
  std::thread writer_thread_;

  static constexpr int kCheckpointFrames = 2000;
  std::unique_ptr<Conn> checkpointer_;  // used only by the checkpoint thread
  std::atomic<int> wal_frames_{0};
  core::CondVar checkpoint_cv_;  // on queue_mu_: the WAL grew past kCheckpointFrames, or stopping_
  std::thread checkpoint_thread_;
};

core::Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const SqliteOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  KLUTCH_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(impl)));
}

SqliteStore::SqliteStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteStore::~SqliteStore() = default;

core::Result<std::optional<KeyValue>> SqliteStore::Get(std::string_view key) {
  return impl_->Get(key);
}
core::Result<ListResult> SqliteStore::List(const ListRequest& request) {
  return impl_->List(request);
}
core::Result<WriteResult> SqliteStore::Write(WriteRequest request) {
  return impl_->Write(std::move(request));
}
core::Result<std::unique_ptr<WatchHandle>> SqliteStore::Watch(std::string prefix,
                                                              int64_t after_revision,
                                                              WatchCallback callback) {
  return impl_->Watch(std::move(prefix), after_revision, std::move(callback));
}
int64_t SqliteStore::Revision() const { return impl_->Revision(); }
int64_t SqliteStore::CompactedRevision() const { return impl_->Compacted(); }
bool SqliteStore::WaitForRevision(int64_t revision, std::chrono::milliseconds timeout) {
  return impl_->WaitForRevision(revision, timeout);
}
core::Status SqliteStore::Compact(int64_t revision) { return impl_->Compact(revision); }
int64_t SqliteStore::commit_count() const { return impl_->commits(); }

}  // namespace klutch::storage
