#include "engines/state_dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>

#include "core/file.h"
#include "core/random.h"
#include "core/strings.h"
#include "machinery/json.h"

namespace klutch::engines {
namespace {

namespace fs = std::filesystem;

}  // namespace

core::Status StateDir::Init() const {
  std::error_code ec;
  for (const fs::path& dir : {root_ / "i", root_ / "backups", TlsDir()}) {
    fs::create_directories(dir, ec);
    if (ec) return core::Internal(fmt::format("create {}: {}", dir.string(), ec.message()));
  }
  // The instances' account must traverse the root and i/ to reach its own directories (the
  // owner runs with umask 077); backups/ and tls/ stay the owner's alone.
  for (const fs::path& dir : {root_, root_ / "i"}) {
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  }
  fs::permissions(root_ / "backups", fs::perms::owner_all, ec);
  fs::permissions(TlsDir(), fs::perms::owner_all, ec);
  return core::Status::Ok();
}

core::Status StateDir::SaveJson(int64_t number, const machinery::Json& record) const {
  fs::path dir = InstanceDir(number);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return core::Internal(fmt::format("create {}: {}", dir.string(), ec.message()));
  return core::WriteFileAtomic(dir / "instance.json", machinery::Dump(record));
}

std::vector<machinery::Json> StateDir::LoadAllJson(std::vector<std::string>* errors) const {
  std::vector<machinery::Json> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(InstancesDir(), ec)) {
    fs::path file = entry.path() / "instance.json";
    if (!fs::exists(file)) continue;
    auto text = core::ReadFile(file);
    if (!text.ok()) {
      if (errors != nullptr) errors->push_back(text.status().message());
      continue;
    }
    auto json = machinery::ParseJson(*text);
    if (!json.ok()) {
      if (errors != nullptr) errors->push_back(file.string() + ": " + json.status().message());
      continue;
    }
    out.push_back(std::move(*json));
  }
  return out;
}

core::Status StateDir::Remove(int64_t number) const {
  // Renamed away first (one atomic step), then deleted: a crash in between leaves a trash
  // directory that the next start deletes, never half an instance.
  std::error_code ec;
  std::string suffix = fmt::format(".trash-{}-{}", number, core::RandomSuffix(6));
  for (const fs::path& dir : {BackupDir(number), InstanceDir(number)}) {
    if (!fs::exists(dir)) continue;
    fs::path trash = dir.parent_path() / suffix;
    fs::rename(dir, trash, ec);
    if (ec) return core::Internal(fmt::format("remove {}: {}", dir.string(), ec.message()));
    fs::remove_all(trash, ec);
    if (ec) return core::Internal(fmt::format("remove {}: {}", trash.string(), ec.message()));
  }
  return core::Status::Ok();
}

int64_t StateDir::CleanUp() const {
  int64_t highest = 0;
  std::error_code ec;
  for (const fs::path& parent : {root_ / "i", root_ / "backups"}) {
    for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::end(it); it.increment(ec)) {
      std::string name = it->path().filename().string();
      std::error_code rm;
      if (name.starts_with(".trash-")) {
        fs::remove_all(it->path(), rm);
        continue;
      }
      if (auto n = core::ParseInt64(name)) highest = std::max(highest, *n);
    }
  }
  return highest;
}

}  // namespace klutch::engines
