#include "apiserver/watch.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <random>

#include "core/log.h"
#include "core/strings.h"
#include "storage/revision_errors.h"

namespace klutch::apiserver {

using Clock = std::chrono::steady_clock;

namespace {
// One watch event line, `type` first as kube-apiserver writes it; `object` is encoded JSON.
std::string Frame(std::string_view type, std::string_view object) {
  std::string frame;
  frame.reserve(object.size() + type.size() + 24);
  frame += R"({"type":")";
  frame += type;
  frame += R"(","object":)";
  frame += object;
  frame += "}\n";
  return frame;
}
}  // namespace

// One watch. Set up on a worker thread by WatchManager::Start (initial events queued, store
// watch registered), then attached to the HTTP stream on an I/O thread. Frames are emitted
// under emit_mu_, which also orders bookmarks after the events they cover: the bookmark's
// resourceVersion is that of the last event actually handed to the stream.
class WatchSession : public std::enable_shared_from_this<WatchSession> {
 public:
  WatchSession(WatchManager* manager, WatchRequest request, int64_t start_revision)
      : manager_(manager),
        request_(std::move(request)),
        last_revision_(start_revision),
        started_(Clock::now()),
        last_bookmark_(Clock::now()) {}

  // Queues the initial events and starts the store watch (worker thread).
  core::Status Begin(std::vector<ListItem>& initial, bool initial_events_end) {
    for (auto& item : initial) SendObject("ADDED", item.raw, item.parsed, 0);
    if (initial_events_end) SendBookmark(true);
    std::weak_ptr<WatchSession> weak = shared_from_this();
    auto handle = manager_->storage_.store().Watch(
        Prefix(), last_revision_.load(), [weak](const std::vector<storage::EventPtr>& events) {
          if (auto self = weak.lock()) self->OnEvents(events);
        });
    if (!handle.ok()) return handle.status();
    core::MutexLock lock(mu_);
    handle_ = std::move(handle).value();
    return core::Status::Ok();
  }

  // Hands the HTTP stream over: queued frames first, then live ones (I/O thread).
  void Attach(const std::shared_ptr<http::ResponseStream>& stream) {
    {
      core::MutexLock lock(emit_mu_);
      for (auto& frame : pending_) stream->Write(std::move(frame));
      pending_.clear();
      pending_.shrink_to_fit();
      stream_ = stream;
    }
    attached_ = true;
    std::weak_ptr<WatchSession> weak = shared_from_this();
    stream->OnClosed([weak] {
      if (auto self = weak.lock()) self->manager_->Remove(self.get());
    });
  }
  bool attached() const { return attached_.load(); }
  const WatchRequest& request() const { return request_; }

  std::string Prefix() const {
    std::string p = request_.resource->KeyPrefix();
    if (request_.resource->namespaced && !request_.ns.empty()) p += request_.ns + "/";
    std::string pinned = request_.filter.PinnedName();
    if (!pinned.empty() && (!request_.resource->namespaced || !request_.ns.empty())) {
      // Exact key: the trailing component is the name (prefix match may include names with
      // the same start; the filter removes those).
      p += pinned;
    }
    return p;
  }

  // Bookmarks and timeouts, from the manager's ticker.
  void Tick(Clock::time_point now, std::chrono::seconds bookmark_interval) {
    if (!attached_) return;
    if (now - started_ >= timeout_) {
      if (request_.allow_bookmarks) SendBookmark(false);
      Close();
      return;
    }
    if (request_.allow_bookmarks && now - last_bookmark_.load() >= bookmark_interval) {
      SendBookmark(false);
    }
  }

  void SetTimeout(std::chrono::seconds t) { timeout_ = t; }

  void Close() {
    std::shared_ptr<http::ResponseStream> s;
    {
      core::MutexLock lock(emit_mu_);
      s = stream_;
    }
    if (s) s->Close();
  }

  void Stop() {
    std::unique_ptr<storage::WatchHandle> h;
    {
      core::MutexLock lock(mu_);
      h = std::move(handle_);
    }
    h.reset();
  }

  // For watches that fail before they start (too old resourceVersion): one ERROR, then end.
  static void SendErrorTo(const std::shared_ptr<http::ResponseStream>& stream,
                          const core::Status& status) {
    stream->Write(Frame("ERROR", machinery::Dump(machinery::StatusToJson(status))));
    stream->Close();
  }

 private:
  // Emits one frame; `revision` > 0 advances the resume point once the frame is handed on.
  void Emit(std::string frame, int64_t revision) {
    core::MutexLock lock(emit_mu_);
    if (stream_) {
      if (!stream_->Write(std::move(frame))) return;
    } else {
      pending_.push_back(std::move(frame));
    }
    if (revision > 0) last_revision_ = revision;
  }

