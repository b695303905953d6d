#include "http/url.h"

#include <gtest/gtest.h>

namespace klutch::http::url_test {
namespace {

TEST(Url, TakesAbsoluteUrlsApart) {
  auto u = ParseUrl("https://Backend.example:8443/export?x=1#top");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "Backend.example");
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->path, "/export");
  EXPECT_EQ(u->query, "x=1");
  EXPECT_EQ(u->fragment, "top");
  EXPECT_EQ(u->Target(), "/export?x=1");
  EXPECT_EQ(u->String(), "https://Backend.example:8443/export?x=1#top");

  auto plain = ParseUrl("HTTP://localhost?p=1");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->port, 80);
  EXPECT_EQ(plain->path, "/");
  EXPECT_EQ(plain->Origin(), "http://localhost");
  EXPECT_EQ(plain->Target(), "/?p=1");

  auto v6 = ParseUrl("https://[::1]:9443/callback");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->Origin(), "https://[::1]:9443");
}

TEST(Url, RejectsWhatIsNotAnHttpUrl) {
  for (const char* bad :
       {"", "backend/export", "ftp://h/", "https://", "https://:80/", "https://u:p@h/",
        "https://h:0/", "https://h:70000/", "https://h:x/", "https://[::1/", "https://h h/",
        "https://[::1]x/", "https://h/a\r\nHost: evil", "https://h/?q=a b"}) {
    auto u = ParseUrl(bad);
    EXPECT_FALSE(u.ok()) << bad;
    if (!u.ok()) {
      EXPECT_EQ(u.status().reason(), core::Reason::kBadRequest) << bad;
    }
  }
}

TEST(Url, AddQueryKeepsExistingParametersAndEncodes) {
  auto u = ParseUrl("http://localhost:5000/callback?a=b");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(AddQuery(*u, {{"response", "x+y/=="}, {"s", "abc"}}),
            "http://localhost:5000/callback?a=b&response=x%2By%2F%3D%3D&s=abc");
  auto bare = ParseUrl("https://h/authorize");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(AddQuery(*bare, {{"p", "1"}}), "https://h/authorize?p=1");
}

}  // namespace
}  // namespace klutch::http::url_test
