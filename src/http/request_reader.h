// The server's reading of HTTP/1.1 requests, apart from the connection coroutine so that the
// fuzzer (fuzz_http_request.cc) and tests drive exactly the code the server runs, bytes in.
//
// Internal to src/http: it names Beast types, so only server.cc and the fuzzer include it.
// `RequestParser` refuses what Beast's containers cannot hold instead of letting them throw
// (a single field over 64 KiB made basic_fields throw std::length_error out of the I/O thread
// and end the process), and `ReadFailureAnswer` maps every parse error to the answer a client
// gets. Thread-compatible.
#pragma once

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"

namespace klutch::http::internal {

// All header fields of a request together (Go's net/http default, which kube-apiserver keeps).
inline constexpr size_t kMaxHeaderBytes = 1024 * 1024;
// The bytes read but not yet parsed that a connection keeps: a whole header, plus room for
// the next read. Beast's parser bounds the header but not a chunk-size line or a trailer.
inline constexpr size_t kMaxReadBufferBytes = kMaxHeaderBytes + 64 * 1024;
// One field's name or value: what Beast's field list can store (16-bit offsets, two bytes of
// which hold ": ").
inline constexpr size_t kMaxFieldBytes = 65533;

// A request parser whose fields (headers and chunked trailers alike) fail with header_limit
// when one is too large to store, instead of throwing.
class RequestParser final
    : public boost::beast::http::request_parser<boost::beast::http::string_body> {
 public:
  explicit RequestParser(size_t max_body_bytes);

 private:
  void on_field_impl(boost::beast::http::field name, boost::beast::string_view name_string,
                     boost::beast::string_view value, boost::beast::error_code& ec) override;
};

// What the server answers when reading a request failed with `ec`: nullopt when the connection
// just ends (the peer closed it, a timeout, a TLS truncation), else the status (400, 413, 431)
// and a message for the client.
struct ReadFailure {
  int status = 0;
  std::string message;
};
std::optional<ReadFailure> ReadFailureAnswer(const boost::beast::error_code& ec,
                                             size_t max_body_bytes);

// The application's view of a parsed message.
Request ToRequest(boost::beast::http::request<boost::beast::http::string_body>&& message);

// Reads one request from `bytes`, fed to the parser `piece` bytes at a time (0: all at once)
// as the server's reads would deliver them. Exactly one of `request` and `failure` is set, or
// neither when the bytes end before the request does.
struct ParsedRequest {
  std::optional<Request> request;
  std::optional<ReadFailure> failure;
};
ParsedRequest ParseRequest(std::string_view bytes, size_t max_body_bytes, size_t piece = 0);

}  // namespace klutch::http::internal
