// TcpProxy: a loopback TCP relay for tests that need to break the network between a client
// and a server: cut every open connection at once, refuse new ones for a while, or point
// at a new upstream port (a restarted server). Blocking sockets, two threads a connection.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "core/sync.h"

namespace klutch::testing {

class TcpProxy {
 public:
  // Listens on 127.0.0.1 (port 0 = any) and relays to 127.0.0.1:upstream_port.
  explicit TcpProxy(uint16_t upstream_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  uint16_t port() const { return port_; }
  void SetUpstream(uint16_t port) { upstream_ = port; }
  // Closes every relayed connection now (both sides see the connection break).
  void CutAll();
  // While refusing, new connections are accepted and closed at once.
  void SetRefusing(bool refusing) { refusing_ = refusing; }
  // Stops relaying on every open connection without closing it, as a network that drops
  // packets does: neither side hears anything more. New connections work normally.
  void FreezeAll() { frozen_before_ = accepted_.load() + 1; }
  // Connections accepted so far.
  int accepted() const { return accepted_; }

 private:
  void AcceptLoop();
  void Relay(int client_fd, int number);
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<uint16_t> upstream_;
  std::atomic<bool> refusing_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> frozen_before_{0};  // connections numbered below this are frozen
  core::Mutex mu_;
  std::set<int> open_fds_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  std::thread acceptor_;
};

}  // namespace klutch::testing
