// Backup encryption: AES-256-GCM (OpenSSL) over whole files, streamed in 1 MiB chunks.
// File format: the magic "KLBK1\n", a 12-byte random IV, the ciphertext, the 16-byte tag.
// Thread-safe (no shared state).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/status.h"

namespace klutch::engines {

// A new random 256-bit key, hex-encoded (as kept in the instance record).
std::string NewBackupKey();
// Encrypts `in` into `out` with the hex key. kInternal naming the file on I/O errors.
core::Status EncryptFile(const std::filesystem::path& in, const std::filesystem::path& out,
                         std::string_view hex_key);
// Decrypts and authenticates; kInvalid when the file is not a backup of this format or the
// tag does not verify (wrong key or tampered file). `out` is removed on failure.
core::Status DecryptFile(const std::filesystem::path& in, const std::filesystem::path& out,
                         std::string_view hex_key);

}  // namespace klutch::engines