  // Writes one event whose object is `raw` (stored bytes) or `parsed`.
  void SendObject(const char* type, const std::shared_ptr<const std::string>& raw,
                  std::shared_ptr<const Json> parsed, int64_t revision) {
    const ResourceInfo& r = *request_.resource;
    if (!request_.table && !r.TransformsOnRead() && raw) {
      Emit(Frame(type, *raw), revision);
      return;
    }
    if (!parsed) {
      auto p = machinery::ParseJson(*raw);
      if (!p.ok()) return;
      parsed = std::make_shared<const Json>(std::move(p).value());
    }
    Json obj = *parsed;
    r.ToServed(obj);
    if (request_.table) {
      bool first = !sent_columns_.exchange(true);
      Json meta = {{"resourceVersion", machinery::ResourceVersion(obj)}};
      Emit(Frame(type, machinery::Dump(ToTable(r, {&obj}, request_.include, meta, first,
                                               manager_->storage_.clock().Now(),
                                               request_.table_api_version))),
           revision);
    } else {
      Emit(Frame(type, machinery::Dump(obj)), revision);
    }
  }

  void SendBookmark(bool initial_events_end) {
    const ResourceInfo& r = *request_.resource;
    core::MutexLock lock(emit_mu_);
    const std::string rv = std::to_string(last_revision_.load());
    Json meta = {{"resourceVersion", rv}, {"creationTimestamp", nullptr}};
    if (initial_events_end) meta["annotations"] = {{"k8s.io/initial-events-end", "true"}};
    Json obj = {{"kind", r.kind}, {"apiVersion", r.ApiVersion()}, {"metadata", meta}};
    if (request_.table) {
      obj = {{"kind", "Table"},
             {"apiVersion", request_.table_api_version},
             {"metadata", {{"resourceVersion", rv}}},
             {"columnDefinitions", nullptr},
             {"rows", nullptr}};
    }
    last_bookmark_ = Clock::now();
    std::string frame = Frame("BOOKMARK", machinery::Dump(obj));
    if (stream_) {
      stream_->Write(std::move(frame));
    } else {
      pending_.push_back(std::move(frame));
    }
  }

  void OnEvents(const std::vector<storage::EventPtr>& events) {
    const ResourceInfo& r = *request_.resource;
    // Name and namespace equalities are decided by the key alone (below and by the watch
    // prefix); only other selectors need the objects parsed.
    const bool filtered = !request_.filter.KeyOnly();
    const std::string pinned = request_.filter.PinnedName();
    const std::string pinned_ns = request_.filter.PinnedNamespace();
    for (const auto& e : events) {
      // A pinned-name prefix also matches longer names; check the exact key.
      if (!pinned.empty() && !e->key.ends_with("/" + pinned)) continue;
      if (!pinned_ns.empty() && r.namespaced &&
          e->key.compare(r.KeyPrefix().size(), pinned_ns.size() + 1, pinned_ns + "/") != 0) {
        continue;
      }
      const bool is_delete = e->type == storage::Event::Type::kDelete;
      if (!filtered) {
        SendObject(is_delete ? "DELETED" : (e->IsCreate() ? "ADDED" : "MODIFIED"), e->value,
                   nullptr, e->revision);
        continue;
      }
      auto cur = machinery::ParseJson(*e->value);
      if (!cur.ok()) continue;
      bool cur_match = request_.filter.Matches(r, *cur);
      bool prev_match = false;
      std::optional<Json> prev;
      if (e->prev_value) {
        auto p = machinery::ParseJson(*e->prev_value);
        if (p.ok()) {
          prev = std::move(p).value();
          prev_match = request_.filter.Matches(r, *prev);
        }
      }
      if (is_delete) {
        if (cur_match || prev_match) {
          SendObject("DELETED", e->value, std::make_shared<const Json>(std::move(cur).value()),
                     e->revision);
        }
        continue;
      }
      if (cur_match && prev_match) {
        SendObject("MODIFIED", e->value, std::make_shared<const Json>(std::move(cur).value()),
                   e->revision);
      } else if (cur_match) {
        SendObject("ADDED", e->value, std::make_shared<const Json>(std::move(cur).value()),
                   e->revision);
      } else if (prev_match && prev) {
        // Stopped matching: DELETED with the previous content at this event's revision.
        machinery::MutableMetadata(*prev)["resourceVersion"] = std::to_string(e->revision);
        auto shared = std::make_shared<const Json>(std::move(*prev));
        SendObject("DELETED", std::make_shared<const std::string>(machinery::Dump(*shared)), shared,
                   e->revision);
      }
    }
    // Events this watch filtered out are behind it too: bookmarks may resume after them.
    if (!events.empty()) {
      core::MutexLock lock(emit_mu_);
      if (events.back()->revision > last_revision_) last_revision_ = events.back()->revision;
    }
  }

  WatchManager* manager_;
  WatchRequest request_;
  std::atomic<int64_t> last_revision_;
  Clock::time_point started_;
  std::chrono::seconds timeout_{1800};
  std::atomic<Clock::time_point> last_bookmark_;
  std::atomic<bool> sent_columns_{false};
  std::atomic<bool> attached_{false};
  core::Mutex emit_mu_;
  std::shared_ptr<http::ResponseStream> stream_ GUARDED_BY(emit_mu_);
  std::vector<std::string> pending_ GUARDED_BY(emit_mu_);  // frames before Attach
  mutable core::Mutex mu_;
  std::unique_ptr<storage::WatchHandle> handle_ GUARDED_BY(mu_);
};

