// Waiting in tests: poll a condition until it holds, with a deadline that only keeps a
// broken build from hanging CI (never a performance assertion).
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace klutch::testing {

inline bool Eventually(const std::function<bool()>& probe,
                       std::chrono::seconds deadline = std::chrono::seconds(60)) {
  auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (probe()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return probe();
}

}  // namespace klutch::testing
