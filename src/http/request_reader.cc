#include "http/request_reader.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include "fmt/format.h"

namespace klutch::http::internal {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

RequestParser::RequestParser(size_t max_body_bytes) {
  body_limit(max_body_bytes);
  header_limit(static_cast<std::uint32_t>(kMaxHeaderBytes));
}

void RequestParser::on_field_impl(bhttp::field name, beast::string_view name_string,
                                  beast::string_view value, beast::error_code& ec) {
  if (name_string.size() > kMaxFieldBytes || value.size() > kMaxFieldBytes) {
    ec = bhttp::error::header_limit;
    return;
  }
  get().insert(name, name_string, value);
}

std::optional<ReadFailure> ReadFailureAnswer(const beast::error_code& ec, size_t max_body_bytes) {
  if (ec == bhttp::error::body_limit) {
    return ReadFailure{413, fmt::format("Request entity too large: limit is {}", max_body_bytes)};
  }
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    return ReadFailure{431, fmt::format("Request header fields too large: at most {} bytes "
                                        "together and {} bytes in one field",
                                        kMaxHeaderBytes, kMaxFieldBytes)};
  }
  // The peer went away mid-message or before one: nobody to answer.
  if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
      ec == bhttp::error::need_more) {
    return std::nullopt;
  }
  if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category()) {
    return ReadFailure{400, "malformed HTTP request: " + ec.message()};
  }
  return std::nullopt;  // transport errors: reset, timeout, TLS
}

Request ToRequest(bhttp::request<bhttp::string_body>&& message) {
  Request req;
  req.method = std::string(message.method_string());
  req.SetTarget(std::string(message.target()));
  for (const auto& field : message) {
    req.headers.Add(std::string(field.name_string()), std::string(field.value()));
  }
  req.body = std::move(message.body());
  return req;
}

ParsedRequest ParseRequest(std::string_view bytes, size_t max_body_bytes, size_t piece) {
  RequestParser parser(max_body_bytes);
  parser.eager(true);
  if (piece == 0) piece = std::max<size_t>(bytes.size(), 1);
  size_t available = std::min(piece, bytes.size());  // bytes "read from the socket" so far
  size_t consumed = 0;
  while (!parser.is_done()) {
    beast::error_code ec;
    size_t n =
        parser.put(boost::asio::const_buffer(bytes.data() + consumed, available - consumed), ec);
    consumed += n;
    if (ec == bhttp::error::need_more || (!ec && n == 0)) {
      // The server's read buffer is full of bytes the parser cannot use yet.
      if (available - consumed >= kMaxReadBufferBytes) {
        return {std::nullopt,
                ReadFailureAnswer(bhttp::make_error_code(bhttp::error::buffer_overflow),
                                  max_body_bytes)};
      }
      if (available == bytes.size()) return {};  // the peer stopped before the request ended
      available = std::min(available + piece, bytes.size());
      continue;
    }
    if (ec) return {std::nullopt, ReadFailureAnswer(ec, max_body_bytes)};
  }
  return {ToRequest(parser.release()), std::nullopt};
}

}  // namespace klutch::http::internal
