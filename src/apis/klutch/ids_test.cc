// The protocol's identifiers: base-62 renderings (vectors computed independently with Python's
// int.from_bytes), the SHA-224 hashes, cluster and session IDs.
#include "apis/klutch/ids.h"

#include <gtest/gtest.h>

#include <string>

namespace klutch::apis::klutch::ids_test {
namespace {

TEST(Base62, MatchesIndependentlyComputedVectors) {
  EXPECT_EQ(Base62(""), "0");
  EXPECT_EQ(Base62(std::string("\x00", 1)), "0");
  EXPECT_EQ(Base62("\x3d"), "Z");
  EXPECT_EQ(Base62("\x3e"), "10");
  EXPECT_EQ(Base62(std::string("\x01\x00", 2)), "48");
  EXPECT_EQ(Base62(std::string("\x00\x00\xff", 3)), "47");
  EXPECT_EQ(Base62("hello"), "7TqlfhZ");
  std::string counting;
  for (char c = 1; c <= 28; ++c) counting.push_back(c);
  EXPECT_EQ(Base62(counting), "39XzPtAbOlZGJv7w3AQQdvGu2tXNGazdRJmUI");
}

TEST(Sha224Base62, MatchesIndependentlyComputedVectors) {
  EXPECT_EQ(Sha224Base62(""), "aAkHCkvjglfF66mdhRcVKb0I3FT1lepYlWZNwj");
  EXPECT_EQ(Sha224Base62("abc"), "1LSmnUo19xkFgHjJRSdyxph9XoxCFoFTvx6exN");
  EXPECT_EQ(ClusterIdFromNamespaceUid("uid-1234"), "7qAxiN");
}

TEST(NewSessionId, IsSixBase62Characters) {
  for (int i = 0; i < 20; ++i) {
    const std::string id = NewSessionId();
    EXPECT_LE(id.size(), 6u);
    EXPECT_EQ(
        id.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
        std::string::npos);
  }
}

}  // namespace
}  // namespace klutch::apis::klutch::ids_test
