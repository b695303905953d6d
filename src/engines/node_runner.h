// NodeRunner: how the engines start and stop the server processes ("nodes") of an instance,
// implemented by Supervisor (supervisor.h); NodeSpec says how to run one.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "core/process.h"
#include "core/status.h"

namespace klutch::engines {

// How to run (or recognise, after its owner restarted) one server process of an instance.
struct NodeSpec {
  core::ProcessSpec process;
  // A file whose first line is the PID of a running server (postmaster.pid, redis.pid): a
  // process found there whose command line contains `match` is adopted instead of started.
  std::filesystem::path pid_file;
  std::string match;
  // For servers that write no PID file: a running process whose command line contains `match`
  // (which must name this node's own files) is adopted.
  bool find_by_match = false;
  int stop_signal = 15;  // SIGTERM; PostgreSQL: SIGINT (fast shutdown)
  // False: when the process exits it is not started again (the owner decides what next).
  bool restart = true;
  // A quick probe (well under a second) that the server answers.
  std::function<bool()> ready;
};

// Starts and stops supervised node processes (implemented by the Supervisor).
class NodeRunner {
 public:
  virtual ~NodeRunner() = default;
  // Starts (or adopts) node `node` of `instance` and keeps it running; returns once the
  // process exists, not when it is ready.
  virtual core::Status Start(const std::string& instance, int node, NodeSpec spec) = 0;
  // Stops the node and stops watching it. True when it ended within the grace period.
  virtual bool Stop(const std::string& instance, int node) = 0;
  // How often the node's process has exited since its last Start (0 when not watched).
  virtual int Exits(const std::string& instance, int node) const = 0;
  // Whether the node's process runs (or is being restarted); false when it is not watched,
  // or exited without a restart to come.
  virtual bool Alive(const std::string& instance, int node) const = 0;
};

}  // namespace klutch::engines
