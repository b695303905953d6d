#include "http/request_reader.h"

#include <gtest/gtest.h>

namespace klutch::http::internal::request_reader_test {
namespace {

TEST(ParseRequest, ReadsTheSameRequestWhateverPiecesItArrivesIn) {
  const std::string wire =
      "POST /a%2Fb?q=x%20y HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n";
  for (size_t piece : {0, 1, 2, 7, 64}) {
    ParsedRequest p = ParseRequest(wire, 1024, piece);
    ASSERT_TRUE(p.request) << piece;
    EXPECT_FALSE(p.failure);
    EXPECT_EQ(p.request->method, "POST");
    EXPECT_EQ(p.request->path, "/a/b");
    EXPECT_EQ(p.request->Query("q"), "x y");
    EXPECT_EQ(p.request->body, "abcde");
    EXPECT_EQ(p.request->headers.Get("X-Trailer"), "t");
  }
}

TEST(ParseRequest, AnswersEachFailureAsAClientShouldSeeIt) {
  const std::string big(kMaxFieldBytes + 1, 'a');
  struct Case {
    std::string wire;
    int status;  // 0: the bytes end before the request does
  } cases[] = {
      {"GET / HTTP/1.1\r\nHost: h\r\n", 0},
      {"GET / HTTP/1.1\r\nX: " + big + "\r\n\r\n", 431},
      {"GET / HTTP/1.1\r\nX: " + std::string(kMaxFieldBytes, 'a') + "\r\n\r\n", -1},
      {"POST / HTTP/1.1\r\nContent-Length: 2000\r\n\r\n", 413},
      {"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400},
      {"\x01\x02\x03 / HTTP/1.1\r\n\r\n", 400},
      // Beast bounds neither a chunk-size line nor a trailer: the read buffer's limit does.
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" +
           [] {
             std::string lines;
             while (lines.size() <= kMaxReadBufferBytes) lines += "a: b\r\n";
             return lines;
           }(),
       431},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;" +
           std::string(kMaxReadBufferBytes, 'x'),
       431},
  };
  for (const auto& c : cases) {
    ParsedRequest p = ParseRequest(c.wire, 1024);
    if (c.status == -1) {
      EXPECT_TRUE(p.request) << c.wire.substr(0, 40);
    } else if (c.status == 0) {
      EXPECT_FALSE(p.request || p.failure) << c.wire.substr(0, 40);
    } else {
      ASSERT_TRUE(p.failure) << c.wire.substr(0, 40);
      EXPECT_EQ(p.failure->status, c.status) << c.wire.substr(0, 40);
    }
  }
}

}  // namespace
}  // namespace klutch::http::internal::request_reader_test
