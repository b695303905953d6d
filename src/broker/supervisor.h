// Supervisor: keeps the server processes of the broker's instances running. It starts a node
// (or adopts the one a previous broker left running, found through its PID file), watches it
// every 100 ms, restarts it with backoff when it dies, and tells a listener when a node goes
// down and when it answers again. Stop ends one node; StopAll every node; the destructor only
// stops watching, so a broker that exits without StopAll leaves its instances running for the
// next one to adopt. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "broker/engine.h"

namespace klutch::broker {

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
  // Stops every node (broker shutdown).
  void StopAll();
  // Whether every watched node of `instance` answers.
  bool InstanceUp(const std::string& instance) const;
  NodeCounts Counts() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::broker
