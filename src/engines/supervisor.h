// Supervisor: keeps the server processes of an owner's instances (the broker's, the
// operator's) running, on the one process supervisor (core/process_supervisor.h): every node
// watched every 100 ms, restarted with backoff (200 ms doubling to 10 s, back to 200 ms after
// a minute up) when it dies. It starts a node (or adopts the one a previous owner process
// left running, found through its PID file) and tells a listener when a node goes down and
// when it answers again. Stop ends one node; StopAll every node, all at once; the destructor
// only stops watching, so an owner that exits without StopAll leaves its instances running
// for the next one to adopt. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/process_supervisor.h"
#include "engines/node_runner.h"

namespace klutch::engines {

struct NodeCounts {
  int up = 0;
  int starting = 0;
  int down = 0;
  int64_t restarts = 0;
};

class Supervisor final : public NodeRunner {
 public:
  // Called from the watcher thread, outside its lock.
  using Listener = std::function<void(const std::string& instance, int node, bool up,
                                      const std::string& detail)>;
  explicit Supervisor(Listener listener);
  ~Supervisor() override;
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  core::Status Start(const std::string& instance, int node, NodeSpec spec) override;
  bool Stop(const std::string& instance, int node) override;
  int Exits(const std::string& instance, int node) const override;
  bool Alive(const std::string& instance, int node) const override;
  // Stops every node (the owner's shutdown).
  void StopAll();
  // Whether every watched node of `instance` answers.
  bool InstanceUp(const std::string& instance) const;
  NodeCounts Counts() const;

 private:
  void OnEvent(const core::SupervisorEvent& event);

  Listener listener_;
  // Last: destroyed first, so that its watcher never calls OnEvent on a listener that is gone.
  core::ProcessSupervisor processes_;
};

}  // namespace klutch::engines
