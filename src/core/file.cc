#include "core/file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "core/random.h"

namespace klutch::core {

namespace fs = std::filesystem;

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return NotFound(fmt::format("{}: no such file", path.string()));
    return Internal(fmt::format("cannot read {}: {}", path.string(), std::strerror(err)));
  }
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Internal(fmt::format("cannot read {}", path.string()));
  return data;
}

Status WriteFileAtomic(const fs::path& path, const std::string& data, fs::perms perms) {
  // A unique temporary name, so concurrent writers never write into one file; created with
  // its final mode, so a key is never readable by others, not even for a moment.
  fs::path tmp = path;
  tmp += ".tmp-" + RandomSuffix(8);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                        static_cast<mode_t>(perms & fs::perms::mask));
  if (fd < 0) {
    return Internal(fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
  }
  size_t written = 0;
  int err = 0;
  while (written < data.size()) {
    ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    written += static_cast<size_t>(n);
  }
  // On disk before the rename makes it visible: after a power cut the file is the old or
  // the new version, never empty.
  if (err == 0 && ::fdatasync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  std::error_code ec;
  if (err == 0) {
    // open() applied the umask; the caller asked for exactly `perms`.
    fs::permissions(tmp, perms, ec);
    if (!ec) fs::rename(tmp, path, ec);
  }
  if (err == 0 && !ec) {
    // And the rename itself.
    fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)::fsync(dfd);
      ::close(dfd);
    }
  }
  if (err != 0 || ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return Internal(fmt::format("cannot write {}: {}", path.string(),
                                err != 0 ? std::strerror(err) : ec.message()));
  }
  return Status::Ok();
}

Status CreateTraversableDirectories(const fs::path& dir) {
  fs::path target = fs::absolute(dir).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // a trailing slash
  std::vector<fs::path> missing;
  for (fs::path p = target; !p.empty() && !fs::exists(p); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.root_path()) break;
  }
  std::error_code ec;
  fs::create_directories(target, ec);
  if (ec) return Internal(fmt::format("creating {}: {}", target.string(), ec.message()));
  for (const fs::path& p : missing) {
    fs::permissions(p, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
    if (ec) return Internal(fmt::format("chmod {}: {}", p.string(), ec.message()));
  }
  return Status::Ok();
}

}  // namespace klutch::core
