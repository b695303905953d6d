#include "client/informer.h"

#include <fmt/format.h>

#include <random>

#include "core/log.h"

namespace klutch::client {

std::string ObjectKey(const Json& object) {
  std::string ns = machinery::Namespace(object);
  std::string name = machinery::Name(object);
  return ns.empty() ? name : ns + "/" + name;
}

// ---------------------------------------------------------------------------------------
// Indexer

Indexer::Indexer() {
  index_funcs_[kNamespaceIndex] = [](const Json& o) -> std::vector<std::string> {
    return {machinery::Namespace(o)};
  };
}

core::Status Indexer::AddIndex(const std::string& name, IndexFunc fn) {
  core::MutexLock lock(mu_);
  if (!items_.empty()) {
    return core::BadRequest(fmt::format("index \"{}\" added after objects arrived", name));
  }
  if (index_funcs_.count(name)) return core::AlreadyExists(fmt::format("index \"{}\"", name));
  index_funcs_[name] = std::move(fn);
  return core::Status::Ok();
}

namespace {
// An index function that throws indexes the object under nothing (and says so once).
std::vector<std::string> IndexValues(const Indexer::IndexFunc& fn, const Json* obj) {
  if (!obj) return {};
  try {
    return fn(*obj);
  } catch (const std::exception& e) {
    KLUTCH_LOG(kWarn, "informer", "index function threw: {}", e.what());
    return {};
  }
}

// Handlers are user code: one that throws must not take the reflector thread down.
template <typename F>
void Safely(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    KLUTCH_LOG(kWarn, "informer", "event handler threw: {}", e.what());
  }
}
}  // namespace

void Indexer::IndexLocked(const std::string& key, const Json* old_obj, const Json* new_obj) {
  for (const auto& [name, fn] : index_funcs_) {
    auto& index = indexes_[name];
    std::vector<std::string> old_values = IndexValues(fn, old_obj);
    std::vector<std::string> new_values = IndexValues(fn, new_obj);
    if (old_values == new_values) continue;
    for (const auto& v : old_values) {
      auto it = index.find(v);
      if (it == index.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) index.erase(it);
    }
    for (const auto& v : new_values) index[v].insert(key);
  }
}

void Indexer::SetCompact(bool compact) {
  core::MutexLock lock(mu_);
  if (items_.empty()) compact_ = compact;
}

Indexer::Slot Indexer::Pack(ObjectPtr object) const {
  Slot slot;
  if (!compact_) {
    slot.object = std::move(object);
    return slot;
  }
  std::vector<uint8_t> bytes = Json::to_cbor(*object);
  slot.packed.assign(bytes.begin(), bytes.end());
  slot.packed.shrink_to_fit();
  return slot;
}

ObjectPtr Indexer::Unpack(const Slot& slot) {
  if (slot.object) return slot.object;
  // Bytes this indexer wrote: they decode (allow_exceptions=false keeps a surprise a null).
  Json object = Json::from_cbor(slot.packed, /*strict=*/true, /*allow_exceptions=*/false);
  if (object.is_discarded()) return nullptr;
  return std::make_shared<const Json>(std::move(object));
}

ObjectPtr Indexer::Get(const std::string& key) const {
  core::MutexLock lock(mu_);
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : Unpack(it->second);
}

std::vector<ObjectPtr> Indexer::List() const {
  core::MutexLock lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) {
    if (ObjectPtr o = Unpack(v)) out.push_back(std::move(o));
  }
  return out;
}

std::vector<std::string> Indexer::Keys() const {
  core::MutexLock lock(mu_);
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(k);
  return out;
}

std::vector<ObjectPtr> Indexer::ByIndex(const std::string& name, const std::string& value) const {
  core::MutexLock lock(mu_);
  std::vector<ObjectPtr> out;
  auto index = indexes_.find(name);
  if (index == indexes_.end()) return out;
  auto keys = index->second.find(value);
  if (keys == index->second.end()) return out;
  for (const auto& k : keys->second) {
    auto it = items_.find(k);
    if (it == items_.end()) continue;
    if (ObjectPtr o = Unpack(it->second)) out.push_back(std::move(o));
  }
  return out;
}

size_t Indexer::Size() const {
  core::MutexLock lock(mu_);
  return items_.size();
}

ObjectPtr Indexer::Upsert(ObjectPtr object) {
  std::string key = ObjectKey(*object);
  core::MutexLock lock(mu_);
  Slot& slot = items_[key];
  ObjectPtr old = slot.object || !slot.packed.empty() ? Unpack(slot) : nullptr;
  IndexLocked(key, old.get(), object.get());
  slot = Pack(std::move(object));
  return old;
}

