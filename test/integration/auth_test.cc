#include <gtest/gtest.h>
TEST(AuthPlaceholder, X) { EXPECT_TRUE(true); }
