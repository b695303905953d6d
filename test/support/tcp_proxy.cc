#include "test/support/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace klutch::testing {

namespace {
int ConnectLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}
}  // namespace

TcpProxy::TcpProxy(uint16_t upstream_port) : upstream_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::listen(listen_fd_, 64);
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  CutAll();
  std::vector<std::thread> threads;
  {
    core::MutexLock lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

void TcpProxy::CutAll() {
  core::MutexLock lock(mu_);
  for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
}

void TcpProxy::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int number = ++accepted_;
    if (refusing_) {
      ::close(fd);
      continue;
    }
    core::MutexLock lock(mu_);
    threads_.emplace_back([this, fd, number] { Relay(fd, number); });
  }
}

void TcpProxy::Relay(int client_fd, int number) {
  {
    core::MutexLock lock(mu_);
    open_fds_.insert(client_fd);  // from now on CutAll() reaches it
  }
  int upstream_fd = ConnectLoopback(upstream_);
  if (upstream_fd < 0) {
    core::MutexLock lock(mu_);
    open_fds_.erase(client_fd);
    ::close(client_fd);
    return;
  }
  {
    core::MutexLock lock(mu_);
    open_fds_.insert(upstream_fd);
  }
  pollfd fds[2] = {{client_fd, POLLIN, 0}, {upstream_fd, POLLIN, 0}};
  char buf[16384];
  bool done = false;
  while (!done && !stopping_) {
    if (number < frozen_before_) {
      // Frozen: hold the connection open, relay nothing.
      ::poll(nullptr, 0, 50);
      continue;
    }
    if (::poll(fds, 2, 100) < 0) break;
    if (number < frozen_before_) continue;  // frozen while waiting: drop nothing, relay nothing
    for (int i = 0; i < 2 && !done; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n <= 0) {
        done = true;
        break;
      }
      int out = fds[1 - i].fd;
      for (ssize_t off = 0; off < n;) {
        // send(MSG_NOSIGNAL): a peer that closed its end (CutAll) must not kill the test with
        // SIGPIPE.
        ssize_t w = ::send(out, buf + off, n - off, MSG_NOSIGNAL);
        if (w <= 0) {
          done = true;
          break;
        }
        off += w;
      }
    }
  }
  {
    core::MutexLock lock(mu_);
    open_fds_.erase(client_fd);
    open_fds_.erase(upstream_fd);
  }
  ::close(client_fd);
  ::close(upstream_fd);
}

}  // namespace klutch::testing
