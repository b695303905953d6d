// libFuzzer target for the server's request reading (request_reader.h), the code every Klutch
// HTTP server runs on bytes from the network before any authentication. Any input either
// parses, ends early, or gets 400/413/431 — never an exception or a crash — whether it arrives
// at once or in pieces (the first byte picks the piece size); a parsed request keeps every field
// within the limits; and a parsed request written out again parses to the same request.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/request_reader.h"

namespace {

using klutch::http::Request;
using klutch::http::internal::kMaxFieldBytes;
using klutch::http::internal::ParsedRequest;
using klutch::http::internal::ParseRequest;

constexpr size_t kMaxBody = 4096;  // small, so that inputs reach the body limit

bool Framing(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  std::string n = lower(name);
  return n == "content-length" || n == "transfer-encoding";
}

// The request as a client would send it again: the body framed by Content-Length.
std::string Write(const Request& r) {
  std::string out = r.method + " " + r.target + " HTTP/1.1\r\n";
  for (const auto& [k, v] : r.headers.items()) {
    if (Framing(k)) continue;
    out += k + ": " + v + "\r\n";
  }
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n" + r.body;
  return out;
}

bool Same(const Request& a, const Request& b) {
  if (a.method != b.method || a.target != b.target || a.path != b.path || a.query != b.query ||
      a.body != b.body) {
    return false;
  }
  auto strip = [](const Request& r) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& kv : r.headers.items()) {
      if (!Framing(kv.first)) out.push_back(kv);
    }
    return out;
  };
  return strip(a) == strip(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = data[0] % 64;  // 0: all at once
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  ParsedRequest parsed = ParseRequest(in, kMaxBody, piece);
  if (parsed.request && parsed.failure) std::abort();
  if (parsed.failure) {
    int s = parsed.failure->status;
    if (s != 400 && s != 413 && s != 431) std::abort();
    return 0;
  }
  if (!parsed.request) return 0;
  const Request& r = *parsed.request;
  if (r.body.size() > kMaxBody) std::abort();
  for (const auto& [k, v] : r.headers.items()) {
    if (k.size() > kMaxFieldBytes || v.size() > kMaxFieldBytes) std::abort();
  }
  // What was read once reads back the same, however it arrives.
  ParsedRequest again = ParseRequest(Write(r), kMaxBody, piece);
  if (!again.request || !Same(r, *again.request)) std::abort();
  return 0;
}
