#include "apis/klutch/ids.h"

#include <openssl/evp.h>

#include <algorithm>
#include <vector>

#include "core/random.h"

namespace klutch::apis::klutch {

std::string Base62(std::string_view bytes) {
  static constexpr char kDigits[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::vector<unsigned> number(bytes.begin(), bytes.end());
  for (auto& b : number) b &= 0xffu;
  std::string out;
  // Repeated division of the big-endian byte string by 62; each pass yields one digit.
  size_t start = 0;
  while (start < number.size() && number[start] == 0) ++start;
  while (start < number.size()) {
    unsigned remainder = 0;
    for (size_t i = start; i < number.size(); ++i) {
      unsigned value = remainder * 256 + number[i];
      number[i] = value / 62;
      remainder = value % 62;
    }
    out.push_back(kDigits[remainder]);
    while (start < number.size() && number[start] == 0) ++start;
  }
  if (out.empty()) return "0";
  std::reverse(out.begin(), out.end());
  return out;
}

std::string Sha224Base62(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha224(), nullptr);
  return Base62(std::string_view(reinterpret_cast<const char*>(digest), len));
}

std::string ClusterIdFromNamespaceUid(std::string_view uid) {
  return Sha224Base62(uid).substr(0, 6);
}

std::string NewSessionId() { return Base62(core::RandomBytes(28)).substr(0, 6); }

}  // namespace klutch::apis::klutch
