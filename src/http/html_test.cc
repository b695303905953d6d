#include "http/html.h"

#include <gtest/gtest.h>

namespace klutch::http::html_test {
namespace {

TEST(Html, EscapesEverySpecialCharacter) {
  EXPECT_EQ(HtmlEscape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
}

}  // namespace
}  // namespace klutch::http::html_test
