#include "core/random.h"

#include <sys/random.h>

#include <cerrno>

#include "core/status.h"
#include "fmt/format.h"

namespace klutch::core {

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(out.data() + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      KLUTCH_CHECK(false && "getrandom failed");
    }
    got += static_cast<size_t>(r);
  }
  return out;
}

std::string NewUuid() {
  std::string b = RandomBytes(16);
  b[6] = static_cast<char>((b[6] & 0x0F) | 0x40);
  b[8] = static_cast<char>((b[8] & 0x3F) | 0x80);
  auto u = [&](int i) { return static_cast<unsigned>(static_cast<unsigned char>(b[i])); };
  return fmt::format(
      "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:"
      "02x}"
      "{:02x}",
      u(0), u(1), u(2), u(3), u(4), u(5), u(6), u(7), u(8), u(9), u(10), u(11), u(12), u(13), u(14),
      u(15));
}

std::string RandomSuffix(size_t n) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  constexpr size_t kSize = sizeof(kAlphabet) - 1;
  std::string out;
  out.reserve(n);
  while (out.size() < n) {
    for (unsigned char c : RandomBytes(n * 2)) {
      // Rejection sampling keeps the distribution uniform.
      if (c >= 256 - 256 % kSize) continue;
      out += kAlphabet[c % kSize];
      if (out.size() == n) break;
    }
  }
  return out;
}

std::string RandomPassword(size_t length) {
  static constexpr char kAlphabet[] = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
  std::string bytes = RandomBytes(length);
  std::string out;
  for (unsigned char c : bytes) out += kAlphabet[c % (sizeof(kAlphabet) - 1)];
  return out;
}

}  // namespace klutch::core
