// The `klutch` command tree: each subcommand registers its flags on a CLI11 app and runs.
#pragma once

namespace klutch::cli {

// Entry point of the `klutch` binary; returns the process exit code.
int Main(int argc, char** argv);

}  // namespace klutch::cli
