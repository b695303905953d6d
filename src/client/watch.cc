#include "client/watch.h"

#include <fmt/format.h>

#include <vector>

namespace klutch::client {

std::string_view EventTypeName(EventType type) {
  switch (type) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
    case EventType::kBookmark:
      return "BOOKMARK";
    case EventType::kError:
      return "ERROR";
  }
  return "ERROR";
}

Json ParseWithoutManagedFields(std::string_view text, int object_key_depth) {
  // keys[d]: the last key read at depth d; the callback sees a key before its value.
  std::vector<std::string> keys(8);
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event != Json::parse_event_t::key) return true;
    if (depth < 0) return true;
    if (static_cast<size_t>(depth) >= keys.size()) keys.resize(static_cast<size_t>(depth) + 1);
    const auto* key = parsed.get_ptr<const std::string*>();  // a key event carries a string
    if (key == nullptr) return true;
    if (depth == object_key_depth + 1 && *key == "managedFields" &&
        keys[static_cast<size_t>(object_key_depth)] == "metadata") {
      return false;  // the key and its whole value are skipped
    }
    keys[static_cast<size_t>(depth)] = *key;
    return true;
  };
  return Json::parse(text, callback, /*allow_exceptions=*/false);
}

core::Status WatchDecoder::DecodeLine(std::string_view line, WatchEvent& event) {
  Json j = skip_managed_fields_ ? ParseWithoutManagedFields(line, 2)
                                : Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return core::BadRequest(
        fmt::format("watch stream: an event is not valid JSON: {}", line.substr(0, 80)));
  }
  if (!j.is_object()) return core::BadRequest("watch stream: an event is not a JSON object");
  auto type = j.find("type");
  auto object = j.find("object");
  const auto* type_text = type == j.end() ? nullptr : type->get_ptr<const std::string*>();
  if (type_text == nullptr) {
    return core::BadRequest("watch stream: an event has no string \"type\"");
  }
  if (object == j.end() || !object->is_object()) {
    return core::BadRequest("watch stream: an event has no \"object\" object");
  }
  const std::string& t = *type_text;
  if (t == "ADDED") {
    event.type = EventType::kAdded;
  } else if (t == "MODIFIED") {
    event.type = EventType::kModified;
  } else if (t == "DELETED") {
    event.type = EventType::kDeleted;
  } else if (t == "BOOKMARK") {
    event.type = EventType::kBookmark;
  } else if (t == "ERROR") {
    event.type = EventType::kError;
  } else {
    return core::BadRequest(
        fmt::format("watch stream: unknown event type \"{}\"", t.substr(0, 40)));
  }
  event.object = std::make_shared<const Json>(std::move(*object));
  return core::Status::Ok();
}

core::Status WatchDecoder::Feed(std::string_view data,
                                const std::function<bool(WatchEvent)>& on_event) {
  if (!failed_.ok()) return failed_;
  buffer_.append(data);
  while (true) {
    size_t nl = buffer_.find('\n', consumed_);
    if (nl == std::string::npos) {
      if (buffer_.size() - consumed_ > max_event_bytes_) {
        failed_ = core::BadRequest(
            fmt::format("watch stream: an event exceeds {} bytes", max_event_bytes_));
        return failed_;
      }
      break;
    }
    std::string_view line(buffer_.data() + consumed_, nl - consumed_);
    consumed_ = nl + 1;
    // Tolerate CRLF and blank keep-alive lines.
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) continue;
    WatchEvent event;
    core::Status st = DecodeLine(line, event);
    if (!st.ok()) {
      failed_ = st;
      return failed_;
    }
    if (!on_event(std::move(event))) break;
  }
  // Drop consumed bytes once they dominate the buffer (amortised O(1) per byte).
  if (consumed_ > 0 && consumed_ * 2 >= buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  return core::Status::Ok();
}

}  // namespace klutch::client