WatchManager::WatchManager(RestStorage& storage, std::chrono::seconds bookmark_interval,
                           std::chrono::seconds default_timeout)
    : storage_(storage), bookmark_interval_(bookmark_interval), default_timeout_(default_timeout) {
  ticker_ = std::thread([this] { Tick(); });
}

WatchManager::~WatchManager() {
  std::set<std::shared_ptr<WatchSession>> sessions;
  {
    core::MutexLock lock(mu_);
    stopping_ = true;
    sessions.swap(sessions_);
  }
  cv_.SignalAll();
  ticker_.join();
  for (const auto& s : sessions) {
    s->Stop();
    s->Close();
  }
}

size_t WatchManager::active() const {
  core::MutexLock lock(mu_);
  return sessions_.size();
}

std::map<std::string, size_t> WatchManager::ActiveByResource() const {
  std::map<std::string, size_t> out;
  core::MutexLock lock(mu_);
  for (const auto& session : sessions_) ++out[session->request().resource->GroupResource()];
  return out;
}

void WatchManager::Remove(WatchSession* session) {
  std::shared_ptr<WatchSession> found;
  {
    core::MutexLock lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->get() == session) {
        found = *it;
        sessions_.erase(it);
        break;
      }
    }
  }
  if (found) found->Stop();
}

void WatchManager::Tick() {
  core::MutexLock lock(mu_);
  while (!stopping_) {
    cv_.WaitFor(mu_, std::chrono::seconds(1));
    if (stopping_) break;
    auto sessions = sessions_;
    mu_.Unlock();
    auto now = Clock::now();
    for (const auto& s : sessions) s->Tick(now, bookmark_interval_);
    mu_.Lock();
  }
}

core::Result<http::Response> WatchManager::Start(WatchRequest request) {
  const ResourceInfo& r = *request.resource;
  std::vector<ListItem> initial;
  int64_t start = 0;
  bool initial_events_end = false;
  const std::string& rv = request.resource_version;
  if (request.send_initial_events) {
    if (!request.allow_bookmarks || request.resource_version_match != "NotOlderThan") {
      core::Status s(core::Reason::kInvalid,
                     "sendInitialEvents requires allowWatchBookmarks=true and "
                     "resourceVersionMatch=NotOlderThan");
      return s;
    }
  }
  std::optional<core::Status> expired;
  if (rv.empty() || rv == "0" || request.send_initial_events) {
    // Synthetic ADDED for the current state, then changes after that snapshot.
    ListOptions lo;
    lo.resource_version = request.send_initial_events ? rv : "";
    KLUTCH_ASSIGN_OR_RETURN(ListOutcome list, storage_.List(r, request.ns, lo));
    for (auto& item : list.items) {
      if (request.filter.Empty() || request.filter.Matches(r, item.Object())) {
        initial.push_back(std::move(item));
      }
    }
    start = *core::ParseInt64(list.resource_version);
    initial_events_end = request.send_initial_events;
  } else {
    auto n = core::ParseInt64(rv);
    if (!n || *n < 0) return core::BadRequest(fmt::format("invalid resource version: {}", rv));
    start = *n;
    auto& store = storage_.store();
    if (start < store.CompactedRevision()) {
      expired = storage::TooOldRevision(start, store.CompactedRevision());
    } else if (start > store.Revision() && !store.WaitForRevision(start, std::chrono::seconds(3))) {
      // A version from the future (a client that saw another server, or a restored store).
      return storage::TooLargeRevision(start, store.Revision());
    }
  }
  auto timeout = request.timeout.count() > 0 ? request.timeout : default_timeout_;
  auto session = std::make_shared<WatchSession>(this, std::move(request), start);
  session->SetTimeout(timeout);
  if (!expired) {
    auto begun = session->Begin(initial, initial_events_end);
    if (!begun.ok()) {
      // Compacted between the check above and the watch: the same 410 as an ERROR event.
      if (!core::IsGone(begun)) return begun;
      expired = begun;
    }
  }
  {
    core::MutexLock lock(mu_);
    if (stopping_) return core::Unavailable("server is shutting down");
    sessions_.insert(session);
  }
  // Releases the session if the stream never starts (the client went away first).
  struct StartGuard {
    StartGuard(WatchManager* m, std::shared_ptr<WatchSession> s)
        : manager(m), session(std::move(s)) {}
    StartGuard(const StartGuard&) = delete;
    StartGuard& operator=(const StartGuard&) = delete;
    ~StartGuard() {
      if (!session->attached()) manager->Remove(session.get());
    }
    WatchManager* manager;
    std::shared_ptr<WatchSession> session;
  };
  auto guard = std::make_shared<StartGuard>(this, session);
  http::Response resp;
  resp.status = 200;
  resp.headers.Set("Content-Type", "application/json");
  resp.headers.Set("Cache-Control", "no-cache, private");
  resp.stream = [guard, expired](std::shared_ptr<http::ResponseStream> stream) {
    if (expired) {
      WatchSession::SendErrorTo(stream, *expired);
      return;
    }
    guard->session->Attach(stream);
  };
  return resp;
}

}  // namespace klutch::apiserver
