// libFuzzer target: the watch-stream decoder with arbitrary bytes split at arbitrary points.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "client/watch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the piece size, so splits inside events are explored too.
  size_t piece = 1 + data[0] % 64;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  klutch::client::WatchDecoder decoder(/*max_event_bytes=*/4096);
  for (size_t i = 0; i < rest.size(); i += piece) {
    auto st = decoder.Feed(rest.substr(i, piece), [](klutch::client::WatchEvent e) {
      return e.object != nullptr && e.object->is_object();
    });
    if (!st.ok()) break;
  }
  return 0;
}
