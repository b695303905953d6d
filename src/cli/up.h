// `klutch up`: the local Klutch sandbox (src/sandbox) in the foreground, its flags and run loop.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace klutch::cli {

struct UpFlags {
  std::string state_dir = ".data";
  int app_clusters = 2;
};

void AddUpFlags(CLI::App* cmd, UpFlags& flags);
// Starts everything, prints the next steps, runs until SIGTERM/SIGINT and stops everything;
// the process exit code (1 when a part fails to start, 3 when another sandbox runs there).
int RunUp(const UpFlags& flags);

}  // namespace klutch::cli
