// Whole-file reads and atomic writes: what configuration, key and state files need.
// Thread-safe (no shared state); concurrent writers of one path leave one complete version.
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"

namespace klutch::core {

// The file's bytes. kNotFound when it does not exist, kInternal naming the path and the
// error otherwise.
Result<std::string> ReadFile(const std::filesystem::path& path);

// Writes `data` to a temporary file beside `path`, sets `perms` on it, syncs it and renames
// it over `path` (then syncs the directory), so readers see the old or the new content, never
// a part, also after a crash of the machine. Parent directories must
// exist. kInternal naming the path on failure.
Status WriteFileAtomic(const std::filesystem::path& path, const std::string& data,
                       std::filesystem::perms perms = std::filesystem::perms::owner_read |
                                                      std::filesystem::perms::owner_write);

// Creates `dir` and its missing parents; every directory it creates, `dir` included, may be
// passed through (not listed) by other accounts (mode 0711 whatever the umask), for state
// directories below which children run as other users. Directories that existed stay as
// they were. kInternal naming the path on failure.
Status CreateTraversableDirectories(const std::filesystem::path& dir);

}  // namespace klutch::core