ObjectPtr Indexer::Delete(const std::string& key) {
  core::MutexLock lock(mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return nullptr;
  ObjectPtr old = Unpack(it->second);
  items_.erase(it);
  IndexLocked(key, old.get(), nullptr);
  return old;
}

// ---------------------------------------------------------------------------------------
// Informer

namespace {
constexpr const char* kMetadataAccept =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
}  // namespace

Informer::Informer(RestClient& rest, GroupVersionResource gvr, InformerOptions options)
    : resource_(rest, gvr, options.ns),
      gvr_(std::move(gvr)),
      options_(std::move(options)),
      clock_(options_.clock ? *options_.clock : core::RealClock::Get()) {
  indexer_.SetCompact(options_.compact);
}

Informer::~Informer() { Stop(); }

Informer::HandlerId Informer::AddEventHandler(EventHandler handler) {
  core::MutexLock lock(handlers_mu_);
  if (handler.on_add) {
    for (const auto& obj : indexer_.List()) Safely([&] { handler.on_add(obj); });
  }
  HandlerId id = next_handler_id_++;
  handlers_.emplace_back(id, std::move(handler));
  return id;
}

void Informer::RemoveEventHandler(HandlerId id) {
  core::MutexLock lock(handlers_mu_);
  std::erase_if(handlers_, [id](const auto& entry) { return entry.first == id; });
}

void Informer::Start() {
  core::MutexLock lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  std::thread thread;
  {
    core::MutexLock lock(mu_);
    stopping_ = true;
    if (canceller_) canceller_->Cancel();
    thread = std::move(thread_);
  }
  cv_.SignalAll();
  if (thread.joinable()) thread.join();
}

bool Informer::Stopping() const {
  core::MutexLock lock(mu_);
  return stopping_;
}

std::string Informer::LastResourceVersion() const {
  core::MutexLock lock(mu_);
  return last_rv_;
}

bool Informer::SleepFor(std::chrono::milliseconds d) {
  core::MutexLock lock(mu_);
  const core::MonoTime deadline = clock_.After(d);
  while (!stopping_ && clock_.MonotonicNow() < deadline) clock_.WaitUntil(cv_, mu_, deadline);
  return !stopping_;
}

bool Informer::ResyncDue() const {
  return options_.resync_period.count() > 0 && clock_.MonotonicNow() >= next_resync_;
}

// managedFields are already left out by the parser when strip_managed_fields is set (lists
// and watch events alike), so shaping is only the transform and the metadata-only cut.
ObjectPtr Informer::Shape(Json object) const {
  if (options_.transform) Safely([&] { options_.transform(object); });
  if (options_.metadata_only) {
    Json slim = {
        {"apiVersion", machinery::GetString(object, {"apiVersion"})},
        {"kind", machinery::GetString(object, {"kind"})},
        {"metadata", object.contains("metadata") ? std::move(object["metadata"]) : Json::object()}};
    if (slim["metadata"].is_object()) slim["metadata"].erase("managedFields");
    return std::make_shared<const Json>(std::move(slim));
  }
  return std::make_shared<const Json>(std::move(object));
}

void Informer::Deliver(EventType type, const ObjectPtr& obj) {
  core::MutexLock lock(handlers_mu_);
  switch (type) {
    case EventType::kAdded:
    case EventType::kModified: {
      ObjectPtr old = indexer_.Upsert(obj);
      for (const auto& entry : handlers_) {
        const EventHandler& h = entry.second;
        if (old) {
          if (h.on_update) Safely([&] { h.on_update(old, obj); });
        } else if (h.on_add) {
          Safely([&] { h.on_add(obj); });
        }
      }
      break;
    }
    case EventType::kDeleted: {
      ObjectPtr old = indexer_.Delete(ObjectKey(*obj));
      // Deliver the last state known: the event's object is the server's final one.
      for (const auto& entry : handlers_) {
        const EventHandler& h = entry.second;
        if (h.on_delete) Safely([&] { h.on_delete(obj ? obj : old); });
      }
      break;
    }
    default:
      break;
  }
}

core::Status Informer::ListAndReplace() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.page_size;
  lo.skip_managed_fields = options_.strip_managed_fields;
  // Pages are fetched one by one and applied after the last, so the cache moves from one
  // consistent snapshot to the next.
  std::vector<Json> items;
  std::string rv;
  while (true) {
    KLUTCH_ASSIGN_OR_RETURN(Json page, resource_.List(lo));
    if (rv.empty()) rv = machinery::GetString(page, {"metadata", "resourceVersion"});
    if (page.contains("items") && page["items"].is_array()) {
      std::string item_api_version = machinery::GetString(page, {"apiVersion"});
      std::string list_kind = machinery::GetString(page, {"kind"});
      std::string item_kind =
          list_kind.ends_with("List") ? list_kind.substr(0, list_kind.size() - 4) : list_kind;
      for (auto& item : page["items"]) {
        // List items carry no apiVersion/kind on the wire; give them the list's.
        if (item.is_object()) {
          if (!item.contains("apiVersion")) item["apiVersion"] = item_api_version;
          if (!item.contains("kind")) item["kind"] = item_kind;
          items.push_back(std::move(item));
        }
      }
    }
    std::string next = machinery::GetString(page, {"metadata", "continue"});
    if (next.empty()) break;
    lo.continue_token = next;
    if (Stopping()) return core::Status::Ok();
  }
  std::set<std::string> seen;
  for (auto& item : items) {
    ObjectPtr obj = Shape(std::move(item));
    std::string key = ObjectKey(*obj);
    seen.insert(key);
    ObjectPtr old = indexer_.Get(key);
    // Unchanged objects (same resourceVersion) are not re-delivered on a relist.
    if (old && machinery::ResourceVersion(*old) == machinery::ResourceVersion(*obj)) continue;
    Deliver(old ? EventType::kModified : EventType::kAdded, obj);
  }
  for (const auto& key : indexer_.Keys()) {
    if (seen.count(key)) continue;
    if (ObjectPtr gone = indexer_.Get(key)) Deliver(EventType::kDeleted, gone);
  }
  {
    core::MutexLock lock(mu_);
    last_rv_ = rv;
  }
  if (!synced_.HasBeenNotified()) {
    synced_.Notify();
    if (options_.on_synced) options_.on_synced();
  }
  return core::Status::Ok();
}

