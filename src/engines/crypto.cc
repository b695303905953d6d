#include "engines/crypto.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cstdio>
#include <memory>
#include <system_error>
#include <vector>

#include "core/random.h"
#include "core/strings.h"

namespace klutch::engines {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMagic = "KLBK1\n";
constexpr size_t kIvSize = 12;
constexpr size_t kTagSize = 16;
constexpr size_t kChunk = 1 << 20;

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;
struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

std::optional<std::string> DecodeKey(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = nibble(hex[i]);
    int lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

core::Status IoError(const char* what, const fs::path& path) {
  return core::Internal(fmt::format("{} {}: {}", what, path.string(), std::strerror(errno)));
}

}  // namespace

std::string NewBackupKey() { return core::HexEncode(core::RandomBytes(32)); }

static core::Status EncryptFileTo(const fs::path& in, const fs::path& out,
                                  std::string_view hex_key);

core::Status EncryptFile(const fs::path& in, const fs::path& out, std::string_view hex_key) {
  // Into a temporary file, renamed when complete: a crash never leaves half a backup under
  // the final name.
  fs::path tmp = out;
  tmp += ".partial";
  core::Status status = EncryptFileTo(in, tmp, hex_key);
  std::error_code ec;
  if (status.ok()) {
    fs::rename(tmp, out, ec);
    if (ec) status = core::Internal(fmt::format("rename {}: {}", tmp.string(), ec.message()));
  }
  if (!status.ok()) fs::remove(tmp, ec);
  return status;
}

static core::Status EncryptFileTo(const fs::path& in, const fs::path& out,
                                  std::string_view hex_key) {
  auto key = DecodeKey(hex_key);
  if (!key) return core::Invalid("backup key: not 64 hex digits");
  File src(std::fopen(in.c_str(), "rb"));
  if (!src) return IoError("open", in);
  File dst(std::fopen(out.c_str(), "wb"));
  if (!dst) return IoError("create", out);
  std::string iv = core::RandomBytes(kIvSize);
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kIvSize, nullptr) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr,
                         reinterpret_cast<const unsigned char*>(key->data()),
                         reinterpret_cast<const unsigned char*>(iv.data())) != 1) {
    return core::Internal("AES-256-GCM: cannot initialise");
  }
  if (std::fwrite(kMagic.data(), 1, kMagic.size(), dst.get()) != kMagic.size() ||
      std::fwrite(iv.data(), 1, iv.size(), dst.get()) != iv.size()) {
    return IoError("write", out);
  }
  std::vector<unsigned char> plain(kChunk);
  std::vector<unsigned char> cipher(kChunk + 32);
  while (true) {
    size_t n = std::fread(plain.data(), 1, plain.size(), src.get());
    if (n > 0) {
      int len = 0;
      if (EVP_EncryptUpdate(ctx.get(), cipher.data(), &len, plain.data(), static_cast<int>(n)) !=
          1) {
        return core::Internal("AES-256-GCM: encrypt failed");
      }
      if (std::fwrite(cipher.data(), 1, static_cast<size_t>(len), dst.get()) !=
          static_cast<size_t>(len)) {
        return IoError("write", out);
      }
    }
    if (n < plain.size()) {
      if (std::ferror(src.get())) return IoError("read", in);
      break;
    }
  }
  int len = 0;
  unsigned char tag[kTagSize];
  if (EVP_EncryptFinal_ex(ctx.get(), cipher.data(), &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagSize, tag) != 1) {
    return core::Internal("AES-256-GCM: finalise failed");
  }
  if (std::fwrite(tag, 1, kTagSize, dst.get()) != kTagSize || std::fflush(dst.get()) != 0) {
    return IoError("write", out);
  }
  return core::Status::Ok();
}

core::Status DecryptFile(const fs::path& in, const fs::path& out, std::string_view hex_key) {
  auto key = DecodeKey(hex_key);
  if (!key) return core::Invalid("backup key: not 64 hex digits");
  std::error_code ec;
  auto total = fs::file_size(in, ec);
  if (ec) return core::Internal(fmt::format("stat {}: {}", in.string(), ec.message()));
  if (total < kMagic.size() + kIvSize + kTagSize) {
    return core::Invalid(fmt::format("{} is not an encrypted backup (too short)", in.string()));
  }
  File src(std::fopen(in.c_str(), "rb"));
  if (!src) return IoError("open", in);
  std::string header(kMagic.size() + kIvSize, '\0');
  if (std::fread(header.data(), 1, header.size(), src.get()) != header.size() ||
      std::string_view(header).substr(0, kMagic.size()) != kMagic) {
    return core::Invalid(fmt::format("{} is not an encrypted backup (no header)", in.string()));
  }
  unsigned char tag[kTagSize];
  if (std::fseek(src.get(), static_cast<long>(total - kTagSize), SEEK_SET) != 0 ||
      std::fread(tag, 1, kTagSize, src.get()) != kTagSize ||
      std::fseek(src.get(), static_cast<long>(header.size()), SEEK_SET) != 0) {
    return IoError("read", in);
  }
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kIvSize, nullptr) != 1 ||
      EVP_DecryptInit_ex(
          ctx.get(), nullptr, nullptr, reinterpret_cast<const unsigned char*>(key->data()),
          reinterpret_cast<const unsigned char*>(header.data() + kMagic.size())) != 1) {
    return core::Internal("AES-256-GCM: cannot initialise");
  }
  File dst(std::fopen(out.c_str(), "wb"));
  if (!dst) return IoError("create", out);
  auto fail = [&](core::Status status) {
    dst.reset();
    std::error_code rm;
    fs::remove(out, rm);
    return status;
  };
  size_t left = total - header.size() - kTagSize;
  std::vector<unsigned char> cipher(kChunk);
  std::vector<unsigned char> plain(kChunk + 32);
  while (left > 0) {
    size_t want = std::min(left, cipher.size());
    if (std::fread(cipher.data(), 1, want, src.get()) != want) return fail(IoError("read", in));
    int len = 0;
    if (EVP_DecryptUpdate(ctx.get(), plain.data(), &len, cipher.data(), static_cast<int>(want)) !=
        1) {
      return fail(core::Internal("AES-256-GCM: decrypt failed"));
    }
    if (std::fwrite(plain.data(), 1, static_cast<size_t>(len), dst.get()) !=
        static_cast<size_t>(len)) {
      return fail(IoError("write", out));
    }
    left -= want;
  }
  int len = 0;
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagSize, tag) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), plain.data(), &len) != 1) {
    return fail(core::Invalid(fmt::format(
        "{}: the backup does not authenticate (wrong key or a modified file)", in.string())));
  }
  if (std::fflush(dst.get()) != 0) return fail(IoError("write", out));
  return core::Status::Ok();
}

}  // namespace klutch::engines
