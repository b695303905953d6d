// Watch events and the decoder for Kubernetes' JSON watch stream.
//
// A watch response is a sequence of JSON objects `{"type":"ADDED","object":{...}}`, one per
// line. WatchDecoder takes the body in whatever pieces the network delivers and yields
// whole events; a piece may end mid-event. Garbage, a wrong shape or an event over the size
// limit is an error, after which the decoder stays failed (the stream must be dropped).
// Not thread-safe: one decoder per stream.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::client {

using machinery::Json;
// Objects from informers and watches are shared, never edited: copy before changing.
using ObjectPtr = std::shared_ptr<const Json>;

enum class EventType { kAdded, kModified, kDeleted, kBookmark, kError };

std::string_view EventTypeName(EventType type);

struct WatchEvent {
  EventType type = EventType::kAdded;
  ObjectPtr object;  // for kError: the metav1.Status object
};

// Parses JSON, leaving out `metadata.managedFields` of the objects found at
// `object_key_depth` (the nesting depth of an object's own keys: 1 for a lone object, 2 for
// a watch event's object, 3 for a list's items) so they are never allocated. Discarded
// (is_discarded()) on malformed input.
Json ParseWithoutManagedFields(std::string_view text, int object_key_depth);

class WatchDecoder {
 public:
  static constexpr size_t kDefaultMaxEventBytes = 64u << 20;
  explicit WatchDecoder(size_t max_event_bytes = kDefaultMaxEventBytes,
                        bool skip_managed_fields = false)
      : max_event_bytes_(max_event_bytes), skip_managed_fields_(skip_managed_fields) {}

  // Feeds bytes; calls `on_event` for each complete event, in order. `on_event` returning
  // false stops decoding (the rest of the piece is kept). Returns the first decoding error,
  // which names the problem and is sticky.
  core::Status Feed(std::string_view data, const std::function<bool(WatchEvent)>& on_event);

  // Bytes of an event not yet complete (a stream that ends with some is truncated).
  size_t pending_bytes() const { return buffer_.size() - consumed_; }

 private:
  core::Status DecodeLine(std::string_view line, WatchEvent& event);
  size_t max_event_bytes_;
  bool skip_managed_fields_;
  std::string buffer_;
  size_t consumed_ = 0;
  core::Status failed_;
};

}  // namespace klutch::client
