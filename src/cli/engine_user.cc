#include "cli/engine_user.h"

#include <unistd.h>

#include "core/file.h"
#include "core/process.h"

namespace klutch::cli {

core::Status PrepareEngineUser(const std::string& flag_run_as, std::filesystem::path& state_dir,
                               engines::EngineContext& engine) {
  std::string run_as = flag_run_as;
  if (run_as.empty() && ::getuid() == 0) run_as = "postgres";
  if (run_as.empty()) return core::Status::Ok();
  auto user = core::LookupUser(run_as);
  if (!user.ok()) return core::Invalid("--run-as: " + user.status().message());
  if (user->uid == 0) {
    return core::Invalid("--run-as: PostgreSQL refuses to run as root; name another account");
  }
  engine.user = *user;
  // The owner makes its own directory and i/ traversable, and so the directories it creates on
  // the way; what lies above is the caller's.
  if (auto made = core::CreateTraversableDirectories(state_dir); !made.ok()) {
    return core::Invalid("--state-dir: " + made.message());
  }
  state_dir = state_dir.lexically_normal();
  if (!state_dir.has_filename()) state_dir = state_dir.parent_path();
  auto reachable =
      core::CheckReachableBy(*user, state_dir.parent_path(), "runs the data-service instances");
  if (!reachable.ok()) return core::Invalid("--state-dir: " + reachable.message());
  return core::Status::Ok();
}

}  // namespace klutch::cli