core::Status Informer::WatchOnce(bool& gone) {
  WatchOptions wo;
  wo.label_selector = options_.label_selector;
  wo.field_selector = options_.field_selector;
  wo.resource_version = LastResourceVersion();
  wo.allow_bookmarks = true;
  wo.skip_managed_fields = options_.strip_managed_fields;
  wo.idle_timeout = options_.watch_idle_timeout;
  {
    static thread_local std::mt19937 rng{std::random_device{}()};
    int min = static_cast<int>(options_.min_watch_timeout.count());
    wo.timeout_seconds = min + std::uniform_int_distribution<int>(0, std::max(0, min - 1))(rng);
  }
  StreamCanceller canceller;
  {
    core::MutexLock lock(mu_);
    if (stopping_) return core::Status::Ok();
    canceller_ = &canceller;
  }
  auto result = resource_.Watch(
      wo,
      [&](const WatchEvent& e) {
        if (e.type == EventType::kBookmark) {
          std::string rv = machinery::ResourceVersion(*e.object);
          core::MutexLock lock(mu_);
          if (!rv.empty()) last_rv_ = rv;
          // A quiet resource still resyncs on time: bookmarks end the watch when it is due.
          return !stopping_ && !ResyncDue();
        }
        std::string rv = machinery::ResourceVersion(*e.object);
        // The decoded event is used as is unless it needs shaping (no copy on the hot path).
        Deliver(e.type,
                options_.transform || options_.metadata_only ? Shape(Json(*e.object)) : e.object);
        core::MutexLock lock(mu_);
        if (!rv.empty()) last_rv_ = rv;
        if (ResyncDue()) return false;  // end this watch to resync; it resumes from last_rv_
        return !stopping_;
      },
      &canceller, options_.metadata_only ? kMetadataAccept : "application/json");
  {
    core::MutexLock lock(mu_);
    canceller_ = nullptr;
  }
  if (!result.ok()) return result.status();
  gone = result->gone;
  if (!result->error.empty() && !result->gone) {
    // A stream we could not decode may have lost events: start over from a list.
    if (!result->complete && result->error.starts_with("watch stream:")) gone = true;
    return core::Unavailable(result->error);
  }
  return core::Status::Ok();
}

void Informer::Resync() {
  {
    core::MutexLock lock(mu_);
    if (!ResyncDue()) return;
    next_resync_ = clock_.After(options_.resync_period);
  }
  core::MutexLock lock(handlers_mu_);
  for (const auto& obj : indexer_.List()) {
    for (const auto& entry : handlers_) {
      const EventHandler& h = entry.second;
      if (h.on_update) Safely([&] { h.on_update(obj, obj); });
    }
  }
}

void Informer::Run() {
  auto backoff = options_.min_backoff;
  bool need_list = true;
  {
    core::MutexLock lock(mu_);
    next_resync_ = clock_.After(options_.resync_period);
  }
  while (true) {
    if (Stopping()) return;
    if (need_list) {
      core::Status st = ListAndReplace();
      if (!st.ok()) {
        KLUTCH_LOG(kWarn, "informer", "list {}: {}", gvr_.GroupResource(), st.ToString());
        if (!SleepFor(backoff)) return;
        backoff = std::min(backoff * 2, options_.max_backoff);
        continue;
      }
      need_list = false;
      backoff = options_.min_backoff;
    }
    Resync();
    bool gone = false;
    core::Status st = WatchOnce(gone);
    if (gone) {
      if (options_.on_restart) options_.on_restart("relist");
      need_list = true;
      continue;
    }
    if (options_.on_restart) options_.on_restart("rewatch");
    if (!st.ok()) {
      if (Stopping()) return;
      KLUTCH_LOG(kInfo, "informer", "watch {}: {}", gvr_.GroupResource(), st.ToString());
      if (!SleepFor(backoff)) return;
      backoff = std::min(backoff * 2, options_.max_backoff);
    } else {
      backoff = options_.min_backoff;
    }
  }
}

}  // namespace klutch::client
