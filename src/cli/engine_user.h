// What `klutch broker` and `klutch operator` share as owners of data-service instances: the
// unprivileged account their servers run as (PostgreSQL refuses root) and a state directory
// that account can reach.
#pragma once

#include <filesystem>
#include <string>

#include "core/status.h"
#include "engines/data_service.h"

namespace klutch::cli {

// Picks the account from `run_as` ("" as root: "postgres"; "" otherwise: the current user),
// creates `state_dir` (normalised in place) traversable for it, and checks the account reaches
// it. Errors name the flag (--run-as, --state-dir) and say what to do.
core::Status PrepareEngineUser(const std::string& run_as, std::filesystem::path& state_dir,
                               engines::EngineContext& engine);

}  // namespace klutch::cli
